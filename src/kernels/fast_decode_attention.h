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
// online softmax (running max and sum per head, FlashDecoding's merge), so nothing of size n_keys
// x heads leaves the caches. A head's result depends only on its own query and the keys (chunk
// boundaries are fixed positions), not on the heads beside it: any split of the heads over
// threads gives the same bits. Only when amx_usable() (matmul_amx.h).
void amx_decode_attention(ConstMatView q_cat, const CachedBlocks& keys, float scale, MatView out);

// The same computation with VDPBF16PS in place of the tiles: the same roundings (q_cat and E to
// bf16 for the scores, the unnormalised probabilities to bf16 for the second product), fp32 sums
// in another order (so other bits than amx_decode_attention, the same contract). Only where the
// AVX-512 kernels run (cpu_supports(Isa::kAvx512), which includes AVX512_BF16).
void bf16dot_decode_attention(ConstMatView q_cat, const CachedBlocks& keys, float scale,
                              MatView out);

}  // namespace dsinfer
