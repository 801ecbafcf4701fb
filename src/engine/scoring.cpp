#include "engine/scoring.h"

#include <algorithm>

#include "engine/engine.h"

namespace dsinfer {

void score_sequences(
    Transformer& model, const std::vector<std::vector<int32_t>>& sequences,
    const std::function<void(int sequence, int64_t position, const float* logits)>& on_logits,
    KVDType kv_dtype, int64_t step_tokens) {
  int64_t positions = 0, tokens = 0;
  for (const auto& s : sequences) {
    positions += KVCache::blocks_of(static_cast<int64_t>(s.size()));
    tokens += static_cast<int64_t>(s.size());
  }
  KVCache cache(model.config(), positions, kv_dtype);
  EngineOptions options;
  options.step_tokens = step_tokens > 0 ? step_tokens : std::max<int64_t>(tokens, 1);
  options.max_running = std::max<int>(static_cast<int>(sequences.size()), 1);
  options.prefix_cache = false;
  Engine engine(model, cache, options);
  SamplingParams params;
  params.max_new_tokens = 0;
  params.prompt_logits = true;
  std::vector<Engine::Pending> requests;
  for (size_t i = 0; i < sequences.size(); ++i) {
    RequestEvents events;
    const int index = static_cast<int>(i);
    events.on_logits = [&on_logits, index](int64_t position, const float* row) {
      on_logits(index, position, row);
    };
    requests.push_back({sequences[i], params, std::move(events)});
  }
  engine.run_all(std::move(requests));
}

}  // namespace dsinfer
