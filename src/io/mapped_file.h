// A read-only view of a whole file: a memory map, or a copy in this process's own anonymous
// memory advised for transparent huge pages (2 MB). A map copies nothing at load and lets
// processes share the page cache, but its 4 KB pages cost decode in TLB misses: 6-14% at one
// process, 40% at two ranks on the Intel VM (README, Performance). The copy costs a read at
// load and memory not shared between processes (the page cache's copy stays, reclaimable, so
// the next run still loads without the disk). HugePages::kAuto (the default) copies files of
// 256 MB or more (shards; not tokenizers or tiny test models) when transparent huge pages are
// on and the file fits in this process's share of the available memory; kOn always copies,
// kOff always maps. A file truncated underneath a live map (reading a page past its new end
// raises SIGBUS) ends the process with exit status 1 and an "error:" line naming the file, not
// a bare "Bus error".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dsinfer {

enum class HugePages { kOff, kOn, kAuto };
// Applies to the files opened after it (process-wide; the front end sets it once).
// local_processes: the ranks on this host that load at the same time (each gets its share of
// the available memory under kAuto).
void set_read_into_huge_pages(HugePages mode, int local_processes = 1);

// kAuto's rule: copy a file of file_bytes when it is at least 256 MB, transparent huge pages are
// on for anonymous memory, and it fits in mem_available_bytes / local_processes with 1 GB to
// spare; else why not (for the log), in *why_not.
bool auto_reads_into_huge_pages(size_t file_bytes, size_t mem_available_bytes, int local_processes,
                                bool thp_on, std::string* why_not = nullptr);

class MappedFile {
 public:
  // Throws Error naming the path when it cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void read_into_anonymous(int fd);
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_bytes_ = 0;  // what munmap releases (the anonymous copy is rounded up to 2 MB)
  int slot_ = -1;            // in the SIGBUS handler's table of maps
};

}  // namespace dsinfer
