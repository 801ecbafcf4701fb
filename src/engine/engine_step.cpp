// The engine's step: plan the chunks of the running requests, run the forward pass (and the
// MTP's), draw each row's token, take the tokens and drafts, record the step's numbers.
#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "engine/engine.h"
#include "engine/engine_request.h"
#include "engine/scheduler.h"
#include "engine/vocab_draw.h"

namespace dsinfer {

namespace {
// Positions a sequence's MTP may fall behind while no step drafts (--mtp auto), before it
// catches up anyway: bounds the hidden rows kept, and what prefix reuse loses when it finishes.
constexpr int64_t kMaxPendingMtp = 512;
}  // namespace

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
