// The multi-token-prediction module of V3/R1 (docs/MTP.md section 1): at position i,
//   u = eh_proj [enorm(embed(t_{i+1})) | hnorm(h_i)],  then one MLA + MoE block over u with its
//   own cache, then head(head_norm(.)) -> the draft distribution for t_{i+2}.
// The embedding half comes first (the checkpoints were trained so, whatever the paper's equation
// says) and h_i is the main model's hidden state after its final norm.
#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "kernels/linear.h"
#include "kernels/ops.h"
#include "model/int8_weights.h"
#include "model/transformer.h"

namespace dsinfer {

void Transformer::load_mtp(const std::string& ckpt_dir) {
  const std::string path = mtp_shard_path(ckpt_dir, comm_.rank(), comm_.world_size());
  auto file = std::make_shared<SafetensorsFile>(path);
  mtp_ = std::make_unique<MtpWeights>(load_mtp_weights(config_, plan_, file));
  if (kernels_.int8()) make_int8_forms(*mtp_, pool_);
  log_info("loaded ", path, " (", file->tensors().size(),
           " tensors: the multi-token-prediction module",
           mtp_->embed.empty() && mtp_->head.empty() ? ", sharing the main embedding and head" : "",
           ")");
}

KVCache Transformer::make_mtp_cache(int64_t budget_positions, KVDType dtype) const {
  ModelConfig one_layer = config_;
  one_layer.n_layers = 1;
  return KVCache(one_layer, budget_positions, dtype);
}

void Transformer::forward_mtp(const Step& step, const float* hidden, KVCache& mtp_cache,
                              StepOutput& output) {
  check(mtp_ != nullptr,
        "forward_mtp: no multi-token-prediction module loaded (--mtp needs convert --keep-mtp)");
  const int64_t n = static_cast<int64_t>(step.tokens.size()), dim = config_.dim;
  check(n >= 1 && !step.chunks.empty(), "forward_mtp: empty step");
  check_step(step, mtp_cache);
  const MtpWeights& m = *mtp_;
  collectives_.reset();
  const ForwardContext ctx{config_, plan_, collectives_, pool_, kernels_};
  float* h = grow(h_, n * dim);            // [n, dim] residual stream
  float* x = grow(x_, n * dim);            // [n, dim]
  float* y = grow(y_, n * dim);            // [n, dim]
  float* in = grow(mtp_in_, n * 2 * dim);  // [n, 2 dim]
  embed_with(m.embed.empty() ? weights_.embed : m.embed, step.tokens.data(), n, x);
  for (int64_t i = 0; i < n; ++i) {
    if (positions_[i] == 0)
      std::fill_n(x + i * dim, dim, 0.0f);  // trained with a zero embedding there
    rms_norm(x + i * dim, m.enorm.data(), 1, dim, 1e-6f, in + i * 2 * dim);
    rms_norm(hidden + i * dim, m.hnorm.data(), 1, dim, 1e-6f, in + i * 2 * dim + dim);
  }
  linear(kernels_, in, n, m.eh_proj, h, pool_);  // every rank holds eh_proj whole: no collective
  rope_.prepare(positions_);
  const LayerWeights& lw = m.block;
  rms_norm(h, lw.attn_norm.data(), n, dim, 1e-6f, x);
  mla_forward(ctx, lw.attn, /*layer=*/0, x, step, mtp_cache, rope_, scratch_, y);
  for (int64_t i = 0; i < n * dim; ++i) h[i] += y[i];
  rms_norm(h, lw.ffn_norm.data(), n, dim, 1e-6f, x);
  if (lw.is_moe)
    moe_forward(ctx, lw.moe, x, n, scratch_, y);
  else
    mlp_forward(ctx, lw.mlp, x, n, /*reduce=*/true, scratch_, y);
  for (int64_t i = 0; i < n * dim; ++i) h[i] += y[i];
  for (const SeqChunk& c : step.chunks) mtp_cache.set_length(c.seq, c.start_pos + c.n_tokens);
  const int64_t n_logits = step.logit_rows();
  float* last = grow(last_, n_logits * dim);  // [n_logits, dim]
  norm_logit_rows(step, h, m.head_norm, last);
  if (step.want_hidden) {
    output.hidden.resize(static_cast<size_t>(step.hidden_rows() * dim));
    norm_logit_rows(step, h, m.head_norm, output.hidden.data(), /*hidden_rows=*/true);
  }
  if (step.want_logits)
    head_logits(last, n_logits, m.head.empty() ? weights_.head : m.head, step.gather_logits,
                output);
  else
    output.logits.clear();
}

}  // namespace dsinfer
