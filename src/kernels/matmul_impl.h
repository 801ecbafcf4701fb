// The vector matrix kernels, written once over a small traits type S (one per ISA) and included
// only by the per-ISA translation units (matmul_avx512.cpp, matmul_avx2.cpp). Everything here
// has internal linkage and uses no library templates, so code built for one ISA can never be
// picked by the linker for another.
//
// S provides: V (vector of S::kWidth floats), zero, load, store, set1, fma, mul, reduce, and
//   load_fp8(codes): kWidth e4m3 codes -> their values times 2^-8, exactly (through the fp16
//                    bit pattern: code << 7 is the fp16 of value / 256, subnormals included;
//                    the NaN codes 0x7f/0xff are not special-cased: real checkpoints never hold
//                    them, as e4m3fn quantizers saturate at 448),
//   load_bf16(bits): kWidth bf16 -> fp32 (exact).
#pragma once

#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "kernels/matmul_isa.h"

namespace dsinfer {
namespace {

constexpr float kFp8Bias = 256.0f;  // load_fp8 returns value / 256; scales absorb the 256

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// A local copy of bf16_to_f32: an out-of-line copy of a shared inline function built with this
// ISA's flags could otherwise be the one the linker keeps for the whole program.
inline float bf16_bits_to_f32(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

enum class WKind { kF32, kBF16, kFp8 };

template <class S, WKind kind>
inline typename S::V load_w(const uint8_t* row, int64_t k) {
  if constexpr (kind == WKind::kF32) return S::load(reinterpret_cast<const float*>(row) + k);
  else if constexpr (kind == WKind::kBF16) return S::load_bf16(reinterpret_cast<const uint16_t*>(row) + k);
  else return S::load_fp8(row + k);
}

// The same value as load_w gives for one element (tails shorter than a vector).
template <WKind kind>
inline float scalar_w(const uint8_t* row, int64_t k) {
  if constexpr (kind == WKind::kF32) return reinterpret_cast<const float*>(row)[k];
  else if constexpr (kind == WKind::kBF16) return bf16_bits_to_f32(reinterpret_cast<const uint16_t*>(row)[k]);
  else return fp8_e4m3_table()[row[k]] * (1.0f / kFp8Bias);
}

// ---- GEMV: a group of R rows against T tokens, weights streamed once -------------------------
// y[t * y_stride + i] = sum_k W_i[k] * xs[t * xs_stride + k] for i < R, t < T.
template <class S, WKind kind, int T, int R>
inline void gemv_group(const uint8_t* w0, int64_t row_bytes, int64_t K, const float* xs,
                       int64_t xs_stride, float* y, int64_t y_stride) {
  using V = typename S::V;
  constexpr int W = S::kWidth;
  V acc[R][T];
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) acc[i][t] = S::zero();
  int64_t k = 0;
  // The next group of rows, prefetched at the pace this one is read (R rows x 2W codes an
  // iteration): rows shorter than a few KB end before the hardware prefetcher has caught on.
  const uint8_t* next = w0 + R * row_bytes;
  if constexpr (kind == WKind::kFp8 && S::kFp8ThroughL1) {
    // 2W codes a row at a time: widened to fp16 patterns in one wide integer step and stored,
    // then converted to fp32 straight from L1 (a memory-operand conversion needs no shuffle
    // port, which the register form would share with the widening): fewer uops per byte.
    alignas(64) uint16_t half[R][2 * W];
    for (; k + 2 * W <= K; k += 2 * W) {
      V x0[T], x1[T];
      for (int t = 0; t < T; ++t) {
        x0[t] = S::load(xs + t * xs_stride + k);
        x1[t] = S::load(xs + t * xs_stride + k + W);
      }
      for (int i = 0; i < R; ++i) S::fp8_to_half_2x(w0 + i * row_bytes + k, half[i]);
      for (int i = 0; i < R; ++i) __builtin_prefetch(next + R * k + i * 2 * W, 0, 2);
      for (int i = 0; i < R; ++i) __builtin_prefetch(w0 + i * row_bytes + k + 4096, 0, 3);
      for (int i = 0; i < R; ++i) {
        const V a = S::load_half(half[i]), b = S::load_half(half[i] + W);
        for (int t = 0; t < T; ++t) acc[i][t] = S::fma(b, x1[t], S::fma(a, x0[t], acc[i][t]));
      }
    }
  }
  constexpr int64_t elem = kind == WKind::kF32 ? 4 : kind == WKind::kBF16 ? 2 : 1;
  for (; k + W <= K; k += W) {
    V xv[T];
    for (int t = 0; t < T; ++t) xv[t] = S::load(xs + t * xs_stride + k);
    if constexpr (kind != WKind::kFp8)
      for (int i = 0; i < R; ++i) __builtin_prefetch(w0 + i * row_bytes + k * elem + 4096, 0, 3);
    for (int i = 0; i < R; ++i) {
      const V wv = load_w<S, kind>(w0 + i * row_bytes, k);
      for (int t = 0; t < T; ++t) acc[i][t] = S::fma(wv, xv[t], acc[i][t]);
    }
  }
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) {
      float s = S::reduce(acc[i][t]);
      for (int64_t kk = k; kk < K; ++kk) s += scalar_w<kind>(w0 + i * row_bytes, kk) * xs[t * xs_stride + kk];
      y[t * y_stride + i] = s;
    }
}

template <class S, WKind kind, int T>
inline void gemv_dispatch_rows(bool four, const uint8_t* w0, int64_t row_bytes, int64_t K, const float* xs,
                               int64_t xs_stride, float* y, int64_t y_stride) {
  if (four) gemv_group<S, kind, T, 4>(w0, row_bytes, K, xs, xs_stride, y, y_stride);
  else gemv_group<S, kind, T, 1>(w0, row_bytes, K, xs, xs_stride, y, y_stride);
}

// Tokens in groups of up to 4, rows in groups of 4 (never straddling an fp8 scale block, since
// fp8 activations are pre-multiplied by the block's scales: xs[t, k] = x[t, k] * scale[k/128] * 256).
template <class S, WKind kind>
void gemv_rows(const MatmulTask& task, int64_t r0, int64_t r1, float* xs_buf) {
  const WeightMatrix& w = *task.w;
  const int64_t K = w.cols;
  const int64_t elem = kind == WKind::kF32 ? 4 : kind == WKind::kBF16 ? 2 : 1;
  const int64_t row_bytes = K * elem;
  for (int64_t t0 = 0; t0 < task.n_tokens; t0 += 4) {
    const int T = static_cast<int>(min64(4, task.n_tokens - t0));
    const float* xs = task.x + t0 * task.x_stride;
    int64_t xs_stride = task.x_stride;
    int64_t scaled_block = -1;
    for (int64_t r = r0; r < r1;) {
      bool four = r + 4 <= r1;
      if constexpr (kind == WKind::kFp8) {
        const int64_t block = r / kFp8Block;
        four = four && (r + 3) / kFp8Block == block;
        if (block != scaled_block) {
          const float* scales = w.scale + block * w.scale_cols();
          for (int t = 0; t < T; ++t)
            for (int64_t c = 0; c < K; c += kFp8Block) {
              const typename S::V s = S::set1(scales[c / kFp8Block] * kFp8Bias);
              const int64_t end = min64(c + kFp8Block, K);
              const float* src = task.x + (t0 + t) * task.x_stride;
              int64_t k = c;
              for (; k + S::kWidth <= end; k += S::kWidth) S::store(xs_buf + t * K + k, S::mul(S::load(src + k), s));
              for (; k < end; ++k) xs_buf[t * K + k] = src[k] * (scales[c / kFp8Block] * kFp8Bias);
            }
          xs = xs_buf;
          xs_stride = K;
          scaled_block = block;
        }
      }
      const uint8_t* w0 = w.data + r * row_bytes;
      float* y = task.y + t0 * task.y_stride + r;
      switch (T) {
        case 1: gemv_dispatch_rows<S, kind, 1>(four, w0, row_bytes, K, xs, xs_stride, y, task.y_stride); break;
        case 2: gemv_dispatch_rows<S, kind, 2>(four, w0, row_bytes, K, xs, xs_stride, y, task.y_stride); break;
        case 3: gemv_dispatch_rows<S, kind, 3>(four, w0, row_bytes, K, xs, xs_stride, y, task.y_stride); break;
        default: gemv_dispatch_rows<S, kind, 4>(four, w0, row_bytes, K, xs, xs_stride, y, task.y_stride); break;
      }
      r += four ? 4 : 1;
    }
  }
}

// ---- GEMM: x packed transposed in tiles of NT = kNV vectors of tokens, weights converted to fp32
// R rows x KC columns at a time and reused by every token tile ----------------------------------
template <class S>
struct Gemm {
  static constexpr int kW = S::kWidth;
  static constexpr int kNV = S::kGemmVectors;  // vectors of tokens per tile
  static constexpr int kNT = kNV * kW;         // tokens per tile
  static constexpr int kR = S::kGemmRows;      // rows per panel (kNV * kR accumulators)
  static constexpr int64_t kKC = 128;      // columns per panel (a multiple of the fp8 block)

  static int64_t tiles(int64_t n) { return (n + kNT - 1) / kNT; }

  static int64_t packed_x_size(int64_t n, int64_t K) { return tiles(n) * K * kNT; }

  // out[(j * K + k) * NT + tt] = x[(j * NT + tt), k], zero past the last token.
  static void pack_x(const float* x, int64_t n, int64_t K, int64_t x_stride, float* out) {
    for (int64_t j = 0; j < tiles(n); ++j) {
      const int64_t tokens = min64(kNT, n - j * kNT);
      const float* src = x + j * kNT * x_stride;
      float* dst = out + j * K * kNT;
      // k outer: the writes are whole rows of the tile, the reads walk kNT token rows in step
      for (int64_t k = 0; k < K; ++k) {
        int64_t tt = 0;
        for (; tt < tokens; ++tt) dst[k * kNT + tt] = src[tt * x_stride + k];
        for (; tt < kNT; ++tt) dst[k * kNT + tt] = 0.0f;
      }
    }
  }

  // dst[0, kc) = fp32 values of W[row, kb + c] (as the reference dequantizes: code x scale).
  template <WKind kind>
  static void convert_row(const WeightMatrix& w, int64_t row, int64_t kb, int64_t kc, float* dst) {
    const int64_t elem = kind == WKind::kF32 ? 4 : kind == WKind::kBF16 ? 2 : 1;
    const uint8_t* src = w.data + row * w.cols * elem;
    for (int64_t c = 0; c < kc; c += kFp8Block) {
      const int64_t end = min64(c + kFp8Block, kc);
      float s = 1.0f;
      if constexpr (kind == WKind::kFp8) s = w.scale[(row / kFp8Block) * w.scale_cols() + (kb + c) / kFp8Block] * kFp8Bias;
      const typename S::V sv = S::set1(s);
      int64_t k = c;
      for (; k + kW <= end; k += kW) {
        const typename S::V v = load_w<S, kind>(src, kb + k);
        S::store(dst + k, kind == WKind::kFp8 ? S::mul(v, sv) : v);
      }
      for (; k < end; ++k) dst[k] = kind == WKind::kFp8 ? scalar_w<kind>(src, kb + k) * s : scalar_w<kind>(src, kb + k);
    }
  }

  // c[i][NT] += sum_k w[i * KC + k] * xp[k * NT + tt] for the first NV vectors of tokens:
  // kR x NV accumulators in registers (NV < kNV only for a tile's last, partial vectors).
  template <int NV>
  static void micro(const float* w, const float* xp, int64_t kc, float* c) {
    using V = typename S::V;
    V acc[kR][NV];
    for (int i = 0; i < kR; ++i)
      for (int v = 0; v < NV; ++v) acc[i][v] = S::load(c + i * kNT + v * kW);
    for (int64_t k = 0; k < kc; ++k) {
      V x[NV];
      for (int v = 0; v < NV; ++v) x[v] = S::load(xp + k * kNT + v * kW);
      for (int i = 0; i < kR; ++i) {
        const V b = S::set1(w[i * kKC + k]);
        for (int v = 0; v < NV; ++v) acc[i][v] = S::fma(b, x[v], acc[i][v]);
      }
    }
    for (int i = 0; i < kR; ++i)
      for (int v = 0; v < NV; ++v) S::store(c + i * kNT + v * kW, acc[i][v]);
  }

  // micro<nv> for a run-time nv in [1, kNV]
  template <int NV = kNV>
  static void micro_vectors(int nv, const float* w, const float* xp, int64_t kc, float* c) {
    if constexpr (NV > 1) {
      if (nv < NV) return micro_vectors<NV - 1>(nv, w, xp, kc, c);
    }
    micro<NV>(w, xp, kc, c);
  }

  // Blocking (as BLIS does, with the tokens in the role of its B panel): a chunk of kNCT token
  // tiles and kMC rows at a time, their accumulators in scratch; inside it, kKC-column panels.
  // Each panel's weights are converted to fp32 once for the whole chunk (kMC x kKC floats, 96 KB,
  // in L2), then every row panel passes over one token tile (kKC x kNT floats, 32 KB) while that
  // tile stays in L1: the micro-kernel's wide loads hit L1 and only its broadcasts come from L2.
  // No buffer grows with the matrix or the prompt.
  static constexpr int64_t kMC = 32 * kR;  // rows per chunk (a multiple of the row panel)
  static constexpr int64_t kNCT = 8;       // token tiles per chunk

  static int64_t scratch_size(int64_t) { return kMC * kKC + kMC * kNCT * kNT; }

  // One row panel's weights of the next column panel (rows [rp, rp + kR), columns [kb, kb + kKC))
  // into L2 while the micro-kernels run: short row pieces a matrix row apart are a pattern the
  // hardware prefetcher does not follow.
  template <WKind kind>
  static void prefetch_panel(const WeightMatrix& w, int64_t rp, int64_t kb, int64_t r_end) {
    if (kb >= w.cols) return;
    const int64_t elem = kind == WKind::kF32 ? 4 : kind == WKind::kBF16 ? 2 : 1;
    const int64_t bytes = min64(kKC, w.cols - kb) * elem;
    for (int64_t r = rp; r < min64(rp + kR, r_end); ++r) {
      const uint8_t* row = w.data + (r * w.cols + kb) * elem;
      for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(row + b, 0, 2);
    }
  }

  template <WKind kind>
  static void rows(const MatmulTask& task, int64_t r0, int64_t r1, float* scratch) {
    const WeightMatrix& w = *task.w;
    const int64_t K = w.cols, n = task.n_tokens, n_tiles = tiles(n);
    float* wbuf = scratch;               // [kMC / kR panels, kR, kKC]
    float* cbuf = scratch + kMC * kKC;   // [kMC / kR panels, kNCT tiles, kR, kNT]
    for (int64_t j0 = 0; j0 < n_tiles; j0 += kNCT) {
      const int64_t nt = min64(kNCT, n_tiles - j0);
      for (int64_t rc = r0; rc < r1; rc += kMC) {
        const int64_t chunk_rows = min64(kMC, r1 - rc);
        const int64_t panels = (chunk_rows + kR - 1) / kR;
        std::memset(cbuf, 0, sizeof(float) * panels * nt * kR * kNT);
        for (int64_t kb = 0; kb < K; kb += kKC) {
          const int64_t kc = min64(kKC, K - kb);
          for (int64_t i = 0; i < panels * kR; ++i) {
            if (i < chunk_rows) convert_row<kind>(w, rc + i, kb, kc, wbuf + i * kKC);
            else std::memset(wbuf + i * kKC, 0, sizeof(float) * kc);
          }
          for (int64_t j = 0; j < nt; ++j) {
            const int64_t tokens = min64(kNT, n - (j0 + j) * kNT);  // the last tile may be partial
            const int nv = static_cast<int>((tokens + kW - 1) / kW);
            const float* xp = task.x_packed + ((j0 + j) * K + kb) * kNT;
            for (int64_t p = 0; p < panels; ++p) {
              // the next column panel of this row panel, spread over the first token tile
              if (j == 0) prefetch_panel<kind>(w, rc + p * kR, kb + kKC, rc + chunk_rows);
              micro_vectors(nv, wbuf + p * kR * kKC, xp, kc, cbuf + (p * nt + j) * kR * kNT);
            }
          }
        }
        for (int64_t p = 0; p < panels; ++p) {
          const int64_t rp = rc + p * kR, n_rows = min64(kR, rc + chunk_rows - rp);
          for (int64_t j = 0; j < nt; ++j) {
            const float* c = cbuf + (p * nt + j) * kR * kNT;
            const int64_t t0 = (j0 + j) * kNT;
            for (int64_t tt = 0; tt < kNT && t0 + tt < n; ++tt) {
              float* y = task.y + (t0 + tt) * task.y_stride + rp;
              for (int64_t i = 0; i < n_rows; ++i) y[i] = c[i * kNT + tt];
            }
          }
        }
      }
    }
  }
};

// ---- Row combination: out[t] = sum_d coef[t, d] W[first + d] (W^T times coefficient sets) ----
// Each 128-column block of a row is widened once into registers and then accumulated into every
// set's output (which stays in L1 for the few sets decode attention has).
template <class S, WKind kind>
void combine_rows_kind(const WeightMatrix& w, int64_t first, int64_t n_rows, const float* coef, int64_t coef_stride,
                       int64_t n_sets, float* out, int64_t out_stride) {
  using V = typename S::V;
  constexpr int W = S::kWidth;
  constexpr int kBlockVectors = static_cast<int>(kFp8Block) / W;
  const int64_t K = w.cols;
  const int64_t elem = kind == WKind::kF32 ? 4 : kind == WKind::kBF16 ? 2 : 1;
  for (int64_t t = 0; t < n_sets; ++t)
    for (int64_t c = 0; c < K; ++c) out[t * out_stride + c] = 0.0f;
  const int64_t row_bytes = K * elem;
  for (int64_t d = 0; d < n_rows; ++d) {
    const int64_t r = first + d;
    const uint8_t* row = w.data + r * row_bytes;
    // rows a few ahead (decode reads these straight from memory, a few hundred bytes a row: too
    // short a stream for the hardware prefetcher to get going)
    if (d + 4 < n_rows)
      for (int64_t b = 0; b < row_bytes; b += 64) __builtin_prefetch(row + 4 * row_bytes + b, 0, 3);
    for (int64_t c0 = 0; c0 < K; c0 += kFp8Block) {
      const int64_t end = min64(c0 + kFp8Block, K);
      const int n_vectors = static_cast<int>((end - c0) / W);
      float s = 1.0f;
      if constexpr (kind == WKind::kFp8) s = w.scale[(r / kFp8Block) * w.scale_cols() + c0 / kFp8Block] * kFp8Bias;
      V wv[kBlockVectors];
      for (int v = 0; v < n_vectors; ++v) wv[v] = load_w<S, kind>(row, c0 + v * W);
      for (int64_t t = 0; t < n_sets; ++t) {
        const float a = coef[t * coef_stride + d] * s;
        const V av = S::set1(a);
        float* o = out + t * out_stride + c0;
        for (int v = 0; v < n_vectors; ++v) S::store(o + v * W, S::fma(wv[v], av, S::load(o + v * W)));
        for (int64_t c = c0 + n_vectors * W; c < end; ++c) out[t * out_stride + c] += scalar_w<kind>(row, c) * a;
      }
    }
  }
}

template <class S>
void combine_rows_impl(const WeightMatrix& w, int64_t first, int64_t n_rows, const float* coef, int64_t coef_stride,
                       int64_t n_sets, float* out, int64_t out_stride) {
  switch (w.dtype) {
    case DType::kF32: return combine_rows_kind<S, WKind::kF32>(w, first, n_rows, coef, coef_stride, n_sets, out, out_stride);
    case DType::kBF16: return combine_rows_kind<S, WKind::kBF16>(w, first, n_rows, coef, coef_stride, n_sets, out, out_stride);
    default: return combine_rows_kind<S, WKind::kFp8>(w, first, n_rows, coef, coef_stride, n_sets, out, out_stride);
  }
}

template <class S>
void matmul_rows_impl(const MatmulTask& task, int64_t r0, int64_t r1, float* scratch) {
  const bool gemm = task.x_packed != nullptr;
  switch (task.w->dtype) {
    case DType::kF32:
      return gemm ? Gemm<S>::template rows<WKind::kF32>(task, r0, r1, scratch) : gemv_rows<S, WKind::kF32>(task, r0, r1, scratch);
    case DType::kBF16:
      return gemm ? Gemm<S>::template rows<WKind::kBF16>(task, r0, r1, scratch) : gemv_rows<S, WKind::kBF16>(task, r0, r1, scratch);
    default:
      return gemm ? Gemm<S>::template rows<WKind::kFp8>(task, r0, r1, scratch) : gemv_rows<S, WKind::kFp8>(task, r0, r1, scratch);
  }
}

template <class S>
int64_t scratch_size_impl(const MatmulTask& task) {
  if (task.x_packed) return Gemm<S>::scratch_size(task.n_tokens);
  return 4 * task.w->cols;  // scaled activations of up to 4 tokens (fp8 GEMV)
}

}  // namespace
}  // namespace dsinfer
