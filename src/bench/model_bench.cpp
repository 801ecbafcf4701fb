#include "bench/model_bench.h"

#include <random>
#include <vector>

#include "core/error.h"
#include "core/log.h"

namespace dsinfer {

void PartTotals::add(const ForwardStats& s) {
  for (int i = 0; i < static_cast<int>(ForwardPart::kCount); ++i) {
    parts[i].seconds += s.parts[i].seconds;
    parts[i].weight_bytes += s.parts[i].weight_bytes;
    parts[i].macs += s.parts[i].macs;
  }
}

double prefill_ceiling_gflops(const Ceilings& ceilings, ActDType act) {
  if (act == ActDType::kF32) return ceilings.fma_gflops;
  return fast_mode_uses_amx() ? ceilings.amx_gflops : ceilings.bf16_gflops;
}

namespace {
std::vector<int32_t> random_tokens(std::mt19937_64& rng, int vocab, int64_t n) {
  // mt19937_64 and this arithmetic are the same on every platform: every rank draws the same
  // ids (std::uniform_int_distribution is not specified exactly enough for that)
  std::vector<int32_t> ids(n);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
  return ids;
}
}  // namespace

DecodeResult bench_decode(Transformer& model, int batch, int prompt_len, int warmup, int steps, uint64_t seed) {
  const ModelConfig& c = model.config();
  check(batch >= 1 && prompt_len >= 1 && warmup >= 0 && steps >= 1, "bench: decode needs batch, prompt ",
        "length and steps >= 1");
  check(prompt_len + warmup + steps <= c.max_seq_len, "bench: decode positions (", prompt_len + warmup + steps,
        ") exceed max_seq_len (", c.max_seq_len, ")");
  std::mt19937_64 rng(seed);
  KVCache cache(c, batch, prompt_len + warmup + steps);
  std::vector<float> logits(static_cast<size_t>(batch) * c.vocab_size);
  const std::vector<int32_t> prompt = random_tokens(rng, c.vocab_size, static_cast<int64_t>(batch) * prompt_len);
  model.forward(prompt.data(), batch, prompt_len, 0, cache, logits.data());
  int pos = prompt_len;
  for (int s = 0; s < warmup; ++s, ++pos)
    model.forward(random_tokens(rng, c.vocab_size, batch).data(), batch, 1, pos, cache, logits.data());
  // the ids of the timed steps are drawn up front: no allocation inside the timed loop
  const std::vector<int32_t> ids = random_tokens(rng, c.vocab_size, static_cast<int64_t>(steps) * batch);
  DecodeResult r;
  r.batch = batch;
  r.steps = steps;
  const double t0 = now_seconds();
  for (int s = 0; s < steps; ++s, ++pos) {
    model.forward(ids.data() + static_cast<int64_t>(s) * batch, batch, 1, pos, cache, logits.data());
    r.weight_bytes += model.stats().weight_bytes;
    r.parts.add(model.stats());
  }
  r.seconds = now_seconds() - t0;
  return r;
}

PrefillResult bench_prefill(Transformer& model, int tokens, uint64_t seed) {
  const ModelConfig& c = model.config();
  check(tokens >= 1 && tokens <= c.max_seq_len, "bench: prefill length ", tokens, " is outside [1, max_seq_len=",
        c.max_seq_len, "]");
  std::mt19937_64 rng(seed);
  KVCache cache(c, 1, tokens);
  std::vector<float> logits(c.vocab_size);
  const std::vector<int32_t> ids = random_tokens(rng, c.vocab_size, tokens);
  PrefillResult r;
  r.tokens = tokens;
  const double t0 = now_seconds();
  model.forward(ids.data(), 1, tokens, 0, cache, logits.data());
  r.seconds = now_seconds() - t0;
  r.macs = model.stats().macs;
  r.weight_bytes = model.stats().weight_bytes;
  r.parts.add(model.stats());
  return r;
}

}  // namespace dsinfer
