// Matrix products over WeightMatrix. Exact mode (the default): fp32 activations and fp32
// accumulation; fp8 codes are widened exactly inside the kernels and their block scales applied
// in fp32, so results differ from the reference's dequantize-then-matmul only by summation
// order. Fast mode (set_act_dtype(kBF16)) rounds the activations to bf16 first. The kernels per
// ISA live in matmul_*.cpp (matmul_isa.h), AMX ones in matmul_amx.cpp.
#pragma once

#include <cstdint>
#include <string>

#include "core/cpu.h"
#include "core/thread_pool.h"
#include "kernels/weight_matrix.h"

namespace dsinfer {

// Dequantizes row `row`, columns [0, w.cols), into out[cols] (fp32).
void dequantize_row(const WeightMatrix& w, int64_t row, float* out);

// y[n_tokens, w.rows] = x[n_tokens, w.cols] @ W^T, rows split across the pool, with the best
// kernels this CPU runs (DSINFER_ISA caps the choice), in the activation precision set below.
void linear(const float* x, int64_t n_tokens, const WeightMatrix& w, float* y, ThreadPool& pool);
// The same with the kernels of one ISA (which the CPU must support): for tests and benchmarks.
void linear(const float* x, int64_t n_tokens, const WeightMatrix& w, float* y, ThreadPool& pool, Isa isa);
// The ISA that linear() uses.
Isa linear_isa();

// How the GEMV streams its weights, per CPU family (picked at start from CPUID's vendor and family; the
// numbers are the same either way, bit for bit, only the speed differs; every tuning is held to
// the canonical order by tests/canonical_order_test.cpp). Environment overrides:
// DSINFER_GEMV_ROWS=1|2|4|8|16 (rows per group for 1 token), DSINFER_GEMV_ROWS2 (for 2 tokens),
// DSINFER_GEMV_PREFETCH=none|ahead|wrapped, DSINFER_GEMV_FP8_SUBNORMAL=0..4 (tokens),
// DSINFER_GEMV_MAX_TOKENS=N (0: the ISA's switch to the GEMM), DSINFER_GEMV_ROWS_FP8=1..16 (rows per
// group for 1 token of fp8 in the subnormal form; 0: DSINFER_GEMV_ROWS's), DSINFER_GEMV_ROWS_MANY=4|6
// (rows per group for 3-4 tokens).
//  - Intel: 4-row groups, software prefetch 4 KB ahead in each row (short rows end before its
//    hardware prefetcher catches on); fp8 rows widened through fp16 conversions.
//  - AMD Zen 5 (family 26): 16 rows at once for 1 token, 8 for 2, and a prefetch 8 KB ahead over
//    the group (512 B a row at 16 rows) that, past a row's end, goes on into the next group's rows
//    (their first lines are otherwise demand misses); fp8 codes read as fp32 subnormal patterns (fp32 subnormal operands
//    cost AMD's FMA nothing). 2 threads, 2 GB of weights, alternating runs: fp8 rows of 1.5-7 KB
//    at 55-68 GB/s = 0.9-1.0 of a plain read, against 39-46 for Intel's way; 16 rows of bf16
//    59-61 against 47-48 (bench/README.md). Rows a multiple of 4 KB apart (wo: 16 KB) all land in
//    the same L1 sets: such matrices go 4 rows at a time (wo 61-64 GB/s, 46-54 Intel's way).
//    3-4 tokens: 6 rows at a time (each token vector loaded serves 6 rows: a third fewer loads
//    per FMA): fp8 matmul_bench 512 tokens 45-47 against 50-51 ms, slice exact
//    prefill 512 99.5-102 against 93-99 tok/s, decode batch 4 38.7-41.5 against 35.6-38.7 (3 rounds).
//  - AMD Zen 4: 8-row groups for up to 2 tokens and no software prefetch for bf16 and f32
//    rows (measured 0.95-1.0 of a plain read's bandwidth against 0.75-0.8 on Zen 4); fp8 as on
//    Intel.
//  - AMD Zen 3 (AVX2 only): 8-row groups for bf16 and f32, fp8 codes in the subnormal form (the fp16
//    conversions held a core to ~11 GB/s) for up to 4 tokens, 4 rows at a time for 1 token, and
//    the wrapped prefetch (2026-12-03, slice decode, 3 alternating rounds: MoE 29-30 GB/s against
//    21-22 with 8 rows and no prefetch; batch 4 +11-16%, and the subnormal form at 3-4 tokens
//    another +7-10%: fp8 101-132 GFLOP/s against 69-110 through fp16, now that its range check is
//    vectorized). Exact products of up to 31 tokens take the GEMV: fp8 at 8-16 tokens 130-133
//    GFLOP/s against the GEMM's 109-110 at 16 (63-77 at 8-12), even at 32, the GEMM ahead from 64
//    (134-142 against 130-133).
//  fp8 rows widened through fp16 conversions always go 4 rows at a time (8 measured no better).
//  The subnormal form serves up to 4 tokens on Zen 5 (4 tokens: 36-42 GB/s against 25-27 through
//  fp16, whose 4 x 4 block GCC keeps on the stack), and up to 4 on Zen 3 too once its range check
//  was vectorized (before that, at 3-4 tokens, its integer ops competed with the FMAs).
enum class GemvPrefetch { kNone, kAhead, kWrapped };
struct GemvTuning {
  int rows_one_token = 4;   // rows per group for 1 token (at most 16 on AVX-512, 8 on AVX2)
  int rows_two_tokens = 4;  // for 2 tokens (at most 8); 3-4 tokens take the ISA's own count
  GemvPrefetch prefetch = GemvPrefetch::kAhead;  // bf16, f32 and subnormal-form fp8 rows
  int fp8_subnormal_tokens = 0;  // fp8 codes as subnormal patterns for up to this many tokens (0: never; 4 at most)
  // Exact-mode products of up to this many tokens take the GEMV (4 tokens at a time) even where the
  // ISA's GEMM would start (8 tokens), unless batch invariance is off; 0: the ISA's own switch.
  int64_t gemv_max_tokens = 0;
  // rows per group for 1 token of fp8 rows in the subnormal form (0: rows_one_token)
  int fp8_rows_one_token = 0;
  // rows per group for 3-4 tokens (bf16, f32, fp8 in the subnormal form): 4, or 6 on AVX-512, where
  // each token vector loaded then serves 6 rows (a third fewer loads per FMA)
  int rows_many_tokens = 4;
};
inline constexpr int64_t kGemvAlways = INT64_MAX;
// Zen 5's tuning (above), by name for the benchmarks that compare it with Intel's (GemvTuning{}).
// There the GEMV (subnormal form, 4 tokens a pass) outruns the exact GEMM at every token count:
// fp8, 2 threads, 320-390 GFLOP/s at 128-512 tokens against the GEMM's 140-257, 4x at 8 tokens.
inline constexpr GemvTuning kZen5GemvTuning{/*rows_one_token=*/16, /*rows_two_tokens=*/8, GemvPrefetch::kWrapped,
                                            /*fp8_subnormal_tokens=*/4, /*gemv_max_tokens=*/kGemvAlways,
                                            /*fp8_rows_one_token=*/0, /*rows_many_tokens=*/6};
inline constexpr GemvTuning kZen3GemvTuning{/*rows_one_token=*/8, /*rows_two_tokens=*/8, GemvPrefetch::kWrapped,
                                            /*fp8_subnormal_tokens=*/4, /*gemv_max_tokens=*/31,
                                            /*fp8_rows_one_token=*/4};
// The tuning of this CPU's family (what the GEMV starts with, before the environment).
GemvTuning family_gemv_tuning();

const GemvTuning& gemv_tuning();
void set_gemv_tuning(const GemvTuning& tuning);  // tests and benchmarks

// Precision of the activations entering linear(): kF32 is exact mode (the default: fp32
// activations, weights dequantized exactly, fp32 accumulation); kBF16 is fast mode (activations
// rounded to bf16 first, weights still exact, fp32 accumulation), which runs on AMX tiles where
// the CPU has them and through the exact kernels otherwise (same numbers up to summation order).
enum class ActDType { kF32, kBF16, kCount };
const char* act_dtype_name(ActDType act);
ActDType parse_act_dtype(const std::string& name);  // "f32" | "bf16"; else an Error
void set_act_dtype(ActDType act);
ActDType act_dtype();
// Batch invariance (the default): every product sums in the one canonical order of its ISA,
// whatever the number of tokens, so a sequence's results do not depend on what else is in the
// step or how its prompt was chunked. set_batch_invariant(false) is the opt-out: the GEMM (8 or
// more tokens) sums each dot product in k order instead, ~20-30% faster prefill on AVX2, results
// within rounding of the canonical ones but no longer bit for bit the same across batchings.
void set_batch_invariant(bool on);
bool batch_invariant();

// Where fast mode's products of kFastGemmMinTokens tokens or more run on this CPU: AMX tiles
// (matmul_amx.h), else VDPBF16PS on AVX512_BF16 (matmul_bf16dot.h; DSINFER_BF16DOT=0 turns it
// off), else the exact kernels; products of fewer tokens (decode) run a VDPBF16PS GEMV from 5
// tokens on where that is fast mode's kernel (bf16dot_gemv; bf16 matrices from 13 tokens on),
// else the exact kernels on the rounded activations; so fast mode's numbers depend on the batch
// (exact mode's never do).
enum class FastModeKernels { kExact, kAmx, kBf16Dot };
FastModeKernels fast_mode_kernels();
const char* fast_mode_kernels_name(FastModeKernels kernels);
bool fast_mode_uses_amx();
inline constexpr int64_t kFastGemmMinTokens = 16;

// y[t * y_stride + r] = sum_c x[t * x_stride + c] * W[r, c] for every row r of w and t <
// n_tokens, on the calling thread only: for callers that split other work across the pool
// (attention heads). Same kernels, hence the same numbers, as linear() in exact mode; in fast
// mode, from kAmxMinTokens tokens on AMX, both operands are rounded to bf16 (attention's
// products, where both are activations), else it stays exact.
void matmul_serial(const float* x, int64_t n_tokens, int64_t x_stride, const WeightMatrix& w, float* y,
                   int64_t y_stride);

// out[t * out_stride + c] = sum_{d < n_rows} coef[t * coef_stride + d] * W[first + d, c] for t <
// n_sets and every column c of w: rows of a weight matrix combined with coefficients (W^T times
// each set, e.g. a query absorbed through wkv_b's key rows), straight from fp8/bf16, on the
// calling thread. Exact mode's numbers in either mode (fp32 coefficients and accumulation).
void combine_rows(const WeightMatrix& w, int64_t first, int64_t n_rows, const float* coef, int64_t coef_stride,
                  int64_t n_sets, float* out, int64_t out_stride);
// The same with the kernels of one ISA (which the CPU must support): for tests.
void combine_rows(const WeightMatrix& w, int64_t first, int64_t n_rows, const float* coef, int64_t coef_stride,
                  int64_t n_sets, float* out, int64_t out_stride, Isa isa);
// y[t * y_stride + r] = x[t] . W[r] for t < n_tokens and every row r of w (f32 or bf16 rows), in
// the ISA's canonical order (the bits of linear() and of matmul_serial in exact mode), on the
// calling thread, register-blocked for a few tokens against many long rows: attention's scores
// (heads against cached keys), 2-3x the canonical GEMM's speed there.
void dot_rows(const float* x, int64_t n_tokens, int64_t x_stride, const WeightMatrix& w, float* y, int64_t y_stride);
void dot_rows(const float* x, int64_t n_tokens, int64_t x_stride, const WeightMatrix& w, float* y, int64_t y_stride,
              Isa isa);
// out += the same sum, continuing each output's chain: combine_rows over rows [0, a) of one matrix
// then accumulate_rows over rows [0, b) of another gives the bits of one combine_rows over the
// a + b rows stacked (attention over a KV cache's blocks, each its own matrix).
void accumulate_rows(const WeightMatrix& w, int64_t first, int64_t n_rows, const float* coef, int64_t coef_stride,
                     int64_t n_sets, float* out, int64_t out_stride);
void accumulate_rows(const WeightMatrix& w, int64_t first, int64_t n_rows, const float* coef, int64_t coef_stride,
                     int64_t n_sets, float* out, int64_t out_stride, Isa isa);

// Dot product with fp32 accumulation in 16 independent lanes (vectorizes; fixed order, so
// results do not depend on the thread count).
float dot(const float* a, const float* b, int64_t n);
// y += alpha * x
void axpy(float alpha, const float* x, float* y, int64_t n);

}  // namespace dsinfer
