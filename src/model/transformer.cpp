#include "model/transformer.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "kernels/linear.h"
#include "kernels/ops.h"

namespace dsinfer {

const char* forward_part_name(ForwardPart part) {
  switch (part) {
    case ForwardPart::kAttention: return "attention";
    case ForwardPart::kDenseMlp: return "dense mlp";
    case ForwardPart::kMoe: return "moe";
    case ForwardPart::kHead: return "head";
    default: return "other";
  }
}

Transformer::Transformer(const ModelConfig& config, ModelWeights weights, const ShardPlan& plan,
                         Comm& comm, ThreadPool& pool)
    : config_(config), weights_(std::move(weights)), plan_(plan), comm_(comm), pool_(pool), rope_(config) {}

std::unique_ptr<Transformer> Transformer::load(const ModelConfig& config, const std::string& ckpt_dir,
                                               Comm& comm, ThreadPool& pool) {
  const ShardPlan plan = ShardPlan::make(config, comm.rank(), comm.world_size());
  const std::string path = shard_path(ckpt_dir, comm.rank(), comm.world_size());
  const double start = now_seconds();
  auto file = std::make_shared<SafetensorsFile>(path);
  ModelWeights weights = load_weights(config, plan, file);
  log_info("loaded ", path, " (", file->tensors().size(), " tensors) in ", now_seconds() - start, " s");
  return std::make_unique<Transformer>(config, std::move(weights), plan, comm, pool);
}

void Transformer::embed(const int32_t* tokens, int64_t n, float* h) {
  // vocab-parallel: rows outside this rank's block contribute zeros; the sum restores them
  for (int64_t i = 0; i < n; ++i) {
    const int64_t local = static_cast<int64_t>(tokens[i]) - plan_.vocab_begin;
    if (local >= 0 && local < plan_.vocab_local)
      dequantize_row(weights_.embed, local, h + i * config_.dim);
    else
      std::fill_n(h + i * config_.dim, config_.dim, 0.0f);
  }
  comm_.all_reduce_sum(h, n * config_.dim);
}

void Transformer::forward(const int32_t* tokens, int batch, int seqlen, int start_pos, KVCache& cache,
                          float* logits) {
  check(batch >= 1 && seqlen >= 1, "forward: empty input");
  Step step;
  for (int b = 0; b < batch; ++b) step.add(b, start_pos, tokens + static_cast<int64_t>(b) * seqlen, seqlen);
  StepOutput out;
  forward(step, cache, out);
  std::copy(out.logits.begin(), out.logits.end(), logits);
}

void Transformer::forward(const Step& step, KVCache& cache, StepOutput& output) {
  const int64_t n = static_cast<int64_t>(step.tokens.size()), dim = config_.dim;
  check(n >= 1 && !step.chunks.empty(), "forward: empty step");
  // the step's shape is checked before anything runs: a bad chunk is an Error, not a torn cache
  int64_t rows = 0;
  positions_.clear();
  for (size_t i = 0; i < step.chunks.size(); ++i) {
    const SeqChunk& c = step.chunks[i];
    check(c.n_tokens >= 1, "forward: chunk ", i, " is empty");
    check(cache.contains(c.seq), "forward: chunk ", i, " names sequence ", c.seq, ", which the cache does not hold");
    check(c.start_pos == cache.length(c.seq), "forward: chunk ", i, " starts at position ", c.start_pos,
          " but its sequence holds ", cache.length(c.seq));
    check(c.start_pos + c.n_tokens <= cache.capacity(c.seq), "forward: positions up to ", c.start_pos + c.n_tokens,
          " exceed the sequence's capacity (", cache.capacity(c.seq), ")");
    for (size_t j = 0; j < i; ++j)
      check(step.chunks[j].seq != c.seq, "forward: sequence ", c.seq, " appears in two chunks of one step");
    for (int64_t s = 0; s < c.n_tokens; ++s) positions_.push_back(c.start_pos + s);
    rows += c.n_tokens;
  }
  check(rows == n, "forward: the chunks cover ", rows, " tokens, the step holds ", n);
  for (int64_t i = 0; i < n; ++i)
    check(step.tokens[i] >= 0 && step.tokens[i] < config_.vocab_size, "token id ", step.tokens[i],
          " is outside the vocabulary [0, ", config_.vocab_size, ")");
  const ForwardContext ctx{config_, plan_, comm_, pool_};
  float* h = grow(h_, n * dim);  // [n, dim] residual stream
  float* x = grow(x_, n * dim);  // [n, dim] normalised input of a block
  float* y = grow(y_, n * dim);  // [n, dim] output of a block
  stats_ = {};
  // wall time per part (a clock read per part and layer: nothing next to a layer's work)
  double t = now_seconds();
  auto lap = [&](ForwardPart part) {
    const double now = now_seconds();
    stats_.part(part).seconds += now - t;
    t = now;
  };
  const int64_t n_logits = step.logit_rows();
  count_ends(step.tokens.data(), n, n_logits);
  embed(step.tokens.data(), n, h);
  rope_.prepare(positions_);
  lap(ForwardPart::kOther);

  for (int layer = 0; layer < config_.n_layers; ++layer) {
    const LayerWeights& lw = weights_.layers[layer];
    // h = h + attn(attn_norm(h))
    rms_norm(h, lw.attn_norm.data(), n, dim, 1e-6f, x);
    mla_forward(ctx, lw.attn, layer, x, step, cache, rope_, scratch_, y);
    lap(ForwardPart::kAttention);
    for (int64_t i = 0; i < n * dim; ++i) h[i] += y[i];
    lap(ForwardPart::kOther);
    // h = h + ffn(ffn_norm(h))
    rms_norm(h, lw.ffn_norm.data(), n, dim, 1e-6f, x);
    if (lw.is_moe)
      moe_forward(ctx, lw.moe, x, n, scratch_, y);
    else
      mlp_forward(ctx, lw.mlp, x, n, /*reduce=*/true, scratch_, y);
    lap(lw.is_moe ? ForwardPart::kMoe : ForwardPart::kDenseMlp);
    for (int64_t i = 0; i < n * dim; ++i) h[i] += y[i];
    count_layer(lw, step);
    lap(ForwardPart::kOther);
  }
  for (const SeqChunk& c : step.chunks) cache.set_length(c.seq, c.start_pos + c.n_tokens);

  // final norm of the rows asked for (each chunk's last, or all of its rows), vocab-parallel
  // head, gather the vocabulary
  float* last = grow(last_, n_logits * dim);  // [n_logits, dim]
  int64_t row = 0, out_row = 0;
  for (const SeqChunk& c : step.chunks) {
    const int64_t first = c.all_logits ? 0 : c.n_tokens - 1;
    for (int64_t s = first; s < c.n_tokens; ++s, ++out_row)
      rms_norm(h + (row + s) * dim, weights_.norm.data(), 1, dim, 1e-6f, last + out_row * dim);
    row += c.n_tokens;
  }
  if (step.want_hidden) output.hidden.assign(last, last + n_logits * dim);
  const int64_t v_local = plan_.vocab_local;
  float* local_logits = grow(logits_local_, n_logits * v_local);  // [n_logits, vocab_local]
  linear(last, n_logits, weights_.head, local_logits, pool_);
  output.logits.resize(static_cast<size_t>(n_logits * config_.vocab_size));
  float* logits = output.logits.data();
  if (plan_.world_size == 1) {
    std::copy_n(local_logits, n_logits * v_local, logits);
  } else {
    float* gathered = grow(gathered_, plan_.world_size * n_logits * v_local);  // [world, n_logits, vocab_local]
    comm_.all_gather(local_logits, n_logits * v_local, gathered);
    for (int r = 0; r < plan_.world_size; ++r)
      for (int64_t b = 0; b < n_logits; ++b)
        std::copy_n(gathered + (static_cast<int64_t>(r) * n_logits + b) * v_local, v_local,
                    logits + b * config_.vocab_size + r * v_local);
  }
  lap(ForwardPart::kHead);
}

namespace {
int64_t matrix_macs(const WeightMatrix& m) { return m.empty() ? 0 : m.rows * m.cols; }
int64_t matrix_bytes(const WeightMatrix& m) { return m.empty() ? 0 : m.bytes(); }
int64_t mlp_macs(const MlpWeights& m) { return matrix_macs(m.w1) + matrix_macs(m.w2) + matrix_macs(m.w3); }
int64_t mlp_bytes(const MlpWeights& m) { return matrix_bytes(m.w1) + matrix_bytes(m.w2) + matrix_bytes(m.w3); }
}  // namespace

void Transformer::count_ends(const int32_t* tokens, int64_t n, int64_t logit_rows) {
  const WeightMatrix& e = weights_.embed;
  const int64_t row_bytes = e.cols * static_cast<int64_t>(dtype_size(e.dtype)) +
                            (e.dtype == DType::kF8E4M3 ? e.scale_cols() * 4 : 0);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t local = static_cast<int64_t>(tokens[i]) - plan_.vocab_begin;
    if (local >= 0 && local < plan_.vocab_local) stats_.add(ForwardPart::kOther, row_bytes, 0);
  }
  // the rows that asked for logits only
  stats_.add(ForwardPart::kHead, matrix_bytes(weights_.head), logit_rows * matrix_macs(weights_.head));
}

void Transformer::count_layer(const LayerWeights& lw, const Step& step) {
  const ModelConfig& c = config_;
  const int64_t n = static_cast<int64_t>(step.tokens.size());
  const AttentionWeights& a = lw.attn;
  for (const WeightMatrix* m : {&a.wq, &a.wq_a, &a.wq_b, &a.wkv_a, &a.wkv_b, &a.wo}) {
    stats_.add(ForwardPart::kAttention, matrix_bytes(*m), m != &a.wkv_b ? n * matrix_macs(*m) : 0);
  }
  // absorbed attention per token and local head (attention.cpp): wkv_b's key half folded into
  // the query (nope x lora), its value half applied to the attended latent (v x lora), and per
  // visible cache position a score (lora + rope) and a value accumulation (lora)
  const int64_t heads = plan_.n_local_heads, lora = c.kv_lora_rank;
  int64_t keys = 0;
  for (const SeqChunk& chunk : step.chunks) keys += chunk.n_tokens * chunk.start_pos + chunk.n_tokens * (chunk.n_tokens + 1) / 2;
  stats_.add(ForwardPart::kAttention, 0,
             heads * (n * (c.qk_nope_head_dim + c.v_head_dim) * lora + keys * (2 * lora + c.qk_rope_head_dim)));
  if (!lw.is_moe) {
    stats_.add(ForwardPart::kDenseMlp, mlp_bytes(lw.mlp), n * mlp_macs(lw.mlp));
    return;
  }
  const MoeWeights& moe = lw.moe;
  stats_.add(ForwardPart::kMoe, matrix_bytes(moe.gate) + mlp_bytes(moe.shared),
             n * (matrix_macs(moe.gate) + mlp_macs(moe.shared)));
  // moe_forward leaves the chosen experts of every token in scratch_.experts [n, k]
  expert_tokens_.assign(moe.experts.size(), 0);
  for (int64_t i = 0; i < n * c.n_activated_experts; ++i) {
    const int64_t local = scratch_.experts[i] - plan_.experts_begin;
    if (local >= 0 && local < static_cast<int64_t>(moe.experts.size())) ++expert_tokens_[local];
  }
  for (size_t e = 0; e < moe.experts.size(); ++e)
    if (expert_tokens_[e] > 0) {
      stats_.add(ForwardPart::kMoe, mlp_bytes(moe.experts[e]), expert_tokens_[e] * mlp_macs(moe.experts[e]));
    }
}

int64_t Transformer::weight_bytes() const {
  const ModelConfig& c = config_;
  int64_t bytes = weights_.head.bytes();
  for (const LayerWeights& lw : weights_.layers) {
    const AttentionWeights& a = lw.attn;
    for (const WeightMatrix* m : {&a.wq, &a.wq_a, &a.wq_b, &a.wkv_a, &a.wkv_b, &a.wo}) bytes += matrix_bytes(*m);
    if (!lw.is_moe) {
      bytes += mlp_bytes(lw.mlp);
    } else {
      bytes += lw.moe.gate.bytes() + mlp_bytes(lw.moe.shared);
      // each token activates n_activated of n_routed experts; this rank holds its share of them
      if (!lw.moe.experts.empty())
        bytes += mlp_bytes(lw.moe.experts[0]) * c.n_activated_experts / plan_.world_size;
    }
  }
  return bytes;
}

}  // namespace dsinfer
