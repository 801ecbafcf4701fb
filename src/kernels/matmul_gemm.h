// The canonical GEMM of the vector kernels (matmul_formats.h has the order it keeps).
#pragma once

#include "kernels/matmul_formats.h"

namespace dsinfer {
namespace {

// ---- GEMM: x packed transposed in tiles of NT = kNV vectors of tokens, weights widened once
// per chunk of tokens; the canonical order kept by splitting k into kW phases -----------------
// The GEMV's lane l sums k = l, l + kW, ... of one (row, token); here tokens fill the vector
// lanes, so each (row, token) keeps kW phase sums instead, phase l summing exactly the k that
// lane l does, in the same order; at the end the phases are added by the same halving. The
// result is the GEMV's bit for bit, at the register-blocked outer product's speed.
template <class S>
struct Gemm {
  using V = typename S::V;
  static constexpr int kW = S::kWidth;
  static constexpr int kNV = S::kGemmVectors;  // vectors of tokens per tile
  static constexpr int kNT = kNV * kW;         // tokens per tile
  static constexpr int kR = S::kGemmRows;      // rows per panel (kNV * kR accumulators)
  // columns per panel (a multiple of the fp8 block and of kW): each micro-kernel call runs kKC / kW
  // steps between its loads and stores of the phase sums
  static constexpr int64_t kKC = S::kGemmPanelColumns;

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

  // dst[0, kc) = fp32 values of W[row, kb + c] as the GEMV multiplies them (fp8: value / 256).
  template <WKind kind>
  static void convert_row(const WeightMatrix& w, int64_t row, int64_t kb, int64_t kc, float* dst) {
    const WRow src = row_of(w, row);
    for (int64_t k = 0; k < kc; k += kW)
      S::store(dst + k, load_w<S, kind>(src, kb + k));  // kc: a multiple of kW
  }

  // fp8: the token tile's columns [kb, kb + kc) times the block scales * 256 of one row block
  // (scale_row), as the GEMV scales its activations: dst [kc, kNT].
  static void scale_tile(const float* xp, const float* scale_row, int64_t kb, int64_t kc,
                         float* dst) {
    for (int64_t k = 0; k < kc; ++k) {
      const V s = S::set1(scale_row[(kb + k) / kFp8Block] * kFp8Bias);
      for (int v = 0; v < kNV; ++v)
        S::store(dst + k * kNT + v * kW, S::mul(S::load(xp + k * kNT + v * kW), s));
    }
  }

  // One phase: c[i][NT] += sum over steps s of w[i * kKC + s * kW] * xp[s * kW * NT + tt], for
  // the first NV vectors of tokens (w and xp already offset to the phase's first column).
  template <int NV>
  static void micro(const float* w, const float* xp, int64_t steps, float* c) {
    V acc[kR][NV];
    for (int i = 0; i < kR; ++i)
      for (int v = 0; v < NV; ++v) acc[i][v] = S::load(c + i * kNT + v * kW);
    for (int64_t s = 0; s < steps; ++s) {
      V x[NV];
      for (int v = 0; v < NV; ++v) x[v] = S::load(xp + s * kW * kNT + v * kW);
      for (int i = 0; i < kR; ++i) {
        const V b = S::set1(w[i * kKC + s * kW]);
        for (int v = 0; v < NV; ++v) acc[i][v] = S::fma(b, x[v], acc[i][v]);
      }
    }
    for (int i = 0; i < kR; ++i)
      for (int v = 0; v < NV; ++v) S::store(c + i * kNT + v * kW, acc[i][v]);
  }

  // micro<nv> for a run-time nv in [1, kNV]
  template <int NV = kNV>
  static void micro_vectors(int nv, const float* w, const float* xp, int64_t steps, float* c) {
    if constexpr (NV > 1) {
      if (nv < NV) return micro_vectors<NV - 1>(nv, w, xp, steps, c);
    }
    micro<NV>(w, xp, steps, c);
  }

  // Blocking (BLIS's, with the tokens as its B panel): a chunk of kNCT token tiles and kMC rows,
  // their phase sums in scratch (kMC x kNCT * kNT x kW floats, L2); inside it kKC-column panels,
  // each panel's weights converted to fp32 once for the whole chunk, then every row panel passes
  // over one token tile (kKC x kNT floats) while it sits in L1 (or, at AVX2's 512 columns, each
  // phase's eighth of it does).
  static constexpr int64_t kMC = 8 * kR;               // rows per chunk
  static constexpr int64_t kNCT = S::kGemmChunkTiles;  // token tiles per chunk

  static int64_t scratch_size(int64_t) {
    return kMC * kKC + kMC * kNCT * kNT * kW + kNT + kKC * kNT;
  }

  // One row panel's weights of the next column panel into L2 while the micro-kernels run:
  // short row pieces a matrix row apart are a pattern the hardware prefetcher does not follow.
  template <WKind kind>
  static void prefetch_panel(const WeightMatrix& w, int64_t rp, int64_t kb, int64_t r_end,
                             int64_t k_end) {
    if (kb >= k_end) return;
    const int64_t bytes = Format<kind>::offset(min64(kKC, k_end - kb));
    for (int64_t r = rp; r < min64(rp + kR, r_end); ++r) {
      const uint8_t* row = row_of(w, r).data + Format<kind>::offset(kb);
      for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(row + b, 0, 2);
    }
  }

  template <WKind kind>
  static void rows(const MatmulTask& task, int64_t r0, int64_t r1, float* scratch) {
    const WeightMatrix& w = *task.w;
    const int64_t K = w.cols, n = task.n_tokens, n_tiles = tiles(n);
    const int64_t K_vec = K - K % kW;   // what the phases cover; the rest is the in-order tail
    float* wbuf = scratch;              // [kMC / kR panels, kR, kKC]
    float* cbuf = scratch + kMC * kKC;  // [kMC / kR panels, kNCT tiles, kW phases, kR, kNT]
    float* out = cbuf + kMC * kNCT * kNT * kW;  // [kNT] one row's results for a tile
    float* xs_tile = out + kNT;                 // [kKC, kNT] a scaled token tile (fp8)
    for (int64_t j0 = 0; j0 < n_tiles; j0 += kNCT) {
      const int64_t nt = min64(kNCT, n_tiles - j0);
      for (int64_t rc = r0, chunk_rows = 0; rc < r1; rc += chunk_rows) {
        chunk_rows = min64(kMC, r1 - rc);
        // fp8: a chunk's rows share one row of block scales (the activations are scaled by it)
        if constexpr (Format<kind>::kBlockScaled)
          chunk_rows = min64(chunk_rows, (rc / kFp8Block + 1) * kFp8Block - rc);
        const float* scale_row =
            Format<kind>::kBlockScaled ? w.scale + (rc / kFp8Block) * w.scale_cols() : nullptr;
        const int64_t panels = (chunk_rows + kR - 1) / kR;
        std::memset(cbuf, 0, sizeof(float) * panels * nt * kW * kR * kNT);
        for (int64_t kb = 0; kb < K_vec; kb += kKC) {
          const int64_t kc = min64(kKC, K_vec - kb);
          for (int64_t i = 0; i < panels * kR; ++i) {
            if (i < chunk_rows)
              convert_row<kind>(w, rc + i, kb, kc, wbuf + i * kKC);
            else
              std::memset(wbuf + i * kKC, 0, sizeof(float) * kc);
          }
          for (int64_t j = 0; j < nt; ++j) {
            const int64_t tokens = min64(kNT, n - (j0 + j) * kNT);  // the last tile may be partial
            const int nv = static_cast<int>((tokens + kW - 1) / kW);
            const float* xp = task.x_packed + ((j0 + j) * K + kb) * kNT;
            if constexpr (Format<kind>::kBlockScaled) {
              scale_tile(xp, scale_row, kb, kc, xs_tile);
              xp = xs_tile;
            }
            for (int64_t p = 0; p < panels; ++p) {
              // the next column panel of this row panel, spread over the first token tile
              if (j == 0) prefetch_panel<kind>(w, rc + p * kR, kb + kKC, rc + chunk_rows, K_vec);
              for (int l = 0; l < kW; ++l)
                micro_vectors(nv, wbuf + p * kR * kKC + l, xp + l * kNT, kc / kW,
                              cbuf + ((p * nt + j) * kW + l) * kR * kNT);
            }
          }
        }
        // the phases added by halving, as S::reduce adds the GEMV's lanes; then the tail in order
        for (int64_t p = 0; p < panels; ++p) {
          const int64_t rp = rc + p * kR, n_rows = min64(kR, rc + chunk_rows - rp);
          for (int64_t j = 0; j < nt; ++j) {
            const int64_t t0 = (j0 + j) * kNT;
            const float* xp = task.x_packed + (j0 + j) * K * kNT;
            const float* c = cbuf + (p * nt + j) * kW * kR * kNT;
            for (int64_t i = 0; i < n_rows; ++i) {
              const WRow row = row_of(w, rp + i);
              for (int v = 0; v < kNV; ++v) {
                V phase[kW];
                for (int l = 0; l < kW; ++l) phase[l] = S::load(c + (l * kR + i) * kNT + v * kW);
                for (int half = kW / 2; half >= 1; half /= 2)
                  for (int l = 0; l < half; ++l) phase[l] = S::add(phase[l], phase[l + half]);
                V sum = phase[0];
                for (int64_t k = K_vec; k < K; ++k) {
                  V xk = S::load(xp + k * kNT + v * kW);
                  if constexpr (Format<kind>::kBlockScaled)
                    xk = S::mul(xk, S::set1(scale_row[k / kFp8Block] * kFp8Bias));
                  sum = S::fma(S::set1(scalar_w<kind>(row, k)), xk, sum);
                }
                S::store(out + v * kW, sum);
              }
              for (int64_t tt = 0; tt < kNT && t0 + tt < n; ++tt)
                task.y[(t0 + tt) * task.y_stride + rp + i] = out[tt];
            }
          }
        }
      }
    }
  }
};

}  // namespace
}  // namespace dsinfer
