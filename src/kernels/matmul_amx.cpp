// AMX tile kernels (compiled with AMX and AVX-512 flags, see CMakeLists.txt; reached only after
// amx_usable()). Tiles: C[16 rows x 16 tokens] fp32 += A[16 rows x 32 k] bf16 . B[32 k x 16
// tokens] bf16, B in the pair-interleaved layout TDPBF16PS wants. The weights are the A side,
// so a panel of 32 rows is just converted to bf16 row-major; the activations are interleaved
// once per call. Each product of a 32-row panel and a 32-token pair runs on 2 x 2 C tiles
// (tiles 0-3), A in tiles 4-5 and B in 6-7.
#include "kernels/matmul_amx.h"

#include <immintrin.h>
#include <sys/syscall.h>
// GCC 12's AVX-512 headers: the same false -Wuninitialized positives as in matmul_avx512.cpp
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/cpu.h"
#include "core/dtype.h"
#include "core/error.h"
#include "kernels/amx_tiles.h"
#include "kernels/weights_to_bf16_avx512.h"

namespace dsinfer {
namespace {

constexpr int64_t kTileK = kAmxTileK;
constexpr int64_t kPanelRows = 32;   // two A tiles of 16 rows
constexpr int64_t kPairTokens = 32;  // two B tiles of 16 tokens
constexpr int64_t kStepsPerBlock = kFp8Block / kTileK;

// Rows [r0, r1) (r0 a multiple of 32) of y [n tokens, w.rows] from the interleaved tokens xv
// (interleave_tokens, whole pairs of token tiles). Blocked so that both operands come
// from L2: 256 rows x 1024 columns of weights converted at a time (each weight once), and for
// every token pair the B tiles of those 1024 columns (64 KB) serve all 8 row panels.
constexpr int64_t kBlockPanels = 8;  // 256 rows
constexpr int64_t kBlockSteps = 32;  // 1024 columns (a multiple of the 128-column scale blocks)

void amx_rows(const uint16_t* xv, const WeightMatrix& w, int64_t r0, int64_t r1, MatView y) {
  configure_tiles();
  const int64_t n = y.rows, steps = ceil_div(w.cols, kTileK), pairs = ceil_div(n, kPairTokens);
  const bool scaled = w.dtype == DType::kF8E4M3;
  constexpr int64_t kWidth = kBlockSteps * kTileK;  // columns of the converted block
  thread_local std::vector<uint16_t> panel_buffer;
  thread_local std::vector<float> acc_buffer;
  panel_buffer.resize(static_cast<size_t>(kBlockPanels * kPanelRows * kWidth));
  acc_buffer.resize(static_cast<size_t>(kBlockPanels * pairs * kPanelRows * kPairTokens));
  uint16_t* panel = panel_buffer.data();
  float* acc_all = acc_buffer.data();  // [panel, pair] blocks of [row 32][token 32]
  alignas(64) float c[4][16 * 16];     // C tiles: [row][token] each
  for (int64_t rb = r0; rb < r1; rb += kBlockPanels * kPanelRows) {
    const int64_t block_rows = std::min(kBlockPanels * kPanelRows, r1 - rb);
    const int64_t panels = ceil_div(block_rows, kPanelRows);
    std::fill(acc_all, acc_all + panels * pairs * kPanelRows * kPairTokens, 0.0f);
    for (int64_t ks0 = 0; ks0 < steps; ks0 += kBlockSteps) {
      const int64_t ks1 = std::min(steps, ks0 + kBlockSteps);
      for (int64_t i = 0; i < panels * kPanelRows; ++i) {
        uint16_t* dst = panel + i * kWidth;
        if (i < block_rows)
          row_to_bf16(w, rb + i, ks0 * kTileK, ks1 * kTileK, dst);
        else
          std::fill(dst, dst + (ks1 - ks0) * kTileK, uint16_t{0});
      }
      const int64_t steps_per_scale =
          scaled ? kStepsPerBlock : ks1 - ks0;  // scales change every 128 columns
      for (int64_t q = 0; q < pairs; ++q) {
        const uint16_t* b0 = xv + (2 * q) * steps * 512;
        const uint16_t* b1 = b0 + steps * 512;
        for (int64_t p = 0; p < panels; ++p) {
          const uint16_t* a = panel + p * kPanelRows * kWidth;
          float* acc = acc_all + (p * pairs + q) * kPanelRows * kPairTokens;
          for (int64_t s0 = ks0; s0 < ks1; s0 += steps_per_scale) {
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            for (int64_t s = s0; s < std::min(ks1, s0 + steps_per_scale); ++s) {
              _tile_loadd(4, a + (s - ks0) * kTileK, kWidth * 2);
              _tile_loadd(5, a + 16 * kWidth + (s - ks0) * kTileK, kWidth * 2);
              _tile_loadd(6, b0 + s * 512, 64);
              _tile_loadd(7, b1 + s * 512, 64);
              _tile_dpbf16ps(0, 4, 6);
              _tile_dpbf16ps(1, 4, 7);
              _tile_dpbf16ps(2, 5, 6);
              _tile_dpbf16ps(3, 5, 7);
            }
            _tile_stored(0, c[0], 64);
            _tile_stored(1, c[1], 64);
            _tile_stored(2, c[2], 64);
            _tile_stored(3, c[3], 64);
            const int64_t rp = rb + p * kPanelRows;
            const __m512 scale = _mm512_set1_ps(
                scaled ? w.scale[(rp / kFp8Block) * w.scale_cols() + s0 / kStepsPerBlock] : 1.0f);
            for (int i = 0; i < 2; ++i)    // row tile
              for (int j = 0; j < 2; ++j)  // token tile
                for (int r = 0; r < 16; ++r) {
                  float* dst = acc + (16 * i + r) * kPairTokens + 16 * j;
                  _mm512_storeu_ps(dst,
                                   _mm512_fmadd_ps(scale, _mm512_load_ps(c[2 * i + j] + r * 16),
                                                   _mm512_loadu_ps(dst)));
                }
          }
        }
      }
    }
    for (int64_t p = 0; p < panels; ++p)
      for (int64_t q = 0; q < pairs; ++q) {
        const float* acc = acc_all + (p * pairs + q) * kPanelRows * kPairTokens;
        const int64_t rp = rb + p * kPanelRows, n_rows = std::min(kPanelRows, r1 - rp);
        for (int64_t t = 0; t < std::min(kPairTokens, n - q * kPairTokens); ++t)
          for (int64_t r = 0; r < n_rows; ++r)
            y.row(q * kPairTokens + t)[rp + r] = acc[r * kPairTokens + t];
      }
  }
}

}  // namespace

bool amx_usable() {
  static const bool usable = [] {
    if (!cpu_has_amx_bf16()) return false;
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;  // asm/prctl.h, Linux >= 5.16
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return usable;
}

void amx_linear(const float* x, int64_t n_tokens, const WeightMatrix& w, float* y,
                ThreadPool& pool) {
  check(amx_usable(), "amx_linear without AMX");
  check(!w.group_scaled(),
        "amx_linear: int4 / int8 weights take the VDPBF16PS kernels (linear.cpp)");
  const int64_t K = w.cols, Kp = ceil_div(K, kTileK) * kTileK;
  const int64_t token_tiles = ceil_div(n_tokens, kPairTokens) * 2;  // whole pairs, zero past n
  thread_local std::vector<uint16_t> xv_buffer;
  xv_buffer.resize(static_cast<size_t>(token_tiles * Kp * 16));
  uint16_t* xv = xv_buffer.data();  // (the workers' own thread_local would be another vector)
  pool.parallel_for(token_tiles, [&](int64_t j0, int64_t j1) {
    interleave_tokens(ConstMatView(x, n_tokens, K), Kp, j0, j1, xv);
  });
  pool.parallel_for(
      w.rows,
      [&](int64_t begin, int64_t end) {
        amx_rows(xv, w, begin, end, MatView(y, n_tokens, w.rows));
      },
      kPanelRows);
}

void amx_matmul_serial(const float* x, int64_t n_tokens, int64_t x_stride, const WeightMatrix& w,
                       float* y, int64_t y_stride) {
  check(amx_usable(), "amx_matmul_serial without AMX");
  check(!w.group_scaled(),
        "amx_matmul_serial: int4 / int8 weights take the VDPBF16PS kernels (linear.cpp)");
  const int64_t K = w.cols, Kp = ceil_div(K, kTileK) * kTileK;
  const int64_t token_tiles = ceil_div(n_tokens, kPairTokens) * 2;
  thread_local std::vector<uint16_t> xv;
  xv.resize(static_cast<size_t>(token_tiles * Kp * 16));
  interleave_tokens(ConstMatView(x, n_tokens, K, x_stride), Kp, 0, token_tiles, xv.data());
  amx_rows(xv.data(), w, 0, w.rows, MatView(y, n_tokens, w.rows, y_stride));
}

}  // namespace dsinfer
