#include "engine/generate.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"

namespace dsinfer {

void check_prompts(const ModelConfig& c, const std::vector<std::vector<int32_t>>& prompts) {
  check(!prompts.empty(), "no prompts given");
  check(static_cast<int>(prompts.size()) <= c.max_batch_size, "Number of prompts (", prompts.size(),
        ") exceeds maximum batch size (max_batch_size=", c.max_batch_size, ")");
  for (size_t i = 0; i < prompts.size(); ++i) {
    check(!prompts[i].empty(), "prompt ", i, " is empty");
    check(static_cast<int64_t>(prompts[i].size()) <= c.max_seq_len, "Prompt ", i, " length (",
          prompts[i].size(), " tokens) exceeds model maximum sequence length (max_seq_len=",
          c.max_seq_len, ")");
    for (int32_t t : prompts[i])
      check(t >= 0 && t < c.vocab_size, "prompt ", i, " holds token id ", t,
            " outside the vocabulary [0, ", c.vocab_size, ")");
  }
}

std::vector<std::vector<int32_t>> generate(Transformer& model, const std::vector<std::vector<int32_t>>& prompts,
                                           const GenerateOptions& options, Sampler& sampler,
                                           const TokenCallback& on_token, GenerateStats* stats) {
  const ModelConfig& c = model.config();
  check_prompts(c, prompts);
  check(options.max_new_tokens >= 0, "max_new_tokens must be >= 0");
  const int batch = static_cast<int>(prompts.size());
  int min_len = c.max_seq_len, max_len = 0;
  for (const auto& p : prompts) {
    min_len = std::min<int>(min_len, static_cast<int>(p.size()));
    max_len = std::max<int>(max_len, static_cast<int>(p.size()));
  }
  const int total_len = std::min(c.max_seq_len, options.max_new_tokens + max_len);

  // tokens [batch, total_len]; -1 marks positions still to generate
  std::vector<int32_t> tokens(static_cast<size_t>(batch) * total_len, -1);
  for (int b = 0; b < batch; ++b) std::copy(prompts[b].begin(), prompts[b].end(), tokens.begin() + b * total_len);
  KVCache cache(c, batch, total_len);
  std::vector<float> logits(static_cast<size_t>(batch) * c.vocab_size);
  std::vector<int32_t> step_tokens;
  std::vector<bool> finished(batch, false);

  double t0 = now_seconds(), t_prefill = t0;
  int prev_pos = 0;
  for (int cur_pos = min_len; cur_pos < total_len; ++cur_pos) {
    const int seqlen = cur_pos - prev_pos;
    step_tokens.resize(static_cast<size_t>(batch) * seqlen);
    for (int b = 0; b < batch; ++b)
      std::copy_n(tokens.begin() + b * total_len + prev_pos, seqlen, step_tokens.begin() + b * seqlen);
    model.forward(step_tokens.data(), batch, seqlen, prev_pos, cache, logits.data());
    if (prev_pos == 0) t_prefill = now_seconds();
    bool all_finished = true;
    for (int b = 0; b < batch; ++b) {
      const bool in_prompt = cur_pos < static_cast<int>(prompts[b].size());
      int32_t next = in_prompt ? tokens[b * total_len + cur_pos]
                               : static_cast<int32_t>(sampler.sample(logits.data() + static_cast<int64_t>(b) * c.vocab_size,
                                                                     c.vocab_size, options.temperature));
      tokens[b * total_len + cur_pos] = next;
      if (!in_prompt) {
        // stream only what the completion will hold: up to its first eos, within max_new_tokens
        const bool was_finished = finished[b];
        if (next == options.eos_id) finished[b] = true;
        if (on_token && !was_finished && !finished[b] &&
            cur_pos - static_cast<int>(prompts[b].size()) < options.max_new_tokens)
          on_token(b, next);
      }
      all_finished = all_finished && finished[b];
    }
    prev_pos = cur_pos;
    if (all_finished) break;
  }
  const double t_end = now_seconds();

  std::vector<std::vector<int32_t>> completions(batch);
  int64_t generated = 0;
  for (int b = 0; b < batch; ++b) {
    const int begin = static_cast<int>(prompts[b].size());
    const int end = std::min(total_len, begin + options.max_new_tokens);
    for (int pos = begin; pos < end; ++pos) {
      const int32_t t = tokens[b * total_len + pos];
      if (t == -1 || t == options.eos_id) break;
      completions[b].push_back(t);
    }
    generated += static_cast<int64_t>(completions[b].size());
  }
  if (stats) {
    stats->prompt_tokens = 0;
    for (const auto& p : prompts) stats->prompt_tokens += static_cast<int64_t>(p.size());
    stats->generated_tokens = generated;
    stats->prefill_seconds = t_prefill - t0;
    stats->decode_seconds = t_end - t_prefill;
  }
  return completions;
}

}  // namespace dsinfer
