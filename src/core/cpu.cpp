#include "core/cpu.h"

#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace dsinfer {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    default: return "?";
  }
}

bool cpu_supports(Isa isa) {
#if defined(__x86_64__)
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             __builtin_cpu_supports("f16c");
    case Isa::kAvx512:
      return cpu_supports(Isa::kAvx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bf16");
    default: return false;
  }
#else
  return isa == Isa::kScalar;
#endif
}

Isa best_isa() {
  Isa cap = Isa::kAvx512;
  if (const char* env = std::getenv("DSINFER_ISA"); env && *env) {
    bool known = false;
    for (int i = 0; i < static_cast<int>(Isa::kCount); ++i)
      if (std::strcmp(env, isa_name(static_cast<Isa>(i))) == 0) {
        cap = static_cast<Isa>(i);
        known = true;
      }
    check(known, "DSINFER_ISA=", env, " is not one of scalar, avx2, avx512");
  }
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
