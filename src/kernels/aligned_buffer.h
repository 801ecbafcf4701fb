// Per-thread scratch for the vector kernels: a std::vector grown on demand and read from its first
// cache line, so that aligned vector loads and stores may use it.
#pragma once

#include <cstdint>
#include <vector>

namespace dsinfer {

// A buffer of at least n elements of `buffer` starting on a cache line.
template <class T>
T* aligned(std::vector<T>& buffer, int64_t n) {
  constexpr size_t kLine = 64 / sizeof(T);
  if (buffer.size() < static_cast<size_t>(n) + kLine) buffer.resize(static_cast<size_t>(n) + kLine);
  const uintptr_t address = reinterpret_cast<uintptr_t>(buffer.data());
  return buffer.data() + (kLine - address / sizeof(T) % kLine) % kLine;
}

}  // namespace dsinfer
