// Which kernels run: one KernelConfig, filled once (the command line's flags, the CPU, the
// DSINFER_* overrides) and passed with every product; nothing process-wide decides a kernel.
// kernels/kernel_plan.h turns a config, a matrix and a token count into the kernel that runs.
#pragma once

#include <cstdint>
#include <string>

#include "core/cpu.h"

namespace dsinfer {

// Exact mode (kF32, the default): fp32 activations, weights dequantized exactly, fp32
// accumulation. Fast mode (kBF16): activations rounded to bf16 first, weights still exact, fp32
// accumulation, on AMX tiles or VDPBF16PS where the CPU has them. int8 mode (kInt8): the linear
// weights repacked as int8 at load and activations quantized to int8 per 128 columns, products
// on integer dot instructions (kernels/int8_matrix.h has the numbers); the rest (attention's
// products, bf16 heads, int4 experts) as in fast mode.
enum class ActDType { kF32, kBF16, kInt8, kCount };
const char* act_dtype_name(ActDType act);
ActDType parse_act_dtype(const std::string& name);  // "f32" | "bf16" | "int8"; else an Error

// int8 mode's kernel: every one gives the same bits (int8_matrix.h), only the speed differs.
enum class Int8Kernel { kScalar, kAvx2, kAvx512Vnni };
const char* int8_kernel_name(Int8Kernel kernel);

// How the exact GEMV streams its weights. Every tuning gives the same bits (the canonical order,
// tests/canonical_order_test.cpp); only the speed differs. The values per CPU family and the runs
// behind them: bench/README.md, "Kernel plans per CPU family".
enum class GemvPrefetch { kNone, kAhead, kWrapped };
const char* gemv_prefetch_name(GemvPrefetch prefetch);
struct GemvTuning {
  int rows_one_token = 4;   // rows per group for 1 token (at most 16 on AVX-512, 8 on AVX2)
  int rows_two_tokens = 4;  // for 2 tokens (at most 8)
  GemvPrefetch prefetch = GemvPrefetch::kAhead;  // bf16, f32 and subnormal-form fp8 rows
  int fp8_subnormal_tokens =
      0;  // fp8 codes read as fp32 subnormals for up to this many tokens (0..4)
  // exact products of up to this many tokens stay on the GEMV past the ISA's GEMM threshold
  // (batch invariance on only); 0: the ISA's own switch
  int64_t gemv_max_tokens = 0;
  int fp8_rows_one_token =
      0;                     // rows per group for 1 token of subnormal-form fp8 (0: rows_one_token)
  int rows_many_tokens = 4;  // rows per group for 3-4 tokens (4, or 6 on AVX-512)
  // products of one token (decode batch 1) read fp8 through fp16 and prefetch nothing, whatever
  // the two settings above say for more tokens
  bool plain_single_token = false;
  bool operator==(const GemvTuning&) const = default;
};
inline constexpr int64_t kGemvAlways = INT64_MAX;

// The CPU families the GEMV is tuned for (CPUID vendor and family; AMD 25 is Zen 3 without
// AVX-512 and Zen 4 with it).
enum class CpuFamily { kIntel, kZen3, kZen4, kZen5, kCount };
const char* cpu_family_name(CpuFamily family);
CpuFamily parse_cpu_family(const std::string& name);  // "intel" | "zen3" | "zen4" | "zen5"
CpuFamily this_cpu_family();
GemvTuning gemv_tuning_of(CpuFamily family);

// Where fast mode's products of kFastGemmMinTokens tokens or more run: AMX tiles, VDPBF16PS, or
// the exact kernels on the rounded activations.
enum class FastModeKernels { kExact, kAmx, kBf16Dot };
const char* fast_mode_kernels_name(FastModeKernels kernels);

struct KernelConfig {
  ActDType act = ActDType::kF32;
  // Every product sums in its ISA's one canonical order whatever the token count (the default),
  // so a sequence's results do not depend on its batch; off, the GEMM sums in k order (faster
  // prefill, results within rounding but no longer the same bits across batchings).
  bool batch_invariant = true;
  Isa isa = Isa::kScalar;  // the exact kernels' instruction set
  bool amx = false;        // fast mode may run on AMX tiles
  bool bf16dot = false;    // fast mode may run VDPBF16PS (AVX512_BF16)
  bool vnni = false;       // int8 mode may run VPDPBUSD (AVX512-VNNI)
  GemvTuning gemv;
  // Fast mode's rounding and kernels apply (in int8 mode too, to the products int8 does not take)
  bool fast() const { return act != ActDType::kF32; }
  bool int8() const { return act == ActDType::kInt8; }
  // Fast mode's kernels for products of many tokens; only beside the AVX-512 exact kernels.
  FastModeKernels fast_kernels() const;
  // int8 mode's kernel: VPDPBUSD beside the AVX-512 kernels, else AVX2's, else the scalar one.
  Int8Kernel int8_kernel() const;
  bool operator==(const KernelConfig&) const = default;
};

// This CPU's best: its widest ISA, AMX and VDPBF16PS where usable, its family's GEMV tuning
// (reads no environment).
KernelConfig cpu_kernel_config();
// What cpu_kernel_config() gives on a typical CPU of `family` (for `bench --explain-kernels
// --explain-cpu` and the plan tables' tests): Intel with AVX-512 and AMX (Sapphire Rapids and
// later), Zen 4 and Zen 5 with AVX-512 and AVX512_BF16, Zen 3 with AVX2.
KernelConfig typical_kernel_config(CpuFamily family);
// The kernels of one ISA (which the CPU must support, for running; any for planning), with the
// rest of `config`: for tests and benchmarks that compare variants.
KernelConfig with_isa(KernelConfig config, Isa isa);
// `config` with the DSINFER_* kernel overrides applied: the one place that reads them.
//   DSINFER_ISA=scalar|avx2|avx512   caps the ISA;  DSINFER_AMX=0, DSINFER_BF16DOT=0,
//   DSINFER_VNNI=0  turn those off; DSINFER_GEMV_ROWS=1..16 (1 token), _ROWS2=1..8 (2 tokens),
//   _ROWS_MANY=4|6 (3-4 tokens), _ROWS_FP8=0..16 (1 token of subnormal-form fp8),
//   _PREFETCH=none|ahead|wrapped, _FP8_SUBNORMAL=0..4 (tokens), _MAX_TOKENS=N (0: the ISA's switch
//   to the GEMM), _SINGLE_PLAIN=0|1 (one token: fp8 through fp16, no prefetch).
// A bad value is an Error naming the variable.
KernelConfig with_environment_overrides(KernelConfig config);
// One line for logs and bench reports: "avx512, exact, batch invariant, gemv intel-like ...".
std::string describe(const KernelConfig& config);

}  // namespace dsinfer
