// The batch-variant GEMM (the opt-out from the canonical order; see matmul_impl.h for the order
// every other kernel keeps). Included by matmul_impl.h only: it uses its helpers.
#pragma once

// ---- The batch-variant GEMM (the opt-out, KernelConfig::batch_invariant false): the same packed
// tiles and blocking, but one fma chain per (row, token) over k in order, weights scaled to code x
// scale once per panel. ~20-30% faster on AVX2 than the canonical GEMM (no phase sums to keep and
// add), and its results depend on whether a row took the GEMM or the GEMV, i.e. on how many
// tokens the step held: a sequence's logits then depend on its batch mates and its chunking
// (within the golden tolerance; bit for bit no longer).
template <class S>
struct GemmBatchVariant {
  static constexpr int kW = S::kWidth;
  static constexpr int kNV = S::kGemmVectors;  // vectors of tokens per tile
  static constexpr int kNT = kNV * kW;         // tokens per tile
  static constexpr int kR = S::kGemmRows;      // rows per panel (kNV * kR accumulators)
  static constexpr int64_t kKC = 128;          // columns per panel (a multiple of the fp8 block)

  static int64_t tiles(int64_t n) { return (n + kNT - 1) / kNT; }

  // x is packed as the canonical GEMM packs it (Gemm<S>::pack_x): tiles of kNT tokens.

  // dst[0, kc) = fp32 values of W[row, kb + c] (as the reference dequantizes: code x scale).
  template <WKind kind>
  static void convert_row(const WeightMatrix& w, int64_t row, int64_t kb, int64_t kc, float* dst) {
    const WRow src = row_of(w, row);
    for (int64_t c = 0; c < kc; c += kFp8Block) {
      const int64_t end = min64(c + kFp8Block, kc);
      float s = 1.0f;
      if constexpr (Format<kind>::kBlockScaled)
        s = w.scale[(row / kFp8Block) * w.scale_cols() + (kb + c) / kFp8Block] * kFp8Bias;
      const typename S::V sv = S::set1(s);
      int64_t k = c;
      for (; k + kW <= end; k += kW) {
        const typename S::V v = load_w<S, kind>(src, kb + k);
        S::store(dst + k, Format<kind>::kBlockScaled ? S::mul(v, sv) : v);
      }
      for (; k < end; ++k)
        dst[k] = Format<kind>::kBlockScaled ? scalar_w<kind>(src, kb + k) * s
                                            : scalar_w<kind>(src, kb + k);
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
    const int64_t bytes = Format<kind>::offset(min64(kKC, w.cols - kb));
    for (int64_t r = rp; r < min64(rp + kR, r_end); ++r) {
      const uint8_t* row = row_of(w, r).data + Format<kind>::offset(kb);
      for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(row + b, 0, 2);
    }
  }

  template <WKind kind>
  static void rows(const MatmulTask& task, int64_t r0, int64_t r1, float* scratch) {
    const WeightMatrix& w = *task.w;
    const int64_t K = w.cols, n = task.n_tokens, n_tiles = tiles(n);
    float* wbuf = scratch;              // [kMC / kR panels, kR, kKC]
    float* cbuf = scratch + kMC * kKC;  // [kMC / kR panels, kNCT tiles, kR, kNT]
    for (int64_t j0 = 0; j0 < n_tiles; j0 += kNCT) {
      const int64_t nt = min64(kNCT, n_tiles - j0);
      for (int64_t rc = r0; rc < r1; rc += kMC) {
        const int64_t chunk_rows = min64(kMC, r1 - rc);
        const int64_t panels = (chunk_rows + kR - 1) / kR;
        std::memset(cbuf, 0, sizeof(float) * panels * nt * kR * kNT);
        for (int64_t kb = 0; kb < K; kb += kKC) {
          const int64_t kc = min64(kKC, K - kb);
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
