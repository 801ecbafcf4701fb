// A small run-time count (1..4) as a compile-time constant, for the AVX-512 kernels whose register
// blocks are templates over it (matmul_bf16dot_gemm_avx512.cpp, attention_bf16dot_avx512.cpp).
// Internal linkage: each unit instantiates it with its own ISA flags.
#pragma once

#include <cstdint>
#include <type_traits>

namespace dsinfer {
namespace {

// f(std::integral_constant<int, n>) for n = 1, 2, 3, else 4, so that each count's kernel is
// inlined where it is used (a function pointer per count cost fast prefill 4-7% on Zen 4).
template <class F>
void with_count_up_to_4(int64_t n, F&& f) {
  switch (n) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 3:
      return f(std::integral_constant<int, 3>{});
    default:
      return f(std::integral_constant<int, 4>{});
  }
}

}  // namespace
}  // namespace dsinfer
