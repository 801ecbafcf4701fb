#include "model/forward_observer.h"

#include "core/error.h"
#include "io/safetensors.h"

namespace dsinfer {

const char* forward_part_name(ForwardPart part) {
  switch (part) {
    case ForwardPart::kAttention:
      return "attention";
    case ForwardPart::kDenseMlp:
      return "dense mlp";
    case ForwardPart::kMoe:
      return "moe";
    case ForwardPart::kHead:
      return "head";
    default:
      return "other";
  }
}

namespace {
int64_t matrix_macs(const WeightMatrix& m) { return m.empty() ? 0 : m.rows * m.cols; }
int64_t matrix_bytes(const WeightMatrix& m) { return m.empty() ? 0 : m.bytes(); }
int64_t mlp_macs(const MlpWeights& m) {
  return matrix_macs(m.w1) + matrix_macs(m.w2) + matrix_macs(m.w3);
}
}  // namespace

void ForwardStatsCounter::begin(const Step& step) {
  stats_ = {};
  // one embedding row per token of this rank's vocabulary block
  const WeightMatrix& e = weights_.embed;
  const int64_t row_bytes = e.row_bytes_read();
  for (int32_t token : step.tokens) {
    const int64_t local = static_cast<int64_t>(token) - plan_.vocab_begin;
    if (local >= 0 && local < plan_.vocab_local) stats_.add(ForwardPart::kOther, row_bytes, 0);
  }
  // the head, for the rows that asked for logits only
  stats_.add(ForwardPart::kHead, matrix_bytes(weights_.head),
             step.logit_rows() * matrix_macs(weights_.head));
}

void ForwardStatsCounter::part_done(const ForwardEvent& event) {
  stats_.part(event.part).seconds += event.seconds;
  if (!event.weights) return;
  const ModelConfig& c = config_;
  const Step& step = *event.step;
  const int64_t n = static_cast<int64_t>(step.tokens.size());
  const LayerWeights& lw = *event.weights;
  switch (event.part) {
    case ForwardPart::kAttention: {
      // (wkv_b's multiply-adds are attention's own, counted below)
      for_each_attention_matrix(lw.attn, [&](const std::string& name, const WeightMatrix& m) {
        stats_.add(ForwardPart::kAttention, m.bytes(),
                   name != "attn.wkv_b" ? n * matrix_macs(m) : 0);
      });
      // absorbed attention per token and local head (attention.cpp): wkv_b's key half folded into
      // the query (nope x lora), its value half applied to the attended latent (v x lora), and per
      // visible cache position a score (lora + rope) and a value accumulation (lora)
      const int64_t heads = plan_.n_local_heads, lora = c.kv_lora_rank;
      int64_t keys = 0;
      for (const SeqChunk& chunk : step.chunks)
        keys += chunk.n_tokens * chunk.start_pos + chunk.n_tokens * (chunk.n_tokens + 1) / 2;
      stats_.add(ForwardPart::kAttention, 0,
                 heads * (n * (c.qk_nope_head_dim + c.v_head_dim) * lora +
                          keys * (2 * lora + c.qk_rope_head_dim)));
      break;
    }
    case ForwardPart::kDenseMlp:
      stats_.add(ForwardPart::kDenseMlp, mlp_bytes(lw.mlp), n * mlp_macs(lw.mlp));
      break;
    case ForwardPart::kMoe: {
      const MoeWeights& moe = lw.moe;
      stats_.add(ForwardPart::kMoe, matrix_bytes(moe.gate) + mlp_bytes(moe.shared),
                 n * (matrix_macs(moe.gate) + mlp_macs(moe.shared)));
      expert_tokens_.assign(moe.experts.size(), 0);
      for (int64_t i = 0; i < n * c.n_activated_experts; ++i) {
        const int64_t local = event.experts[i] - plan_.experts_begin;
        if (local >= 0 && local < static_cast<int64_t>(moe.experts.size())) ++expert_tokens_[local];
      }
      for (size_t e = 0; e < moe.experts.size(); ++e)
        if (expert_tokens_[e] > 0)
          stats_.add(ForwardPart::kMoe, mlp_bytes(moe.experts[e]),
                     expert_tokens_[e] * mlp_macs(moe.experts[e]));
      break;
    }
    default:
      break;
  }
}

void TensorDump::tensor(const std::string& name, const float* data, int64_t rows, int64_t cols) {
  tensors_[name] = Tensor{rows, cols, std::vector<float>(data, data + rows * cols)};
}

void TensorDump::write(const std::string& path) const {
  check(!tensors_.empty(), "dump: no forward call has run");
  std::vector<SafetensorsWriter::Entry> entries;
  for (const auto& [name, t] : tensors_) entries.push_back({name, DType::kF32, {t.rows, t.cols}});
  SafetensorsWriter out(path, entries, {{"format", "dsinfer intermediates"}});
  for (const auto& [name, t] : tensors_)
    out.write(name, t.data.data(), t.data.size() * sizeof(float));
  out.finish();
}

}  // namespace dsinfer
