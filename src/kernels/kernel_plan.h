// Which kernel computes one product, and how: plan() is the one place that decides, from the
// matrix (format, row stride), the token count and the KernelConfig; linear() and
// matmul_serial() execute its answer. Pure: `dsinfer bench --explain-kernels` prints it and
// tests/kernel_plan_test.cpp pins each CPU family's table.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/kernel_config.h"
#include "kernels/weight_matrix.h"

namespace dsinfer {

// What each ISA's exact kernels can do (their traits static_assert against this table).
struct IsaLimits {
  int64_t gemm_min_tokens;  // from this many tokens on the product may pack x for the GEMM
  int gemv_max_rows_one;    // rows per GEMV group at most for 1 token (2 tokens: 8)
  int gemv_max_rows_many;   // at most for 3-4 tokens
  bool fp8_subnormal;       // the GEMV reads fp8 codes as fp32 subnormal patterns
};
constexpr IsaLimits isa_limits(Isa isa) {
  switch (isa) {
    case Isa::kAvx512:
      return {8, 16, 6, true};
    case Isa::kAvx2:
      return {8, 8, 2, true};
    default:
      return {INT64_MAX, 1, 1, false};
  }
}

// Fast mode's products of this many tokens or more run its own kernels (AMX, VDPBF16PS GEMM).
inline constexpr int64_t kFastGemmMinTokens = 16;
// Fast mode's VDPBF16PS GEMV serves 5-15 tokens where VDPBF16PS is fast mode's kernel (below 5
// the exact GEMV streams as fast); bf16 matrices keep the exact GEMV up to 12 tokens (it reads
// them without converting). bench/README.md "fast mode's kernels by token count".
inline constexpr int64_t kBf16DotGemvMinTokens = 5, kBf16DotGemvMaxTokens = 15;
inline constexpr int64_t kBf16ExactGemvMaxTokens = 12;

enum class KernelKind {
  kGemv,              // exact: the weights streamed once per pass of up to 4 tokens
  kGemm,              // exact: x packed in tiles, canonical order
  kGemmBatchVariant,  // exact: x packed, each dot product in k order (batch invariance off)
  kBf16DotGemv,       // fast: VDPBF16PS, each weight vector converted once for every token
  kBf16DotGemm,       // fast: VDPBF16PS on packed token tiles
  kAmxGemm,           // fast: AMX tiles
  kInt8,              // int8 mode: int8 activations against the matrix's int8 form
};
const char* kernel_kind_name(KernelKind kind);

// How the exact GEMV runs (kGemv): tokens in passes of up to 4, rows in groups.
struct GemvPlan {
  int rows_per_group[4] = {1, 1, 1, 1};  // for passes of 1, 2, 3 and 4 tokens
  // passes of up to this many tokens read fp8 codes as fp32 subnormals (where the row block's
  // scaled activations fit that form; the same bits either way)
  int fp8_subnormal_tokens = 0;
  GemvPrefetch prefetch = GemvPrefetch::kNone;  // for bf16, f32 and subnormal-form fp8 rows
  // a thread's rows in chunks of this many, every pass over one chunk before the next, so that
  // later passes read it from L2 (0: all its rows in each pass)
  int64_t chunk_rows = 0;
  bool operator==(const GemvPlan&) const = default;
};

struct KernelPlan {
  KernelKind kernel = KernelKind::kGemv;
  Isa isa = Isa::kScalar;                 // the exact kernels' (kGemv, kGemm, kGemmBatchVariant)
  bool round_activations = false;         // fast mode on the exact kernels: x rounded to bf16 first
  GemvPlan gemv;                          // kGemv only
  Int8Kernel int8 = Int8Kernel::kScalar;  // kInt8 only
  bool operator==(const KernelPlan&) const = default;
};

// linear(): weights times activations. matmul_serial(): attention's products, where both sides
// are activations: in fast mode they round both only on the fast kernels (f32 "weights" too),
// and stay exact below kFastGemmMinTokens.
enum class ProductUse { kLinear, kSerial };

// The matrix only for its dtype, format and row stride (no data is read).
KernelPlan plan(const WeightMatrix& w, int64_t n_tokens, const KernelConfig& config,
                ProductUse use = ProductUse::kLinear);
// "gemv avx512, rows 16/8/6/6, prefetch wrapped, fp8 subnormal <= 4" and the like.
std::string describe(const KernelPlan& plan);

}  // namespace dsinfer
