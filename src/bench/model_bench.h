// Decode and prefill throughput of a loaded model, with the bytes and multiply-adds the forward
// pass counted (ForwardStats), for `dsinfer bench`. Every rank of a tensor-parallel world calls
// these with the same arguments (the forward pass holds collectives); token ids come from a
// fixed seed, so every rank feeds the same ones.
#pragma once

#include <cstdint>

#include "bench/ceilings.h"
#include "kernels/linear.h"
#include "model/transformer.h"

namespace dsinfer {

// The flop ceiling of a mode: the fp32 FMA peak, or the bf16 dot-product peak.
double prefill_ceiling_gflops(const Ceilings& ceilings, ActDType act);

// Per part of the model (ForwardPart), summed over the timed forward calls, this rank.
struct PartTotals {
  PartStats parts[static_cast<int>(ForwardPart::kCount)];
  void add(const ForwardStats& s);
};

struct DecodeResult {
  int batch = 0;
  int steps = 0;              // timed steps (after the warm-up)
  double seconds = 0;         // of the timed steps
  int64_t weight_bytes = 0;   // summed over the timed steps, this rank
  PartTotals parts;           // summed over the timed steps, this rank
  double tokens_per_s() const { return batch * steps / seconds; }
  double bytes_per_step() const { return static_cast<double>(weight_bytes) / steps; }
  double bytes_per_token() const { return bytes_per_step() / batch; }
};

// A prompt of `prompt_len` random tokens per row (one forward call), `warmup` untimed decode
// steps, then `steps` timed decode steps of one random token per row each.
DecodeResult bench_decode(Transformer& model, int batch, int prompt_len, int warmup, int steps,
                          uint64_t seed);

struct PrefillResult {
  int tokens = 0;
  double seconds = 0;
  int64_t macs = 0;          // this rank
  int64_t weight_bytes = 0;  // this rank
  PartTotals parts;          // this rank
  double tokens_per_s() const { return tokens / seconds; }
};

// One forward call of `tokens` random tokens from position 0 at batch 1 (logits of the last
// position only, as the reference computes them).
PrefillResult bench_prefill(Transformer& model, int tokens, uint64_t seed);

}  // namespace dsinfer
