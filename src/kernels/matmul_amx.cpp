// AMX tile kernels (compiled with AMX and AVX-512 flags, see CMakeLists.txt; reached only after
// amx_usable()). Tiles: C[16 tokens x 16 rows] fp32 += A[16 tokens x 32 k] bf16 .
// B[32 k x 16 rows] bf16 in the pair-interleaved layout TDPBF16PS wants. A panel of 32 weight
// rows is converted once into B tiles for every k, then every pair of token tiles runs over it
// with 2 x 2 C tiles (tiles 0-3), A in tiles 4-5 and B in 6-7.
#include "kernels/matmul_amx.h"

#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace dsinfer {
namespace {

constexpr int64_t kTileK = 32;        // bf16 per A tile row (and k per B tile)
constexpr int64_t kPanelRows = 32;    // two B tiles of 16 rows
constexpr int64_t kPairTokens = 32;   // two A tiles of 16 tokens
constexpr int64_t kStepsPerBlock = kFp8Block / kTileK;

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// The tile configuration is per thread; every tile is 16 rows x 64 bytes.
void configure_tiles() {
  thread_local bool configured = false;
  if (configured) return;
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.colsb[t] = 64;
    config.rows[t] = 16;
  }
  _tile_loadconfig(&config);
  configured = true;
}

// bf16 bits of each fp8 code's value (exact: e4m3 values have at most 4 significant bits).
const uint16_t* fp8_to_bf16_table() {
  static const auto table = [] {
    std::vector<uint16_t> t(256);
    for (int c = 0; c < 256; ++c) t[static_cast<size_t>(c)] = static_cast<uint16_t>(std::bit_cast<uint32_t>(fp8_e4m3_table()[c]) >> 16);
    return t;
  }();
  return table.data();
}

// Row r of w as bf16 bits, columns [0, Kp) (zero past w.cols): codes exactly, bf16 as is; f32
// rounded (linear() sends f32 weights to the exact kernels instead).
void row_to_bf16(const WeightMatrix& w, int64_t r, int64_t Kp, uint16_t* out) {
  const int64_t K = w.cols;
  if (w.dtype == DType::kF8E4M3) {
    const uint16_t* table = fp8_to_bf16_table();
    const uint8_t* codes = w.data + r * K;
    for (int64_t k = 0; k < K; ++k) out[k] = table[codes[k]];
  } else if (w.dtype == DType::kBF16) {
    std::memcpy(out, w.data + r * K * 2, static_cast<size_t>(K) * 2);
  } else {
    const float* v = reinterpret_cast<const float*>(w.data) + r * K;
    for (int64_t k = 0; k < K; ++k) out[k] = f32_to_bf16(v[k]);
  }
  std::fill(out + K, out + Kp, uint16_t{0});
}

// B tiles of panel rows [rp, rp + 32) for every k step s: b[(s * 2 + j) * 256 + kp * 16 + n]
// (32-bit words) = the bf16 pair (W[rp + 16 j + n, 32 s + 2 kp], W[.., 32 s + 2 kp + 1]).
void prepare_panel(const WeightMatrix& w, int64_t rp, int64_t r1, int64_t Kp, uint16_t* row, uint32_t* b) {
  const int64_t steps = Kp / kTileK;
  for (int64_t j = 0; j < 2; ++j)
    for (int64_t n = 0; n < 16; ++n) {
      const int64_t r = rp + 16 * j + n;
      if (r < r1) row_to_bf16(w, r, Kp, row);
      else std::fill(row, row + Kp, uint16_t{0});
      const uint32_t* pairs = reinterpret_cast<const uint32_t*>(row);
      for (int64_t s = 0; s < steps; ++s) {
        uint32_t* tile = b + (s * 2 + j) * 256 + n;
        for (int64_t kp = 0; kp < 16; ++kp) tile[kp * 16] = pairs[s * 16 + kp];
      }
    }
}

// Rows [r0, r1) (r0 a multiple of 32) of y from xb [tokens rounded up to 32, Kp] bf16.
void amx_rows(const uint16_t* xb, int64_t n, int64_t Kp, const WeightMatrix& w, int64_t r0, int64_t r1, float* y,
              int64_t y_stride) {
  configure_tiles();
  const int64_t steps = Kp / kTileK;
  const bool scaled = w.dtype == DType::kF8E4M3;
  const int64_t steps_per_block = scaled ? kStepsPerBlock : steps;  // scales change every 128 columns
  thread_local std::vector<uint16_t> row;
  thread_local std::vector<uint32_t> b;
  row.resize(static_cast<size_t>(Kp));
  b.resize(static_cast<size_t>(steps * 2 * 256));
  alignas(64) float c[4][16 * 16];                     // C tiles: [token][row] each
  alignas(64) float acc[kPairTokens * kPanelRows];     // [token][row] of the panel
  const int64_t a_stride = Kp * 2;                     // bytes between token rows of xb
  for (int64_t rp = r0; rp < r1; rp += kPanelRows) {
    prepare_panel(w, rp, r1, Kp, row.data(), b.data());
    const int64_t n_rows = std::min(kPanelRows, r1 - rp);
    for (int64_t t0 = 0; t0 < n; t0 += kPairTokens) {
      std::fill(std::begin(acc), std::end(acc), 0.0f);
      for (int64_t s0 = 0; s0 < steps; s0 += steps_per_block) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int64_t s = s0; s < std::min(steps, s0 + steps_per_block); ++s) {
          _tile_loadd(4, xb + t0 * Kp + s * kTileK, a_stride);
          _tile_loadd(5, xb + (t0 + 16) * Kp + s * kTileK, a_stride);
          _tile_loadd(6, b.data() + (s * 2) * 256, 64);
          _tile_loadd(7, b.data() + (s * 2 + 1) * 256, 64);
          _tile_dpbf16ps(0, 4, 6);
          _tile_dpbf16ps(1, 4, 7);
          _tile_dpbf16ps(2, 5, 6);
          _tile_dpbf16ps(3, 5, 7);
        }
        _tile_stored(0, c[0], 64);
        _tile_stored(1, c[1], 64);
        _tile_stored(2, c[2], 64);
        _tile_stored(3, c[3], 64);
        const float scale = scaled ? w.scale[(rp / kFp8Block) * w.scale_cols() + s0 / kStepsPerBlock] : 1.0f;
        for (int i = 0; i < 2; ++i)      // token tile
          for (int j = 0; j < 2; ++j)    // row tile
            for (int t = 0; t < 16; ++t)
              for (int r = 0; r < 16; ++r)
                acc[(16 * i + t) * kPanelRows + 16 * j + r] += scale * c[2 * i + j][t * 16 + r];
      }
      for (int64_t t = 0; t < std::min(kPairTokens, n - t0); ++t)
        std::memcpy(y + (t0 + t) * y_stride + rp, acc + t * kPanelRows, static_cast<size_t>(n_rows) * sizeof(float));
    }
  }
}

}  // namespace

bool amx_usable() {
  static const bool usable = [] {
    if (const char* v = std::getenv("DSINFER_AMX"); v && std::string(v) == "0") return false;
    if (!__builtin_cpu_supports("amx-tile") || !__builtin_cpu_supports("amx-bf16")) return false;
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;  // asm/prctl.h, Linux >= 5.16
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return usable;
}

void amx_linear(const float* x, int64_t n_tokens, const WeightMatrix& w, float* y, ThreadPool& pool) {
  check(amx_usable(), "amx_linear without AMX");
  const int64_t K = w.cols, Kp = ceil_div(K, kTileK) * kTileK;
  const int64_t padded = ceil_div(n_tokens, kPairTokens) * kPairTokens;
  // x rounded to bf16 (the one rounding of fast mode), zero-padded to whole tiles
  thread_local std::vector<uint16_t> xb;
  xb.assign(static_cast<size_t>(padded * Kp), 0);
  uint16_t* xbp = xb.data();  // (the workers' own `xb` would be another, empty, vector)
  pool.parallel_for(n_tokens, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t)
      for (int64_t k = 0; k < K; ++k) xbp[t * Kp + k] = f32_to_bf16(x[t * K + k]);
  });
  pool.parallel_for(
      w.rows, [&](int64_t begin, int64_t end) { amx_rows(xbp, n_tokens, Kp, w, begin, end, y, w.rows); },
      kPanelRows);
}

}  // namespace dsinfer
