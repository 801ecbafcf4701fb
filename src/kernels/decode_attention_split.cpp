// The position split of fast mode's decode attention (fast_decode_attention.h): a sequence's
// segments and the merge of their states, shared by both kernels and by attend_per_query, which
// runs the segments of a long sequence on different threads.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/fast_decode_attention.h"

namespace dsinfer {

CachedBlocks decode_segment(const CachedBlocks& keys, int64_t s) {
  constexpr int64_t kBlocksPerSegment = kDecodeSplitKeys / kAttentionBlockKeys;
  static_assert(kDecodeSplitKeys % kAttentionBlockKeys == 0);
  const int64_t first_key = s * kDecodeSplitKeys;
  check(s >= 0 && first_key < keys.n_keys, "decode_segment: segment ", s, " past ", keys.n_keys,
        " keys");
  const int64_t n_keys = std::min(kDecodeSplitKeys, keys.n_keys - first_key);
  const int64_t first_block = s * kBlocksPerSegment;
  const int64_t n_blocks =
      std::min<int64_t>((n_keys + kAttentionBlockKeys - 1) / kAttentionBlockKeys,
                        static_cast<int64_t>(keys.blocks.size()) - first_block);
  check(n_blocks > 0, "decode_segment: blocks do not cover the keys");
  return CachedBlocks{
      keys.blocks.subspan(static_cast<size_t>(first_block), static_cast<size_t>(n_blocks)), n_keys};
}

int64_t decode_heads_per_item(int64_t heads, int64_t segments, int threads) {
  constexpr int64_t kTileHeads = 16;
  int64_t group = std::min(heads, kDecodeMaxHeadsPerItem);
  auto items = [&](int64_t g) { return segments * ((heads + g - 1) / g); };
  while (items(group) < threads && group > kTileHeads)
    group = ((group + 1) / 2 + kTileHeads - 1) / kTileHeads * kTileHeads;
  return group;
}

void merge_decode_segments(std::span<const DecodeSegmentState> segments, float scale, MatView out) {
  check(!segments.empty(), "merge_decode_segments: no segments");
  for (const DecodeSegmentState& s : segments)
    check(s.o.rows == out.rows && s.o.cols == out.cols, "merge_decode_segments: shapes differ");
  for (int64_t h = 0; h < out.rows; ++h) {
    float max = segments[0].max[h];
    for (const DecodeSegmentState& s : segments) max = std::max(max, s.max[h]);
    float* dst = out.row(h);
    float total = 0.0f;
    for (size_t i = 0; i < segments.size(); ++i) {
      const DecodeSegmentState& s = segments[i];
      // the segment's weight: exactly 1 for the segment that holds the max
      const float a = std::exp(scale * (s.max[h] - max));
      total += a * s.sum[h];
      const float* o = s.o.row(h);
      if (i == 0) {
        for (int64_t c = 0; c < out.cols; ++c) dst[c] = a * o[c];
      } else {
        for (int64_t c = 0; c < out.cols; ++c) dst[c] += a * o[c];
      }
    }
    const float inv = 1.0f / total;
    for (int64_t c = 0; c < out.cols; ++c) dst[c] *= inv;
  }
}

void decode_attention_split(DecodeSegmentKernel kernel, ConstMatView q_cat,
                            const CachedBlocks& keys, float scale, MatView out) {
  check(keys.n_keys > 0 && out.rows == q_cat.rows, "decode attention: shapes do not match");
  const int64_t n_segments = decode_segments(keys.n_keys);
  const int64_t heads = out.rows, cols = out.cols;
  thread_local std::vector<float> o, max, sum;  // [segments, heads, cols], [segments, heads] x 2
  o.resize(static_cast<size_t>(n_segments * heads * cols));
  max.resize(static_cast<size_t>(n_segments * heads));
  sum.resize(static_cast<size_t>(n_segments * heads));
  std::vector<DecodeSegmentState> states;
  for (int64_t s = 0; s < n_segments; ++s) {
    states.push_back({MatView(o.data() + s * heads * cols, heads, cols), max.data() + s * heads,
                      sum.data() + s * heads});
    kernel(q_cat, decode_segment(keys, s), scale, states.back());
  }
  merge_decode_segments(states, scale, out);
}

}  // namespace dsinfer
