#include "kernels/linear.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/matmul_amx.h"
#include "kernels/matmul_bf16dot.h"
#include "kernels/matmul_isa.h"

namespace dsinfer {

// The hot loops are compiled for several ISAs and picked at load time (GCC target_clones),
// so the default build runs anywhere and still uses AVX-512/AVX2 where the CPU has them.
#define DS_TARGET_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

DS_TARGET_CLONES float dot(const float* a, const float* b, int64_t n) {
  constexpr int kLanes = 16;
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  for (int l = 0; i < n; ++i, ++l) acc[l] += a[i] * b[i];
  float s = 0;
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  return s;
}

DS_TARGET_CLONES void axpy(float alpha, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

DS_TARGET_CLONES static void decode_bf16(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(in[i]);
}

// e4m3 -> fp32 with integer ops instead of a table gather (which does not vectorize): the 7
// exponent+mantissa bits placed at fp32 bit 20 give 2^(e-127) (1 + m/8), or the fp32 denormal
// (m/8) 2^-126 when e == 0; times 2^120 that is exactly the e4m3 value, normal or subnormal.
// The only non-finite codes, 0x7f and 0xff, become NaN. Folding 2^120 into the block scale
// multiplies the same exact real numbers, so each product rounds exactly as code x scale does
// (the reference's dequantization) as long as scale x 2^120 stays finite.
DS_TARGET_CLONES static void decode_fp8(const uint8_t* __restrict in, float scale,
                                        float* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t code = in[i];
    const uint32_t bits = ((code & 0x80u) << 24) | ((code & 0x7fu) << 20) |
                          ((code & 0x7fu) == 0x7fu ? 0x7fc00000u : 0u);
    std::memcpy(out + i, &bits, sizeof bits);
  }
  if (std::fabs(scale) < 0x1p7f) {
    const float folded = scale * 0x1p120f;
    for (int64_t i = 0; i < n; ++i) out[i] *= folded;
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = (out[i] * 0x1p120f) * scale;
  }
}

void dequantize_row(const WeightMatrix& w, int64_t row, float* out) {
  switch (w.dtype) {
    case DType::kF32:
      std::copy_n(reinterpret_cast<const float*>(w.data) + row * w.cols, w.cols, out);
      return;
    case DType::kBF16:
      decode_bf16(reinterpret_cast<const uint16_t*>(w.data) + row * w.cols, out, w.cols);
      return;
    case DType::kF8E4M3: {
      const uint8_t* codes = w.data + row * w.cols;
      const float* scales = w.scale + (row / kFp8Block) * w.scale_cols();
      for (int64_t c = 0; c < w.cols; c += kFp8Block) {
        int64_t n = std::min<int64_t>(kFp8Block, w.cols - c);
        decode_fp8(codes + c, scales[c / kFp8Block], out + c, n);
      }
      return;
    }
    case kInt4Storage:
    case kInt8Storage: {
      dequantize_quant_row(w.quant_format(), w.data + row * w.row_stride(), w.group_scale + row * quant_groups(w.cols),
                           w.cols, out);
      return;
    }
    default:
      // the loader admits only the five formats above; anything else is a programming error
      fail("dequantize_row: unsupported weight dtype ", dtype_name(w.dtype));
  }
}

namespace {

const MatmulKernels& active_kernels() {
  static const MatmulKernels& kernels = matmul_kernels(best_isa());
  return kernels;
}

ActDType g_act_dtype = ActDType::kF32;

int gemv_rows_from_env(const char* name, int fallback, int most) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  const std::string text(v);
  for (int rows = 1; rows <= most; rows *= 2)
    if (text == std::to_string(rows)) return rows;
  fail(name, "=", text, " is not a power of two from 1 to ", most);
}

GemvTuning initial_gemv_tuning() {
  GemvTuning t = family_gemv_tuning();
  t.rows_one_token = gemv_rows_from_env("DSINFER_GEMV_ROWS", t.rows_one_token, 16);
  t.rows_two_tokens = gemv_rows_from_env("DSINFER_GEMV_ROWS2", t.rows_two_tokens, 8);
  if (const char* v = std::getenv("DSINFER_GEMV_ROWS_FP8"); v && *v)
    t.fp8_rows_one_token = std::string(v) == "0" ? 0 : gemv_rows_from_env("DSINFER_GEMV_ROWS_FP8", 0, 16);
  if (const char* v = std::getenv("DSINFER_GEMV_PREFETCH"); v && *v) {
    const std::string text(v);
    check(text == "none" || text == "ahead" || text == "wrapped", "DSINFER_GEMV_PREFETCH=", text,
          " is not one of none, ahead, wrapped");
    t.prefetch = text == "none" ? GemvPrefetch::kNone : text == "ahead" ? GemvPrefetch::kAhead : GemvPrefetch::kWrapped;
  }
  if (const char* v = std::getenv("DSINFER_GEMV_FP8_SUBNORMAL"); v && *v) {
    const std::string text(v);
    check(text.size() == 1 && text[0] >= '0' && text[0] <= '4', "DSINFER_GEMV_FP8_SUBNORMAL=", text,
          " is not a number of tokens from 0 to 4");
    t.fp8_subnormal_tokens = text[0] - '0';
  }
  if (const char* v = std::getenv("DSINFER_GEMV_ROWS_MANY"); v && *v) {
    const std::string text(v);
    check(text == "4" || text == "6", "DSINFER_GEMV_ROWS_MANY=", text, " is not 4 or 6 (GEMV rows per group for 3-4 tokens)");
    t.rows_many_tokens = text[0] - '0';
  }
  if (const char* v = std::getenv("DSINFER_GEMV_MAX_TOKENS"); v && *v) {
    const std::string text(v);
    check(text.size() <= 18 && text.find_first_not_of("0123456789") == std::string::npos, "DSINFER_GEMV_MAX_TOKENS=",
          text, " is not a number of tokens (0: the ISA's own switch to the GEMM)");
    t.gemv_max_tokens = std::stoll(text);
  }
  return t;
}
// Read at first use, not during static initialization, so that a bad DSINFER_GEMV_* value is
// one clear error from the command that ran (an exception thrown before main would abort).
GemvTuning& current_gemv_tuning() {
  static GemvTuning tuning = initial_gemv_tuning();
  return tuning;
}
bool g_batch_invariant = true;

// Where fast mode's products of kFastGemmMinTokens or more tokens go with these kernels: their
// own (AMX tiles where the CPU lets us use them, else VDPBF16PS) only when the kernels in use are
// the AVX-512 ones (not a variant forced for a test).
FastModeKernels fast_kernels_for(const MatmulKernels& kernels) {
  if (kernels.isa != Isa::kAvx512) return FastModeKernels::kExact;
  if (amx_usable()) return FastModeKernels::kAmx;
  if (bf16dot_usable()) return FastModeKernels::kBf16Dot;
  return FastModeKernels::kExact;
}

// The fast kernels for this product, or kExact: exact mode, or too few tokens (then the exact
// kernels run on the rounded activations). The int4 and int8 formats take the VDPBF16PS kernels
// even where AMX is there (every AMX CPU has AVX512_BF16): only those scale partial sums per row.
FastModeKernels fast_gemm(const MatmulKernels& kernels, int64_t n_tokens, const WeightMatrix& w) {
  if (g_act_dtype != ActDType::kBF16 || n_tokens < kFastGemmMinTokens) return FastModeKernels::kExact;
  const FastModeKernels fast = fast_kernels_for(kernels);
  if (fast == FastModeKernels::kAmx && w.group_scaled()) return bf16dot_usable() ? FastModeKernels::kBf16Dot : FastModeKernels::kExact;
  return fast;
}

// Whether fast mode's product of n_tokens below kFastGemmMinTokens runs bf16dot_gemv: from
// kBf16DotGemvMinTokens on (below, the exact GEMV, tuned per CPU family, streams as fast), where
// the VDPBF16PS kernels are fast mode's (AMX CPUs keep the exact kernels there: unmeasured).
// bf16 matrices, which the VDPBF16PS GEMV does not need to convert, still run faster through the
// exact GEMV up to kBf16ExactGemvMaxTokens (3 passes of 4 tokens, the later ones from L2: kernels
// /matmul_impl.h, gemv_pass_chunk_rows). Zen 5, 2 threads, the slice's bf16 head 129280 x 7168,
// 2 alternating rounds: 5 tokens 49-50 against 60 ms, 8 tokens 53-54 against 70-77, 12 tokens
// 72-73 against 86-92; at 15 tokens the VDPBF16PS GEMV is ahead (39 against 44-45 ms for half
// the head). fp8 stays on it (5 tokens: expert w1 0.54-0.55 against 0.61-0.64 ms).
inline constexpr int64_t kBf16ExactGemvMaxTokens = 12;
bool fast_gemv(const MatmulKernels& kernels, int64_t n_tokens, const WeightMatrix& w) {
  static_assert(kFastGemmMinTokens - 1 <= kBf16DotGemvMaxTokens);
  if (w.dtype == DType::kBF16 && n_tokens <= kBf16ExactGemvMaxTokens) return false;
  return n_tokens >= kBf16DotGemvMinTokens && n_tokens < kFastGemmMinTokens &&
         fast_kernels_for(kernels) == FastModeKernels::kBf16Dot;
}

// Whether an exact-mode product of n_tokens packs its tokens for the GEMM, else runs the GEMV.
// The batch-variant opt-out always takes the GEMM from gemm_min_tokens on: its k-order sums are
// the point of it (on Zen 5 at 512 tokens 134-146 tok/s against the GEMV's 128-129).
bool takes_gemm(const MatmulKernels& kernels, int64_t n_tokens) {
  return n_tokens >= kernels.gemm_min_tokens && (!g_batch_invariant || n_tokens > current_gemv_tuning().gemv_max_tokens);
}

// n floats of `buffer` (grown as needed; per-thread buffers reused across calls), starting on a
// cache line: the kernels' vector loads from packed tiles and scratch then never straddle two
// lines (a straddling load costs two, and large allocations start 16 bytes past a page).
float* at_least(std::vector<float>& buffer, int64_t n) {
  constexpr size_t kLineFloats = 16;
  if (buffer.size() < static_cast<size_t>(n) + kLineFloats) buffer.resize(static_cast<size_t>(n) + kLineFloats);
  const uintptr_t address = reinterpret_cast<uintptr_t>(buffer.data());
  return buffer.data() + (kLineFloats - address / sizeof(float) % kLineFloats) % kLineFloats;
}

// x[n, cols] rounded to bf16 values (kept as fp32) in a per-thread buffer.
const float* rounded_to_bf16(const float* x, int64_t n, int64_t cols, ThreadPool& pool) {
  thread_local std::vector<float> rounded;
  float* out = at_least(rounded, n * cols);
  pool.parallel_for(n * cols, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = bf16_to_f32(f32_to_bf16(x[i]));
  }, 4096);
  return out;
}

void linear_with(const MatmulKernels& kernels, const float* x, int64_t n_tokens, const WeightMatrix& w,
                 float* y, ThreadPool& pool) {
  if (g_act_dtype == ActDType::kBF16) {
    // (f32 weights would lose bits in bf16: they take the exact kernels)
    if (w.dtype != DType::kF32) {
      switch (fast_gemm(kernels, n_tokens, w)) {
        case FastModeKernels::kAmx: return amx_linear(x, n_tokens, w, y, pool);
        case FastModeKernels::kBf16Dot: return bf16dot_linear(x, n_tokens, w, y, pool);
        case FastModeKernels::kExact: break;
      }
      if (fast_gemv(kernels, n_tokens, w)) return bf16dot_gemv(x, n_tokens, w, y, pool);
    }
    x = rounded_to_bf16(x, n_tokens, w.cols, pool);
  }
  MatmulTask task{x, n_tokens, w.cols, &w, y, w.rows, nullptr, !g_batch_invariant, current_gemv_tuning()};
  // Packed once here and shared by every thread (the activations are small next to the weights).
  thread_local std::vector<float> packed;
  if (takes_gemm(kernels, n_tokens)) {
    float* out = at_least(packed, kernels.packed_x_size(n_tokens, w.cols));
    // in whole tiles per thread (a tile of `tile` tokens is tile * cols floats)
    const int64_t tile = kernels.packed_x_size(1, w.cols) / w.cols;
    pool.parallel_for(ceil_div(n_tokens, tile), [&](int64_t begin, int64_t end) {
      const int64_t t0 = begin * tile, t1 = std::min(end * tile, n_tokens);
      kernels.pack_x(x + t0 * w.cols, t1 - t0, w.cols, w.cols, out + t0 * w.cols);
    });
    task.x_packed = out;
  }
  // Below this many multiply-adds, waking other threads costs more than it saves.
  constexpr int64_t kMinParallelWork = 1 << 16;
  int64_t grain = std::max<int64_t>(1, kMinParallelWork / std::max<int64_t>(1, w.cols * n_tokens));
  grain = ceil_div(grain, kernels.row_grain) * kernels.row_grain;
  pool.parallel_for(
      w.rows,
      [&](int64_t begin, int64_t end) {
        thread_local std::vector<float> scratch;
        kernels.matmul_rows(task, begin, end, at_least(scratch, kernels.scratch_size(task)));
      },
      grain);
}

}  // namespace

void linear(const float* x, int64_t n_tokens, const WeightMatrix& w, float* y, ThreadPool& pool) {
  linear_with(active_kernels(), x, n_tokens, w, y, pool);
}

void linear(const float* x, int64_t n_tokens, const WeightMatrix& w, float* y, ThreadPool& pool, Isa isa) {
  linear_with(matmul_kernels(isa), x, n_tokens, w, y, pool);
}

Isa linear_isa() { return active_kernels().isa; }

void combine_rows(const WeightMatrix& w, int64_t first, int64_t n_rows, const float* coef, int64_t coef_stride,
                  int64_t n_sets, float* out, int64_t out_stride) {
  active_kernels().combine_rows(w, first, n_rows, coef, coef_stride, n_sets, out, out_stride, /*accumulate=*/false);
}

void combine_rows(const WeightMatrix& w, int64_t first, int64_t n_rows, const float* coef, int64_t coef_stride,
                  int64_t n_sets, float* out, int64_t out_stride, Isa isa) {
  matmul_kernels(isa).combine_rows(w, first, n_rows, coef, coef_stride, n_sets, out, out_stride, /*accumulate=*/false);
}

namespace {
// dot_rows' kernels read f32 and bf16 rows only (a cache's entries)
void dot_rows_with(const MatmulKernels& kernels, const float* x, int64_t n_tokens, int64_t x_stride,
                   const WeightMatrix& w, float* y, int64_t y_stride) {
  check(w.dtype == DType::kF32 || w.dtype == DType::kBF16, "dot_rows: rows of ", dtype_name(w.dtype),
        " (f32 or bf16 only)");
  kernels.dot_rows(x, n_tokens, x_stride, w, y, y_stride);
}
}  // namespace

void dot_rows(const float* x, int64_t n_tokens, int64_t x_stride, const WeightMatrix& w, float* y, int64_t y_stride) {
  dot_rows_with(active_kernels(), x, n_tokens, x_stride, w, y, y_stride);
}

void dot_rows(const float* x, int64_t n_tokens, int64_t x_stride, const WeightMatrix& w, float* y, int64_t y_stride,
              Isa isa) {
  dot_rows_with(matmul_kernels(isa), x, n_tokens, x_stride, w, y, y_stride);
}

void accumulate_rows(const WeightMatrix& w, int64_t first, int64_t n_rows, const float* coef, int64_t coef_stride,
                     int64_t n_sets, float* out, int64_t out_stride) {
  active_kernels().combine_rows(w, first, n_rows, coef, coef_stride, n_sets, out, out_stride, /*accumulate=*/true);
}

void accumulate_rows(const WeightMatrix& w, int64_t first, int64_t n_rows, const float* coef, int64_t coef_stride,
                     int64_t n_sets, float* out, int64_t out_stride, Isa isa) {
  matmul_kernels(isa).combine_rows(w, first, n_rows, coef, coef_stride, n_sets, out, out_stride, /*accumulate=*/true);
}

const char* act_dtype_name(ActDType act) { return act == ActDType::kBF16 ? "bf16" : "f32"; }

ActDType parse_act_dtype(const std::string& name) {
  if (name == "f32") return ActDType::kF32;
  if (name == "bf16") return ActDType::kBF16;
  fail("unknown activation dtype '", name, "' (f32 or bf16)");
}

void set_act_dtype(ActDType act) { g_act_dtype = act; }
GemvTuning family_gemv_tuning() {
  if (!cpu_is_amd()) return GemvTuning{};
  if (cpu_family() >= 26) return kZen5GemvTuning;
  // Zen 4 as measured there on 2026-12-01, Zen 3 (no AVX-512) on 2026-12-03 (linear.h)
  if (!cpu_supports(Isa::kAvx512)) return kZen3GemvTuning;
  return {/*rows_one_token=*/8, /*rows_two_tokens=*/8, GemvPrefetch::kNone, /*fp8_subnormal_tokens=*/0};
}
const GemvTuning& gemv_tuning() { return current_gemv_tuning(); }
void set_gemv_tuning(const GemvTuning& tuning) { current_gemv_tuning() = tuning; }
void set_batch_invariant(bool on) { g_batch_invariant = on; }
bool batch_invariant() { return g_batch_invariant; }
ActDType act_dtype() { return g_act_dtype; }
bool fast_mode_uses_amx() { return fast_mode_kernels() == FastModeKernels::kAmx; }
FastModeKernels fast_mode_kernels() { return fast_kernels_for(active_kernels()); }

const char* fast_mode_kernels_name(FastModeKernels kernels) {
  switch (kernels) {
    case FastModeKernels::kAmx: return "AMX tiles";
    case FastModeKernels::kBf16Dot: return "AVX-512 BF16 dot products";
    default: return "the exact kernels";
  }
}

// Here rather than in matmul_bf16dot_avx512.cpp: it runs before the CPU check, so it must not be
// built with AVX-512 flags.
bool bf16dot_usable() {
  static const bool usable = [] {
    if (const char* v = std::getenv("DSINFER_BF16DOT"); v && std::string(v) == "0") return false;
    return cpu_supports(Isa::kAvx512);  // which includes AVX512_BF16 (core/cpu.h)
  }();
  return usable;
}

void matmul_serial(const float* x, int64_t n_tokens, int64_t x_stride, const WeightMatrix& w, float* y,
                   int64_t y_stride) {
  const MatmulKernels& kernels = active_kernels();
  switch (fast_gemm(kernels, n_tokens, w)) {
    case FastModeKernels::kAmx: return amx_matmul_serial(x, n_tokens, x_stride, w, y, y_stride);
    case FastModeKernels::kBf16Dot: return bf16dot_matmul_serial(x, n_tokens, x_stride, w, y, y_stride);
    case FastModeKernels::kExact: break;
  }
  MatmulTask task{x, n_tokens, x_stride, &w, y, y_stride, nullptr, !g_batch_invariant, current_gemv_tuning()};
  thread_local std::vector<float> packed, scratch;
  if (takes_gemm(kernels, n_tokens)) {
    float* out = at_least(packed, kernels.packed_x_size(n_tokens, w.cols));
    kernels.pack_x(x, n_tokens, w.cols, x_stride, out);
    task.x_packed = out;
  }
  kernels.matmul_rows(task, 0, w.rows, at_least(scratch, kernels.scratch_size(task)));
}

}  // namespace dsinfer
