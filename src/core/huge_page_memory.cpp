#include "core/huge_page_memory.h"

#include <sys/mman.h>

#include <utility>

#include "core/error.h"

namespace dsinfer {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}

HugePageMemory::HugePageMemory(int64_t bytes) {
  check(bytes > 0, "HugePageMemory of ", bytes, " bytes");
  const size_t size = (static_cast<size_t>(bytes) + kHugePage - 1) / kHugePage * kHugePage;
  // one page more than asked, so that an aligned start exists inside the mapping
  mapped_bytes_ = size + kHugePage;
  mapping_ =
      ::mmap(nullptr, mapped_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  check(mapping_ != MAP_FAILED, "cannot map ", size, " bytes of memory (out of memory?)");
  const uintptr_t start = reinterpret_cast<uintptr_t>(mapping_);
  data_ = reinterpret_cast<uint8_t*>((start + kHugePage - 1) / kHugePage * kHugePage);
  ::madvise(data_, size, MADV_HUGEPAGE);  // best effort
}

HugePageMemory::~HugePageMemory() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapped_bytes_);
}

HugePageMemory::HugePageMemory(HugePageMemory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      mapping_(std::exchange(other.mapping_, nullptr)),
      mapped_bytes_(std::exchange(other.mapped_bytes_, 0)) {}

HugePageMemory& HugePageMemory::operator=(HugePageMemory&& other) noexcept {
  if (this != &other) {
    if (mapping_ != nullptr) ::munmap(mapping_, mapped_bytes_);
    data_ = std::exchange(other.data_, nullptr);
    mapping_ = std::exchange(other.mapping_, nullptr);
    mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
  }
  return *this;
}

}  // namespace dsinfer
