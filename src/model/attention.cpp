// Multi-head latent attention (MLA) in the reference's "absorb" form: the cache holds the
// normalised latent c_kv and the rotated k_pe per token; wkv_b is folded into the query
// (nope part) and into the output, so per-head keys and values are never materialised.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/dtype.h"
#include "core/mat_view.h"
#include "kernels/fast_decode_attention.h"
#include "kernels/linear.h"
#include "kernels/ops.h"
#include "model/layers.h"

namespace dsinfer {

namespace {

// From this many queries per sequence on (prefill), attention runs as matrix products through
// the GEMM kernels; below it (decode) each query walks the cache with dot products.
constexpr int kMatrixAttentionMinQueries = 8;

// Whether attention's products run on bf16 kernels: fast mode, where they run (AMX, AVX512_BF16).
// Fast mode elsewhere (AVX2) has the exact kernels only, and takes exact mode's attention.
bool bf16_attention(const KernelConfig& k) {
  return k.fast() && k.fast_kernels() != FastModeKernels::kExact;
}

// Rows [first, first + count) of wkv_b as fp32 [count, lora].
void dequantize_rows(const WeightMatrix& wkv_b, int64_t first, int64_t count, float* out) {
  for (int64_t r = 0; r < count; ++r) dequantize_row(wkv_b, first + r, out + r * wkv_b.cols);
}

WeightMatrix f32_matrix(const float* data, int64_t rows, int64_t cols) {
  return {DType::kF32, rows, cols, reinterpret_cast<const uint8_t*>(data), nullptr};
}

// Head h's rows of wkv_b's value half (W_v, [v_dim, lora]) as a matrix: in place where
// WeightMatrix::row_range allows (f32/bf16/int8 always; fp8 when the rows start a 128-row scale
// block, as V3's and V2's heads of 128 + 128 rows do), else dequantized into `buffer`.
WeightMatrix value_rows(const WeightMatrix& wkv_b, int64_t h, int64_t nope, int64_t v_dim,
                        std::vector<float>& buffer) {
  const int64_t first = h * (nope + v_dim) + nope;
  if (WeightMatrix view = wkv_b.row_range(first, v_dim); !view.empty()) return view;
  buffer.resize(static_cast<size_t>(v_dim * wkv_b.cols));
  dequantize_rows(wkv_b, first, v_dim, buffer.data());
  return f32_matrix(buffer.data(), v_dim, wkv_b.cols);
}

// A sequence's cache entries in one layer as attention reads them: block by block, each block
// its own matrix [<= kKVBlock, lora + rope] straight from the cache (fp32 or bf16).
struct CachedKeys {
  const KVCache& cache;
  int layer;
  SeqId seq;
  // fn(first key, the block's entries [rows, entry_dim]) for the blocks of keys [0, n_keys)
  template <class Fn>
  void for_each_block(int64_t n_keys, Fn&& fn) const {
    for (int64_t b = 0; b * kKVBlock < n_keys; ++b)
      fn(b * kKVBlock,
         cache.block_entries(layer, seq, b, std::min(kKVBlock, n_keys - b * kKVBlock)));
  }
};

// probs[r, t] = softmax over t < visible(r) of ([q_abs | q_pe][r] . entry[t]) * scale, and 0 for
// t in [visible(r), n_keys) where n_keys = probs.cols: one product per cache block (the latent and
// rope key side by side, KVCache) with the rows as tokens, each score its own dot product whatever
// the blocking.
template <class Visible>
void attention_probabilities(const KernelConfig& k, ConstMatView q_cat, const CachedKeys& keys,
                             float scale, const Visible& visible, MatView probs) {
  const int64_t n_keys = probs.cols;
  // q_cat [rows, lora + rope], entries [n_keys, lora + rope] -> probs [rows, n_keys]
  // exact kernels: dot_rows, the canonical order (the GEMM's bits) at 1.4-1.5x its speed for these
  // shapes; fast mode's bf16 kernels: matmul_serial (AMX or VDPBF16PS tiles from enough rows on)
  const bool exact = !bf16_attention(k);
  keys.for_each_block(n_keys, [&](int64_t first, const WeightMatrix& entries) {
    const MatView block_probs = probs.columns(first, entries.rows);  // [rows, block keys]
    if (exact)
      dot_rows(k.isa, q_cat, entries, block_probs);
    else
      matmul_serial(k, q_cat, entries, block_probs);
  });
  for (int64_t r = 0; r < q_cat.rows; ++r) {
    float* row = probs.row(r);
    const int64_t visible_keys = visible(r);
    for (int64_t t = 0; t < visible_keys; ++t) row[t] *= scale;
    softmax(row, visible_keys);
    std::fill(row + visible_keys, row + n_keys, 0.0f);
  }
}

// out[t] = sum over keys k < n_keys of probs[t, k] * latent[k] for every set t: probs
// [n_sets, n_keys] -> out [n_sets, lora]. The cache's latents (each entry's leading lora values,
// read in place) combined with the probabilities, block after block as one chain per output (the
// bits of one combine_rows over the whole sequence).
void attended_latents(const KernelConfig& k, const CachedKeys& keys, int64_t n_keys,
                      ConstMatView probs, MatView out) {
  const int64_t lora = keys.cache.latent_dim();
  keys.for_each_block(n_keys, [&](int64_t first, const WeightMatrix& entries) {
    const WeightMatrix latents = entries.leading_columns(lora);
    const ConstMatView block_probs = probs.columns(first, latents.rows);
    if (first == 0)
      combine_rows(k.isa, latents, {0, latents.rows}, block_probs, out);
    else
      accumulate_rows(k.isa, latents, {0, latents.rows}, block_probs, out);
  });
}

// q_cat [n, lora + rope] = [q_nope W_k | q_pe] for head h's query rows q_h [n, qk_dim]: wkv_b's
// key half absorbed into the queries (its rows read straight from the checkpoint), the rope part
// beside it. Decode and prefill absorb with this one kernel, in the same order.
void absorb_queries(const ForwardContext& ctx, const WeightMatrix& wkv_b, int64_t h,
                    ConstMatView q_h, MatView q_cat) {
  const ModelConfig& c = ctx.config;
  const int64_t nope = c.qk_nope_head_dim, v_dim = c.v_head_dim, lora = c.kv_lora_rank;
  combine_rows(ctx.kernels.isa, wkv_b, {h * (nope + v_dim), nope}, q_h.columns(0, nope),
               q_cat.columns(0, lora));
  for (int64_t i = 0; i < q_h.rows; ++i)
    std::copy_n(q_h.row(i) + nope, c.qk_rope_head_dim, q_cat.row(i) + lora);
}

// Which fast_decode_attention.h kernel decode attention takes: fast mode's, where AMX or
// VDPBF16PS runs (both products in bf16, the cache read in place where it is bf16); nullptr:
// the exact kernels.
DecodeSegmentKernel fast_decode_segment_kernel(const KernelConfig& k) {
  if (!k.fast()) return nullptr;
  switch (k.fast_kernels()) {
    case FastModeKernels::kAmx:
      return amx_decode_segment;
    case FastModeKernels::kBf16Dot:
      return bf16dot_decode_segment;
    default:
      return nullptr;
  }
}
static_assert(kAttentionBlockKeys == kKVBlock);

// A query that walks its sequence's cache on its own (decode): its sequence and position.
struct Query {
  SeqId seq;
  int64_t pos;
};

// What every attention path of one layer reads, with the shapes they all use.
struct LayerAttention {
  LayerAttention(const ForwardContext& ctx, const AttentionWeights& w, CacheLayer kv,
                 float softmax_scale)
      : ctx(ctx),
        w(w),
        kv(kv),
        softmax_scale(softmax_scale),
        H(ctx.plan.n_local_heads),
        nope(ctx.config.qk_nope_head_dim),
        v_dim(ctx.config.v_head_dim),
        qk_dim(ctx.config.qk_head_dim()),
        lora(ctx.config.kv_lora_rank),
        entry_dim(kv.cache.entry_dim()) {}
  const ForwardContext& ctx;
  const AttentionWeights& w;
  CacheLayer kv;
  float softmax_scale;
  int64_t H;  // this rank's heads
  int64_t nope, v_dim, qk_dim, lora;
  int64_t entry_dim;  // a cache entry: the latent and the rope key (lora + rope)
};

// (Each path copies what it reads into locals, not a structured binding: its lambdas capture them.)

// Decode: per query, q_abs = W_k^T q_nope for each head, scores over the cache, the attended
// latent; then W_v of every query's latent at once, straight from the checkpoint's wkv_b rows
// where they can be viewed in place. Every query of the step that attends this way comes in one
// call, whatever its sequence: wkv_b's rows are read once per step and head, not once per
// sequence (at batch 16 that was 16 passes over them), and combine_rows / matmul_serial give each
// query the same bits whatever the number of queries beside it. The thread's heads share each
// pass over the cache: the scores as one product with the heads as tokens, the attended entries
// as one combine_rows with the heads as its sets (the same kernels, hence the same bits, as the
// prefill path). Fast mode's bf16 kernels take attend_per_query_split instead.
// q [n, H, qk_dim] -> attn [n, H, v_dim], row i for queries[i].
void attend_per_query(const LayerAttention& a, const float* q, const std::vector<Query>& queries,
                      float* attn) {
  const ForwardContext& ctx = a.ctx;
  const AttentionWeights& w = a.w;
  KVCache& cache = a.kv.cache;
  const int layer = a.kv.layer;
  const float softmax_scale = a.softmax_scale;
  const int64_t H = a.H, nope = a.nope, v_dim = a.v_dim, qk_dim = a.qk_dim, lora = a.lora;
  const int64_t n = static_cast<int64_t>(queries.size());
  int64_t max_keys = 0;
  for (const Query& query : queries) max_keys = std::max(max_keys, query.pos + 1);
  const int64_t entry_dim = a.entry_dim;
  ctx.pool.parallel_for(H, [&](int64_t h_begin, int64_t h_end) {
    const int64_t heads = h_end - h_begin;
    thread_local std::vector<float> w_v, q_cat, scores, o_lat;
    q_cat.resize(heads * n * entry_dim);  // [heads, n, lora + rope]: [q_abs | q_pe]
    scores.resize(heads * max_keys);      // [heads, keys] of one query
    o_lat.resize(heads * n * lora);       // [heads, n, lora]: the attended latents
    // every query of the step absorbed at once
    for (int64_t h = h_begin; h < h_end; ++h)
      absorb_queries(ctx, w.wkv_b, h, ConstMatView(q + h * qk_dim, n, qk_dim, H * qk_dim),
                     MatView(q_cat.data() + (h - h_begin) * n * entry_dim, n, entry_dim));
    for (int64_t i = 0; i < n; ++i) {
      const int64_t n_keys = queries[i].pos + 1;
      const CachedKeys keys{cache, layer, queries[i].seq};
      // probabilities [heads, keys]: the thread's heads are the rows
      attention_probabilities(
          ctx.kernels, ConstMatView(q_cat.data() + i * entry_dim, heads, entry_dim, n * entry_dim),
          keys, softmax_scale, [&](int64_t) { return n_keys; },
          MatView(scores.data(), heads, n_keys, max_keys));
      // the attended latents of every head: the cache rows combined with the probabilities
      attended_latents(ctx.kernels, keys, n_keys,
                       ConstMatView(scores.data(), heads, n_keys, max_keys),
                       MatView(o_lat.data() + i * lora, heads, lora, n * lora));
    }
    // wkv_b's value half maps the attended latents to each head's outputs
    for (int64_t h = h_begin; h < h_end; ++h) {
      const WeightMatrix w_v_rows = value_rows(w.wkv_b, h, nope, v_dim, w_v);
      matmul_serial(ctx.kernels, ConstMatView(o_lat.data() + (h - h_begin) * n * lora, n, lora),
                    w_v_rows, MatView(attn + h * v_dim, n, v_dim, H * v_dim));
    }
  });
}

// Which items of attend_per_query_split each of `threads` threads takes: [threads + 1], thread t
// the items [first[t], first[t + 1]). Items are (segment, group of `group` heads), segment-major,
// and go to threads in contiguous runs of equal cost (keys x 16-head tiles, plus a block's worth
// per call): thread t takes those whose cost midpoint lies in [t, t + 1) x total / threads. (A
// sequence's last segment is often a few keys: equal counts of items had left one thread idle for
// half the step at depth 4096.)
std::vector<int64_t> first_items_by_cost(const std::vector<Query>& queries,
                                         const std::vector<int64_t>& first_segment, int64_t H,
                                         int64_t group, int64_t threads) {
  const int64_t groups = ceil_div(H, group);
  std::vector<int64_t> cost_before = {0};  // [items + 1]
  for (size_t i = 0; i < queries.size(); ++i)
    for (int64_t s = 0; s < first_segment[i + 1] - first_segment[i]; ++s) {
      const int64_t keys = std::min(kDecodeSplitKeys, queries[i].pos + 1 - s * kDecodeSplitKeys);
      for (int64_t g = 0; g < groups; ++g)
        cost_before.push_back(cost_before.back() +
                              (keys + kKVBlock) * ceil_div(std::min(group, H - g * group), 16));
    }
  const int64_t items = static_cast<int64_t>(cost_before.size()) - 1, total = cost_before.back();
  std::vector<int64_t> first(static_cast<size_t>(threads + 1), items);
  int64_t item = 0;
  for (int64_t t = 0; t < threads; ++t) {
    while (item < items && (cost_before[item] + cost_before[item + 1]) * threads < 2 * t * total)
      ++item;
    first[static_cast<size_t>(t)] = item;
  }
  return first;
}

// Fast mode's decode where its bf16 kernels run (fast_decode_attention.h: AMX tiles, or VDPBF16PS
// on Zen 4 / Zen 5; both products in bf16, a bf16 cache read in place), in three stages, each
// parallel on its own: q_abs per head (as attend_per_query); the attention as items of (query,
// segment of kDecodeSplitKeys positions, group of heads), so that one long sequence's positions
// spread over the pool (FlashDecoding's split; a head split alone leaves cores idle when a rank
// has few heads, e.g. 16 at mp8, and pads each thread's share to 16-head tiles); then per head the
// merge of its segments, in position order, and W_v. The items are sized by the pool, never the
// numbers: a head's segment state depends only on its query and the segment's keys.
// q [n, H, qk_dim] -> attn [n, H, v_dim], row i for queries[i].
void attend_per_query_split(const LayerAttention& a, const float* q,
                            const std::vector<Query>& queries, DecodeSegmentKernel kernel,
                            float* attn) {
  const ForwardContext& ctx = a.ctx;
  const AttentionWeights& w = a.w;
  KVCache& cache = a.kv.cache;
  const int layer = a.kv.layer;
  const float softmax_scale = a.softmax_scale;
  const int64_t H = a.H, nope = a.nope, v_dim = a.v_dim, qk_dim = a.qk_dim, lora = a.lora;
  const int64_t n = static_cast<int64_t>(queries.size());
  const int64_t entry_dim = a.entry_dim;
  // (the calling thread's buffers, reached from the pool's threads through these pointers)
  thread_local std::vector<float> q_cat_storage, o_storage, max_storage, sum_storage;
  thread_local std::vector<WeightMatrix> blocks_storage;
  thread_local std::vector<int64_t> first_segment_storage, first_block_storage;
  std::vector<WeightMatrix>& blocks = blocks_storage;  // every query's blocks, in query order
  std::vector<int64_t>& first_segment = first_segment_storage;  // [n + 1]: query i's first
  std::vector<int64_t>& first_block = first_block_storage;      // segment and block
  q_cat_storage.resize(static_cast<size_t>(H * n * entry_dim));
  float* q_cat = q_cat_storage.data();  // [H, n, lora + rope]: [q_abs | q_pe]
  ctx.pool.parallel_for(H, [&](int64_t h_begin, int64_t h_end) {
    for (int64_t h = h_begin; h < h_end; ++h)
      absorb_queries(ctx, w.wkv_b, h, ConstMatView(q + h * qk_dim, n, qk_dim, H * qk_dim),
                     MatView(q_cat + h * n * entry_dim, n, entry_dim));
  });
  // each query's cache blocks and segments, numbered across the step
  blocks.clear();
  first_segment.assign(1, 0);
  first_block.assign(1, 0);
  for (const Query& query : queries) {
    const int64_t n_keys = query.pos + 1;
    for (int64_t b = 0; b * kKVBlock < n_keys; ++b)
      blocks.push_back(
          cache.block_entries(layer, query.seq, b, std::min(kKVBlock, n_keys - b * kKVBlock)));
    first_segment.push_back(first_segment.back() + decode_segments(n_keys));
    first_block.push_back(static_cast<int64_t>(blocks.size()));
  }
  const int64_t segments = first_segment.back();
  const int64_t group = decode_heads_per_item(H, segments, ctx.pool.size());
  const int64_t groups = ceil_div(H, group);
  o_storage.resize(static_cast<size_t>(segments * H * lora));
  max_storage.resize(static_cast<size_t>(segments * H));
  sum_storage.resize(static_cast<size_t>(segments * H));
  float* o = o_storage.data();          // [segments, H, lora]: each segment's unnormalised latents
  float* seg_max = max_storage.data();  // [segments, H]
  float* seg_sum = sum_storage.data();  // [segments, H]
  const int64_t threads = ctx.pool.size();
  const std::vector<int64_t> first_item =
      first_items_by_cost(queries, first_segment, H, group, threads);
  ctx.pool.parallel_for(threads, [&](int64_t t_begin, int64_t t_end) {
    for (int64_t item = first_item[t_begin]; item < first_item[t_end]; ++item) {
      const int64_t seg = item / groups, h0 = (item % groups) * group;
      const int64_t heads = std::min(group, H - h0);
      const int64_t i = std::upper_bound(first_segment.begin(), first_segment.end(), seg) -
                        first_segment.begin() - 1;
      const CachedBlocks all{std::span<const WeightMatrix>(blocks).subspan(
                                 static_cast<size_t>(first_block[i]),
                                 static_cast<size_t>(first_block[i + 1] - first_block[i])),
                             queries[i].pos + 1};
      kernel(ConstMatView(q_cat + (h0 * n + i) * entry_dim, heads, entry_dim, n * entry_dim),
             decode_segment(all, seg - first_segment[i]), softmax_scale,
             DecodeSegmentState{MatView(o + (seg * H + h0) * lora, heads, lora),
                                seg_max + seg * H + h0, seg_sum + seg * H + h0});
    }
  });
  ctx.pool.parallel_for(H, [&](int64_t h_begin, int64_t h_end) {
    thread_local std::vector<float> w_v, o_lat;
    thread_local std::vector<DecodeSegmentState> states;
    o_lat.resize(static_cast<size_t>(n * lora));  // [n, lora]: one head's attended latents
    for (int64_t h = h_begin; h < h_end; ++h) {
      for (int64_t i = 0; i < n; ++i) {
        states.clear();
        for (int64_t seg = first_segment[i]; seg < first_segment[i + 1]; ++seg)
          states.push_back({MatView(o + (seg * H + h) * lora, 1, lora), seg_max + seg * H + h,
                            seg_sum + seg * H + h});
        merge_decode_segments(states, softmax_scale, MatView(o_lat.data() + i * lora, 1, lora));
      }
      // wkv_b's value half maps the attended latents to the head's outputs
      const WeightMatrix w_v_rows = value_rows(w.wkv_b, h, nope, v_dim, w_v);
      matmul_serial(ctx.kernels, ConstMatView(o_lat.data(), n, lora), w_v_rows,
                    MatView(attn + h * v_dim, n, v_dim, H * v_dim));
    }
  });
}

// Prefill: the same computation per head and sequence as matrix products over blocks of
// queries (Q_abs = Q_nope W_k; S = Q_abs L^T + Q_pe K_pe^T; O_lat = softmax(S) L;
// O = O_lat W_v^T). A block of queries reads only the keys its last query sees, so the causal
// mask wastes at most one block's worth of products; positions past each query are masked
// before the softmax.
constexpr int kQueryBlock = 64;

// q [seqlen, H, qk_dim] -> attn [seqlen, H, v_dim] for the chunk's rows.
void attend_as_matrices(const LayerAttention& a, const SeqChunk& chunk, const float* q,
                        float* attn) {
  const ForwardContext& ctx = a.ctx;
  const AttentionWeights& w = a.w;
  KVCache& cache = a.kv.cache;
  const int layer = a.kv.layer;
  const float softmax_scale = a.softmax_scale;
  const SeqId seq = chunk.seq;
  const int64_t seqlen = chunk.n_tokens, start_pos = chunk.start_pos;
  const int64_t H = a.H, nope = a.nope, v_dim = a.v_dim, qk_dim = a.qk_dim, lora = a.lora;
  const int64_t n_blocks = (seqlen + kQueryBlock - 1) / kQueryBlock;
  auto block_keys = [&](int64_t qb) {
    return start_pos + std::min<int64_t>(seqlen, (qb + 1) * kQueryBlock);
  };
  const int64_t max_keys = block_keys(n_blocks - 1);
  const int64_t entry_dim = a.entry_dim;
  ctx.pool.parallel_for(H, [&](int64_t h_begin, int64_t h_end) {
    thread_local std::vector<float> w_v, q_cat, scores, o_lat;
    q_cat.resize(seqlen * entry_dim);       // [seqlen, lora + rope]: [q_abs | q_pe]
    scores.resize(kQueryBlock * max_keys);  // [block queries, block keys]
    o_lat.resize(seqlen * lora);            // [seqlen, lora]: the attended latents
    for (int64_t h = h_begin; h < h_end; ++h) {
      // W_v in place where it can be viewed, else dequantized, exactly as decode takes it
      const WeightMatrix w_v_rows = value_rows(w.wkv_b, h, nope, v_dim, w_v);
      absorb_queries(ctx, w.wkv_b, h, ConstMatView(q + h * qk_dim, seqlen, qk_dim, H * qk_dim),
                     MatView(q_cat.data(), seqlen, entry_dim));
      const CachedKeys cached{cache, layer, seq};
      for (int64_t qb = 0; qb < n_blocks; ++qb) {
        const int64_t s0 = qb * kQueryBlock, n_q = std::min<int64_t>(kQueryBlock, seqlen - s0);
        const int64_t keys = block_keys(qb);
        attention_probabilities(
            ctx.kernels, ConstMatView(q_cat.data() + s0 * entry_dim, n_q, entry_dim), cached,
            softmax_scale, [&](int64_t s) { return start_pos + s0 + s + 1; },
            MatView(scores.data(), n_q, keys));
        // past each query's own keys the probabilities are 0: the chain over them adds exact zeros
        attended_latents(ctx.kernels, cached, keys, ConstMatView(scores.data(), n_q, keys),
                         MatView(o_lat.data() + s0 * lora, n_q, lora));
      }
      matmul_serial(ctx.kernels, ConstMatView(o_lat.data(), seqlen, lora), w_v_rows,
                    MatView(attn + h * v_dim, seqlen, v_dim, H * v_dim));
    }
  });
}

// attention_probabilities' computation over fast mode's gathered bf16 entries [keys, lora + rope]
// (one matrix), with the vectorized softmax_fast.
template <class Visible>
void bf16_probabilities(const KernelConfig& k, ConstMatView q_cat, const WeightMatrix& entries,
                        float scale, const Visible& visible, MatView probs) {
  matmul_serial(k, q_cat, entries, probs.columns(0, entries.rows));
  for (int64_t r = 0; r < q_cat.rows; ++r) {
    float* row = probs.row(r);
    const int64_t n_keys = visible(r);
    for (int64_t t = 0; t < n_keys; ++t) row[t] *= scale;
    softmax_fast(k.isa, row, n_keys);
    std::fill(row + n_keys, row + entries.rows, 0.0f);
  }
}

// Fast mode's prefill where its bf16 kernels run (AMX tiles or VDPBF16PS): the same computation,
// with the cache entering both products as bf16 weights. The entries are rounded once per call
// for every head: E [keys, lora + rope] for the scores, and its latent part transposed, L^T
// [lora, keys], so that the attended latents O_lat = P L are a bf16 product too instead of an
// exact combine_rows over fp32 entries (2-3x the time; together a sixth of a 512-token prefill on
// Zen 5), and the softmax takes a vectorized exp (libm's scalar one was a fifth of this path). The
// loop runs over query blocks, heads inside: a block's L^T serves every head; q_abs and W_v run per
// block and head with the exact path's kernels.
void attend_as_bf16_matrices(const LayerAttention& a, const SeqChunk& chunk, const float* q,
                             float* attn) {
  const ForwardContext& ctx = a.ctx;
  const AttentionWeights& w = a.w;
  KVCache& cache = a.kv.cache;
  const int layer = a.kv.layer;
  const float softmax_scale = a.softmax_scale;
  const SeqId seq = chunk.seq;
  const int64_t seqlen = chunk.n_tokens, start_pos = chunk.start_pos;
  const int64_t H = a.H, nope = a.nope, v_dim = a.v_dim, qk_dim = a.qk_dim, lora = a.lora;
  const int64_t entry_dim = a.entry_dim, q_stride = H * qk_dim;
  const int64_t max_keys = start_pos + seqlen;
  // (the calling thread's buffers, reached from the pool's threads through these pointers)
  thread_local std::vector<uint16_t> entries_storage, latents_t_storage, block_latents_t;
  entries_storage.resize(static_cast<size_t>(max_keys * entry_dim));
  latents_t_storage.resize(static_cast<size_t>(lora * max_keys));
  uint16_t* entries = entries_storage.data();      // E [max_keys, entry_dim] bf16
  uint16_t* latents_t = latents_t_storage.data();  // L^T [lora, max_keys] bf16
  // the cache's blocks gathered into one bf16 matrix (a copy where the cache is bf16 already)
  ctx.pool.parallel_for(KVCache::blocks_for(max_keys), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t rows = std::min(kKVBlock, max_keys - b * kKVBlock);
      const WeightMatrix block = cache.block_entries(layer, seq, b, rows);
      uint16_t* dst = entries + b * kKVBlock * entry_dim;
      if (block.dtype == DType::kBF16) {
        std::copy_n(reinterpret_cast<const uint16_t*>(block.data), rows * entry_dim, dst);
      } else {
        const float* src = reinterpret_cast<const float*>(block.data);
        for (int64_t i = 0; i < rows * entry_dim; ++i) dst[i] = f32_to_bf16(src[i]);
      }
    }
  });
  ctx.pool.parallel_for(
      lora,
      [&](int64_t c0, int64_t c1) {
        for (int64_t col = c0; col < c1; ++col)
          for (int64_t k = 0; k < max_keys; ++k)
            latents_t[col * max_keys + k] = entries[k * entry_dim + col];
      },
      16);
  auto bf16_matrix = [](const uint16_t* data, int64_t rows, int64_t cols) {
    return WeightMatrix{DType::kBF16, rows, cols, reinterpret_cast<const uint8_t*>(data), nullptr};
  };
  for (int64_t s0 = 0; s0 < seqlen; s0 += kQueryBlock) {
    const int64_t n_q = std::min<int64_t>(kQueryBlock, seqlen - s0);
    const int64_t keys = start_pos + s0 + n_q;  // what the block's last query sees
    // L^T of the block's keys: the first `keys` columns of each row, as a matrix of its own
    const uint16_t* block_lt = latents_t;
    if (keys < max_keys) {
      block_latents_t.resize(static_cast<size_t>(lora * keys));
      for (int64_t col = 0; col < lora; ++col)
        std::copy_n(latents_t + col * max_keys, keys, block_latents_t.data() + col * keys);
      block_lt = block_latents_t.data();
    }
    const WeightMatrix block_entries = bf16_matrix(entries, keys, entry_dim);
    const WeightMatrix block_latents = bf16_matrix(block_lt, lora, keys);
    ctx.pool.parallel_for(H, [&](int64_t h_begin, int64_t h_end) {
      thread_local std::vector<float> w_v, q_cat, probs, o_lat;
      q_cat.resize(static_cast<size_t>(n_q * entry_dim));  // [n_q, lora + rope]: [q_abs | q_pe]
      probs.resize(static_cast<size_t>(n_q * keys));       // [n_q, keys]
      o_lat.resize(static_cast<size_t>(n_q * lora));       // [n_q, lora]: the attended latents
      for (int64_t h = h_begin; h < h_end; ++h) {
        absorb_queries(ctx, w.wkv_b, h,
                       ConstMatView(q + s0 * q_stride + h * qk_dim, n_q, qk_dim, q_stride),
                       MatView(q_cat.data(), n_q, entry_dim));
        bf16_probabilities(
            ctx.kernels, ConstMatView(q_cat.data(), n_q, entry_dim), block_entries, softmax_scale,
            [&](int64_t s) { return start_pos + s0 + s + 1; }, MatView(probs.data(), n_q, keys));
        matmul_serial(ctx.kernels, ConstMatView(probs.data(), n_q, keys), block_latents,
                      MatView(o_lat.data(), n_q, lora));
        const WeightMatrix w_v_rows = value_rows(w.wkv_b, h, nope, v_dim, w_v);
        matmul_serial(ctx.kernels, ConstMatView(o_lat.data(), n_q, lora), w_v_rows,
                      MatView(attn + s0 * H * v_dim + h * v_dim, n_q, v_dim, H * v_dim));
      }
    });
  }
}

}  // namespace

void mla_forward(const ForwardContext& ctx, const AttentionWeights& w, CacheLayer kv_cache,
                 const Step& step, const float* x, float* out) {
  const Rope& rope = ctx.rope;
  Scratch& scratch = ctx.scratch;
  const ModelConfig& c = ctx.config;
  const int64_t n = static_cast<int64_t>(step.tokens.size());
  const int64_t H = ctx.plan.n_local_heads;
  const int64_t nope = c.qk_nope_head_dim, rope_dim = c.qk_rope_head_dim, v_dim = c.v_head_dim;
  const int64_t qk_dim = c.qk_head_dim(), lora = c.kv_lora_rank;

  // queries: q = wq(x) or wq_b(q_norm(wq_a(x)))                     // [n, H, qk_dim]
  float* q = grow(scratch.q, n * H * qk_dim);
  if (c.q_lora_rank == 0) {
    linear(ctx.kernels, x, n, w.wq, q, ctx.pool);
  } else {
    float* q_lora = grow(scratch.q_lora, n * c.q_lora_rank);  // [n, q_lora_rank]
    linear(ctx.kernels, x, n, w.wq_a, q_lora, ctx.pool);
    rms_norm(q_lora, w.q_norm.data(), n, c.q_lora_rank, 1e-6f, q_lora);
    linear(ctx.kernels, q_lora, n, w.wq_b, q, ctx.pool);
  }
  // latent and shared rope key: kv = wkv_a(x)                       // [n, lora + rope_dim]
  float* kv = grow(scratch.kv, n * (lora + rope_dim));
  linear(ctx.kernels, x, n, w.wkv_a, kv, ctx.pool);

  // rotate the rope parts (rope holds each row's absolute position), then cache kv_norm(latent)
  // and k_pe at each chunk's positions of its sequence
  int64_t row = 0;
  thread_local std::vector<float> latent_storage;
  latent_storage.resize(static_cast<size_t>(lora));
  float* latent = latent_storage.data();  // [lora]: one position's normalised latent
  for (const SeqChunk& chunk : step.chunks) {
    for (int64_t s = 0; s < chunk.n_tokens; ++s, ++row) {
      for (int64_t h = 0; h < H; ++h) rope.apply(q + (row * H + h) * qk_dim + nope, row);
      float* kv_i = kv + row * (lora + rope_dim);
      rope.apply(kv_i + lora, row);
      rms_norm(kv_i, w.kv_norm.data(), 1, lora, 1e-6f, latent);
      kv_cache.cache.write_entry(kv_cache.layer, chunk.seq, chunk.start_pos + s, latent,
                                 kv_i + lora);
    }
  }

  // attention per chunk, over its sequence's cache: per query (decode) or as matrix products
  // (prefill); both give the same bits, so the choice never changes a result
  const LayerAttention attention{ctx, w, kv_cache, attention_softmax_scale(c)};
  float* attn = grow(scratch.attn, n * H * v_dim);  // [n, H, v_dim]
  // (the queries of short chunks, decode's, are gathered for one attend_per_query: `rows` their
  // rows in the step, contiguous when those chunks are, as in a step of decodes only)
  thread_local std::vector<Query> queries;
  thread_local std::vector<int64_t> rows;
  queries.clear();
  rows.clear();
  row = 0;
  for (const SeqChunk& chunk : step.chunks) {
    const float* q_chunk = q + row * H * qk_dim;
    float* attn_chunk = attn + row * H * v_dim;
    if (chunk.n_tokens >= kMatrixAttentionMinQueries && bf16_attention(ctx.kernels)) {
      attend_as_bf16_matrices(attention, chunk, q_chunk, attn_chunk);
    } else if (chunk.n_tokens >= kMatrixAttentionMinQueries) {
      attend_as_matrices(attention, chunk, q_chunk, attn_chunk);
    } else {
      for (int64_t s = 0; s < chunk.n_tokens; ++s) {
        queries.push_back({chunk.seq, chunk.start_pos + s});
        rows.push_back(row + s);
      }
    }
    row += chunk.n_tokens;
  }
  if (!queries.empty()) {
    const DecodeSegmentKernel fast_kernel = fast_decode_segment_kernel(ctx.kernels);
    auto attend = [&](const float* q_rows, float* attn_rows) {
      if (fast_kernel)
        attend_per_query_split(attention, q_rows, queries, fast_kernel, attn_rows);
      else
        attend_per_query(attention, q_rows, queries, attn_rows);
    };
    const int64_t m = static_cast<int64_t>(rows.size());
    if (rows.back() - rows.front() + 1 == m) {
      attend(q + rows.front() * H * qk_dim, attn + rows.front() * H * v_dim);
    } else {  // decodes between prefill chunks: gathered, attended, scattered back
      float* q_rows = grow(scratch.query_rows, m * H * qk_dim);    // [m, H, qk_dim]
      float* attn_rows = grow(scratch.query_attn, m * H * v_dim);  // [m, H, v_dim]
      for (int64_t i = 0; i < m; ++i)
        std::copy_n(q + rows[i] * H * qk_dim, H * qk_dim, q_rows + i * H * qk_dim);
      attend(q_rows, attn_rows);
      for (int64_t i = 0; i < m; ++i)
        std::copy_n(attn_rows + i * H * v_dim, H * v_dim, attn + rows[i] * H * v_dim);
    }
  }

  // output projection (row-parallel): out = wo(attn), summed over ranks
  linear(ctx.kernels, attn, n, w.wo, out, ctx.pool);
  ctx.comm.all_reduce_sum(out, n * c.dim);
}

}  // namespace dsinfer
