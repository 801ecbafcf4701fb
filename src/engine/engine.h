// The engine of sequences (docs/ENGINE.md): requests join and leave between forward steps, each
// with its own sampling parameters and keyed random stream, its KV cache positions reserved when it
// is admitted. The scheduler builds each step from every decoding sequence (one token each) plus
// chunked prefill within a token budget, so a long prompt never stalls running streams; prompts
// that do not fit the cache wait. Because the kernels are batch invariant, a request's tokens do
// not depend on what else runs, how its prompt was chunked or when it arrived.
//
// Threads: submit() and cancel() may be called from any thread; step() from one thread only
// (the engine thread). Callbacks run on the engine thread, inside step().
// Ranks: rank 0 leads. Before each step it broadcasts what was submitted and cancelled since the
// last one (engine/step_orders.h); every other rank runs follow(), which applies the same orders
// and takes the same step. Every decision depends only on those orders and on the gathered
// logits, so the ranks schedule, sample and finish alike without exchanging anything else.
// The leader's run_until_idle() (or pause()) lets the followers' follow() return, so a front end
// that reads input on rank 0 between runs keeps its own broadcasts in step with the engine's.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/draft_policy.h"
#include "engine/prefix_cache.h"
#include "engine/rank_channel.h"
#include "engine/sampling.h"
#include "engine/speculator.h"
#include "engine/step_orders.h"
#include "engine/token_constraint.h"
#include "model/kv_cache.h"
#include "model/transformer.h"

namespace dsinfer {

enum class FinishReason { kStop, kLength, kCancelled, kError };
const char* finish_reason_name(FinishReason reason);

struct RequestEvents {
  std::function<void(int32_t token)> on_token;  // each completion token, in order
  // once, at the end; `error` explains kError (e.g. a prompt longer than the cache can ever hold)
  std::function<void(FinishReason reason, const std::string& error)> on_finish;
  // Each logits row [vocab] computed for the request, with the input position it was computed at
  // (the row predicts position + 1): every prompt position when params.prompt_logits, then the
  // row each token is sampled from (before its on_token). The pointer is valid until the step ends
  // (so on_token may still read the row it was sampled from). Needs params.prompt_logits or
  // params.token_logits (they decide, on every rank, which steps gather whole rows).
  std::function<void(int64_t position, const float* logits)> on_logits;
  // Once, when the request is admitted: how many prompt positions it took from the cache
  // (prefix reuse) instead of prefilling them.
  std::function<void(int64_t reused_tokens)> on_start;
};

// What one forward step did (EngineOptions::on_step): every rank sees the same steps.
struct StepReport {
  int64_t decode_rows = 0;     // sequences that decoded one token
  int64_t prefill_tokens = 0;  // prompt tokens in prefill chunks
  double seconds = 0;          // the forward call
};

struct EngineOptions {
  int64_t step_tokens = 256;  // most tokens per forward step (decode rows + prefill chunks)
  int max_running = 64;       // most sequences admitted at once
  // Prefix reuse (engine/prefix_cache.h): a prompt maps the cached blocks of its longest cached
  // prefix (a shared system prompt, a conversation's earlier turns) and prefills only the rest;
  // blocks no sequence holds stay cached until their room is needed (least recently used first).
  bool prefix_cache = true;
  // The ranks that step together; null: the model's. Rank 0 leads, the others follow().
  Comm* ranks = nullptr;
  // On a follower: the events of a request rank 0 submitted (none when unset), so that a front
  // end that runs on every rank can collect the same completions everywhere.
  std::function<RequestEvents(RequestId id)> follower_events;
  // After each forward step, on every rank (benchmarks read the model's stats here).
  std::function<void(const StepReport&)> on_step;
  // Speculative decoding with the checkpoint's multi-token-prediction module (the model must have
  // it loaded: Transformer::load_mtp): each decoding sequence feeds its next token and the MTP's
  // draft of the one after, verified in the same step. The tokens and logits are those of a run
  // without it, bit for bit (batch invariance); only the speed changes.
  bool mtp = false;
  // Drafts per sequence and step: the first from the module's pass over the settled positions,
  // each further one from the same module fed its last draft and its own output (docs/MTP.md:
  // chained drafts lie outside what the module was trained for, so acceptance decays).
  int draft_tokens = 1;
  // With mtp: draft only when it measured faster for this many decoding sequences (--mtp auto,
  // engine/draft_policy.h). Which steps draft never changes a token.
  bool mtp_auto = false;
  // Structured output: makes the TokenConstraint of a request whose params.grammar is set (on every
  // rank). Unset: such a request is an Error.
  ConstraintFactory make_constraint;
};

struct EngineStats {
  int64_t steps = 0, prompt_tokens = 0, prefilled_tokens = 0, reused_tokens = 0,
          generated_tokens = 0;
  double prefill_seconds = 0;         // steps that held prefill chunks
  double decode_seconds = 0;          // steps of decode rows only
  int64_t drafted = 0, accepted = 0;  // MTP drafts verified, and those the model agreed with
  double mtp_seconds = 0;             // the MTP module's forward calls (in the above too)
  int64_t draft_steps = 0;  // decode steps that verified drafts (--mtp auto: the ones it chose)
  // Decode rows over all steps (a sequence decoding in a step), and the tokens they gave: their
  // ratio is what the drafts gain per step (about 1 without them).
  int64_t decode_row_steps = 0, decoded_tokens = 0;
  // What happened between two readings (e.g. one chat turn).
  EngineStats operator-(const EngineStats& o) const {
    return {steps - o.steps,
            prompt_tokens - o.prompt_tokens,
            prefilled_tokens - o.prefilled_tokens,
            reused_tokens - o.reused_tokens,
            generated_tokens - o.generated_tokens,
            prefill_seconds - o.prefill_seconds,
            decode_seconds - o.decode_seconds,
            drafted - o.drafted,
            accepted - o.accepted,
            mtp_seconds - o.mtp_seconds,
            draft_steps - o.draft_steps,
            decode_row_steps - o.decode_row_steps,
            decoded_tokens - o.decoded_tokens};
  }
};

class Engine {
 public:
  Engine(Transformer& model, KVCache& cache, EngineOptions options = {});
  // A leader that dies while its followers are inside follow() tells them (they fail with an
  // Error instead of waiting for a step that never comes).
  ~Engine();

  // Whether this rank schedules (rank 0, or a world of one); the others follow().
  bool leader() const { return channel_.leader(); }

  // Queues a request; an Error for a bad one (empty prompt, token ids outside the vocabulary,
  // longer than max_seq_len, bad parameters), or on a follower. Thread safe.
  RequestId submit(std::vector<int32_t> prompt, const SamplingParams& params, RequestEvents events);
  // Ends a request (finish reason kCancelled) at the next step; unknown or finished ids are
  // ignored.
  void cancel(RequestId id);
  // Leader: runs one forward step (admitting, prefilling, decoding, finishing) after sending its
  // orders to the followers; false when there was nothing to do.
  bool step();
  // Leader: step() until every request has finished, then pause().
  void run_until_idle();
  // Leader: lets the followers' follow() return true (the leader goes back to its input).
  void pause();
  // Leader: lets the followers' follow() return false (the session is over).
  void stop();
  // Follower: takes the steps rank 0 orders until it pauses (true) or stops (false); an Error
  // when rank 0 reports a failure, a CommError when the ranks lose each other.
  bool follow();

  // Leader: submits every request and runs until idle; follower: follows, giving each request
  // rank 0 submitted the events of the same index. Every rank calls it with the same list (the
  // lockstep front ends: generate, eval, perplexity, bench); the requests get consecutive ids.
  // A bad request, or one that ends in error, is an Error on every rank.
  struct Pending {
    std::vector<int32_t> prompt;
    SamplingParams params;
    RequestEvents events;
  };
  void run_all(std::vector<Pending> requests);

  // Nothing submitted, waiting or running (engine thread only, as step()).
  bool idle() const;
  const EngineStats& stats() const { return stats_; }
  KVCache& cache() { return cache_; }
  // The prefix index (null without options.prefix_cache).
  const PrefixCache* prefix_cache() const { return prefix_.get(); }
  // Forgets every cached prefix (the blocks only the index held are freed).
  void drop_prefix_cache();

 private:
  struct Request;
  // What this step starts from: the leader's submissions and cancellations (broadcast to the
  // followers when there are any), or rank 0's orders on a follower.
  void take_leader_orders();
  void apply_orders(const StepOrders& orders);
  void apply_cancels(const std::vector<RequestId>& cancelled);
  // One step: admit -> plan_step (schedule) -> forward -> draw_rows -> commit_chunk per chunk ->
  // the MTP's drafts for the next -> record_step.
  bool run_step();
  struct PlannedStep;
  struct DrawnRows;
  struct MtpCatchUp;
  PlannedStep plan_step();
  DrawnRows draw_rows(const PlannedStep& plan, const StepOutput& out);
  // Takes what one chunk's rows gave: the tokens drawn (decode, drafts verified, a prompt's end),
  // the logits rows reported; with MTP, queues the positions it settled for the MTP's catch-up.
  void commit_chunk(Request& r, const SeqChunk& chunk, const PlannedStep& plan,
                    const StepOutput& out, const DrawnRows& drawn, int64_t first_row,
                    int64_t hidden_row, int64_t token_row, MtpCatchUp& catch_up);
  void record_step(const PlannedStep& plan, double seconds, bool mtp_ran);
  void admit();
  void run_all_events(std::vector<Pending>& requests);
  // The Error submit() gives for a bad request.
  void check_request(const std::vector<int32_t>& prompt, const SamplingParams& params) const;
  void finish(Request& r, FinishReason reason, const std::string& error = {});
  // Indexes a request's full blocks of settled positions (and their MTP blocks) not yet indexed.
  void index_blocks(Request& r);
  // A finished request's last blocks into the index, its sequences released.
  void retire(Request& r, bool keep);
  // Takes `token`, the one drawn for the position after r.cached (vocab_draw.h), reporting its
  // logits row (nullptr when the step kept slices: then the request did not ask for rows) unless
  // that was done already; false when that ended the request.
  bool take_token(Request& r, const float* logits, int32_t token, bool report_logits);
  // With MTP: how many drafts a decoding request may verify next step (its length and room
  // allowing), and how many of those it has.
  static int64_t max_drafts(const Request& r);
  static int64_t usable_drafts(const Request& r);
  // params.grammar's constraint (null without one), from options_.make_constraint.
  std::unique_ptr<TokenConstraint> make_constraint(const SamplingParams& params) const;
  // The token at position `pos` of a request's sequence (prompt, then generated).
  static int32_t token_at(const Request& r, int64_t pos);

  Transformer& model_;
  KVCache& cache_;
  EngineOptions options_;
  RankChannel channel_{nullptr};  // the ranks that step together (engine/rank_channel.h)
  EngineStats stats_;
  mutable std::mutex mutex_;  // guards submitted_, cancelled_, next_id_
  std::deque<std::unique_ptr<Request>> submitted_;
  std::vector<RequestId> cancelled_;
  RequestId next_id_ = 0;
  std::deque<std::unique_ptr<Request>> waiting_;
  std::vector<std::unique_ptr<Request>> running_;
  std::unique_ptr<Speculator>
      speculator_;  // with options.mtp (engine/speculator.h): the MTP and its cache
  std::unique_ptr<PrefixCache>
      prefix_;                // with options.prefix_cache (after speculator_: it goes first)
  DraftPolicy draft_policy_;  // --mtp auto, on rank 0
  // The forward step's output, reused: a fresh one zero-filled [rows, vocab] floats and faulted
  // its pages in every step (52 MB for 100 decoding sequences at V3's vocabulary: half the time of
  // a 100-sequence step of the tiny test models).
  StepOutput step_output_;
  bool draft_ = true;  // this step's MTP drafts for the next: rank 0's decision, sent in its orders
};

}  // namespace dsinfer
