// A read-only memory map of a whole file. Weights stay where mmap put them, so ranks on one
// host share the page cache and nothing is copied at load. A file truncated underneath a live map
// (reading a page past its new end raises SIGBUS) ends the process with exit status 1 and an
// "error:" line naming the file, not a bare "Bus error".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dsinfer {

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
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  int slot_ = -1;  // in the SIGBUS handler's table of maps
};

}  // namespace dsinfer
