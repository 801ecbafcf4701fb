#include "kernels/kernel_plan.h"

#include <algorithm>

namespace dsinfer {

const char* kernel_kind_name(KernelKind kind) {
  switch (kind) {
    case KernelKind::kGemv:
      return "gemv";
    case KernelKind::kGemm:
      return "gemm";
    case KernelKind::kGemmBatchVariant:
      return "gemm-batch-variant";
    case KernelKind::kBf16DotGemv:
      return "bf16dot-gemv";
    case KernelKind::kBf16DotGemm:
      return "bf16dot-gemm";
    case KernelKind::kInt8:
      return "int8";
    default:
      return "amx";
  }
}

namespace {

// Rows a multiple of 4 KB apart (wo: 16 KB) all map to the same L1 sets: 16 of them streaming at
// once under the wrapped prefetch thrash those sets, so such matrices go at most 4 rows at a time.
GemvTuning tuning_for_stride(GemvTuning t, int64_t row_stride) {
  if (row_stride % 4096 != 0 || t.prefetch != GemvPrefetch::kWrapped) return t;
  t.rows_one_token = std::min(t.rows_one_token, 4);
  t.fp8_rows_one_token = std::min(t.fp8_rows_one_token, 4);
  t.rows_two_tokens = std::min(t.rows_two_tokens, 4);
  t.rows_many_tokens = std::min(t.rows_many_tokens, 4);
  return t;
}

// Rows per group for a pass of T tokens: the tuning's, at most what the ISA's registers hold;
// int4 / int8 rows and fp8 rows widened through fp16 run their own loops, 4 rows at a time
// (at most the ISA's count for 3-4 tokens).
int gemv_rows_per_group(const WeightMatrix& w, const GemvTuning& t, const IsaLimits& isa, int T) {
  const bool fp8 = w.dtype == DType::kF8E4M3;
  const bool fp8_through_half = fp8 && !(isa.fp8_subnormal && T <= t.fp8_subnormal_tokens);
  if (w.group_scaled() || fp8_through_half) return T > 2 ? std::min(isa.gemv_max_rows_many, 4) : 4;
  const int one = fp8 && t.fp8_rows_one_token > 0 ? t.fp8_rows_one_token : t.rows_one_token;
  const int rows = T == 1 ? one : T == 2 ? t.rows_two_tokens : t.rows_many_tokens;
  return std::min(rows, T == 1 ? isa.gemv_max_rows_one : T == 2 ? 8 : isa.gemv_max_rows_many);
}

// Decode batches of 5-16 tokens take several passes over the rows: bf16 and f32 rows (which a
// pass reads faster than it computes) go in chunks that stay in L2 between passes. Not fp8
// (bound by its widening; each chunk would scale the activations again), nor prefills.
int64_t gemv_chunk_rows(const WeightMatrix& w, int64_t n_tokens) {
  if ((w.dtype != DType::kBF16 && w.dtype != DType::kF32) || n_tokens <= 4 || n_tokens > 16)
    return 0;
  return w.row_stride() <= 8192 ? 48 : 24;
}

// The tuning for a product of n_tokens: a plain single token (Zen 4, where the subnormal form
// and the wrapped prefetch pay from 2 tokens on and cost at 1) drops both, before the stride's
// cap on rows, which only the wrapped prefetch needs.
GemvTuning tuning_for(GemvTuning t, int64_t n_tokens, int64_t row_stride) {
  if (n_tokens == 1 && t.plain_single_token) {
    t.prefetch = GemvPrefetch::kNone;
    t.fp8_subnormal_tokens = 0;
  }
  return tuning_for_stride(t, row_stride);
}

GemvPlan gemv_plan(const WeightMatrix& w, int64_t n_tokens, const KernelConfig& config) {
  const IsaLimits isa = isa_limits(config.isa);
  const GemvTuning t = tuning_for(config.gemv, n_tokens, w.row_stride());
  GemvPlan g;
  for (int T = 1; T <= 4; ++T) g.rows_per_group[T - 1] = gemv_rows_per_group(w, t, isa, T);
  g.fp8_subnormal_tokens =
      isa.fp8_subnormal && w.dtype == DType::kF8E4M3 ? t.fp8_subnormal_tokens : 0;
  g.prefetch = t.prefetch;
  g.chunk_rows = gemv_chunk_rows(w, n_tokens);
  return g;
}

// Fast mode's own kernel for this product, if any.
bool fast_kernel(const WeightMatrix& w, int64_t n_tokens, const KernelConfig& config,
                 ProductUse use, KernelKind& kind) {
  const FastModeKernels fast = config.fast_kernels();
  if (n_tokens >= kFastGemmMinTokens) {
    // int4 / int8 take VDPBF16PS even beside AMX: only those kernels scale partial sums per row
    if (fast == FastModeKernels::kAmx && !w.group_scaled())
      return kind = KernelKind::kAmxGemm, true;
    if (fast == FastModeKernels::kBf16Dot || (fast == FastModeKernels::kAmx && config.bf16dot))
      return kind = KernelKind::kBf16DotGemm, true;
    return false;
  }
  if (use == ProductUse::kSerial || fast != FastModeKernels::kBf16Dot) return false;
  if (w.dtype == DType::kBF16 && n_tokens <= kBf16ExactGemvMaxTokens) return false;
  if (n_tokens < kBf16DotGemvMinTokens) return false;
  return kind = KernelKind::kBf16DotGemv, true;
}

}  // namespace

KernelPlan plan(const WeightMatrix& w, int64_t n_tokens, const KernelConfig& config,
                ProductUse use) {
  KernelPlan p;
  p.isa = config.isa;
  // int8 mode takes every product whose matrix was repacked (model/int8_weights.h: make_int8_forms)
  if (config.int8() && use == ProductUse::kLinear && w.int8 != nullptr) {
    p.kernel = KernelKind::kInt8;
    p.int8 = config.int8_kernel();
    return p;
  }
  // (f32 weights would lose bits in bf16: linear() keeps them on the exact kernels)
  const bool fast_eligible =
      config.fast() && (use == ProductUse::kSerial || w.dtype != DType::kF32);
  if (fast_eligible && fast_kernel(w, n_tokens, config, use, p.kernel)) return p;
  p.round_activations = config.fast() && use == ProductUse::kLinear;
  const IsaLimits isa = isa_limits(config.isa);
  const bool gemm = n_tokens >= isa.gemm_min_tokens &&
                    (!config.batch_invariant || n_tokens > config.gemv.gemv_max_tokens);
  if (gemm) {
    p.kernel = config.batch_invariant ? KernelKind::kGemm : KernelKind::kGemmBatchVariant;
    return p;
  }
  p.kernel = KernelKind::kGemv;
  if (config.isa != Isa::kScalar) p.gemv = gemv_plan(w, n_tokens, config);
  return p;
}

std::string describe(const KernelPlan& p) {
  std::string out = kernel_kind_name(p.kernel);
  const bool exact = p.kernel == KernelKind::kGemv || p.kernel == KernelKind::kGemm ||
                     p.kernel == KernelKind::kGemmBatchVariant;
  if (exact) out += std::string(" ") + isa_name(p.isa);
  if (p.kernel == KernelKind::kInt8) out += std::string(" ") + int8_kernel_name(p.int8);
  if (p.round_activations) out += ", x rounded to bf16";
  if (p.kernel == KernelKind::kGemv && p.isa != Isa::kScalar) {
    const GemvPlan& g = p.gemv;
    out += ", rows " + std::to_string(g.rows_per_group[0]) + "/" +
           std::to_string(g.rows_per_group[1]) + "/" + std::to_string(g.rows_per_group[2]) + "/" +
           std::to_string(g.rows_per_group[3]) + ", prefetch " + gemv_prefetch_name(g.prefetch);
    if (g.fp8_subnormal_tokens)
      out += ", fp8 subnormal <= " + std::to_string(g.fp8_subnormal_tokens);
    if (g.chunk_rows) out += ", chunks of " + std::to_string(g.chunk_rows) + " rows";
  }
  return out;
}

}  // namespace dsinfer
