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

PrefillCeiling prefill_ceiling(const KernelConfig& kernels) {
  if (!kernels.fast()) return PrefillCeiling::kFmaF32;
  // int8 mode's bulk (the linear weights) runs on its integer kernels, whatever else rounds
  if (kernels.int8() && kernels.int8_kernel() != Int8Kernel::kScalar)
    return PrefillCeiling::kInt8Dot;
  switch (kernels.fast_kernels()) {
    case FastModeKernels::kAmx:
      return PrefillCeiling::kAmxBf16;
    case FastModeKernels::kBf16Dot:
      return PrefillCeiling::kBf16Dot;
    case FastModeKernels::kExact:
      break;  // rounded activations through the fp32 FMA kernels
  }
  return PrefillCeiling::kFmaF32;
}

namespace {
// Each prefill ceiling's JSON key, its name in the table and where Ceilings keeps it.
struct PrefillCeilingInfo {
  const char* key;
  const char* name;
  double Ceilings::*gflops;
};
const PrefillCeilingInfo& info_of(PrefillCeiling ceiling) {
  static const PrefillCeilingInfo kAmx{"amx_bf16_gflops", "AMX bf16 peak", &Ceilings::amx_gflops};
  static const PrefillCeilingInfo kBf16{"bf16_dot_gflops", "bf16 dot peak", &Ceilings::bf16_gflops};
  static const PrefillCeilingInfo kFma{"fma_f32_gflops", "fp32 FMA peak", &Ceilings::fma_gflops};
  static const PrefillCeilingInfo kInt8{"int8_dot_gops", "int8 dot peak", &Ceilings::int8_gops};
  switch (ceiling) {
    case PrefillCeiling::kInt8Dot:
      return kInt8;
    case PrefillCeiling::kAmxBf16:
      return kAmx;
    case PrefillCeiling::kBf16Dot:
      return kBf16;
    case PrefillCeiling::kFmaF32:
      break;
  }
  return kFma;
}
}  // namespace

const char* prefill_ceiling_key(PrefillCeiling ceiling) { return info_of(ceiling).key; }
const char* prefill_ceiling_name(PrefillCeiling ceiling) { return info_of(ceiling).name; }
double prefill_ceiling_gflops(const Ceilings& ceilings, const KernelConfig& kernels) {
  return ceilings.*(info_of(prefill_ceiling(kernels)).gflops);
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

DecodeResult bench_decode(Transformer& model, int batch, int prompt_len, int warmup, int steps,
                          uint64_t seed) {
  const ModelConfig& c = model.config();
  check(batch >= 1 && prompt_len >= 1 && warmup >= 0 && steps >= 1,
        "bench: decode needs batch, prompt ", "length and steps >= 1");
  check(prompt_len + warmup + steps <= c.max_seq_len, "bench: decode positions (",
        prompt_len + warmup + steps, ") exceed max_seq_len (", c.max_seq_len, ")");
  std::mt19937_64 rng(seed);
  // the engine's lockstep policy: one step prefills every prompt, then each step decodes every row
  KVCache cache = cache_for(c, batch, prompt_len + warmup + steps);
  DecodeResult r;
  r.batch = batch;
  int step_index = 0;
  EngineOptions options;
  options.step_tokens = static_cast<int64_t>(batch) * prompt_len;
  options.max_running = batch;
  options.prefix_cache = false;
  options.on_step = [&](const StepReport& s) {
    if (step_index++ < 1 + warmup) return;  // the prefill and the warm-up steps
    check(s.decode_rows == batch && s.prefill_tokens == 0, "bench: a decode step held ",
          s.decode_rows, " rows");
    ++r.steps;
    r.seconds += s.seconds;
    r.weight_bytes += model.stats().weight_bytes;
    r.parts.add(model.stats());
    r.collectives.add(model.collective_stats());
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

DecodeResult bench_decode_at_depth(Transformer& model, int batch, int64_t depth, int warmup,
                                   int steps, uint64_t seed, KVDType kv_dtype) {
  const ModelConfig& c = model.config();
  check(batch >= 1 && depth >= 0 && warmup >= 0 && steps >= 1,
        "bench: decode at depth needs batch, steps >= 1");
  check(depth + warmup + steps <= c.max_seq_len, "bench: depth ", depth, " + ", warmup + steps,
        " decode steps exceed max_seq_len (", c.max_seq_len, ")");
  std::mt19937_64 rng(seed);
  KVCache cache(c, batch * KVCache::blocks_of(depth + warmup + steps), kv_dtype);
  std::vector<SeqId> seqs;
  // unit-variance values, as the normalised latent and the rotated rope key have
  std::vector<float> latent(static_cast<size_t>(c.kv_lora_rank)),
      rope(static_cast<size_t>(c.qk_rope_head_dim));
  auto fill = [&](std::vector<float>& v) {
    for (float& x : v)
      x = static_cast<float>(static_cast<double>(rng() >> 11) * 0x1p-53 * 3.4641 - 1.7320);
  };
  for (int b = 0; b < batch; ++b) {
    const SeqId s = cache.create(depth + warmup + steps);
    for (int l = 0; l < c.n_layers; ++l)
      for (int64_t p = 0; p < depth; ++p) {
        fill(latent);
        fill(rope);
        cache.write_entry(l, s, p, latent.data(), rope.data());
      }
    cache.set_length(s, depth);
    seqs.push_back(s);
  }
  DecodeResult r;
  r.batch = batch;
  for (int i = 0; i < warmup + steps; ++i) {
    Step step;
    const std::vector<int32_t> tokens = random_tokens(rng, c.vocab_size, batch);
    for (int b = 0; b < batch; ++b) step.add(seqs[b], depth + i, &tokens[b], 1);
    StepOutput out;
    const double start = now_seconds();
    model.forward(step, cache, out);
    if (i < warmup) continue;
    r.seconds += now_seconds() - start;
    ++r.steps;
    r.weight_bytes += model.stats().weight_bytes;
    r.parts.add(model.stats());
    r.collectives.add(model.collective_stats());
  }
  return r;
}

PrefillResult bench_prefill(Transformer& model, int tokens, uint64_t seed) {
  const ModelConfig& c = model.config();
  // (the prompt and the one token drawn after it must fit: the engine refuses a longer request)
  check(tokens >= 1 && tokens < c.max_seq_len, "bench: prefill length ", tokens,
        " is outside [1, max_seq_len - 1 = ", c.max_seq_len - 1, "] (--max-seq-len)");
  std::mt19937_64 rng(seed);
  KVCache cache = cache_for(c, 1, tokens + 1);
  PrefillResult r;
  r.tokens = tokens;
  EngineOptions options;
  options.step_tokens = tokens;  // the whole prompt in one step
  options.prefix_cache = false;
  options.on_step = [&](const StepReport& s) {
    if (s.prefill_tokens == 0) return;
    r.seconds += s.seconds;
    r.macs += model.stats().macs;
    r.weight_bytes += model.stats().weight_bytes;
    r.parts.add(model.stats());
    r.collectives.add(model.collective_stats());
  };
  Engine engine(model, cache, options);
  SamplingParams params;
  params.max_new_tokens = 1;
  std::vector<Engine::Pending> requests;
  requests.push_back({random_tokens(rng, c.vocab_size, tokens), params, {}});
  engine.run_all(std::move(requests));
  check(r.seconds > 0, "bench: the prefill of ", tokens, " tokens did not run");
  return r;
}

ServingResult bench_serving(Transformer& model, const ServingOptions& o) {
  const ModelConfig& c = model.config();
  check(o.concurrency >= 1 && o.requests >= 1 && o.prompt_len >= 1 && o.max_new_tokens >= 1 &&
            o.stagger_steps >= 0,
        "bench: serving needs concurrency, requests, prompt length and new tokens >= 1");
  check(o.prompt_len + o.max_new_tokens <= c.max_seq_len, "bench: serving prompt plus new tokens (",
        o.prompt_len + o.max_new_tokens, ") exceed max_seq_len (", c.max_seq_len, ")");
  std::mt19937_64 rng(o.seed);
  KVCache cache = cache_for(c, o.concurrency, o.prompt_len + o.max_new_tokens);
  EngineOptions options;
  options.step_tokens = o.step_tokens;
  options.max_running = o.concurrency;
  options.prefix_cache = false;
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

ConversationResult bench_conversations(Transformer& model, const ConversationOptions& o) {
  const ModelConfig& c = model.config();
  check(
      o.users >= 1 && o.turns >= 1 && o.system_len >= 0 && o.user_len >= 1 && o.max_new_tokens >= 1,
      "bench: conversations need users, turns, user tokens and new tokens >= 1");
  const int64_t longest =
      o.system_len + static_cast<int64_t>(o.turns) * (o.user_len + o.max_new_tokens);
  check(longest <= c.max_seq_len, "bench: a conversation of ", longest,
        " positions exceeds max_seq_len (", c.max_seq_len, ")");
  std::mt19937_64 rng(o.seed);
  const int64_t budget =
      o.kv_positions > 0 ? o.kv_positions : o.users * KVCache::blocks_of(longest);
  KVCache cache(c, budget);
  EngineOptions options;
  options.step_tokens = o.step_tokens;
  options.max_running = o.users;
  options.prefix_cache = o.prefix_cache;
  ConversationResult result;
  result.options = o;
  result.kv_bytes_per_block = cache.bytes_per_position() * kKVBlock;
  options.on_step = [&](const StepReport&) {
    result.peak_kv_blocks = std::max(result.peak_kv_blocks, cache.used_blocks());
  };
  Engine engine(model, cache, options);
  if (!engine.leader()) {
    engine.follow();
    return result;
  }
  result.ttft_seconds.assign(static_cast<size_t>(o.turns), {});
  result.tpot_seconds.assign(static_cast<size_t>(o.turns), {});
  result.turn_reused.assign(static_cast<size_t>(o.turns), 0);
  result.turn_prompt_tokens.assign(static_cast<size_t>(o.turns), 0);
  const std::vector<int32_t> system = random_tokens(rng, c.vocab_size, o.system_len);
  struct User {
    std::vector<int32_t> history, answer;
    int turn = 0;
    bool busy = false;
    double submitted = 0, first = 0, last = 0;
  };
  std::vector<User> users(static_cast<size_t>(o.users));
  for (User& u : users) u.history = system;
  int done = 0, answered = 0;
  const double t0 = now_seconds();
  while (done < o.users) {
    for (size_t i = 0; i < users.size(); ++i) {
      User& u = users[i];
      if (u.busy || u.turn >= o.turns || static_cast<int>(i) > answered) continue;
      std::vector<int32_t> prompt = u.history;
      const std::vector<int32_t> message = random_tokens(rng, c.vocab_size, o.user_len);
      prompt.insert(prompt.end(), message.begin(), message.end());
      // ideal: everything a previous turn of this user left in the cache, or else the system
      // prompt when some earlier request computed it (user 0's first turn has, by the time others
      // start)
      const int64_t ideal =
          u.turn > 0
              ? static_cast<int64_t>(u.history.size()) - 1
              : (i > 0 ? std::min<int64_t>(o.system_len, static_cast<int64_t>(prompt.size()) - 1)
                       : 0);
      result.ideal_reused_tokens += ideal;
      result.prompt_tokens += static_cast<int64_t>(prompt.size());
      result.turn_prompt_tokens[static_cast<size_t>(u.turn)] += static_cast<int64_t>(prompt.size());
      SamplingParams params;
      params.temperature = 1.0f;
      params.seed = o.seed + 1000 * i + static_cast<uint64_t>(u.turn);
      params.max_new_tokens = o.max_new_tokens;
      RequestEvents events;
      const size_t turn = static_cast<size_t>(u.turn);
      events.on_start = [&result, turn](int64_t reused) {
        result.reused_tokens += reused;
        result.turn_reused[turn] += reused;
      };
      events.on_token = [&u](int32_t t) {
        u.last = now_seconds();
        if (u.answer.empty()) u.first = u.last;
        u.answer.push_back(t);
      };
      events.on_finish = [&u, &result, &done, &answered, &o, turn, p = prompt](
                             FinishReason, const std::string&) mutable {
        ++answered;
        result.ttft_seconds[turn].push_back(u.first - u.submitted);
        if (u.answer.size() > 1)
          result.tpot_seconds[turn].push_back((u.last - u.first) /
                                              static_cast<double>(u.answer.size() - 1));
        u.history = std::move(p);
        u.history.insert(u.history.end(), u.answer.begin(), u.answer.end());
        u.answer.clear();
        u.busy = false;
        if (++u.turn == o.turns) ++done;
      };
      u.busy = true;
      u.submitted = now_seconds();
      engine.submit(std::move(prompt), params, std::move(events));
    }
    engine.step();
  }
  engine.pause();
  result.seconds = now_seconds() - t0;
  if (const PrefixCache* prefix = engine.prefix_cache()) result.evictions = prefix->evictions();
  return result;
}

double MtpCostResult::break_even_acceptance(int k) const {
  if (speedup_at(k, 1.0) < 1) return 2;  // not even when every draft is accepted
  double lo = 0, hi = 1;
  for (int i = 0; i < 50; ++i) {
    const double mid = (lo + hi) / 2;
    (speedup_at(k, mid) < 1 ? lo : hi) = mid;
  }
  return hi;
}

MtpCostResult bench_mtp(Transformer& model, int batch, int prompt_len, int rounds, int max_drafts,
                        uint64_t seed) {
  const ModelConfig& c = model.config();
  check(model.has_mtp(), "bench --mtp: no multi-token-prediction module loaded");
  check(batch >= 1 && prompt_len >= 2 && rounds >= 1 && max_drafts >= 1,
        "bench: MTP cost needs batch and rounds >= 1, a prompt of >= 2 tokens and >= 1 draft");
  std::mt19937_64 rng(seed);
  const int64_t room = prompt_len + max_drafts + 1;
  KVCache cache = cache_for(c, batch, room);
  KVCache mtp_cache = model.make_mtp_cache(static_cast<int64_t>(batch) * KVCache::blocks_of(room));
  std::vector<SeqId> seqs, mtp_seqs;
  std::vector<std::vector<int32_t>> tokens;
  Step prefill, mtp_prefill;
  prefill.want_hidden = true;
  for (int b = 0; b < batch; ++b) {
    seqs.push_back(cache.create(room));
    mtp_seqs.push_back(mtp_cache.create(room));
    tokens.push_back(random_tokens(rng, c.vocab_size, room));
    prefill.add(seqs.back(), 0, tokens.back().data(), prompt_len);
    prefill.chunks.back().all_hidden = true;
    mtp_prefill.add(mtp_seqs.back(), 0, tokens.back().data() + 1, prompt_len - 1);
  }
  StepOutput out;
  model.forward(prefill, cache, out);
  {  // the MTP's cache holds positions 0 .. prompt_len - 2, as after a prefill
    std::vector<float> hidden;
    for (int b = 0; b < batch; ++b) {
      const auto first = out.hidden.begin() + static_cast<int64_t>(b) * prompt_len * c.dim;
      hidden.insert(hidden.end(), first, first + static_cast<int64_t>(prompt_len - 1) * c.dim);
    }
    StepOutput ignored;
    mtp_prefill.want_logits = false;
    model.forward_mtp(mtp_prefill, hidden.data(), mtp_cache, ignored);
  }
  const int64_t at = prompt_len, mtp_at = prompt_len - 1;
  MtpCostResult r;
  r.batch = batch;
  r.rounds = rounds;
  r.verify_seconds.assign(max_drafts, 0);
  r.draft_seconds.assign(max_drafts, 0);
  r.verify_bytes.assign(max_drafts, 0);
  r.verify_parts.resize(max_drafts);
  for (int round = -1; round < rounds; ++round) {  // round -1 warms the paths up, untimed
    const bool timed = round >= 0;
    Step decode;
    for (int b = 0; b < batch; ++b) decode.add(seqs[b], at, tokens[b].data() + at, 1);
    double t = now_seconds();
    model.forward(decode, cache, out);
    if (timed) {
      r.decode_seconds += (now_seconds() - t) / rounds;
      r.decode_bytes += static_cast<double>(model.stats().weight_bytes) / rounds;
      r.decode_parts.add(model.stats());
    }
    for (SeqId s : seqs) cache.truncate(s, at);
    for (int k = 1; k <= max_drafts; ++k) {
      Step verify;
      verify.want_hidden = true;
      for (int b = 0; b < batch; ++b)
        verify.add(seqs[b], at, tokens[b].data() + at, 1 + k, /*all_logits=*/true);
      t = now_seconds();
      model.forward(verify, cache, out);
      if (timed) {
        r.verify_seconds[k - 1] += (now_seconds() - t) / rounds;
        r.verify_bytes[k - 1] += static_cast<double>(model.stats().weight_bytes) / rounds;
        r.verify_parts[k - 1].add(model.stats());
      }
      for (SeqId s : seqs) cache.truncate(s, at);
      // the drafts: the MTP over the settled position (the first verify row's hidden state),
      // then k - 1 chained steps on its own output
      std::vector<float> hidden;
      for (int b = 0; b < batch; ++b) {
        const auto first = out.hidden.begin() + static_cast<int64_t>(b) * (1 + k) * c.dim;
        hidden.insert(hidden.end(), first, first + c.dim);
      }
      t = now_seconds();
      for (int j = 0; j < k; ++j) {
        Step draft;
        draft.want_hidden = j + 1 < k;
        for (int b = 0; b < batch; ++b)
          draft.add(mtp_seqs[b], mtp_at + j, tokens[b].data() + mtp_at + j + 1, 1);
        StepOutput drafts;
        model.forward_mtp(draft, hidden.data(), mtp_cache, drafts);
        hidden = drafts.hidden;
      }
      if (timed) r.draft_seconds[k - 1] += (now_seconds() - t) / rounds;
      for (SeqId s : mtp_seqs) mtp_cache.truncate(s, mtp_at);
    }
  }
  return r;
}

}  // namespace dsinfer
