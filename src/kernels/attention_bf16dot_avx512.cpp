// bf16dot_decode_attention (fast_decode_attention.h), compiled with AVX-512 flags: the chunked
// online softmax of attention_chunks_avx512.h with both products as VDPBF16PS (each instruction 16
// fp32 lanes += the products of two bf16 pairs), register-blocked so that every operand load
// serves several instructions:
//   scores  S^T [k, 16 heads] += (E[k, 2c], E[k, 2c + 1]) broadcast . (Q[h, 2c], Q[h, 2c + 1]) of
//           16 heads: the queries as column pairs by head [Kp / 2][Hp][2], 6 keys x up to 4 head
//           vectors (24 accumulators) per pass over the entry; the cache rows read in place;
//   latents O [h, 16 columns] += (P[h, 2p], P[h, 2p + 1]) broadcast . (L[2p, c], L[2p + 1, c]) of
//           16 columns (pack_latents' layout), up to 6 heads x 4 column vectors per pass over the
//           chunk's key pairs.
// Each score and output is one chain of fp32 sums over its own operands in a fixed order: a
// head's bits depend only on its query and the keys.
#include <immintrin.h>
// GCC 12's AVX-512 headers: the same false -Wuninitialized positives as in matmul_avx512.cpp
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <cstring>

#include "core/cpu.h"
#include "kernels/attention_chunks_avx512.h"
#include "kernels/count_dispatch.h"
#include "kernels/fast_decode_attention.h"

namespace dsinfer {
namespace {

using namespace attention_chunks;

constexpr int kScoreKeys = 6, kScoreHeadVectors = 4;       // the scores' register block
constexpr int kLatentHeads = 6, kLatentColumnVectors = 4;  // the latents' register block

__m512bh as_bh(__m512i v) { return reinterpret_cast<__m512bh>(v); }

// Two adjacent bf16 (one 32-bit word) in every lane.
__m512bh pair_everywhere(const uint16_t* pair) {
  uint32_t word;
  std::memcpy(&word, pair, 4);
  return as_bh(_mm512_set1_epi32(static_cast<int>(word)));
}

// st[k, 16 (g0 + g) ..] for R keys from a (rows a_stride apart) and G head vectors.
template <int R, int G>
void scores_block(const uint16_t* a, int64_t a_stride, const uint16_t* q_pairs, int64_t Hp,
                  int64_t pairs, float* st) {
  __m512 acc[R][G];
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) acc[r][g] = _mm512_setzero_ps();
  for (int64_t c = 0; c < pairs; ++c) {
    __m512bh q[G];
    for (int g = 0; g < G; ++g)
      q[g] = as_bh(_mm512_loadu_si512(q_pairs + (c * Hp + kTile * g) * 2));
    for (int r = 0; r < R; ++r) {
      const __m512bh e = pair_everywhere(a + r * a_stride + 2 * c);
      for (int g = 0; g < G; ++g) acc[r][g] = _mm512_dpbf16_ps(acc[r][g], q[g], e);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) _mm512_storeu_ps(st + r * Hp + kTile * g, acc[r][g]);
}

// O rows h0 .. h0 + H, column vectors from c0 (C of them) += P . L over `pairs` key pairs.
template <int H, int C>
void latents_block(const uint16_t* probs, const uint16_t* lv, int64_t Lp, int64_t pairs, float* o) {
  __m512 acc[H][C];
  for (int h = 0; h < H; ++h)
    for (int c = 0; c < C; ++c) acc[h][c] = _mm512_loadu_ps(o + h * Lp + kTile * c);
  for (int64_t p = 0; p < pairs; ++p) {
    __m512bh l[C];
    for (int c = 0; c < C; ++c) l[c] = as_bh(_mm512_loadu_si512(lv + (p * Lp + kTile * c) * 2));
    for (int h = 0; h < H; ++h) {
      const __m512bh pp = pair_everywhere(probs + h * kChunkKeys + 2 * p);
      for (int c = 0; c < C; ++c) acc[h][c] = _mm512_dpbf16_ps(acc[h][c], pp, l[c]);
    }
  }
  for (int h = 0; h < H; ++h)
    for (int c = 0; c < C; ++c) _mm512_storeu_ps(o + h * Lp + kTile * c, acc[h][c]);
}

template <int C>
void latents_heads(int64_t H, const uint16_t* probs, const uint16_t* lv, int64_t Lp, int64_t pairs,
                   float* o) {
  switch (H) {
    case 6:
      return latents_block<6, C>(probs, lv, Lp, pairs, o);
    case 5:
      return latents_block<5, C>(probs, lv, Lp, pairs, o);
    case 4:
      return latents_block<4, C>(probs, lv, Lp, pairs, o);
    case 3:
      return latents_block<3, C>(probs, lv, Lp, pairs, o);
    case 2:
      return latents_block<2, C>(probs, lv, Lp, pairs, o);
    default:
      return latents_block<1, C>(probs, lv, Lp, pairs, o);
  }
}

struct Bf16DotProducts {
  // Q as column pairs by head: [Kp / 2][Hp][2] bf16, zeros past the heads and the columns
  // (32 columns of a head at a time: rounded as f32_to_bf16, their 16 pairs scattered Hp apart)
  static void queries(ConstMatView q_cat, const Shape& sh, Buffers& b) {
    b.q_tiles.assign(static_cast<size_t>(sh.Kp * sh.Hp), 0);
    int* pairs = reinterpret_cast<int*>(b.q_tiles.data());
    const __m512i pair_rows =
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32(static_cast<int>(sh.Hp)));
    for (int64_t h = 0; h < sh.heads; ++h) {
      const float* q = q_cat.row(h);
      for (int64_t c = 0; c < q_cat.cols; c += 32) {
        const int64_t left = std::min<int64_t>(32, q_cat.cols - c);
        const __mmask32 m = left >= 32 ? ~__mmask32{0} : (__mmask32{1} << left) - 1;
        const __m512 lo = _mm512_maskz_loadu_ps(static_cast<__mmask16>(m), q + c);
        const __m512 hi = _mm512_maskz_loadu_ps(static_cast<__mmask16>(m >> 16), q + c + 16);
        const __m512i words = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
        const __m512i at =
            _mm512_add_epi32(pair_rows, _mm512_set1_epi32(static_cast<int>((c / 2) * sh.Hp + h)));
        _mm512_i32scatter_epi32(pairs, at, words, 4);
      }
    }
  }
  static void block_scores(const uint16_t* a, int64_t a_stride, int64_t rows, const Shape& sh,
                           const Buffers& b, float* st) {
    const int64_t pairs = sh.Kp / 2;  // (a's rows are Kp wide, zeros past the entry)
    for (int64_t g = 0; g < sh.head_tiles; g += kScoreHeadVectors) {
      const int64_t G = std::min<int64_t>(kScoreHeadVectors, sh.head_tiles - g);
      const uint16_t* q = b.q_tiles.data() + kTile * g * 2;
      with_count_up_to_4(G, [&](auto head_vectors) {
        constexpr int kG = head_vectors();
        int64_t k = 0;
        for (; k + kScoreKeys <= rows; k += kScoreKeys)
          scores_block<kScoreKeys, kG>(a + k * a_stride, a_stride, q, sh.Hp, pairs,
                                       st + k * sh.Hp + kTile * g);
        for (; k < rows; ++k)
          scores_block<1, kG>(a + k * a_stride, a_stride, q, sh.Hp, pairs,
                              st + k * sh.Hp + kTile * g);
      });
    }
  }
  static void chunk_latents(int64_t n, const Shape& sh, Buffers& b) {
    const int64_t pairs = ceil_div(n, 2);   // P and L are zero past n
    const int64_t vectors = sh.Lp / kTile;  // even: Lp is a multiple of 32
    for (int64_t h = 0; h < sh.heads; h += kLatentHeads) {
      const int64_t H = std::min<int64_t>(kLatentHeads, sh.heads - h);
      const uint16_t* probs = b.probs.data() + h * kChunkKeys;
      for (int64_t v = 0; v < vectors; v += kLatentColumnVectors) {
        const uint16_t* lv = b.latents.data() + kTile * v * 2;
        float* o = b.acc.data() + h * sh.Lp + kTile * v;
        if (v + kLatentColumnVectors <= vectors)
          latents_heads<kLatentColumnVectors>(H, probs, lv, sh.Lp, pairs, o);
        else
          latents_heads<2>(H, probs, lv, sh.Lp, pairs, o);
      }
    }
  }
};

}  // namespace

void bf16dot_decode_segment(ConstMatView q_cat, const CachedBlocks& keys, float scale,
                            const DecodeSegmentState& state) {
  check(cpu_supports(Isa::kAvx512), "bf16dot_decode_segment without AVX512_BF16");
  decode_segment_state<Bf16DotProducts>("bf16dot_decode_segment", q_cat, keys, scale, state);
}

void bf16dot_decode_attention(ConstMatView q_cat, const CachedBlocks& keys, float scale,
                              MatView out) {
  decode_attention_split(bf16dot_decode_segment, q_cat, keys, scale, out);
}

}  // namespace dsinfer
