#include "engine/generate.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "engine/engine.h"

namespace dsinfer {

void check_prompts(const ModelConfig& c, const std::vector<std::vector<int32_t>>& prompts,
                   bool lockstep) {
  check(!prompts.empty(), "no prompts given");
  check(!lockstep || static_cast<int>(prompts.size()) <= c.max_batch_size, "Number of prompts (",
        prompts.size(), ") exceeds maximum batch size (max_batch_size=", c.max_batch_size, ")");
  for (size_t i = 0; i < prompts.size(); ++i) {
    check(!prompts[i].empty(), "prompt ", i, " is empty");
    check(static_cast<int64_t>(prompts[i].size()) <= c.max_seq_len, "Prompt ", i, " length (",
          prompts[i].size(),
          " tokens) exceeds model maximum sequence length (max_seq_len=", c.max_seq_len, ")");
    for (int32_t t : prompts[i])
      check(t >= 0 && t < c.vocab_size, "prompt ", i, " holds token id ", t,
            " outside the vocabulary [0, ", c.vocab_size, ")");
  }
}

std::vector<std::vector<int32_t>> generate(Transformer& model,
                                           const std::vector<std::vector<int32_t>>& prompts,
                                           const GenerateOptions& options, Sampler& sampler,
                                           const TokenCallback& on_token, GenerateStats* stats) {
  const ModelConfig& c = model.config();
  const bool lockstep = options.max_running <= 0;
  check_prompts(c, prompts, lockstep);
  check(options.max_new_tokens >= 0, "max_new_tokens must be >= 0");
  check(options.step_tokens >= 0, "step_tokens must be >= 0");
  const int batch = static_cast<int>(prompts.size());
  // The reference's lockstep policy: every prompt admitted at once and prefilled whole in the
  // first step, then all rows decode together. (Its rows that already hit eos keep decoding
  // there; here they leave. Batch invariance makes the tokens the same either way.)
  // Continuous: room for the max_running largest sequences; the rest wait for their turn.
  std::vector<int64_t> reserved;
  int64_t prompt_tokens = 0;
  for (const auto& p : prompts) {
    const int64_t capacity =
        std::min<int64_t>(c.max_seq_len, static_cast<int64_t>(p.size()) + options.max_new_tokens);
    reserved.push_back(KVCache::blocks_of(capacity));
    prompt_tokens += static_cast<int64_t>(p.size());
  }
  const int running = lockstep ? batch : std::min(options.max_running, batch);
  std::sort(reserved.rbegin(), reserved.rend());
  int64_t budget = 0;
  for (int i = 0; i < running; ++i) budget += reserved[static_cast<size_t>(i)];
  KVCache cache(c, budget, options.kv_dtype);
  EngineOptions engine_options;
  engine_options.step_tokens = lockstep                  ? std::max<int64_t>(prompt_tokens, 1)
                               : options.step_tokens > 0 ? options.step_tokens
                                                         : EngineOptions{}.step_tokens;
  engine_options.max_running = running;
  engine_options.prefix_cache = false;
  engine_options.mtp = options.mtp;
  engine_options.mtp_auto = options.mtp_auto;
  engine_options.draft_tokens = options.draft_tokens;
  Engine engine(model, cache, engine_options);
  std::vector<std::vector<int32_t>> completions(batch);
  SamplingParams params;
  params.temperature = options.temperature;
  params.max_new_tokens = options.max_new_tokens;
  if (options.eos_id >= 0) params.stop_ids = {options.eos_id};
  params.seed = sampler.seed();
  std::vector<Engine::Pending> requests;
  for (int b = 0; b < batch; ++b) {
    RequestEvents events;
    events.on_token = [&, b](int32_t token) {
      completions[b].push_back(token);
      if (on_token) on_token(b, token);
    };
    requests.push_back({prompts[b], params, std::move(events)});
  }
  // every rank gets the completions: the followers sample the same tokens
  engine.run_all(std::move(requests));
  if (stats) {
    stats->prompt_tokens = prompt_tokens;
    stats->generated_tokens = engine.stats().generated_tokens;
    stats->prefill_seconds = engine.stats().prefill_seconds;
    stats->decode_seconds = engine.stats().decode_seconds;
    stats->drafted = engine.stats().drafted;
    stats->accepted = engine.stats().accepted;
    stats->decode_row_steps = engine.stats().decode_row_steps;
    stats->decoded_tokens = engine.stats().decoded_tokens;
  }
  return completions;
}

}  // namespace dsinfer
