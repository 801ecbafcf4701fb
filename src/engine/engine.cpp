#include "engine/engine.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "engine/engine_request.h"
#include "engine/scheduler.h"
#include "engine/vocab_draw.h"

namespace dsinfer {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    default:
      return "error";
  }
}

Engine::Engine(Transformer& model, KVCache& cache, EngineOptions options)
    : model_(model), cache_(cache), options_(std::move(options)) {
  check(options_.step_tokens >= 1, "engine: step_tokens must be >= 1");
  check(options_.max_running >= 1, "engine: max_running must be >= 1");
  if (options_.mtp)
    speculator_ = std::make_unique<Speculator>(model_, cache_, options_.draft_tokens);
  if (options_.prefix_cache)
    prefix_ = std::make_unique<PrefixCache>(cache_, speculator_ ? &speculator_->cache() : nullptr);
  check(!options_.mtp_auto || options_.mtp, "engine: mtp_auto needs mtp");
  check(options_.draft_tokens >= 1, "engine: draft_tokens must be >= 1");
  channel_ = RankChannel(options_.ranks ? options_.ranks : &model_.comm());
}

void Engine::check_request(const std::vector<int32_t>& prompt, const SamplingParams& params) const {
  const ModelConfig& c = model_.config();
  check(!prompt.empty(), "the prompt is empty");
  check(static_cast<int64_t>(prompt.size()) <= c.max_seq_len, "Prompt length (", prompt.size(),
        " tokens) exceeds model maximum sequence length (max_seq_len=", c.max_seq_len, ")");
  for (int32_t t : prompt)
    check(t >= 0 && t < c.vocab_size, "the prompt holds token id ", t,
          " outside the vocabulary [0, ", c.vocab_size, ")");
  check_sampling(params);
}

RequestId Engine::submit(std::vector<int32_t> prompt, const SamplingParams& params,
                         RequestEvents events) {
  check(leader(), "engine: rank ", channel_.rank(), " follows rank 0 and takes no submissions");
  check_request(prompt, params);
  check(!events.on_logits || params.prompt_logits || params.token_logits,
        "engine: on_logits needs params.prompt_logits or params.token_logits");
  auto r = std::make_unique<Request>();
  r->prompt = std::move(prompt);
  r->params = params;
  r->events = std::move(events);
  r->constraint = make_constraint(params);  // outside the lock: compiling a grammar takes a while
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

Engine::~Engine() {
  // unwinding on rank 0 (a front end's error between steps): release the followers
  channel_.abort_run("rank 0 stopped in the middle of a run (its own error says why)");
}

bool Engine::idle() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return submitted_.empty() && waiting_.empty() && running_.empty();
}

void Engine::run_until_idle() {
  while (step()) {
  }
  pause();
}

void Engine::pause() {
  check(leader(), "engine: pause() and stop() are rank 0's");
  channel_.send_kind(StepOrders::Kind::kPause);
}

void Engine::stop() {
  check(leader(), "engine: pause() and stop() are rank 0's");
  channel_.send_kind(StepOrders::Kind::kStop);
}

bool Engine::follow() {
  check(!leader(), "engine: follow() is for ranks other than 0");
  for (;;) {
    const StepOrders orders = channel_.receive();
    switch (orders.kind) {
      case StepOrders::Kind::kPause:
        return true;
      case StepOrders::Kind::kStop:
        return false;
      case StepOrders::Kind::kAbort:
        fail("rank 0 failed: ", orders.reason);
      case StepOrders::Kind::kStep:
        apply_orders(orders);
        run_step();
        break;
    }
  }
}

void Engine::run_all(std::vector<Pending> requests) {
  // every rank checks the same list, so a bad request fails everywhere before anyone waits
  for (const Pending& p : requests) check_request(p.prompt, p.params);
  // a request that ends in error (it can never fit the cache) is this call's Error, on every rank
  std::string first_error;
  for (Pending& p : requests) {
    p.events.on_finish = [&first_error, then = std::move(p.events.on_finish)](
                             FinishReason reason, const std::string& e) {
      if (reason == FinishReason::kError && first_error.empty()) first_error = e;
      if (then) then(reason, e);
    };
  }
  run_all_events(requests);
  check(first_error.empty(), first_error);
}

void Engine::run_all_events(std::vector<Pending>& requests) {
  if (leader()) {
    for (Pending& p : requests) submit(std::move(p.prompt), p.params, std::move(p.events));
    run_until_idle();
    return;
  }
  // rank 0 numbers them from the same next id
  const RequestId first = next_id_;
  auto saved = std::move(options_.follower_events);
  options_.follower_events = [&](RequestId id) {
    const RequestId i = id - first;
    return i >= 0 && i < static_cast<RequestId>(requests.size()) ? requests[i].events
                                                                 : RequestEvents{};
  };
  try {
    follow();
  } catch (...) {
    options_.follower_events = std::move(saved);
    throw;
  }
  options_.follower_events = std::move(saved);
}

void Engine::drop_prefix_cache() {
  if (prefix_) prefix_->clear();
}

std::unique_ptr<TokenConstraint> Engine::make_constraint(const SamplingParams& params) const {
  if (params.grammar.kind == OutputGrammar::Kind::kNone) return nullptr;
  check(static_cast<bool>(options_.make_constraint),
        "structured output (a grammar) is not available in this front end");
  return options_.make_constraint(params);
}

int32_t Engine::token_at(const Request& r, int64_t pos) {
  const int64_t n = static_cast<int64_t>(r.prompt.size());
  return pos < n ? r.prompt[pos] : r.generated[pos - n];
}

void Engine::take_leader_orders() {
  std::vector<RequestId> cancelled;
  StepOrders orders;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    while (!submitted_.empty()) {
      Request& r = *submitted_.front();
      if (!channel_.alone()) orders.submissions.push_back({r.id, r.prompt, r.params});
      waiting_.push_back(std::move(submitted_.front()));
      submitted_.pop_front();
    }
    cancelled.swap(cancelled_);
  }
  // whether this step's MTP drafts for the next one (timings differ between ranks: rank 0's
  // decide for all); the next step has about as many decoding sequences as this one
  int64_t decoding = 0;
  for (auto& r : running_) decoding += !r->prefilling();
  draft_ = speculator_ && (!options_.mtp_auto || draft_policy_.should_draft(decoding));
  if (!channel_.alone()) {
    orders.cancels = cancelled;
    orders.draft = draft_;
    channel_.send(orders);
  }
  apply_cancels(cancelled);
}

void Engine::apply_orders(const StepOrders& orders) {
  for (const Submission& s : orders.submissions) {
    auto r = std::make_unique<Request>();
    r->id = s.id;
    r->prompt = s.prompt;
    r->params = s.params;
    r->constraint = make_constraint(s.params);  // rank 0 made the same one in submit()
    if (options_.follower_events) r->events = options_.follower_events(s.id);
    next_id_ = s.id + 1;
    waiting_.push_back(std::move(r));
  }
  draft_ = orders.draft;
  apply_cancels(orders.cancels);
}

void Engine::apply_cancels(const std::vector<RequestId>& cancelled) {
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

void Engine::admit() {
  KVCache* mtp_cache =
      speculator_ ? &speculator_->cache() : nullptr;  // mirrors cache_ block for block
  // first come, first served: a request that does not fit waits, and so do the ones behind it
  while (!waiting_.empty() && static_cast<int>(running_.size()) < options_.max_running) {
    Request& r = *waiting_.front();
    // a sequence may grow to its prompt plus max_new_tokens, within max_seq_len; the last token
    // generated is never fed back, so it needs no position
    const int64_t prompt_len = static_cast<int64_t>(r.prompt.size());
    r.capacity =
        std::min<int64_t>(model_.config().max_seq_len, prompt_len + r.params.max_new_tokens);
    if (r.capacity <= prompt_len && !r.params.prompt_logits) {
      // no room for a token: max_new_tokens 0, or the prompt already fills max_seq_len
      finish(r, FinishReason::kLength);
      waiting_.pop_front();
      continue;
    }
    const int64_t blocks = KVCache::blocks_for(r.capacity);
    if (blocks > cache_.total_blocks()) {  // it could never fit, whatever finishes
      finish(r, FinishReason::kError,
             "the prompt and its max_new_tokens need " + std::to_string(r.capacity) +
                 " cache positions; the KV cache holds " +
                 std::to_string(cache_.budget_positions()) + " (raise --kv-cache-tokens)");
      waiting_.pop_front();
      continue;
    }
    // the longest cached prefix (at most prompt_len - 1 positions, so that a logit row is left to
    // compute; none for a request that wants every prompt position's logits)
    PrefixCache::Match match;
    if (prefix_ && !r.params.prompt_logits) match = prefix_->lookup(r.prompt, prompt_len - 1);
    // its blocks are held while room is made, so that the eviction leaves them
    auto hold = [&](bool on) {
      for (BlockId b : match.blocks) on ? cache_.retain_block(b) : cache_.release_block(b);
      for (BlockId b : match.mtp_blocks)
        on ? mtp_cache->retain_block(b) : mtp_cache->release_block(b);
      if (match.copy_from >= 0)
        on ? cache_.retain_block(match.copy_from) : cache_.release_block(match.copy_from);
      if (match.mtp_copy_from >= 0)
        on ? mtp_cache->retain_block(match.mtp_copy_from)
           : mtp_cache->release_block(match.mtp_copy_from);
    };
    hold(true);
    const int64_t needed = blocks - static_cast<int64_t>(match.blocks.size());
    auto fits = [&] {
      return cache_.free_blocks() >= needed && (!mtp_cache || mtp_cache->free_blocks() >= needed);
    };
    if (!fits() && prefix_ && !prefix_->make_room(needed) && match.copy_from >= 0) {
      // the block copied from may be what is missing: without it
      hold(false);
      match.copy_from = match.mtp_copy_from = -1;
      match.copy_positions = 0;
      hold(true);
      prefix_->make_room(needed);
    }
    if (!fits()) {
      hold(false);
      if (!running_.empty()) break;  // backpressure: wait for running sequences to finish
      finish(r, FinishReason::kError,
             "the prompt and its max_new_tokens need " + std::to_string(r.capacity) +
                 " cache positions; " + std::to_string(cache_.free_positions()) +
                 " of the KV cache's " + std::to_string(cache_.budget_positions()) +
                 " are free (raise --kv-cache-tokens)");
      waiting_.pop_front();
      continue;
    }
    r.seq = cache_.create_sharing(match.blocks, match.copy_from, match.copy_positions, r.capacity);
    if (mtp_cache)
      r.spec.mtp_seq = mtp_cache->create_sharing(match.mtp_blocks, match.mtp_copy_from,
                                                 match.copy_positions, r.capacity);
    hold(false);
    const int64_t shared = match.positions();
    r.path = std::move(match.path);
    r.spec.mtp_indexed = speculator_ ? static_cast<int64_t>(r.path.size()) : 0;
    r.cached = shared;
    r.spec.mtp_cached = shared;
    stats_.reused_tokens += shared;
    if (r.events.on_start) r.events.on_start(shared);
    stats_.prompt_tokens += static_cast<int64_t>(r.prompt.size());
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
}

void Engine::index_blocks(Request& r) {
  if (!prefix_ || r.seq < 0) return;
  const int64_t settled = std::min(r.cached, cache_.length(r.seq));
  std::vector<int32_t> tokens(static_cast<size_t>(kKVBlock));
  while ((static_cast<int64_t>(r.path.size()) + 1) * kKVBlock <= settled) {
    const int64_t k = static_cast<int64_t>(r.path.size());
    for (int64_t j = 0; j < kKVBlock; ++j)
      tokens[static_cast<size_t>(j)] = token_at(r, k * kKVBlock + j);
    r.path.push_back(prefix_->add_block(k == 0 ? kPrefixRoot : r.path.back(), tokens, r.seq, k));
  }
  if (!speculator_ || r.spec.mtp_seq < 0) return;
  // the MTP entry at the block's last position took the token after the block
  const int64_t mtp_settled =
      std::min(r.spec.mtp_cached, speculator_->cache().length(r.spec.mtp_seq));
  while (r.spec.mtp_indexed < static_cast<int64_t>(r.path.size()) &&
         (r.spec.mtp_indexed + 1) * kKVBlock <= mtp_settled) {
    const int64_t k = r.spec.mtp_indexed++;
    prefix_->add_mtp_block(r.path[static_cast<size_t>(k)], r.spec.mtp_seq, k,
                           token_at(r, (k + 1) * kKVBlock));
  }
}

void Engine::retire(Request& r, bool keep) {
  if (keep && prefix_) {
    index_blocks(r);
    prefix_->touch(r.path);
    // the partial last block, for this conversation's next turn
    const int64_t length = std::min(r.cached, cache_.length(r.seq));
    const int64_t first = static_cast<int64_t>(r.path.size()) * kKVBlock;
    if (length > first) {
      std::vector<int32_t> tail;
      for (int64_t p = first; p < length; ++p) tail.push_back(token_at(r, p));
      const int64_t known = static_cast<int64_t>(r.prompt.size() + r.generated.size());
      int64_t mtp_positions = 0;
      if (r.spec.mtp_seq >= 0 && r.spec.mtp_indexed == static_cast<int64_t>(r.path.size()))
        mtp_positions = std::clamp<int64_t>(
            std::min(r.spec.mtp_cached, speculator_->cache().length(r.spec.mtp_seq)) - first, 0,
            length - first);
      prefix_->add_tail(r.path.empty() ? kPrefixRoot : r.path.back(), tail, r.seq,
                        static_cast<int64_t>(r.path.size()), r.spec.mtp_seq, mtp_positions,
                        length < known ? token_at(r, length) : -1);
    }
  }
  cache_.release(r.seq);
  if (r.spec.mtp_seq >= 0) speculator_->cache().release(r.spec.mtp_seq);
  r.seq = -1;
  r.spec.mtp_seq = -1;
}

void Engine::finish(Request& r, FinishReason reason, const std::string& error) {
  r.done = true;
  // its blocks stay in the prefix index for reuse (its positions hold the prompt and all but the
  // last generated token), unless it ended badly
  if (r.seq >= 0) retire(r, reason != FinishReason::kError);
  if (r.events.on_finish) r.events.on_finish(reason, error);
}

}  // namespace dsinfer
