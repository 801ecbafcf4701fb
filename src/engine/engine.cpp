#include "engine/engine.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"

namespace dsinfer {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    default: return "error";
  }
}

struct Engine::Request {
  RequestId id = 0;
  std::vector<int32_t> prompt;
  SamplingParams params;
  RequestEvents events;
  SeqId seq = -1;                  // its cache sequence once admitted
  int64_t capacity = 0;            // positions it may reach
  int64_t cached = 0;              // positions in its cache (prompt prefix, then generated tokens)
  std::vector<int32_t> generated;  // completion tokens so far (the last one not yet in the cache)
  bool done = false;
  bool prefilling() const { return cached < static_cast<int64_t>(prompt.size()); }
};

Engine::Engine(Transformer& model, KVCache& cache, EngineOptions options)
    : model_(model), cache_(cache), options_(options) {
  check(options_.step_tokens >= 1, "engine: step_tokens must be >= 1");
  check(options_.max_running >= 1, "engine: max_running must be >= 1");
}

RequestId Engine::submit(std::vector<int32_t> prompt, const SamplingParams& params, RequestEvents events) {
  const ModelConfig& c = model_.config();
  check(!prompt.empty(), "the prompt is empty");
  check(static_cast<int64_t>(prompt.size()) <= c.max_seq_len, "Prompt length (", prompt.size(),
        " tokens) exceeds model maximum sequence length (max_seq_len=", c.max_seq_len, ")");
  for (int32_t t : prompt)
    check(t >= 0 && t < c.vocab_size, "the prompt holds token id ", t, " outside the vocabulary [0, ", c.vocab_size, ")");
  check_sampling(params);
  auto r = std::make_unique<Request>();
  r->prompt = std::move(prompt);
  r->params = params;
  r->events = std::move(events);
  // a sequence may grow to its prompt plus max_new_tokens, within max_seq_len; the last token
  // generated is never fed back, so it needs no position
  r->capacity = std::min<int64_t>(c.max_seq_len, static_cast<int64_t>(r->prompt.size()) + params.max_new_tokens);
  std::lock_guard<std::mutex> lock(mutex_);
  r->id = next_id_++;
  const RequestId id = r->id;
  submitted_.push_back(std::move(r));
  return id;
}

void Engine::cancel(RequestId id) {
  std::lock_guard<std::mutex> lock(mutex_);
  cancelled_.push_back(id);
}

Engine::~Engine() = default;

bool Engine::idle() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return submitted_.empty() && waiting_.empty() && running_.empty();
}

void Engine::run_until_idle() {
  while (step()) {
  }
}

void Engine::drop_retained() {
  for (const Retained& r : retained_) cache_.release(r.seq);
  retained_.clear();
}

void Engine::take_submissions() {
  std::vector<RequestId> cancelled;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    while (!submitted_.empty()) {
      waiting_.push_back(std::move(submitted_.front()));
      submitted_.pop_front();
    }
    cancelled.swap(cancelled_);
  }
  for (RequestId id : cancelled) {
    for (auto& r : waiting_)
      if (r->id == id && !r->done) finish(*r, FinishReason::kCancelled);
    for (auto& r : running_)
      if (r->id == id && !r->done) finish(*r, FinishReason::kCancelled);
  }
  auto gone = [](const std::unique_ptr<Request>& r) { return r->done; };
  waiting_.erase(std::remove_if(waiting_.begin(), waiting_.end(), gone), waiting_.end());
  running_.erase(std::remove_if(running_.begin(), running_.end(), gone), running_.end());
}

int Engine::best_retained(const std::vector<int32_t>& prompt, int64_t& shared) const {
  int best = -1;
  shared = 0;
  for (size_t i = 0; i < retained_.size(); ++i) {
    const auto& tokens = retained_[i].tokens;
    const int64_t limit = std::min<int64_t>(static_cast<int64_t>(tokens.size()), static_cast<int64_t>(prompt.size()) - 1);
    int64_t n = 0;
    while (n < limit && tokens[n] == prompt[n]) ++n;
    if (n > shared) {
      shared = n;
      best = static_cast<int>(i);
    }
  }
  return best;
}

void Engine::admit() {
  // first come, first served: a request that does not fit waits, and so do the ones behind it
  while (!waiting_.empty() && static_cast<int>(running_.size()) < options_.max_running) {
    Request& r = *waiting_.front();
    if (r.capacity <= static_cast<int64_t>(r.prompt.size())) {
      // no room for a token: max_new_tokens 0, or the prompt already fills max_seq_len
      finish(r, FinishReason::kLength);
      waiting_.pop_front();
      continue;
    }
    int64_t shared = 0;
    int reuse = best_retained(r.prompt, shared);
    if (reuse >= 0 && cache_.capacity(retained_[reuse].seq) >= r.capacity) {
      // take the retained sequence over: its first `shared` positions are this prompt's
      r.seq = retained_[reuse].seq;
      cache_.truncate(r.seq, shared);
      retained_.erase(retained_.begin() + reuse);
    } else {
      // make room by dropping retained sequences, oldest first, the one to copy from last
      while (!cache_.can_reserve(r.capacity) && !retained_.empty()) {
        const size_t victim = (reuse == 0 && retained_.size() > 1) ? 1 : 0;
        if (static_cast<int>(victim) == reuse) {  // the one to copy from is the last left
          reuse = -1;
          shared = 0;
        }
        cache_.release(retained_[victim].seq);
        retained_.erase(retained_.begin() + static_cast<int64_t>(victim));
        if (reuse > static_cast<int>(victim)) --reuse;
      }
      if (!cache_.can_reserve(r.capacity)) {
        if (!running_.empty()) break;  // backpressure: wait for running sequences to finish
        finish(r, FinishReason::kError,
               "the prompt and its max_new_tokens need " + std::to_string(r.capacity) +
                   " cache positions; the KV cache holds " + std::to_string(cache_.budget_positions()) +
                   " (raise --kv-cache-tokens)");
        waiting_.pop_front();
        continue;
      }
      if (reuse >= 0 && shared > 0) {
        r.seq = cache_.fork(retained_[reuse].seq, shared, r.capacity);
      } else {
        r.seq = cache_.create(r.capacity);
        shared = 0;
      }
    }
    r.cached = shared;
    stats_.reused_tokens += shared;
    stats_.prompt_tokens += static_cast<int64_t>(r.prompt.size());
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
}

void Engine::finish(Request& r, FinishReason reason, const std::string& error) {
  r.done = true;
  if (r.seq >= 0) {
    // keep the sequence for prefix reuse (its positions hold the prompt and all but the last
    // generated token), unless nothing is to be kept or it ended badly
    const int64_t length = cache_.length(r.seq);
    if (options_.retained_sequences > 0 && reason != FinishReason::kError && length > 0) {
      Retained kept{r.seq, r.prompt};
      kept.tokens.insert(kept.tokens.end(), r.generated.begin(), r.generated.end());
      kept.tokens.resize(static_cast<size_t>(length));
      retained_.push_back(std::move(kept));
      while (static_cast<int>(retained_.size()) > options_.retained_sequences) {
        cache_.release(retained_.front().seq);
        retained_.pop_front();
      }
    } else {
      cache_.release(r.seq);
    }
    r.seq = -1;
  }
  if (r.events.on_finish) r.events.on_finish(reason, error);
}

bool Engine::step() {
  take_submissions();
  admit();
  if (running_.empty()) return false;
  // decode rows first (every sequence past its prompt), then prefill chunks in admission order
  Step step;
  std::vector<Request*> in_step;
  for (auto& r : running_)
    if (!r->prefilling()) {
      step.add(r->seq, r->cached, &r->generated.back(), 1);
      in_step.push_back(r.get());
    }
  int64_t budget = std::max<int64_t>(options_.step_tokens - static_cast<int64_t>(in_step.size()), 0);
  // a step always makes prefill progress when nothing decodes
  if (in_step.empty()) budget = std::max<int64_t>(budget, 1);
  bool has_prefill = false;
  for (auto& r : running_) {
    if (!r->prefilling() || budget == 0) continue;
    const int64_t n = std::min<int64_t>(budget, static_cast<int64_t>(r->prompt.size()) - r->cached);
    step.add(r->seq, r->cached, r->prompt.data() + r->cached, n);
    in_step.push_back(r.get());
    budget -= n;
    stats_.prefilled_tokens += n;
    has_prefill = true;
  }
  const double start = now_seconds();
  StepOutput out;
  model_.forward(step, cache_, out);
  (has_prefill ? stats_.prefill_seconds : stats_.decode_seconds) += now_seconds() - start;
  ++stats_.steps;

  const int64_t vocab = model_.config().vocab_size;
  for (size_t i = 0; i < in_step.size(); ++i) {
    Request& r = *in_step[i];
    r.cached += step.chunks[i].n_tokens;
    if (r.prefilling()) continue;  // a prompt chunk that is not the last: its logits are not needed
    const int64_t position = r.cached;  // where the new token will sit
    const int32_t token = static_cast<int32_t>(sample_keyed(out.logits.data() + static_cast<int64_t>(i) * vocab, vocab,
                                                            r.params, position, sample_scratch_));
    const auto& stops = r.params.stop_ids;
    if (std::find(stops.begin(), stops.end(), token) != stops.end()) {
      finish(r, FinishReason::kStop);
      continue;
    }
    r.generated.push_back(token);
    ++stats_.generated_tokens;
    if (r.events.on_token) r.events.on_token(token);
    // the next token would sit past the reservation (max_seq_len): done, as the reference's loop
    if (static_cast<int64_t>(r.generated.size()) >= r.params.max_new_tokens || position + 1 >= r.capacity)
      finish(r, FinishReason::kLength);
  }
  running_.erase(std::remove_if(running_.begin(), running_.end(), [](const auto& r) { return r->done; }),
                 running_.end());
  return true;
}

}  // namespace dsinfer
