// Feed-forward blocks: the dense MLP and the mixture of experts with its router.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "kernels/linear.h"
#include "kernels/ops.h"
#include "model/layers.h"

namespace dsinfer {

namespace {
// Elements per chunk of the elementwise work split across the pool: a decode step's few rows stay
// on the calling thread.
constexpr int64_t kElementwiseGrain = 16384;
}  // namespace

void mlp_forward(const ForwardContext& ctx, const MlpWeights& w, const float* x, int64_t n,
                 bool reduce, float* out) {
  Scratch& scratch = ctx.scratch;
  const int64_t inter = w.w1.rows;
  float* a = grow(scratch.mlp_a, n * inter);  // [n, inter]
  float* b = grow(scratch.mlp_b, n * inter);  // [n, inter]
  linear(ctx.kernels, x, n, w.w1, a, ctx.pool);
  linear(ctx.kernels, x, n, w.w3, b, ctx.pool);
  // elementwise, so split across the pool bit for bit (on one thread it was ~1% of a 512-token
  // prefill's samples while the other thread waited)
  ctx.pool.parallel_for(
      n * inter, [&](int64_t begin, int64_t end) { silu_mul(a + begin, b + begin, end - begin); },
      kElementwiseGrain);
  linear(ctx.kernels, a, n, w.w2, out, ctx.pool);  // [n, dim]
  if (reduce) ctx.comm.all_reduce_sum(out, n * w.w2.rows);
}

namespace {
// Indices of the k largest values, largest first; ties go to the lower index (torch.topk's
// order on CPU for equal values is not specified; exact ties do not occur with real scores).
void top_k(const float* values, int n, int k, int* out) {
  thread_local std::vector<int> order;  // (no allocation per token once warm)
  order.resize(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
    return values[a] > values[b] || (values[a] == values[b] && a < b);
  });
  std::copy_n(order.begin(), k, out);
}
}  // namespace

void route(const ModelConfig& c, const float* gate_logits, const float* bias, int* experts,
           float* weights) {
  const int E = c.n_routed_experts;
  // per-thread buffers: route() runs for every token, it should not allocate each time
  thread_local std::vector<float> scores, select, group_scores;
  thread_local std::vector<int> keep;
  thread_local std::vector<char> kept;
  scores.assign(gate_logits, gate_logits + E);
  if (c.score_func == ScoreFunc::kSoftmax) {
    softmax(scores.data(), E);
  } else {
    for (float& s : scores) s = 1.0f / (1.0f + std::exp(-s));
  }
  // selection uses the biased scores; the weights use the original ones
  select = scores;
  if (bias)
    for (int e = 0; e < E; ++e) select[e] += bias[e];
  if (c.n_expert_groups > 1) {
    const int G = c.n_expert_groups, per_group = E / G;
    group_scores.resize(static_cast<size_t>(G));
    for (int g = 0; g < G; ++g) {
      const float* s = select.data() + g * per_group;
      if (!bias) {
        group_scores[g] = *std::max_element(s, s + per_group);
      } else {
        int top2[2];
        const int k = std::min(2, per_group);
        top_k(s, per_group, k, top2);
        group_scores[g] = s[top2[0]] + (k > 1 ? s[top2[1]] : 0.0f);
      }
    }
    keep.resize(static_cast<size_t>(c.n_limited_groups));
    top_k(group_scores.data(), G, c.n_limited_groups, keep.data());
    kept.assign(static_cast<size_t>(G), 0);
    for (int g : keep) kept[g] = 1;
    for (int g = 0; g < G; ++g)
      if (!kept[g])
        std::fill_n(select.begin() + g * per_group, per_group,
                    -std::numeric_limits<float>::infinity());
  }
  const int k = c.n_activated_experts;
  top_k(select.data(), E, k, experts);
  float sum = 0;
  for (int j = 0; j < k; ++j) {
    weights[j] = scores[experts[j]];
    sum += weights[j];
  }
  for (int j = 0; j < k; ++j) {
    if (c.score_func == ScoreFunc::kSigmoid) weights[j] /= sum;
    weights[j] *= static_cast<float>(c.route_scale);
  }
}

const int* moe_forward(const ForwardContext& ctx, const MoeWeights& w, const float* x, int64_t n,
                       float* out) {
  Scratch& scratch = ctx.scratch;
  const ModelConfig& c = ctx.config;
  const int64_t dim = c.dim, E = c.n_routed_experts, k = c.n_activated_experts;

  // router: gate logits -> k experts and weights per token
  float* logits = grow(scratch.scores, n * E);  // [n, E]
  linear(ctx.kernels, x, n, w.gate, logits, ctx.pool);
  scratch.experts.resize(n * k);
  scratch.expert_weights.resize(n * k);
  const float* bias = w.gate_bias.empty() ? nullptr : w.gate_bias.data();
  for (int64_t i = 0; i < n; ++i)
    route(c, logits + i * E, bias, scratch.experts.data() + i * k,
          scratch.expert_weights.data() + i * k);

  // routed experts of this rank, in expert order: gather each expert's tokens, run it once
  float* routed = grow(scratch.routed, n * dim);  // [n, dim]
  ctx.pool.parallel_for(
      n * dim, [&](int64_t begin, int64_t end) { std::fill(routed + begin, routed + end, 0.0f); },
      kElementwiseGrain);
  // token rows per chunk of the per-expert gathers and weighted sums (rows of dim elements)
  const int64_t row_grain = ceil_div(kElementwiseGrain, dim);
  std::vector<int64_t>& tokens = scratch.expert_tokens;
  std::vector<float>& token_weights = scratch.expert_token_weights;
  for (size_t local = 0; local < w.experts.size(); ++local) {
    const int expert = ctx.plan.experts_begin + static_cast<int>(local);
    tokens.clear();
    token_weights.clear();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < k; ++j)
        if (scratch.experts[i * k + j] == expert) {
          tokens.push_back(i);
          token_weights.push_back(scratch.expert_weights[i * k + j]);
        }
    if (tokens.empty()) continue;
    const int64_t m = static_cast<int64_t>(tokens.size());
    float* gathered = grow(scratch.gathered, m * dim);  // [m, dim]
    ctx.pool.parallel_for(
        m,
        [&](int64_t t0, int64_t t1) {
          for (int64_t t = t0; t < t1; ++t)
            std::copy_n(x + tokens[t] * dim, dim, gathered + t * dim);
        },
        row_grain);
    float* y = grow(scratch.expert_out, m * dim);  // [m, dim]
    mlp_forward(ctx, w.experts[local], gathered, m, /*reduce=*/false, y);
    // (an expert's tokens are distinct rows: the chunks write disjoint rows of `routed`)
    ctx.pool.parallel_for(
        m,
        [&](int64_t t0, int64_t t1) {
          for (int64_t t = t0; t < t1; ++t)
            axpy(token_weights[t], y + t * dim, routed + tokens[t] * dim, dim);
        },
        row_grain);
  }
  // shared experts (column/row-parallel MLP), then routed + shared. The reference reduces the
  // two partial sums apart (the shared w2's RowParallelLinear, then the routed sum); one reduction
  // of their sum per layer is the same up to rounding (sum over ranks of r_i + s_i), one collective
  // fewer per MoE layer (58 of V3's 182 per decode step), and at one rank nothing changes at all.
  if (!w.shared.w1.empty()) {
    float* shared = grow(scratch.shared, n * dim);  // [n, dim] this rank's part
    mlp_forward(ctx, w.shared, x, n, /*reduce=*/false, shared);
    ctx.pool.parallel_for(
        n * dim,
        [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) out[i] = routed[i] + shared[i];
        },
        kElementwiseGrain);
  } else {
    std::copy_n(routed, n * dim, out);
  }
  ctx.comm.all_reduce_sum(out, n * dim);
  return scratch.experts.data();
}

}  // namespace dsinfer
