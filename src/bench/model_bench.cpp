#include "bench/model_bench.h"

#include <random>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "engine/engine.h"

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

namespace {
// A cache that holds `count` sequences of `positions` each (whole blocks).
KVCache cache_for(const ModelConfig& c, int64_t count, int64_t positions) {
  return KVCache(c, count * KVCache::blocks_of(positions));
}
}  // namespace

DecodeResult bench_decode(Transformer& model, int batch, int prompt_len, int warmup, int steps, uint64_t seed) {
  const ModelConfig& c = model.config();
  check(batch >= 1 && prompt_len >= 1 && warmup >= 0 && steps >= 1, "bench: decode needs batch, prompt ",
        "length and steps >= 1");
  check(prompt_len + warmup + steps <= c.max_seq_len, "bench: decode positions (", prompt_len + warmup + steps,
        ") exceed max_seq_len (", c.max_seq_len, ")");
  std::mt19937_64 rng(seed);
  // the engine's lockstep policy: one step prefills every prompt, then each step decodes every row
  KVCache cache = cache_for(c, batch, prompt_len + warmup + steps);
  DecodeResult r;
  r.batch = batch;
  int step_index = 0;
  EngineOptions options;
  options.step_tokens = static_cast<int64_t>(batch) * prompt_len;
  options.max_running = batch;
  options.retained_sequences = 0;
  options.on_step = [&](const StepReport& s) {
    if (step_index++ < 1 + warmup) return;  // the prefill and the warm-up steps
    check(s.decode_rows == batch && s.prefill_tokens == 0, "bench: a decode step held ", s.decode_rows, " rows");
    ++r.steps;
    r.seconds += s.seconds;
    r.weight_bytes += model.stats().weight_bytes;
    r.parts.add(model.stats());
  };
  Engine engine(model, cache, options);
  // sampled at temperature 1 (each row its own stream): the rows keep routing like real text
  // does instead of a random model's greedy loop repeating one token
  std::vector<Engine::Pending> requests;
  for (int b = 0; b < batch; ++b) {
    SamplingParams params;
    params.temperature = 1.0f;
    params.seed = seed + static_cast<uint64_t>(b);
    params.max_new_tokens = 1 + warmup + steps;
    requests.push_back({random_tokens(rng, c.vocab_size, prompt_len), params, {}});
  }
  engine.run_all(std::move(requests));
  check(r.steps == steps, "bench: ", r.steps, " timed decode steps ran, not ", steps);
  return r;
}

PrefillResult bench_prefill(Transformer& model, int tokens, uint64_t seed) {
  const ModelConfig& c = model.config();
  check(tokens >= 1 && tokens <= c.max_seq_len, "bench: prefill length ", tokens, " is outside [1, max_seq_len=",
        c.max_seq_len, "]");
  std::mt19937_64 rng(seed);
  KVCache cache = cache_for(c, 1, tokens + 1);
  PrefillResult r;
  r.tokens = tokens;
  EngineOptions options;
  options.step_tokens = tokens;  // the whole prompt in one step
  options.retained_sequences = 0;
  options.on_step = [&](const StepReport& s) {
    if (s.prefill_tokens == 0) return;
    r.seconds += s.seconds;
    r.macs += model.stats().macs;
    r.weight_bytes += model.stats().weight_bytes;
    r.parts.add(model.stats());
  };
  Engine engine(model, cache, options);
  SamplingParams params;
  params.max_new_tokens = 1;
  std::vector<Engine::Pending> requests;
  requests.push_back({random_tokens(rng, c.vocab_size, tokens), params, {}});
  engine.run_all(std::move(requests));
  return r;
}

ServingResult bench_serving(Transformer& model, const ServingOptions& o) {
  const ModelConfig& c = model.config();
  check(o.concurrency >= 1 && o.requests >= 1 && o.prompt_len >= 1 && o.max_new_tokens >= 1 && o.stagger_steps >= 0,
        "bench: serving needs concurrency, requests, prompt length and new tokens >= 1");
  check(o.prompt_len + o.max_new_tokens <= c.max_seq_len, "bench: serving prompt plus new tokens (",
        o.prompt_len + o.max_new_tokens, ") exceed max_seq_len (", c.max_seq_len, ")");
  std::mt19937_64 rng(o.seed);
  KVCache cache = cache_for(c, o.concurrency, o.prompt_len + o.max_new_tokens);
  EngineOptions options;
  options.step_tokens = o.step_tokens;
  options.max_running = o.concurrency;
  options.retained_sequences = 0;
  ServingResult result;
  result.options = o;
  options.on_step = [&](const StepReport& s) {
    ++result.steps;
    result.forward_seconds += s.seconds;
    result.max_step_seconds = std::max(result.max_step_seconds, s.seconds);
  };
  Engine engine(model, cache, options);
  if (!engine.leader()) {  // rank 0 decides when requests arrive; the others take its steps
    engine.follow();
    return result;
  }
  struct Timing {
    double submitted = 0, first = 0, last = 0;
    int tokens = 0;
  };
  std::vector<Timing> timing(static_cast<size_t>(o.requests));
  int next = 0, in_flight = 0, steps_since_arrival = o.stagger_steps;
  const double t0 = now_seconds();
  for (;;) {
    // staggered arrivals: a new request every stagger_steps steps while fewer than
    // `concurrency` are in flight (a closed loop of clients with think time 0)
    if (next < o.requests && in_flight < o.concurrency && steps_since_arrival >= o.stagger_steps) {
      SamplingParams params;
      params.temperature = 1.0f;
      params.seed = o.seed + static_cast<uint64_t>(next);
      params.max_new_tokens = o.max_new_tokens;
      Timing& t = timing[static_cast<size_t>(next)];
      RequestEvents events;
      events.on_token = [&t](int32_t) {
        t.last = now_seconds();
        if (t.tokens++ == 0) t.first = t.last;
      };
      events.on_finish = [&in_flight](FinishReason, const std::string&) { --in_flight; };
      t.submitted = now_seconds();
      engine.submit(random_tokens(rng, c.vocab_size, o.prompt_len), params, std::move(events));
      ++next;
      ++in_flight;
      steps_since_arrival = 0;
      continue;  // another may arrive at once when stagger_steps is 0
    }
    const bool stepped = engine.step();
    ++steps_since_arrival;
    if (!stepped && next == o.requests) break;
  }
  engine.pause();
  result.seconds = now_seconds() - t0;
  for (const Timing& t : timing) {
    result.generated_tokens += t.tokens;
    result.ttft_seconds.push_back(t.first - t.submitted);
    if (t.tokens > 1) result.tpot_seconds.push_back((t.last - t.first) / (t.tokens - 1));
    result.latency_seconds.push_back(t.last - t.submitted);
  }
  return result;
}

MtpCostResult bench_mtp(Transformer& model, int batch, int prompt_len, int rounds, uint64_t seed) {
  const ModelConfig& c = model.config();
  check(model.has_mtp(), "bench --mtp: no multi-token-prediction module loaded");
  check(batch >= 1 && prompt_len >= 1 && rounds >= 1, "bench: MTP cost needs batch, prompt length and rounds >= 1");
  std::mt19937_64 rng(seed);
  KVCache cache = cache_for(c, batch, prompt_len + 2);
  KVCache mtp_cache = model.make_mtp_cache(static_cast<int64_t>(batch) * KVCache::blocks_of(prompt_len + 2));
  std::vector<SeqId> seqs, mtp_seqs;
  Step prefill;
  prefill.want_hidden = true;
  Step mtp_prefill;
  std::vector<std::vector<int32_t>> prompts;
  for (int b = 0; b < batch; ++b) {
    seqs.push_back(cache.create(prompt_len + 2));
    mtp_seqs.push_back(mtp_cache.create(prompt_len + 2));
    prompts.push_back(random_tokens(rng, c.vocab_size, prompt_len + 2));
    prefill.add(seqs.back(), 0, prompts.back().data(), prompt_len);
    prefill.chunks.back().all_hidden = true;
    mtp_prefill.add(mtp_seqs.back(), 0, prompts.back().data() + 1, prompt_len - 1 > 0 ? prompt_len - 1 : 1);
  }
  StepOutput out;
  model.forward(prefill, cache, out);
  if (prompt_len > 1) {  // the MTP's cache holds positions 0 .. prompt_len - 2, as after a prefill
    std::vector<float> hidden;
    int64_t row = 0;
    for (int b = 0; b < batch; ++b, row += prompt_len)
      hidden.insert(hidden.end(), out.hidden.begin() + row * c.dim, out.hidden.begin() + (row + prompt_len - 1) * c.dim);
    StepOutput ignored;
    model.forward_mtp(mtp_prefill, hidden.data(), mtp_cache, ignored);
  } else {
    for (SeqId s : mtp_seqs) mtp_cache.set_length(s, 0);
  }
  const int64_t at = prompt_len, mtp_at = prompt_len > 1 ? prompt_len - 1 : 0;
  MtpCostResult r;
  r.batch = batch;
  r.rounds = rounds;
  for (int round = -1; round < rounds; ++round) {  // round -1 warms the paths up, untimed
    Step decode, verify, draft;
    verify.want_hidden = true;
    for (int b = 0; b < batch; ++b) {
      decode.add(seqs[b], at, prompts[b].data() + at, 1);
      verify.add(seqs[b], at, prompts[b].data() + at, 2, /*all_logits=*/true);
      draft.add(mtp_seqs[b], mtp_at, prompts[b].data() + mtp_at + 1, 1);
    }
    double t = now_seconds();
    model.forward(decode, cache, out);
    const double decode_s = now_seconds() - t;
    const ForwardStats decode_stats = model.stats();
    for (SeqId s : seqs) cache.truncate(s, at);
    t = now_seconds();
    model.forward(verify, cache, out);
    const double verify_s = now_seconds() - t;
    const ForwardStats verify_stats = model.stats();
    for (SeqId s : seqs) cache.truncate(s, at);
    std::vector<float> hidden;  // each sequence's first verify row: what the MTP takes next
    for (int b = 0; b < batch; ++b)
      hidden.insert(hidden.end(), out.hidden.begin() + 2 * b * c.dim, out.hidden.begin() + (2 * b + 1) * c.dim);
    StepOutput drafts;
    t = now_seconds();
    model.forward_mtp(draft, hidden.data(), mtp_cache, drafts);
    const double mtp_s = now_seconds() - t;
    for (SeqId s : mtp_seqs) mtp_cache.truncate(s, mtp_at);
    if (round < 0) continue;
    r.decode_seconds += decode_s / rounds;
    r.verify_seconds += verify_s / rounds;
    r.mtp_seconds += mtp_s / rounds;
    r.decode_bytes += static_cast<double>(decode_stats.weight_bytes) / rounds;
    r.verify_bytes += static_cast<double>(verify_stats.weight_bytes) / rounds;
    r.decode_parts.add(decode_stats);
    r.verify_parts.add(verify_stats);
  }
  return r;
}

}  // namespace dsinfer
