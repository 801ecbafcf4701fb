// A read-only memory map of a whole file. Weights stay where mmap put them, so ranks on one
// host share the page cache and nothing is copied at load. With set_read_into_huge_pages(true)
// (dsinfer --huge-pages) a file is instead read into this process's own anonymous memory advised
// for transparent huge pages (2 MB): the page cache's 4 KB pages cost decode ~20% in TLB misses
// (README, Performance), at the price of a copy at load and no sharing between processes (the
// page cache's copy stays, reclaimable, so the next run still loads without the disk). A file truncated underneath a live map
// (reading a page past its new end raises SIGBUS) ends the process with exit status 1 and an
// "error:" line naming the file, not a bare "Bus error".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dsinfer {

// Applies to the files mapped after it (process-wide; the front end sets it once).
void set_read_into_huge_pages(bool on);

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
  int slot_ = -1;  // in the SIGBUS handler's table of maps
};

}  // namespace dsinfer
