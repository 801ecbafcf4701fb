// Fast mode's decode attention: one query's heads against one sequence's cached entries, both
// products (the scores and the attended latents) in bf16 with fp32 sums, on AMX tiles or as
// AVX512_BF16 dot products (VDPBF16PS, AMD Zen 4 / Zen 5), with an online softmax over chunks
// (kernels/attention_chunks_avx512.h).
#pragma once

#include <cstdint>
#include <span>

#include "core/mat_view.h"
#include "kernels/weight_matrix.h"

namespace dsinfer {

// A sequence's cache in one layer as attention reads it: its blocks in key order, each a matrix
// [kAttentionBlockKeys (the last: 1..kAttentionBlockKeys), entry_dim] of f32 or bf16 entries.
inline constexpr int64_t kAttentionBlockKeys = 64;
struct CachedBlocks {
  std::span<const WeightMatrix> blocks;
  int64_t n_keys = 0;  // keys over all blocks
};

// out[h, c] = sum_k softmax_k(scale * q_cat[h] . E[k]) E[k, c] for c < out.cols (the latent part;
// out.rows = q_cat.rows heads), E the cached entries [n_keys, entry_dim = q_cat.cols].
// q_cat and E are rounded to bf16 for the scores, the unnormalised probabilities to bf16 for the
// second product; both accumulate in fp32 tiles. The keys go in chunks of 256 positions with an
// online softmax (running max and sum per head), and the chunks in segments of kDecodeSplitKeys
// positions, each segment's state computed on its own and the states merged in position order
// (FlashDecoding's split): a long sequence's segments can run on different threads with the
// same bits as on one. Chunk and segment boundaries are fixed positions, and a head's result
// depends only on its own query and the keys, not on the heads beside it: any split of the heads
// or segments over threads gives the same bits. Only when amx_usable() (matmul_amx.h).
void amx_decode_attention(ConstMatView q_cat, const CachedBlocks& keys, float scale, MatView out);

// The same computation with VDPBF16PS in place of the tiles: the same roundings (q_cat and E to
// bf16 for the scores, the unnormalised probabilities to bf16 for the second product), fp32 sums
// in another order (so other bits than amx_decode_attention, the same contract). Only where the
// AVX-512 kernels run (cpu_supports(Isa::kAvx512), which includes AVX512_BF16).
void bf16dot_decode_attention(ConstMatView q_cat, const CachedBlocks& keys, float scale,
                              MatView out);

// The position split. A segment is keys [s * kDecodeSplitKeys, (s + 1) * kDecodeSplitKeys) of a
// sequence (the last one shorter); a multiple of the kernels' 256-key chunks.
inline constexpr int64_t kDecodeSplitKeys = 2048;

// One segment's unnormalised state per head h (of the call's heads):
//   max[h] = the largest raw score q_cat[h] . E[k] over the segment's keys,
//   sum[h] = sum_k of the bf16-rounded p_k = e^(scale (s_k - max[h])) (the online softmax's sum),
//   o[h, c] = sum_k p_k E[k, c] for c < o.cols (the attended latents before the division).
struct DecodeSegmentState {
  MatView o;
  float* max = nullptr;
  float* sum = nullptr;
};

// A kernel's state of one segment: `keys` holds the segment's blocks only (keys.n_keys of them,
// at most kDecodeSplitKeys; its first key is a segment's first position).
using DecodeSegmentKernel = void (*)(ConstMatView q_cat, const CachedBlocks& keys, float scale,
                                     const DecodeSegmentState& state);
void amx_decode_segment(ConstMatView q_cat, const CachedBlocks& keys, float scale,
                        const DecodeSegmentState& state);
void bf16dot_decode_segment(ConstMatView q_cat, const CachedBlocks& keys, float scale,
                            const DecodeSegmentState& state);

// The blocks of segment `s` of a sequence's cache.
CachedBlocks decode_segment(const CachedBlocks& keys, int64_t s);
inline int64_t decode_segments(int64_t n_keys) {
  return (n_keys + kDecodeSplitKeys - 1) / kDecodeSplitKeys;
}

// out[h, :] = the merged segments, in position order: M = max_s max_s[h], a_s = e^(scale (max_s[h]
// - M)), out = (sum_s a_s o_s[h, :]) * (1 / sum_s a_s sum_s[h]). With one segment a_s = 1 and the
// result is o / sum, the online softmax's own last step. segments[s] are the states of segment s
// for out.rows heads.
void merge_decode_segments(std::span<const DecodeSegmentState> segments, float scale, MatView out);

// Heads per work item when `segments` segments of `heads` heads are spread over `threads`
// threads (attend_per_query_split): at most kDecodeMaxHeadsPerItem (a kernel call's buffers for 64
// heads, S^T 64 KB, O 128 KB, P 32 KB, stay in a 1 MB L2 beside the streamed entries; 128-head
// calls ran ~10% slower on Zen 5), halved in whole 16-head tiles while there are fewer items than
// threads. Only speed depends on it: a head's bits do not depend on the heads beside it.
inline constexpr int64_t kDecodeMaxHeadsPerItem = 64;
int64_t decode_heads_per_item(int64_t heads, int64_t segments, int threads);

// A whole call of a segment kernel: every segment in order on the calling thread, then the merge
// (what amx_decode_attention / bf16dot_decode_attention are).
void decode_attention_split(DecodeSegmentKernel kernel, ConstMatView q_cat,
                            const CachedBlocks& keys, float scale, MatView out);

}  // namespace dsinfer
