// Per-sequence sampling parameters and the keyed random stream (docs/ENGINE.md): the token a
// sequence draws at position p depends only on (its logits, its parameters, seed, p, choice), never
// on what else runs in the engine or on how many draws came before, so a request's sampled text is
// the same alone, in a batch or under continuous batching.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace dsinfer {

// The grammar a completion must match (structured output; engine/token_constraint.h).
struct OutputGrammar {
  enum class Kind : uint8_t {
    kNone,
    kJsonObject,  // any JSON object (OpenAI's response_format json_object)
    kJsonSchema,  // a value valid against the JSON Schema in `text`
    kGbnf,   // the grammar in `text`, root rule "root" (llama.cpp's GBNF, as xgrammar reads it)
    kRegex,  // a string matching the regular expression in `text`
    kStructuralTag,  // xgrammar's structural tag JSON in `text` (forced tool calls)
  };
  Kind kind = Kind::kNone;
  std::string text;
  // kJsonSchema: objects allow no properties and arrays no items the schema does not name, as
  // OpenAI's strict mode; false: the schema's own additionalProperties / items rule.
  bool strict = true;
  // The completion opens in reasoning (the prompt ended with <think>: R1, V3.1 thinking): the
  // grammar applies to the answer after the model's "</think>", the reasoning is free (vLLM's rule
  // with a reasoning parser).
  bool after_reasoning = false;
};

struct SamplingParams {
  float temperature = 0.0f;  // <= 0: greedy (argmax)
  float top_p = 1.0f;        // nucleus: the smallest set of tokens whose probability reaches top_p
  int top_k = 0;             // 0: no limit
  int max_new_tokens = 200;
  std::vector<int32_t>
      stop_ids;  // ends the sequence (finish reason "stop"); not part of the completion
  uint64_t seed = 965;
  int choice = 0;  // which of several completions of one request (n > 1) this is
  // Also compute the logits of every prompt position (RequestEvents::on_logits): scoring
  // (perplexity, eval) and prompt logprobs. With max_new_tokens 0 nothing is sampled.
  bool prompt_logits = false;
  // Also report the logits row each token is drawn from (RequestEvents::on_logits; logprobs).
  // Without it or prompt_logits a step may keep each rank's slice of the vocabulary and gather
  // only each rank's best candidate (engine/vocab_draw.h).
  bool token_logits = false;
  // The logits' adjustments before the draw (adjust_logits; the reported rows stay the model's):
  float repetition_penalty =
      1.0f;  // > 0; an id of the prompt or completion: x / r if x > 0, else x r
  float frequency_penalty = 0.0f;  // x -= f times the id's count in the completion so far
  float presence_penalty = 0.0f;   // x -= p if the id occurs in the completion so far
  std::vector<std::pair<int32_t, float>> logit_bias;  // x += bias (ids in increasing order)
  int min_tokens = 0;  // stop_ids cannot be drawn before this many completion tokens
  // After temperature, top_k and top_p: only ids with probability >= min_p times the likeliest's.
  float min_p = 0.0f;
  // Structured output: the ids the grammar does not allow next are masked to -infinity before the
  // draw (after the adjustments above); drafts are not verified for such a request.
  OutputGrammar grammar;
};

// What the adjustments read of a sequence when a row is drawn: its prompt (repetition_penalty)
// and its completion before the row's token: the tokens committed, then `pending` (the drafts a
// speculative step verifies before this row), so that a row's draw is the same with or without
// speculation.
struct TokenHistory {
  std::span<const int32_t> prompt;
  std::span<const int32_t> generated;
  std::span<const int32_t> pending;
  int64_t completion_tokens() const {
    return static_cast<int64_t>(generated.size() + pending.size());
  }
};

// Whether adjust_logits changes anything for these parameters.
bool adjusts_logits(const SamplingParams& params);

// logits[n], the ids first .. first + n - 1 (a rank's slice of the vocabulary or the whole row),
// adjusted in place, in this order: repetition_penalty (vLLM's and Hugging Face's rule), then
// frequency and presence penalties (OpenAI's), then logit_bias, then the stop ids masked to
// -infinity while the completion is shorter than min_tokens. Each id's result depends only on its
// own logit and the history, so slices adjusted apart give the whole row's values.
void adjust_logits(float* logits, int64_t n, int64_t first, const SamplingParams& params,
                   const TokenHistory& history);

// Checks the parameters (an Error naming the bad one).
void check_sampling(const SamplingParams& params);

// The token drawn from logits[n] at `position` (the absolute position the token will take):
// argmax at temperature 0, else the race argmax_i(logits_i / T - log E_i) over the tokens top_k,
// top_p and min_p keep (of softmax(logits / T)), E_i ~ Exponential(1) from a counter-based stream
// keyed by (seed, position, choice, i). That is the exponential race argmax(p_i / E_i) of the
// reference in log form (Gumbel-max): it draws i with probability p_i, and needs no normalisation,
// so ranks holding slices of the vocabulary can run it on their own slice (race_candidate) and
// agree on the same token as one process. `scratch` is reused between calls.
int64_t sample_keyed(const float* logits, int64_t n, const SamplingParams& params, int64_t position,
                     std::vector<float>& scratch);

// Whether the draw can run over slices of the vocabulary: greedy and plain temperature sampling;
// top_k, top_p and min_p cut by the whole row's probabilities.
bool race_splits_over_vocab(const SamplingParams& params);

// The best of the race over logits[n], the vocabulary's ids first .. first + n - 1: the greatest
// race value (NaN never wins), the lowest id on ties. Combining slices' candidates in id order
// with keep_better gives the whole row's winner, bit for bit: sample_keyed's token when
// race_splits_over_vocab(params).
struct RaceCandidate {
  double value;
  int64_t index;
};
RaceCandidate race_candidate(const float* logits, int64_t n, int64_t first,
                             const SamplingParams& params, int64_t position);
// The same, computing every id's value (race_candidate skips ids that provably lose): for tests.
RaceCandidate race_candidate_exhaustive(const float* logits, int64_t n, int64_t first,
                                        const SamplingParams& params, int64_t position);
// best becomes c when c beats it (a greater value; a number beats NaN).
inline void keep_better(RaceCandidate& best, const RaceCandidate& c) {
  if (!std::isnan(c.value) && (std::isnan(best.value) || c.value > best.value)) best = c;
}

// The exponential race over probs[n]: argmax(probs[i] / E_i), E_i = -log(1 - uniform(i)) ~
// Exponential(1), which draws i with probability probs[i]; uniform(i) in [0, 1) is called for
// every i in order (a stream-based caller keeps its stream's consumption).
template <class Uniform>
int64_t exponential_race(const float* probs, int64_t n, Uniform&& uniform) {
  int64_t best = 0;
  double best_value = -1;
  for (int64_t i = 0; i < n; ++i) {
    const double e = -std::log1p(-uniform(i));  // never 0 for u in [0, 1) but u = 0 itself
    const double value = probs[i] / e;
    if (value > best_value) {
      best_value = value;
      best = i;
    }
  }
  return best;
}

}  // namespace dsinfer
