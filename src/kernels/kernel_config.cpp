#include "kernels/kernel_config.h"

#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "kernels/matmul_amx.h"

namespace dsinfer {

const char* act_dtype_name(ActDType act) {
  switch (act) {
    case ActDType::kBF16:
      return "bf16";
    case ActDType::kInt8:
      return "int8";
    default:
      return "f32";
  }
}

ActDType parse_act_dtype(const std::string& name) {
  if (name == "f32") return ActDType::kF32;
  if (name == "bf16") return ActDType::kBF16;
  if (name == "int8") return ActDType::kInt8;
  fail("unknown activation dtype '", name, "' (f32, bf16 or int8)");
}

const char* int8_kernel_name(Int8Kernel kernel) {
  switch (kernel) {
    case Int8Kernel::kAvx512Vnni:
      return "avx512-vnni";
    case Int8Kernel::kAvx2:
      return "avx2";
    default:
      return "scalar";
  }
}

const char* gemv_prefetch_name(GemvPrefetch prefetch) {
  switch (prefetch) {
    case GemvPrefetch::kNone:
      return "none";
    case GemvPrefetch::kAhead:
      return "ahead";
    default:
      return "wrapped";
  }
}

const char* cpu_family_name(CpuFamily family) {
  switch (family) {
    case CpuFamily::kIntel:
      return "intel";
    case CpuFamily::kZen3:
      return "zen3";
    case CpuFamily::kZen4:
      return "zen4";
    default:
      return "zen5";
  }
}

CpuFamily parse_cpu_family(const std::string& name) {
  for (int i = 0; i < static_cast<int>(CpuFamily::kCount); ++i)
    if (name == cpu_family_name(static_cast<CpuFamily>(i))) return static_cast<CpuFamily>(i);
  fail("unknown CPU family '", name, "' (intel, zen3, zen4 or zen5)");
}

CpuFamily this_cpu_family() {
  if (!cpu_is_amd()) return CpuFamily::kIntel;
  if (cpu_family() >= 26) return CpuFamily::kZen5;
  return cpu_supports(Isa::kAvx512) ? CpuFamily::kZen4 : CpuFamily::kZen3;
}

GemvTuning gemv_tuning_of(CpuFamily family) {
  switch (family) {
    case CpuFamily::kZen5:
      return {/*rows_one_token=*/16,           /*rows_two_tokens=*/8,
              GemvPrefetch::kWrapped,          /*fp8_subnormal_tokens=*/4,
              /*gemv_max_tokens=*/kGemvAlways, /*fp8_rows_one_token=*/0,
              /*rows_many_tokens=*/6};
    case CpuFamily::kZen4:
      return {/*rows_one_token=*/8,   /*rows_two_tokens=*/8,
              GemvPrefetch::kWrapped, /*fp8_subnormal_tokens=*/4,
              /*gemv_max_tokens=*/0,  /*fp8_rows_one_token=*/0,
              /*rows_many_tokens=*/4, /*plain_single_token=*/true};
    case CpuFamily::kZen3:
      return {/*rows_one_token=*/8,   /*rows_two_tokens=*/8,
              GemvPrefetch::kWrapped, /*fp8_subnormal_tokens=*/4,
              /*gemv_max_tokens=*/31, /*fp8_rows_one_token=*/4};
    default:
      return GemvTuning{};
  }
}

const char* fast_mode_kernels_name(FastModeKernels kernels) {
  switch (kernels) {
    case FastModeKernels::kAmx:
      return "AMX tiles";
    case FastModeKernels::kBf16Dot:
      return "AVX-512 BF16 dot products";
    default:
      return "the exact kernels";
  }
}

FastModeKernels KernelConfig::fast_kernels() const {
  if (isa != Isa::kAvx512) return FastModeKernels::kExact;
  if (amx) return FastModeKernels::kAmx;
  if (bf16dot) return FastModeKernels::kBf16Dot;
  return FastModeKernels::kExact;
}

Int8Kernel KernelConfig::int8_kernel() const {
  if (isa == Isa::kAvx512 && vnni) return Int8Kernel::kAvx512Vnni;
  return isa == Isa::kScalar ? Int8Kernel::kScalar : Int8Kernel::kAvx2;
}

KernelConfig cpu_kernel_config() {
  KernelConfig config;
  config.isa = best_isa(Isa::kAvx512);
  config.bf16dot = cpu_supports(Isa::kAvx512);  // which includes AVX512_BF16 (core/cpu.h)
  config.amx = config.bf16dot && amx_usable();
  config.vnni = config.bf16dot && cpu_has_avx512_vnni();
  config.gemv = gemv_tuning_of(this_cpu_family());
  return config;
}

KernelConfig typical_kernel_config(CpuFamily family) {
  KernelConfig config;
  config.isa = family == CpuFamily::kZen3 ? Isa::kAvx2 : Isa::kAvx512;
  config.bf16dot = config.isa == Isa::kAvx512;
  config.amx = family == CpuFamily::kIntel;
  config.vnni = config.isa == Isa::kAvx512;
  config.gemv = gemv_tuning_of(family);
  return config;
}

KernelConfig with_isa(KernelConfig config, Isa isa) {
  config.isa = isa;
  return config;
}

namespace {

const char* variable(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

int rows_from(const char* name, const char* text, int most) {
  for (int rows = 1; rows <= most; rows *= 2)
    if (std::string(text) == std::to_string(rows)) return rows;
  fail(name, "=", text, " is not a power of two from 1 to ", most);
}

void apply_gemv_overrides(GemvTuning& t) {
  if (const char* v = variable("DSINFER_GEMV_ROWS"))
    t.rows_one_token = rows_from("DSINFER_GEMV_ROWS", v, 16);
  if (const char* v = variable("DSINFER_GEMV_ROWS2"))
    t.rows_two_tokens = rows_from("DSINFER_GEMV_ROWS2", v, 8);
  if (const char* v = variable("DSINFER_GEMV_ROWS_FP8"))
    t.fp8_rows_one_token = std::string(v) == "0" ? 0 : rows_from("DSINFER_GEMV_ROWS_FP8", v, 16);
  if (const char* v = variable("DSINFER_GEMV_PREFETCH")) {
    const std::string text(v);
    check(text == "none" || text == "ahead" || text == "wrapped", "DSINFER_GEMV_PREFETCH=", text,
          " is not one of none, ahead, wrapped");
    t.prefetch = text == "none"    ? GemvPrefetch::kNone
                 : text == "ahead" ? GemvPrefetch::kAhead
                                   : GemvPrefetch::kWrapped;
  }
  if (const char* v = variable("DSINFER_GEMV_FP8_SUBNORMAL")) {
    const std::string text(v);
    check(text.size() == 1 && text[0] >= '0' && text[0] <= '4', "DSINFER_GEMV_FP8_SUBNORMAL=", text,
          " is not a number of tokens from 0 to 4");
    t.fp8_subnormal_tokens = text[0] - '0';
  }
  if (const char* v = variable("DSINFER_GEMV_ROWS_MANY")) {
    const std::string text(v);
    check(text == "4" || text == "6", "DSINFER_GEMV_ROWS_MANY=", text,
          " is not 4 or 6 (GEMV rows per group for 3-4 tokens)");
    t.rows_many_tokens = text[0] - '0';
  }
  if (const char* v = variable("DSINFER_GEMV_SINGLE_PLAIN")) {
    const std::string text(v);
    check(text == "0" || text == "1", "DSINFER_GEMV_SINGLE_PLAIN=", text, " is not 0 or 1");
    t.plain_single_token = text == "1";
  }
  if (const char* v = variable("DSINFER_GEMV_MAX_TOKENS")) {
    const std::string text(v);
    check(text.size() <= 18 && text.find_first_not_of("0123456789") == std::string::npos,
          "DSINFER_GEMV_MAX_TOKENS=", text,
          " is not a number of tokens (0: the ISA's own switch to the GEMM)");
    t.gemv_max_tokens = std::stoll(text);
  }
}

}  // namespace

KernelConfig with_environment_overrides(KernelConfig config) {
  if (const char* v = variable("DSINFER_ISA")) {
    bool known = false;
    for (int i = 0; i < static_cast<int>(Isa::kCount); ++i)
      if (std::strcmp(v, isa_name(static_cast<Isa>(i))) == 0) {
        config.isa = best_isa(static_cast<Isa>(i));
        known = true;
      }
    check(known, "DSINFER_ISA=", v, " is not one of scalar, avx2, avx512");
  }
  if (const char* v = variable("DSINFER_AMX"); v && std::string(v) == "0") config.amx = false;
  if (const char* v = variable("DSINFER_BF16DOT"); v && std::string(v) == "0")
    config.bf16dot = false;
  if (const char* v = variable("DSINFER_VNNI"); v && std::string(v) == "0") config.vnni = false;
  apply_gemv_overrides(config.gemv);
  return config;
}

std::string describe(const KernelConfig& c) {
  const GemvTuning& g = c.gemv;
  std::string out =
      std::string(isa_name(c.isa)) + ", " +
      (c.int8() ? "int8 (int8 activations on " + std::string(int8_kernel_name(c.int8_kernel())) +
                      " where the weights are int8, else bf16"
       : c.fast() ? "fast (bf16 activations"
                  : "exact (f32");
  if (c.fast()) out += std::string(", ") + fast_mode_kernels_name(c.fast_kernels());
  out += std::string("), ") + (c.batch_invariant ? "batch invariant" : "batch variant") +
         "; GEMV rows " + std::to_string(g.rows_one_token) + "/" +
         std::to_string(g.rows_two_tokens) + "/" + std::to_string(g.rows_many_tokens) +
         " for 1/2/3-4 tokens, prefetch " + gemv_prefetch_name(g.prefetch) +
         ", fp8 subnormal form up to " + std::to_string(g.fp8_subnormal_tokens) + " tokens";
  if (g.fp8_rows_one_token) out += " (" + std::to_string(g.fp8_rows_one_token) + " rows for 1)";
  if (g.plain_single_token) out += ", one token plain (fp8 through fp16, no prefetch)";
  if (g.gemv_max_tokens)
    out += ", GEMV up to " +
           (g.gemv_max_tokens == kGemvAlways ? std::string("any number of")
                                             : std::to_string(g.gemv_max_tokens)) +
           " tokens";
  return out;
}

}  // namespace dsinfer
