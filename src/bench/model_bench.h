// Decode and prefill throughput of a loaded model, with the bytes and multiply-adds the forward
// pass counted (ForwardStats), for `dsinfer bench`. Every rank of a tensor-parallel world calls
// these with the same arguments (the forward pass holds collectives); token ids come from a
// fixed seed, so every rank feeds the same ones.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/ceilings.h"
#include "kernels/linear.h"
#include "model/transformer.h"

namespace dsinfer {

// The flop ceiling of a mode on this CPU: the fp32 FMA peak in exact mode and in fast mode where
// its kernels are the exact ones (CPUs without AMX or AVX512_BF16, e.g. AVX2-only Zen 3), else the
// AMX or bf16 dot-product peak. Its key in `bench --json`'s ceilings, and its name in the table.
enum class PrefillCeiling { kFmaF32, kBf16Dot, kAmxBf16, kInt8Dot };
PrefillCeiling prefill_ceiling(const KernelConfig& kernels);
const char* prefill_ceiling_key(PrefillCeiling ceiling);   // "fma_f32_gflops", ...
const char* prefill_ceiling_name(PrefillCeiling ceiling);  // "fp32 FMA peak", ...
double prefill_ceiling_gflops(const Ceilings& ceilings, const KernelConfig& kernels);

// Per part of the model (ForwardPart), summed over the timed forward calls, this rank.
struct PartTotals {
  PartStats parts[static_cast<int>(ForwardPart::kCount)];
  void add(const ForwardStats& s);
};

struct DecodeResult {
  int batch = 0;
  int steps = 0;                // timed steps (after the warm-up)
  double seconds = 0;           // of the timed steps
  int64_t weight_bytes = 0;     // summed over the timed steps, this rank
  PartTotals parts;             // summed over the timed steps, this rank
  CollectiveStats collectives;  // summed over the timed steps, this rank
  double tokens_per_s() const { return batch * steps / seconds; }
  double bytes_per_step() const { return static_cast<double>(weight_bytes) / steps; }
  double bytes_per_token() const { return bytes_per_step() / batch; }
};

// On the engine (lockstep): a prompt of `prompt_len` random tokens per row (one step), `warmup`
// untimed decode steps, then `steps` timed decode steps of one token per row each (sampled at
// temperature 1, every row its own stream). Seconds count the forward calls only.
DecodeResult bench_decode(Transformer& model, int batch, int prompt_len, int warmup, int steps,
                          uint64_t seed);

// Decode at depth: `batch` sequences whose caches hold `depth` positions of synthetic entries
// (random latents and rope keys written straight into the cache: prefilling 16k positions of V3
// on 2 cores takes minutes and leaves a decode step's work the same; attention's cost does not
// depend on the entries' values), then `warmup` untimed and `steps` timed decode steps of one
// random token per sequence, straight through Transformer::forward. Every rank draws the same.
DecodeResult bench_decode_at_depth(Transformer& model, int batch, int64_t depth, int warmup,
                                   int steps, uint64_t seed, KVDType kv_dtype = KVDType::kF32);

struct PrefillResult {
  int tokens = 0;
  double seconds = 0;
  int64_t macs = 0;             // this rank
  int64_t weight_bytes = 0;     // this rank
  PartTotals parts;             // this rank
  CollectiveStats collectives;  // this rank
  double tokens_per_s() const { return tokens / seconds; }
};

// One engine step of `tokens` random tokens from position 0 at batch 1 (logits of the last
// position only, as the reference computes them).
PrefillResult bench_prefill(Transformer& model, int tokens, uint64_t seed);

// A serving-shaped run on the engine: `requests` requests of `prompt_len` random tokens and
// `max_new_tokens` sampled ones (temperature 1), arriving one every `stagger_steps` engine steps
// while fewer than `concurrency` are in flight (clients that send the next request as soon as one
// ends), prefilled in chunks within the step budget `step_tokens` beside the running decodes.
struct ServingOptions {
  int concurrency = 4;
  int requests = 8;
  int prompt_len = 64;
  int max_new_tokens = 16;
  int stagger_steps = 2;
  int64_t step_tokens = 256;
  uint64_t seed = 1;
};

struct ServingResult {
  ServingOptions options;
  double seconds = 0;           // wall time of the whole run (rank 0)
  double forward_seconds = 0;   // of which in forward steps
  double max_step_seconds = 0;  // the longest step: what a running stream waits at worst
  int64_t steps = 0;
  int64_t generated_tokens = 0;
  // per request (rank 0): time to first token, mean time per output token after it, end to end
  std::vector<double> ttft_seconds, tpot_seconds, latency_seconds;
  double tokens_per_s() const { return static_cast<double>(generated_tokens) / seconds; }
};

// Every rank calls it; rank 0 decides the arrivals and reports, the others follow its steps.
ServingResult bench_serving(Transformer& model, const ServingOptions& options);

// Conversations (agents, chats that grow): `users` users each hold `turns` turns; every prompt is
// a shared system prompt of `system_len` random tokens, the user's history (its earlier prompts'
// new parts and the answers, as a chat template re-sends them), and `user_len` new tokens; each
// answer has `max_new_tokens` sampled tokens. Every user sends its next turn as soon as its last
// answer ends (think time 0); user i starts once i answers (any user's) have ended, so new
// conversations begin while others go on, and the turns of different users interleave. The KV
// cache holds `kv_positions` (0: room for every user's longest sequence).
struct ConversationOptions {
  int users = 8;
  int turns = 4;
  int system_len = 300;
  int user_len = 32;
  int max_new_tokens = 16;
  int64_t step_tokens = 256;
  int64_t kv_positions = 0;
  bool prefix_cache = true;
  uint64_t seed = 1;
};

struct ConversationResult {
  ConversationOptions options;
  double seconds = 0;
  int64_t prompt_tokens = 0;
  int64_t reused_tokens = 0;  // prompt positions taken from the cache
  // What an ideal cache reuses: a later turn's whole previous prompt and answer (but the answer's
  // last token, never fed), and the system prompt of every first turn but the very first.
  int64_t ideal_reused_tokens = 0;
  int64_t peak_kv_blocks = 0, kv_bytes_per_block = 0;
  int64_t evictions = 0;
  // per turn index: every user's time to first token, mean time per output token, reused tokens
  std::vector<std::vector<double>> ttft_seconds, tpot_seconds;
  std::vector<int64_t> turn_reused, turn_prompt_tokens;
};

// Every rank calls it; rank 0 decides the arrivals and reports, the others follow its steps.
ConversationResult bench_conversations(Transformer& model, const ConversationOptions& options);

// What one cycle of MTP speculation costs next to a plain decode step, at `batch` sequences of
// `prompt_len` random tokens, for 1 .. max_drafts drafts per sequence: per round, a decode step
// (one token per sequence), for each k a verify step (the token and k drafts per sequence, every
// row's logits and hidden state: what --mtp on runs) and the k MTP forwards that draft them (the
// pass over the settled position, then k - 1 chained ones), each rolled back so the positions stay
// put. Mean seconds and weight bytes (rank 0's view; bytes this rank's).
struct MtpCostResult {
  int batch = 0, rounds = 0;
  double decode_seconds = 0, decode_bytes = 0;
  std::vector<double> verify_seconds, draft_seconds, verify_bytes;  // [k - 1] for k drafts
  PartTotals decode_parts;
  std::vector<PartTotals> verify_parts;
  double cycle_seconds(int k) const { return verify_seconds[k - 1] + draft_seconds[k - 1]; }
  // Tokens per cycle when each draft is accepted with probability a given the ones before it:
  // 1 + a + ... + a^k; the speedup against plain decode steps, and where it breaks even.
  static double tokens_per_cycle(int k, double a) {
    double t = 1, p = 1;
    for (int i = 0; i < k; ++i) t += (p *= a);
    return t;
  }
  double speedup_at(int k, double a) const {
    return tokens_per_cycle(k, a) * decode_seconds / cycle_seconds(k);
  }
  double break_even_acceptance(int k) const;  // the a where speedup_at(k, a) == 1 (> 1: never)
};
MtpCostResult bench_mtp(Transformer& model, int batch, int prompt_len, int rounds, int max_drafts,
                        uint64_t seed);

}  // namespace dsinfer
