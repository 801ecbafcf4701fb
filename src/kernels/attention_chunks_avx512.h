// What fast mode's two decode-attention kernels share (attention_amx.cpp on AMX tiles,
// attention_bf16dot_avx512.cpp on VDPBF16PS): the chunked walk over a sequence's cache blocks with
// an online softmax, the buffers and their layouts, and the softmax and latent packing between the
// two products. Include only from *_avx512.cpp / *_amx.cpp files (compiled with AVX-512 flags).
//
// Per chunk of 256 keys, with the call's heads padded to whole 16-head vectors (Hp) and the entry
// padded to whole 32-column steps (Kp):
//   scores  S^T [keys, Hp] = E_bf16 [keys, Kp] . Q^T (Products::block_scores, per cache block;
//           the entries read in place from a bf16 cache);
//   softmax running max and sum per head, 16 heads to a vector (S^T's rows), the chunk's
//           unnormalised probabilities rounded to bf16 and transposed to P [Hp, keys];
//   latents O [Hp, Lp] += P . L (Products::chunk_latents), the chunk's latents pair-interleaved.
// O is rescaled when a head's max grows. A call covers one segment of kDecodeSplitKeys positions
// and leaves O, the max and the sum unnormalised for merge_decode_segments. A head's numbers
// depend only on its own query and the keys (chunk boundaries are fixed positions).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/mat_view.h"
#include "kernels/exp_avx512.h"
#include "kernels/fast_decode_attention.h"

namespace dsinfer::attention_chunks {

constexpr int64_t kChunkKeys = 256;  // keys per online-softmax step: 4 cache blocks
constexpr int64_t kChunkBlocks = kChunkKeys / kAttentionBlockKeys;
constexpr int64_t kTile = 16;   // heads per vector (and rows of an AMX tile)
constexpr int64_t kStepK = 32;  // the entry's padding: bf16 per AMX tile row

inline int64_t round_up(int64_t x, int64_t m) { return ceil_div(x, m) * m; }

struct Shape {
  int64_t heads, head_tiles, Hp;  // heads, their 16-row tiles, heads padded
  int64_t Kp, steps;              // the entry padded to 32 columns, its k steps
  int64_t lora, Lp;               // the attended columns, padded to 32
};

// Per-thread buffers, sized per call.
struct Buffers {
  std::vector<uint16_t> q_tiles;  // the queries as the scores' kernel lays them out
  std::vector<uint16_t> entries;  // one block's entries as bf16 [64, Kp] (when not in place)
  std::vector<float> scores;      // S^T of a chunk [256, Hp]
  std::vector<uint16_t> probs;    // P of a chunk [Hp, 256] bf16, unnormalised
  std::vector<uint16_t> latents;  // L of a chunk pair-interleaved [128 key pairs, Lp, 2] bf16
  std::vector<float> acc;         // O [Hp, Lp]
  std::vector<float> max, sum;    // per head [Hp]
};

// A block's entries as bf16 rows `stride` apart with 32-column steps readable to Kp and whole
// 32-row pairs: in place for a full bf16 block of Kp columns, else converted into `buffer`
// (zeros past its rows and columns).
inline const uint16_t* block_rows(const WeightMatrix& block, const Shape& sh,
                                  std::vector<uint16_t>& buffer, int64_t& stride) {
  if (block.dtype == DType::kBF16 && block.cols == sh.Kp && block.rows == kAttentionBlockKeys) {
    stride = block.cols;
    return reinterpret_cast<const uint16_t*>(block.data);
  }
  buffer.assign(static_cast<size_t>(kAttentionBlockKeys * sh.Kp), 0);
  for (int64_t r = 0; r < block.rows; ++r) {
    uint16_t* dst = buffer.data() + r * sh.Kp;
    if (block.dtype == DType::kBF16) {
      std::copy_n(reinterpret_cast<const uint16_t*>(block.data) + r * block.cols, block.cols, dst);
    } else {
      const float* src = reinterpret_cast<const float*>(block.data) + r * block.cols;
      int64_t c = 0;
      for (; c + 32 <= block.cols; c += 32)  // round to nearest even, as f32_to_bf16
        _mm512_storeu_si512(dst + c, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(
                                         _mm512_loadu_ps(src + c + 16), _mm512_loadu_ps(src + c))));
      for (; c < block.cols; ++c) dst[c] = f32_to_bf16(src[c]);
    }
  }
  stride = sh.Kp;
  return buffer.data();
}

// r[i] (row i of a 16 x 16 block) becomes column i.
inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  __m512 u[16];  // u[4 i + c], 128-bit lane L: column 4 L + c of rows 4 i .. 4 i + 3
  for (int i = 0; i < 4; ++i) {
    u[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512 lo01 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x44);
    const __m512 lo23 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x44);
    const __m512 hi01 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xEE);
    const __m512 hi23 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xEE);
    r[c] = _mm512_shuffle_f32x4(lo01, lo23, 0x88);
    r[4 + c] = _mm512_shuffle_f32x4(lo01, lo23, 0xDD);
    r[8 + c] = _mm512_shuffle_f32x4(hi01, hi23, 0x88);
    r[12 + c] = _mm512_shuffle_f32x4(hi01, hi23, 0xDD);
  }
}

// fp32 -> bf16 (round to nearest even) -> fp32: the value the tiles will multiply.
inline __m512 round_to_bf16(__m512 x) {
  const __m256i bits = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(x));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

// The online softmax over a chunk's scores S^T [n, Hp] (n keys): raises each head's running max,
// rescales its O row and sum where it grew, and writes P [Hp, 256] = bf16(e^(scale (s - max)))
// for the chunk's keys (zeros to the next 32), adding the rounded values to the sums.
inline void chunk_probabilities(const float* st, int64_t n, float scale, const Shape& sh,
                                Buffers& b) {
  const __m512 scale_v = _mm512_set1_ps(scale);
  for (int64_t g = 0; g < sh.head_tiles; ++g) {
    __m512 chunk_max = _mm512_set1_ps(-__builtin_inff());
    for (int64_t k = 0; k < n; ++k)
      chunk_max = _mm512_max_ps(chunk_max, _mm512_loadu_ps(st + k * sh.Hp + kTile * g));
    float* max = b.max.data() + kTile * g;
    float* sum = b.sum.data() + kTile * g;
    const __m512 old_max = _mm512_loadu_ps(max);
    const __m512 new_max = _mm512_max_ps(old_max, chunk_max);
    if (_mm512_cmp_ps_mask(new_max, old_max, _CMP_GT_OQ) != 0) {
      alignas(64) float alpha[kTile];  // e^(scale (old - new)): 0 on the first chunk (sum, O 0)
      _mm512_store_ps(alpha,
                      exp_nonpositive(_mm512_mul_ps(scale_v, _mm512_sub_ps(old_max, new_max))));
      _mm512_storeu_ps(sum, _mm512_mul_ps(_mm512_loadu_ps(sum), _mm512_load_ps(alpha)));
      for (int64_t h = 0; h < kTile; ++h) {
        if (alpha[h] == 1.0f) continue;
        float* o = b.acc.data() + (kTile * g + h) * sh.Lp;
        const __m512 a = _mm512_set1_ps(alpha[h]);
        for (int64_t c = 0; c < sh.Lp; c += 16)
          _mm512_storeu_ps(o + c, _mm512_mul_ps(a, _mm512_loadu_ps(o + c)));
      }
      _mm512_storeu_ps(max, new_max);
    }
    const __m512 shift = _mm512_mul_ps(scale_v, new_max);
    __m512 total = _mm512_loadu_ps(sum);
    for (int64_t k0 = 0; k0 < round_up(n, 2 * kTile); k0 += kTile) {
      __m512 rows[kTile];  // rows[r]: key k0 + r, 16 heads
      for (int64_t r = 0; r < kTile; ++r) {
        if (k0 + r >= n) {
          rows[r] = _mm512_setzero_ps();
          continue;
        }
        const __m512 s = _mm512_loadu_ps(st + (k0 + r) * sh.Hp + kTile * g);
        rows[r] = round_to_bf16(exp_nonpositive(_mm512_fmsub_ps(scale_v, s, shift)));
        total = _mm512_add_ps(total, rows[r]);
      }
      transpose16(rows);  // rows[h]: head 16 g + h, keys k0 ..
      for (int64_t h = 0; h < kTile; ++h)
        _mm256_storeu_si256(
            reinterpret_cast<__m256i*>(b.probs.data() + (kTile * g + h) * kChunkKeys + k0),
            reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(rows[h])));
    }
    _mm512_storeu_ps(sum, total);
  }
}

// 32 bf16 of one key's latent, columns [c, c + 32) (zeros past `lora`; a null row is all zeros).
inline __m512i latent_pair_half(const WeightMatrix* block, int64_t row, int64_t c, int64_t lora) {
  if (block == nullptr) return _mm512_setzero_si512();
  const int64_t left = std::min<int64_t>(32, lora - c);
  const __mmask32 m = left >= 32 ? ~__mmask32{0} : (__mmask32{1} << left) - 1;
  if (block->dtype == DType::kBF16)
    return _mm512_maskz_loadu_epi16(
        m, reinterpret_cast<const uint16_t*>(block->data) + row * block->cols + c);
  const float* src = reinterpret_cast<const float*>(block->data) + row * block->cols + c;
  const __m512 lo = _mm512_maskz_loadu_ps(static_cast<__mmask16>(m), src);
  const __m512 hi = _mm512_maskz_loadu_ps(static_cast<__mmask16>(m >> 16), src + 16);
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
}

// The chunk's latents L [n keys, lora] as B tiles: pair p's row holds (L[2p, c], L[2p + 1, c])
// for every c < Lp, zeros past n (to the next 32 keys) and past lora.
inline void pack_latents(const WeightMatrix* blocks, int64_t n, const Shape& sh, uint16_t* lv) {
  __m512i lo_index, hi_index;  // (key 0, key 1) pairs of columns [0, 16) and [16, 32)
  alignas(64) uint16_t lo[32], hi[32];
  for (int i = 0; i < 32; ++i) {
    lo[i] = static_cast<uint16_t>((i % 2) * 32 + i / 2);
    hi[i] = static_cast<uint16_t>((i % 2) * 32 + 16 + i / 2);
  }
  lo_index = _mm512_load_si512(lo);
  hi_index = _mm512_load_si512(hi);
  auto key_row = [&](int64_t k, int64_t& row) -> const WeightMatrix* {
    if (k >= n) return nullptr;
    row = k % kAttentionBlockKeys;
    return &blocks[k / kAttentionBlockKeys];
  };
  for (int64_t p = 0; p < round_up(n, 2 * kTile) / 2; ++p) {
    int64_t row0 = 0, row1 = 0;
    const WeightMatrix* block0 = key_row(2 * p, row0);
    const WeightMatrix* block1 = key_row(2 * p + 1, row1);
    uint16_t* dst = lv + p * sh.Lp * 2;
    for (int64_t c = 0; c < sh.Lp; c += 32) {
      const __m512i k0 = latent_pair_half(block0, row0, c, sh.lora);
      const __m512i k1 = latent_pair_half(block1, row1, c, sh.lora);
      _mm512_storeu_si512(dst + 2 * c, _mm512_permutex2var_epi16(k0, lo_index, k1));
      _mm512_storeu_si512(dst + 2 * c + 32, _mm512_permutex2var_epi16(k0, hi_index, k1));
    }
  }
}

// One segment's state (fast_decode_attention.h: DecodeSegmentState) with Products' two kernels:
// Products::queries(q_cat, sh, b) lays the queries out in b.q_tiles;
// Products::block_scores(a, a_stride, rows, sh, b, st) writes S^T rows [0, rows rounded up to 32)
// for one block; Products::chunk_latents(n, sh, b) adds P . L to O.
template <class Products>
void decode_segment_state(const char* name, ConstMatView q_cat, const CachedBlocks& keys,
                          float scale, const DecodeSegmentState& state) {
  check(state.o.rows == q_cat.rows && state.o.cols <= q_cat.cols && keys.n_keys > 0 &&
            keys.n_keys <= kDecodeSplitKeys,
        name, ": shapes do not match");
  const int64_t n_blocks = static_cast<int64_t>(keys.blocks.size());
  check(n_blocks == ceil_div(keys.n_keys, kAttentionBlockKeys), name,
        ": blocks do not cover the keys");
  for (int64_t i = 0; i < n_blocks; ++i) {
    const WeightMatrix& block = keys.blocks[static_cast<size_t>(i)];
    const int64_t rows = std::min(kAttentionBlockKeys, keys.n_keys - i * kAttentionBlockKeys);
    check(block.rows == rows && block.cols == q_cat.cols &&
              (block.dtype == DType::kF32 || block.dtype == DType::kBF16),
          name, ": a block is not [64 keys, entry] of f32 or bf16");
  }
  Shape sh;
  sh.heads = q_cat.rows;
  sh.head_tiles = ceil_div(sh.heads, kTile);
  sh.Hp = sh.head_tiles * kTile;
  sh.Kp = round_up(q_cat.cols, kStepK);
  sh.steps = sh.Kp / kStepK;
  sh.lora = state.o.cols;
  sh.Lp = round_up(sh.lora, 2 * kTile);
  thread_local Buffers b;  // (per instantiation: each kernel its own)
  b.scores.resize(static_cast<size_t>(kChunkKeys * sh.Hp));
  b.probs.resize(static_cast<size_t>(sh.Hp * kChunkKeys));
  b.latents.resize(static_cast<size_t>(kChunkKeys * sh.Lp));
  b.acc.assign(static_cast<size_t>(sh.Hp * sh.Lp), 0.0f);
  b.max.assign(static_cast<size_t>(sh.Hp), -__builtin_inff());
  b.sum.assign(static_cast<size_t>(sh.Hp), 0.0f);
  Products::queries(q_cat, sh, b);
  for (int64_t first = 0; first < n_blocks; first += kChunkBlocks) {
    const int64_t last = std::min(n_blocks, first + kChunkBlocks);
    const int64_t n = std::min(kChunkKeys, keys.n_keys - first * kAttentionBlockKeys);
    for (int64_t i = first; i < last; ++i) {
      const WeightMatrix& block = keys.blocks[static_cast<size_t>(i)];
      int64_t stride = 0;
      const uint16_t* a = block_rows(block, sh, b.entries, stride);
      Products::block_scores(a, stride, block.rows, sh, b,
                             b.scores.data() + (i - first) * kAttentionBlockKeys * sh.Hp);
    }
    chunk_probabilities(b.scores.data(), n, scale, sh, b);
    pack_latents(keys.blocks.data() + first, n, sh, b.latents.data());
    Products::chunk_latents(n, sh, b);
  }
  for (int64_t h = 0; h < sh.heads; ++h) {
    std::copy_n(b.acc.data() + h * sh.Lp, sh.lora, state.o.row(h));
    state.max[h] = b.max[static_cast<size_t>(h)];
    state.sum[h] = b.sum[static_cast<size_t>(h)];
  }
}

}  // namespace dsinfer::attention_chunks
