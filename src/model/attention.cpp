// Multi-head latent attention (MLA) in the reference's "absorb" form: the cache holds the
// normalised latent c_kv and the rotated k_pe per token; wkv_b is folded into the query
// (nope part) and into the output, so per-head keys and values are never materialised.
#include <cmath>
#include <vector>

#include "kernels/linear.h"
#include "kernels/ops.h"
#include "model/layers.h"

namespace dsinfer {

void mla_forward(const ForwardContext& ctx, const AttentionWeights& w, int layer, const float* x,
                 int batch, int seqlen, int start_pos, KVCache& cache, const Rope& rope,
                 Scratch& scratch, float* out) {
  const ModelConfig& c = ctx.config;
  const int64_t n = static_cast<int64_t>(batch) * seqlen;
  const int64_t H = ctx.plan.n_local_heads;
  const int64_t nope = c.qk_nope_head_dim, rope_dim = c.qk_rope_head_dim, v_dim = c.v_head_dim;
  const int64_t qk_dim = c.qk_head_dim(), lora = c.kv_lora_rank;

  // queries: q = wq(x) or wq_b(q_norm(wq_a(x)))                     // [n, H, qk_dim]
  float* q = grow(scratch.q, n * H * qk_dim);
  if (c.q_lora_rank == 0) {
    linear(x, n, w.wq, q, ctx.pool);
  } else {
    float* q_lora = grow(scratch.q_lora, n * c.q_lora_rank);     // [n, q_lora_rank]
    linear(x, n, w.wq_a, q_lora, ctx.pool);
    rms_norm(q_lora, w.q_norm.data(), n, c.q_lora_rank, 1e-6f, q_lora);
    linear(q_lora, n, w.wq_b, q, ctx.pool);
  }
  // latent and shared rope key: kv = wkv_a(x)                       // [n, lora + rope_dim]
  float* kv = grow(scratch.kv, n * (lora + rope_dim));
  linear(x, n, w.wkv_a, kv, ctx.pool);

  // rotate the rope parts, then cache kv_norm(latent) and k_pe at this step's positions
  for (int b = 0; b < batch; ++b) {
    for (int s = 0; s < seqlen; ++s) {
      const int64_t i = static_cast<int64_t>(b) * seqlen + s;
      for (int64_t h = 0; h < H; ++h) rope.apply(q + (i * H + h) * qk_dim + nope, s);
      float* kv_i = kv + i * (lora + rope_dim);
      rope.apply(kv_i + lora, s);
      rms_norm(kv_i, w.kv_norm.data(), 1, lora, 1e-6f, cache.latent(layer, b, start_pos + s));
      std::copy_n(kv_i + lora, rope_dim, cache.rope_key(layer, b, start_pos + s));
    }
  }

  // attention per head over the cache, causal: position p sees positions [0, p]
  const float softmax_scale = attention_softmax_scale(c);
  float* attn = grow(scratch.attn, n * H * v_dim);                 // [n, H, v_dim]
  ctx.pool.parallel_for(H, [&](int64_t h_begin, int64_t h_end) {
    thread_local std::vector<float> w_head, q_abs, scores, o_lat;
    w_head.resize((nope + v_dim) * lora);                          // [nope + v_dim, lora]
    q_abs.resize(lora);
    scores.resize(start_pos + seqlen);
    o_lat.resize(lora);
    for (int64_t h = h_begin; h < h_end; ++h) {
      for (int64_t r = 0; r < nope + v_dim; ++r)
        dequantize_row(w.wkv_b, h * (nope + v_dim) + r, w_head.data() + r * lora);
      for (int b = 0; b < batch; ++b) {
        for (int s = 0; s < seqlen; ++s) {
          const int64_t i = static_cast<int64_t>(b) * seqlen + s;
          const float* q_nope = q + (i * H + h) * qk_dim;
          const float* q_pe = q_nope + nope;
          // absorb wkv_b's key half into the query: q_abs[c] = sum_d q_nope[d] W[d, c]
          std::fill(q_abs.begin(), q_abs.end(), 0.0f);
          for (int64_t d = 0; d < nope; ++d) axpy(q_nope[d], w_head.data() + d * lora, q_abs.data(), lora);
          const int n_keys = start_pos + s + 1;
          for (int t = 0; t < n_keys; ++t)
            scores[t] = (dot(q_abs.data(), cache.latent(layer, b, t), lora) +
                         dot(q_pe, cache.rope_key(layer, b, t), rope_dim)) * softmax_scale;
          softmax(scores.data(), n_keys);
          std::fill(o_lat.begin(), o_lat.end(), 0.0f);
          for (int t = 0; t < n_keys; ++t) axpy(scores[t], cache.latent(layer, b, t), o_lat.data(), lora);
          // wkv_b's value half maps the attended latent to this head's output
          float* o = attn + (i * H + h) * v_dim;
          for (int64_t d = 0; d < v_dim; ++d) o[d] = dot(w_head.data() + (nope + d) * lora, o_lat.data(), lora);
        }
      }
    }
  });

  // output projection (row-parallel): out = wo(attn), summed over ranks
  linear(attn, n, w.wo, out, ctx.pool);
  ctx.comm.all_reduce_sum(out, n * c.dim);
}

}  // namespace dsinfer
