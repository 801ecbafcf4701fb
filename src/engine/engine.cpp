#include "engine/engine.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "engine/scheduler.h"
#include "engine/vocab_draw.h"

namespace dsinfer {

namespace {
// Positions a sequence's MTP may fall behind while no step drafts (--mtp auto), before it
// catches up anyway: bounds the hidden rows kept, and what prefix reuse loses when it finishes.
constexpr int64_t kMaxPendingMtp = 512;
}  // namespace

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

struct Engine::Request {
  RequestId id = 0;
  std::vector<int32_t> prompt;
  SamplingParams params;
  RequestEvents events;
  SeqId seq = -1;                  // its cache sequence once admitted
  int64_t capacity = 0;            // positions it may reach
  int64_t cached = 0;              // positions in its cache (prompt prefix, then generated tokens)
  std::vector<int32_t> generated;  // completion tokens so far (the last one not yet in the cache)
  Speculation spec;                // with MTP (engine/speculator.h)
  // Its full blocks in the prefix index: path[i] is block i's node (the first ones mapped from the
  // index when it was admitted; spec.mtp_indexed of them have their MTP blocks recorded).
  std::vector<PrefixNodeId> path;
  // Structured output (params.grammar): the grammar's state after the tokens generated, and the
  // mask of the ids it allows next (masked: this draw has one).
  std::unique_ptr<TokenConstraint> constraint;
  std::vector<uint32_t> allowed;
  bool masked = false;
  bool done = false;
  bool prefilling() const { return cached < static_cast<int64_t>(prompt.size()); }
};

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

bool Engine::step() {
  check(leader(), "engine: step() is rank 0's; rank ", channel_.rank(), " follows");
  take_leader_orders();
  return run_step();
}

bool Engine::take_token(Request& r, const float* logits, int32_t token, bool report_logits) {
  if (token == kNoTokenFromNonFiniteLogits) {
    finish(r, FinishReason::kError,
           "the model's logits are not finite (NaN or infinity): the checkpoint's weights or "
           "scales, or its config, overflow");
    return false;
  }
  const int64_t position = r.cached;  // where the new token will sit
  if (report_logits && r.events.on_logits) {
    check(logits != nullptr, "engine: request ", r.id,
          " wants logits rows its step did not gather");
    r.events.on_logits(position - 1, logits);
  }
  if (r.constraint && !r.constraint->accept(token)) {
    // only when the mask allowed nothing the sampling parameters allow (every id -infinity)
    finish(r, FinishReason::kError,
           "structured output: no token the grammar allows here is left (min_tokens or "
           "logit_bias rule out every one, or the grammar admits no answer)");
    return false;
  }
  const auto& stops = r.params.stop_ids;
  if (std::find(stops.begin(), stops.end(), token) != stops.end()) {
    finish(r, FinishReason::kStop);
    return false;
  }
  r.generated.push_back(token);
  ++stats_.generated_tokens;
  if (r.events.on_token) r.events.on_token(token);
  if (r.constraint && r.constraint->complete()) {  // a grammar for a request without stop ids
    finish(r, FinishReason::kStop);
    return false;
  }
  // the next token would sit past the reservation (max_seq_len): done, as the reference's loop
  if (static_cast<int64_t>(r.generated.size()) >= r.params.max_new_tokens ||
      position + 1 >= r.capacity) {
    finish(r, FinishReason::kLength);
    return false;
  }
  return true;
}

int64_t Engine::max_drafts(const Request& r) {
  if (r.constraint) return 0;  // its mask follows the tokens taken, one draw per step
  // draft j (from 1) stands at position cached + j and is worth verifying only while the request
  // may still take token generated + j + 1, within its reservation
  const int64_t by_length = r.params.max_new_tokens - static_cast<int64_t>(r.generated.size()) - 1;
  const int64_t by_room = r.capacity - r.cached - 2;
  return std::max<int64_t>(0, std::min(by_length, by_room));
}

int64_t Engine::usable_drafts(const Request& r) {
  return std::min(static_cast<int64_t>(r.spec.drafts.size()), max_drafts(r));
}

// The step's plan: its chunks, the request of each, and what they hold.
struct Engine::PlannedStep {
  Step step;
  std::vector<Request*> in_step;  // chunk i is in_step[i]'s
  int64_t decode_rows = 0, decode_tokens = 0, prefill_tokens = 0;
  int64_t drafts() const { return decode_tokens - decode_rows; }
};

// The tokens drawn from the step's logits: drawn[draw_of_row[row]] for each row a request draws
// from.
struct Engine::DrawnRows {
  std::vector<int32_t> drawn;
  std::vector<int64_t> draw_of_row;
  int32_t token(int64_t row) const {
    return drawn[static_cast<size_t>(draw_of_row[static_cast<size_t>(row)])];
  }
};

// With MTP, what each sequence's MTP catches up on after the step: positions [mtp_cached,
// cached), each with the token after it and the main hidden state there (its chunk's rows).
struct Engine::MtpCatchUp {
  Step step;
  std::vector<float> hidden;  // [rows, dim]
  std::vector<Request*> requests;
};

bool Engine::run_step() {
  admit();
  if (running_.empty()) return false;
  PlannedStep plan = plan_step();
  stats_.prefilled_tokens += plan.prefill_tokens;
  const double start = now_seconds();
  StepOutput& out = step_output_;  // its buffers kept from step to step (see engine.h)
  model_.forward(plan.step, cache_, out);
  const DrawnRows drawn = draw_rows(plan, out);
  MtpCatchUp catch_up;
  for (size_t i = 0, row = 0, hidden_row = 0, token_row = 0; i < plan.in_step.size(); ++i) {
    const SeqChunk& chunk = plan.step.chunks[i];
    commit_chunk(*plan.in_step[i], chunk, plan, out, drawn, static_cast<int64_t>(row),
                 static_cast<int64_t>(hidden_row), static_cast<int64_t>(token_row), catch_up);
    row += static_cast<size_t>(chunk.all_logits ? chunk.n_tokens : 1);
    hidden_row += static_cast<size_t>(chunk.all_logits || chunk.all_hidden ? chunk.n_tokens : 1);
    token_row += static_cast<size_t>(chunk.n_tokens);
  }
  if (!catch_up.requests.empty()) {
    const double mtp_start = now_seconds();
    std::vector<DraftTarget> targets;
    for (Request* r : catch_up.requests)
      targets.push_back({&r->spec, r->cached, r->prefilling(), max_drafts(*r)});
    speculator_->draft(catch_up.step, catch_up.hidden, targets, draft_);
    stats_.mtp_seconds += now_seconds() - mtp_start;
  }
  record_step(plan, now_seconds() - start, !catch_up.requests.empty());
  for (auto& r : running_)
    if (!r->done) index_blocks(*r);
  running_.erase(
      std::remove_if(running_.begin(), running_.end(), [](const auto& r) { return r->done; }),
      running_.end());
  return true;
}

Engine::PlannedStep Engine::plan_step() {
  // the step's chunks (engine/scheduler.h): every decoding sequence's next token (and with MTP the
  // drafts of the ones after, where they could still be used), then prefill chunks
  const bool mtp = speculator_ != nullptr;
  std::vector<ScheduleEntry> entries;
  for (auto& r : running_)
    entries.push_back({r->cached, static_cast<int64_t>(r->prompt.size()),
                       r->prefilling() ? 0 : usable_drafts(*r)});
  PlannedStep plan;
  plan.step.want_hidden = mtp;  // the MTP reads the main model's hidden state of every row
  for (const ScheduledChunk& c : schedule_step(entries, options_.step_tokens)) {
    Request& r = *running_[c.entry];
    if (c.decode) {
      std::vector<int32_t> tokens = {r.generated.back()};
      tokens.insert(tokens.end(), r.spec.drafts.begin(), r.spec.drafts.begin() + (c.n_tokens - 1));
      plan.step.add(r.seq, c.start, tokens.data(), c.n_tokens, /*all_logits=*/c.n_tokens > 1);
      plan.decode_tokens += c.n_tokens;
      ++plan.decode_rows;
    } else {
      plan.step.add(r.seq, c.start, r.prompt.data() + c.start, c.n_tokens,
                    /*all_logits=*/r.params.prompt_logits);
      plan.prefill_tokens += c.n_tokens;
    }
    plan.step.chunks.back().all_hidden = mtp;
    plan.in_step.push_back(&r);
  }
  // every rank decides alike (from the requests' parameters): whole rows only where a request
  // reads them or its draw needs them
  plan.step.gather_logits =
      std::any_of(plan.in_step.begin(), plan.in_step.end(), [](const Request* r) {
        return r->params.prompt_logits || r->params.token_logits ||
               !race_splits_over_vocab(r->params);
      });
  return plan;
}

Engine::DrawnRows Engine::draw_rows(const PlannedStep& plan, const StepOutput& out) {
  // the token of every row a request draws from, all in one call (one collective when sliced):
  // a decode chunk's rows (the next token, then each draft's successor), a prompt's last row
  std::vector<RowDraw> draws;
  DrawnRows result;
  result.draw_of_row.assign(static_cast<size_t>(plan.step.logit_rows()), -1);
  auto draws_any = [&](const Request& r, const SeqChunk& chunk) {
    return chunk.start_pos + chunk.n_tokens >= static_cast<int64_t>(r.prompt.size()) &&
           r.params.max_new_tokens > 0;
  };
  // structured output: each constrained request's mask for its one draw (no drafts: the prompt's
  // last row or the decode row), computed on the model's threads, idle between forward passes
  std::vector<Request*> masking;
  for (size_t i = 0; i < plan.in_step.size(); ++i)
    if (plan.in_step[i]->constraint && draws_any(*plan.in_step[i], plan.step.chunks[i]))
      masking.push_back(plan.in_step[i]);
  model_.pool().parallel_for(static_cast<int64_t>(masking.size()), [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k)
      masking[k]->masked = masking[k]->constraint->next_allowed(masking[k]->allowed);
  });
  for (size_t i = 0, row = 0; i < plan.in_step.size(); ++i) {
    Request& r = *plan.in_step[i];
    const SeqChunk& chunk = plan.step.chunks[i];
    const int64_t rows = chunk.all_logits ? chunk.n_tokens : 1;
    const bool drawn_here = draws_any(r, chunk);
    // row j holds input position start_pos + n_tokens - rows + j; its token sits one further
    for (int64_t j = r.prefilling() ? rows - 1 : 0; drawn_here && j < rows; ++j) {
      result.draw_of_row[row + j] = static_cast<int64_t>(draws.size());
      // the completion before row j's token: the tokens committed, then (a decode chunk's row j
      // > 0) the drafts it verifies before that row
      const std::span<const int32_t> drafts(r.spec.drafts);
      const TokenHistory history{
          r.prompt, r.generated,
          r.prefilling() ? drafts.first(0) : drafts.first(static_cast<size_t>(j))};
      draws.push_back({static_cast<int64_t>(row + j), &r.params,
                       chunk.start_pos + chunk.n_tokens - rows + j + 1, history,
                       r.masked ? r.allowed.data() : nullptr});
    }
    row += static_cast<size_t>(rows);
  }
  result.drawn =
      draw_tokens(out, model_.config().vocab_size, draws, model_.collectives(), &model_.pool());
  return result;
}

void Engine::commit_chunk(Request& r, const SeqChunk& chunk, const PlannedStep& plan,
                          const StepOutput& out, const DrawnRows& drawn, int64_t first_row,
                          int64_t hidden_row, int64_t token_row, MtpCatchUp& catch_up) {
  const int64_t dim = model_.config().dim;
  const int64_t rows =
      chunk.all_logits ? chunk.n_tokens : 1;  // the chunk's rows of logits: first_row ..
  auto logits_row = [&](int64_t row) {
    return plan.step.gather_logits ? out.logits.data() + row * out.logit_columns : nullptr;
  };
  const bool decoding = !r.prefilling();
  const int64_t generated_before = static_cast<int64_t>(r.generated.size());
  // how many tokens a decode row gave (counted however the row ends)
  struct CountDecoded {
    bool on;
    const Request& r;
    int64_t before;
    int64_t& total;
    ~CountDecoded() {
      if (on) total += static_cast<int64_t>(r.generated.size()) - before;
    }
  } count_decoded{decoding, r, generated_before, stats_.decoded_tokens};
  if (decoding && chunk.n_tokens > 1) {
    // the next token and drafts of the ones after: a draft's cache entry and logits row count
    // only if every token sampled before it agreed with the drafts (the longest agreeing
    // prefix, then the model's own token)
    const std::vector<int32_t> drafts(plan.step.tokens.begin() + token_row + 1,
                                      plan.step.tokens.begin() + token_row + chunk.n_tokens);
    cache_.truncate(r.seq, chunk.start_pos + 1);
    r.cached = chunk.start_pos + 1;
    stats_.drafted += static_cast<int64_t>(drafts.size());
    int accepted = 0;
    bool going =
        take_token(r, logits_row(first_row), drawn.token(first_row), /*report_logits=*/true);
    while (going && accepted < static_cast<int>(drafts.size()) &&
           r.generated.back() == drafts[accepted]) {
      ++accepted;
      cache_.set_length(r.seq, chunk.start_pos + 1 + accepted);
      r.cached = chunk.start_pos + 1 + accepted;
      going = take_token(r, logits_row(first_row + accepted), drawn.token(first_row + accepted),
                         /*report_logits=*/true);
    }
    stats_.accepted += accepted;
    draft_policy_.record_cycle(accepted);
    if (!going) return;
  } else {
    r.cached += chunk.n_tokens;
    if (chunk.all_logits && r.events.on_logits)
      for (int64_t j = 0; j < rows; ++j)
        r.events.on_logits(chunk.start_pos + j, logits_row(first_row + j));
    if (!r.prefilling()) {
      if (static_cast<int64_t>(r.generated.size()) >= r.params.max_new_tokens) {
        finish(r, FinishReason::kLength);  // max_new_tokens 0: the prompt was only scored
        return;
      }
      const int64_t last = first_row + rows - 1;
      if (!take_token(r, logits_row(last), drawn.token(last), /*report_logits=*/!chunk.all_logits))
        return;
    }
    // else a prompt chunk that is not the last: nothing to sample yet
  }
  if (!speculator_) return;
  // the positions this step settled (their hidden rows lead the chunk's) wait for the MTP with
  // any that waited before; it takes them when this step drafts for the next (so a step that
  // does not costs what it costs without MTP), or when too many wait
  const float* chunk_hidden = out.hidden.data() + hidden_row * dim;
  const int64_t settled = r.cached - chunk.start_pos;
  check(r.spec.mtp_cached + static_cast<int64_t>(r.spec.pending_hidden.size()) / dim ==
            chunk.start_pos,
        "engine: the MTP cache lost step with sequence ", r.id);
  r.spec.pending_hidden.insert(r.spec.pending_hidden.end(), chunk_hidden,
                               chunk_hidden + settled * dim);
  r.spec.drafts.clear();
  const int64_t n = r.cached - r.spec.mtp_cached;
  if (!draft_ && n < kMaxPendingMtp) return;
  speculator_->cache().truncate(r.spec.mtp_seq,
                                r.spec.mtp_cached);  // what a chained draft wrote past them goes
  std::vector<int32_t> next(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) next[j] = token_at(r, r.spec.mtp_cached + j + 1);
  catch_up.step.add(r.spec.mtp_seq, r.spec.mtp_cached, next.data(), n);
  catch_up.hidden.insert(catch_up.hidden.end(), r.spec.pending_hidden.begin(),
                         r.spec.pending_hidden.end());
  r.spec.pending_hidden.clear();
  catch_up.requests.push_back(&r);
}

void Engine::record_step(const PlannedStep& plan, double seconds, bool mtp_ran) {
  StepReport report{plan.decode_rows, plan.prefill_tokens, seconds};
  (plan.prefill_tokens > 0 ? stats_.prefill_seconds : stats_.decode_seconds) += report.seconds;
  stats_.draft_steps += plan.drafts() > 0;
  stats_.decode_row_steps += plan.decode_rows;
  // a pure decode step of either kind: without drafts or the MTP, or with both (the transitions
  // between the two hold one but not the other and would bias either mean)
  if (options_.mtp_auto && plan.prefill_tokens == 0 && (plan.drafts() > 0) == mtp_ran)
    draft_policy_.record_step(plan.decode_rows, plan.drafts() > 0, report.seconds);
  ++stats_.steps;
  if (options_.on_step) options_.on_step(report);
}

}  // namespace dsinfer
