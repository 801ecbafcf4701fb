// Zero-filled anonymous memory in whole 2 MB pages, with transparent huge pages asked for
// (madvise: the setting Debian ships; "never" leaves 4 KB pages, the same memory): for large
// buffers walked in strides, where 4 KB pages cost TLB misses (the KV cache: attention at depth
// reads tens of MB per layer and step). Unmapped on destruction; move-only.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dsinfer {

class HugePageMemory {
 public:
  HugePageMemory() = default;
  // `bytes` rounded up to whole 2 MB pages; throws Error when the system refuses the mapping.
  explicit HugePageMemory(int64_t bytes);
  ~HugePageMemory();
  HugePageMemory(HugePageMemory&& other) noexcept;
  HugePageMemory& operator=(HugePageMemory&& other) noexcept;
  HugePageMemory(const HugePageMemory&) = delete;
  HugePageMemory& operator=(const HugePageMemory&) = delete;

  uint8_t* data() const { return data_; }
  bool empty() const { return data_ == nullptr; }

 private:
  uint8_t* data_ = nullptr;  // 2 MB aligned
  void* mapping_ = nullptr;
  size_t mapped_bytes_ = 0;
};

}  // namespace dsinfer
