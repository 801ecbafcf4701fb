#include "core/cpu.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <array>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace dsinfer {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
    default:
      return "?";
  }
}

#if defined(__x86_64__)
namespace {
// F16C and AVX512_BF16 straight from CPUID: clang 14's __builtin_cpu_supports knows neither name
// (the OS's save of the vector state is covered by the avx2 / avx512f checks beside them).
bool has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
}
bool has_avx512_bf16() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5)) != 0;
}
}  // namespace
#endif

bool cpu_is_amd() {
  __builtin_cpu_init();  // callers may run during static initialization, before libgcc's own
  return __builtin_cpu_is("amd");
}

int cpu_family() {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  const int base = static_cast<int>((a >> 8) & 0xf);
  return base == 0xf ? base + static_cast<int>((a >> 20) & 0xff) : base;
#else
  return 0;
#endif
}

bool cpu_has_avx512_vnni() {
  unsigned a, b, c, d;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 11)) != 0;
}

bool cpu_has_amx_bf16() {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool tile = (d & (1u << 24)) != 0, bf16 = (d & (1u << 22)) != 0;
  return tile && bf16 && has_avx512_bf16();
#else
  return false;
#endif
}

namespace {
bool cpu_supports_uncached(Isa isa) {
#if defined(__x86_64__)
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
    case Isa::kAvx512:
      return cpu_supports_uncached(Isa::kAvx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512dq") && has_avx512_bf16();
    default:
      return false;
  }
#else
  return isa == Isa::kScalar;
#endif
}
}  // namespace

// Asked once per ISA: CPUID traps to the hypervisor in a VM (tens of microseconds per linear()
// call with an explicit ISA before this cache: matmul_bench's small matrices).
bool cpu_supports(Isa isa) {
  static const auto supported = [] {
    std::array<bool, static_cast<size_t>(Isa::kCount)> out{};
    for (size_t i = 0; i < out.size(); ++i) out[i] = cpu_supports_uncached(static_cast<Isa>(i));
    return out;
  }();
  const auto i = static_cast<size_t>(isa);
  return i < supported.size() && supported[i];
}

Isa best_isa(Isa cap) {
  for (int i = static_cast<int>(cap); i > 0; --i)
    if (cpu_supports(static_cast<Isa>(i))) return static_cast<Isa>(i);
  return Isa::kScalar;
}

std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (int i = 0; i < static_cast<int>(Isa::kCount); ++i)
    if (cpu_supports(static_cast<Isa>(i))) out.push_back(static_cast<Isa>(i));
  return out;
}

}  // namespace dsinfer
