#include "model/transformer.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "kernels/linear.h"
#include "kernels/ops.h"
#include "model/int8_weights.h"

namespace dsinfer {

Transformer::Transformer(const ModelConfig& config, ModelWeights weights, const ShardPlan& plan,
                         Comm& comm, ThreadPool& pool, const KernelConfig& kernels)
    : config_(config),
      weights_(std::move(weights)),
      plan_(plan),
      comm_(comm),
      pool_(pool),
      kernels_(kernels),
      rope_(config) {
  observers_.push_back(&counter_);
  if (kernels_.int8()) make_int8_forms(weights_, pool_);
}

void Transformer::set_kernels(const KernelConfig& kernels) {
  kernels_ = kernels;
  if (!kernels_.int8()) return;
  make_int8_forms(weights_, pool_);
  if (mtp_) make_int8_forms(*mtp_, pool_);
}

void Transformer::add_observer(ForwardObserver* observer) {
  observers_.push_back(observer);
  observers_want_tensors_ = observers_want_tensors_ || observer->wants_tensors();
}

void Transformer::remove_observer(ForwardObserver* observer) {
  std::erase(observers_, observer);
  observers_want_tensors_ = false;
  for (ForwardObserver* o : observers_)
    observers_want_tensors_ = observers_want_tensors_ || o->wants_tensors();
}

void Transformer::tensor(const std::string& name, const float* data, int64_t rows, int64_t cols) {
  if (!observers_want_tensors_) return;
  for (ForwardObserver* o : observers_)
    if (o->wants_tensors()) o->tensor(name, data, rows, cols);
}

std::unique_ptr<Transformer> Transformer::load(const ModelConfig& config,
                                               const std::string& ckpt_dir, Comm& comm,
                                               ThreadPool& pool, const KernelConfig& kernels) {
  const ShardPlan plan = ShardPlan::make(config, comm.rank(), comm.world_size());
  const std::string path = shard_path(ckpt_dir, comm.rank(), comm.world_size());
  const double start = now_seconds();
  auto file = std::make_shared<SafetensorsFile>(path);
  ModelWeights weights = load_weights(config, plan, file);
  log_info("loaded ", path, " (", file->tensors().size(), " tensors",
           weights.quantization.any() ? "; " + weights.quantization.describe() : std::string(),
           ") in ", now_seconds() - start, " s");
  return std::make_unique<Transformer>(config, std::move(weights), plan, comm, pool, kernels);
}

void Transformer::embed(const int32_t* tokens, int64_t n, float* h) {
  embed_with(weights_.embed, tokens, n, h);
}

void Transformer::embed_with(const WeightMatrix& table, const int32_t* tokens, int64_t n,
                             float* h) {
  // vocab-parallel: rows outside this rank's block contribute zeros; the sum restores them
  for (int64_t i = 0; i < n; ++i) {
    const int64_t local = static_cast<int64_t>(tokens[i]) - plan_.vocab_begin;
    if (local >= 0 && local < plan_.vocab_local)
      dequantize_row(table, local, h + i * config_.dim);
    else
      std::fill_n(h + i * config_.dim, config_.dim, 0.0f);
  }
  collectives_.all_reduce_sum(h, n * config_.dim);
}

void Transformer::forward(const int32_t* tokens, int batch, int seqlen, int start_pos,
                          KVCache& cache, float* logits) {
  check(batch >= 1 && seqlen >= 1, "forward: empty input");
  Step step;
  for (int b = 0; b < batch; ++b)
    step.add(b, start_pos, tokens + static_cast<int64_t>(b) * seqlen, seqlen);
  StepOutput out;
  forward(step, cache, out);
  std::copy(out.logits.begin(), out.logits.end(), logits);
}

// The step's shape is checked before anything runs: a bad chunk is an Error, not a torn cache.
void Transformer::check_step(const Step& step, const KVCache& cache) {
  const int64_t n = static_cast<int64_t>(step.tokens.size());
  int64_t rows = 0;
  positions_.clear();
  for (size_t i = 0; i < step.chunks.size(); ++i) {
    const SeqChunk& c = step.chunks[i];
    check(c.n_tokens >= 1, "forward: chunk ", i, " is empty");
    check(cache.contains(c.seq), "forward: chunk ", i, " names sequence ", c.seq,
          ", which the cache does not hold");
    check(c.start_pos == cache.length(c.seq), "forward: chunk ", i, " starts at position ",
          c.start_pos, " but its sequence holds ", cache.length(c.seq));
    check(c.start_pos + c.n_tokens <= cache.capacity(c.seq), "forward: positions up to ",
          c.start_pos + c.n_tokens, " exceed the sequence's capacity (", cache.capacity(c.seq),
          ")");
    for (size_t j = 0; j < i; ++j)
      check(step.chunks[j].seq != c.seq, "forward: sequence ", c.seq,
            " appears in two chunks of one step");
    for (int64_t s = 0; s < c.n_tokens; ++s) positions_.push_back(c.start_pos + s);
    rows += c.n_tokens;
  }
  check(rows == n, "forward: the chunks cover ", rows, " tokens, the step holds ", n);
  for (int64_t i = 0; i < n; ++i)
    check(step.tokens[i] >= 0 && step.tokens[i] < config_.vocab_size, "token id ", step.tokens[i],
          " is outside the vocabulary [0, ", config_.vocab_size, ")");
}

void Transformer::forward(const Step& step, KVCache& cache, StepOutput& output) {
  const int64_t n = static_cast<int64_t>(step.tokens.size()), dim = config_.dim;
  check(n >= 1 && !step.chunks.empty(), "forward: empty step");
  check_step(step, cache);
  begin_pass(step);
  const ForwardContext ctx{config_, plan_, collectives_, pool_, kernels_, rope_, scratch_};
  float* h = grow(h_, n * dim);  // [n, dim] residual stream
  embed(step.tokens.data(), n, h);
  rope_.prepare(positions_);
  tensor("embed", h, n, dim);
  part_done(ForwardPart::kOther, step);
  for (int layer = 0; layer < config_.n_layers; ++layer)
    block_forward(ctx, weights_.layers[layer], layer, step, cache);
  for (const SeqChunk& c : step.chunks) cache.set_length(c.seq, c.start_pos + c.n_tokens);
  finish_pass(step, weights_.norm, weights_.head, output);
}

void Transformer::begin_pass(const Step& step) {
  const int64_t n = static_cast<int64_t>(step.tokens.size()), dim = config_.dim;
  collectives_.reset();
  grow(h_, n * dim);
  grow(x_, n * dim);
  grow(y_, n * dim);
  for (ForwardObserver* o : observers_) o->begin(step);
  part_start_ = now_seconds();
}

// A clock read per part and layer: nothing next to a layer's work.
void Transformer::part_done(ForwardPart part, const Step& step, int layer, const LayerWeights* lw,
                            const int* experts) {
  const double now = now_seconds();
  const ForwardEvent event{part, layer, now - part_start_, &step, lw, experts};
  for (ForwardObserver* o : observers_) o->part_done(event);
  part_start_ = now;
}

void Transformer::block_forward(const ForwardContext& ctx, const LayerWeights& lw, int layer,
                                const Step& step, KVCache& cache) {
  const int64_t n = static_cast<int64_t>(step.tokens.size()), dim = config_.dim;
  float* h = h_.data();  // [n, dim] residual stream
  float* x = x_.data();  // [n, dim] normalised input of a sublayer
  float* y = y_.data();  // [n, dim] output of a sublayer
  const std::string prefix = observers_want_tensors_ ? "layers." + std::to_string(layer) + "." : "";
  // the MTP block (layer n_layers, as the checkpoints number it) has a cache of its own
  const int cache_layer = layer < config_.n_layers ? layer : 0;
  // h = h + attn(attn_norm(h))
  rms_norm(h, lw.attn_norm.data(), n, dim, 1e-6f, x);
  mla_forward(ctx, lw.attn, {cache, cache_layer}, step, x, y);
  part_done(ForwardPart::kAttention, step, layer, &lw);
  tensor(prefix + "attn_out", y, n, dim);
  for (int64_t i = 0; i < n * dim; ++i) h[i] += y[i];
  part_done(ForwardPart::kOther, step, layer);
  // h = h + ffn(ffn_norm(h))
  rms_norm(h, lw.ffn_norm.data(), n, dim, 1e-6f, x);
  if (lw.is_moe) {
    const int* experts = moe_forward(ctx, lw.moe, x, n, y);
    part_done(ForwardPart::kMoe, step, layer, &lw, experts);
  } else {
    mlp_forward(ctx, lw.mlp, x, n, /*reduce=*/true, y);
    part_done(ForwardPart::kDenseMlp, step, layer, &lw);
  }
  tensor(prefix + "ffn_out", y, n, dim);
  for (int64_t i = 0; i < n * dim; ++i) h[i] += y[i];
  tensor(prefix + "out", h, n, dim);
  part_done(ForwardPart::kOther, step, layer);
}

void Transformer::finish_pass(const Step& step, const std::vector<float>& norm,
                              const WeightMatrix& head, StepOutput& output) {
  const int64_t dim = config_.dim, n_logits = step.logit_rows();
  // final norm of the rows asked for (each chunk's last, or all of its rows), vocab-parallel
  // head, gather the vocabulary
  float* last = grow(last_, n_logits * dim);  // [n_logits, dim]
  norm_logit_rows(step, h_.data(), norm, last);
  if (step.want_hidden) {
    output.hidden.resize(static_cast<size_t>(step.hidden_rows() * dim));
    norm_logit_rows(step, h_.data(), norm, output.hidden.data(), /*hidden_rows=*/true);
  }
  tensor("final_hidden", last, n_logits, dim);
  if (step.want_logits) {
    head_logits(last, n_logits, head, step.gather_logits, output);
    tensor("logits", output.logits.data(), n_logits, output.logit_columns);
  } else {
    output.logits.clear();
  }
  part_done(ForwardPart::kHead, step);
}

void Transformer::norm_logit_rows(const Step& step, const float* h, const std::vector<float>& norm,
                                  float* last, bool hidden_rows) const {
  const int64_t dim = config_.dim;
  int64_t row = 0, out_row = 0;
  for (const SeqChunk& c : step.chunks) {
    const int64_t first = c.all_logits || (hidden_rows && c.all_hidden) ? 0 : c.n_tokens - 1;
    for (int64_t s = first; s < c.n_tokens; ++s, ++out_row)
      rms_norm(h + (row + s) * dim, norm.data(), 1, dim, 1e-6f, last + out_row * dim);
    row += c.n_tokens;
  }
}

void Transformer::head_logits(const float* last, int64_t n_logits, const WeightMatrix& head,
                              bool gather, StepOutput& output) {
  const int64_t v_local = plan_.vocab_local;
  if (plan_.world_size == 1 || !gather) {
    output.logits.resize(static_cast<size_t>(n_logits * v_local));  // [n_logits, vocab_local]
    output.logit_columns = v_local;
    output.vocab_offset = plan_.rank * v_local;
    linear(kernels_, last, n_logits, head, output.logits.data(), pool_);
    return;
  }
  float* local_logits = grow(logits_local_, n_logits * v_local);  // [n_logits, vocab_local]
  linear(kernels_, last, n_logits, head, local_logits, pool_);
  output.logits.resize(static_cast<size_t>(n_logits * config_.vocab_size));
  output.logit_columns = config_.vocab_size;
  output.vocab_offset = 0;
  float* logits = output.logits.data();
  float* gathered =
      grow(gathered_, plan_.world_size * n_logits * v_local);  // [world, n_logits, vocab_local]
  collectives_.all_gather(local_logits, n_logits * v_local, gathered);
  for (int r = 0; r < plan_.world_size; ++r)
    for (int64_t b = 0; b < n_logits; ++b)
      std::copy_n(gathered + (static_cast<int64_t>(r) * n_logits + b) * v_local, v_local,
                  logits + b * config_.vocab_size + r * v_local);
}

int64_t Transformer::weight_bytes() const {
  const ModelConfig& c = config_;
  int64_t bytes = weights_.head.bytes();
  for (const LayerWeights& lw : weights_.layers) {
    for_each_attention_matrix(
        lw.attn, [&](const std::string&, const WeightMatrix& m) { bytes += m.bytes(); });
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
