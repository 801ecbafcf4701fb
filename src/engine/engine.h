// The engine of sequences (ENGINE.md): requests join and leave between forward steps, each with
// its own sampling parameters and keyed random stream, its KV cache positions reserved when it is
// admitted. The scheduler builds each step from every decoding sequence (one token each) plus
// chunked prefill within a token budget, so a long prompt never stalls running streams; prompts
// that do not fit the cache wait. Because the kernels are batch invariant, a request's tokens do
// not depend on what else runs, how its prompt was chunked or when it arrived.
//
// Threads: submit() and cancel() may be called from any thread; step() from one thread only
// (the engine thread). Callbacks run on the engine thread, inside step().
// Ranks: every rank runs the same engine over the same submissions in the same order (the
// prompts are broadcast by the front end); every decision depends only on them and on the
// gathered logits, so the ranks take the same steps without exchanging them.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/sampling.h"
#include "model/kv_cache.h"
#include "model/transformer.h"

namespace dsinfer {

using RequestId = int64_t;

enum class FinishReason { kStop, kLength, kCancelled, kError };
const char* finish_reason_name(FinishReason reason);

struct RequestEvents {
  std::function<void(int32_t token)> on_token;  // each completion token, in order
  // once, at the end; `error` explains kError (e.g. a prompt longer than the cache can ever hold)
  std::function<void(FinishReason reason, const std::string& error)> on_finish;
};

struct EngineOptions {
  int64_t step_tokens = 256;  // most tokens per forward step (decode rows + prefill chunks)
  int max_running = 64;       // most sequences admitted at once
  // Finished sequences kept in the cache for prefix reuse (a later prompt that starts with the
  // same tokens prefills only the rest); evicted oldest first when their room is needed.
  int retained_sequences = 4;
};

struct EngineStats {
  int64_t steps = 0, prompt_tokens = 0, prefilled_tokens = 0, reused_tokens = 0, generated_tokens = 0;
  double prefill_seconds = 0;  // steps that held prefill chunks
  double decode_seconds = 0;   // steps of decode rows only
};

class Engine {
 public:
  Engine(Transformer& model, KVCache& cache, EngineOptions options = {});
  ~Engine();

  // Queues a request; an Error for a bad one (empty prompt, token ids outside the vocabulary,
  // longer than max_seq_len, bad parameters). Thread safe.
  RequestId submit(std::vector<int32_t> prompt, const SamplingParams& params, RequestEvents events);
  // Ends a request (finish reason kCancelled) at the next step; unknown or finished ids are ignored.
  void cancel(RequestId id);
  // Runs one forward step (admitting, prefilling, decoding, finishing); false when there was
  // nothing to do.
  bool step();
  // step() until every request has finished.
  void run_until_idle();

  // Nothing submitted, waiting or running (engine thread only, as step()).
  bool idle() const;
  const EngineStats& stats() const { return stats_; }
  KVCache& cache() { return cache_; }
  // Forgets the finished sequences kept for prefix reuse (their cache room is freed).
  void drop_retained();

 private:
  struct Request;
  struct Retained {
    SeqId seq;
    std::vector<int32_t> tokens;  // what its cache positions hold
  };
  void take_submissions();
  void admit();
  void finish(Request& r, FinishReason reason, const std::string& error = {});
  // The retained sequence sharing the longest prefix with `prompt` (at most prompt.size() - 1
  // tokens, so that a logit row is left to compute), or -1.
  int best_retained(const std::vector<int32_t>& prompt, int64_t& shared) const;

  Transformer& model_;
  KVCache& cache_;
  EngineOptions options_;
  EngineStats stats_;
  mutable std::mutex mutex_;  // guards submitted_, cancelled_, next_id_
  std::deque<std::unique_ptr<Request>> submitted_;
  std::vector<RequestId> cancelled_;
  RequestId next_id_ = 0;
  std::deque<std::unique_ptr<Request>> waiting_;
  std::vector<std::unique_ptr<Request>> running_;
  std::deque<Retained> retained_;
  std::vector<float> sample_scratch_;
};

}  // namespace dsinfer
