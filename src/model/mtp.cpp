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
  begin_pass(step);
  const ForwardContext ctx{config_, plan_, collectives_, pool_, kernels_, rope_, scratch_};
  float* x = x_.data();                    // [n, dim]
  float* in = grow(mtp_in_, n * 2 * dim);  // [n, 2 dim]
  embed_with(m.embed.empty() ? weights_.embed : m.embed, step.tokens.data(), n, x);
  for (int64_t i = 0; i < n; ++i) {
    if (positions_[i] == 0)
      std::fill_n(x + i * dim, dim, 0.0f);  // trained with a zero embedding there
    rms_norm(x + i * dim, m.enorm.data(), 1, dim, 1e-6f, in + i * 2 * dim);
    rms_norm(hidden + i * dim, m.hnorm.data(), 1, dim, 1e-6f, in + i * 2 * dim + dim);
  }
  // every rank holds eh_proj whole: no collective
  linear(kernels_, in, n, m.eh_proj, h_.data(), pool_);  // -> h [n, dim]
  rope_.prepare(positions_);
  tensor("mtp.eh_proj", h_.data(), n, dim);
  part_done(ForwardPart::kOther, step);
  block_forward(ctx, m.block, /*layer=*/config_.n_layers, step, mtp_cache);
  for (const SeqChunk& c : step.chunks) mtp_cache.set_length(c.seq, c.start_pos + c.n_tokens);
  finish_pass(step, m.head_norm, m.head.empty() ? weights_.head : m.head, output);
}

}  // namespace dsinfer
