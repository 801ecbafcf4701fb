// Requests on the engine for the prefix-cache tests (engine_prefix_test, engine_depth_test): the
// tiny-v3 golden model loaded once, random prompts, one request run to the end (its tokens, the
// positions it reused, optionally the logits rows it sampled from), and the same request alone on
// a fresh engine without prefix reuse (what reuse must not change).
#pragma once

#include <memory>
#include <random>
#include <vector>

#include "engine/engine.h"
#include "model/transformer.h"
#include "parallel/comm.h"
#include "test_support.h"

namespace dsinfer::test {

using Tokens = std::vector<int32_t>;

struct Loaded {
  std::unique_ptr<Comm> comm = make_local_comm();
  ThreadPool pool{2};
  ModelConfig config;
  std::unique_ptr<Transformer> model;
  Loaded() {
    const std::string ckpt = convert_golden("tiny-v3");
    config = load_config(ckpt + "/config.json");
    model = Transformer::load(config, ckpt, *comm, pool);
  }
};

inline Loaded& loaded() {
  static Loaded l;
  return l;
}

inline Tokens random_tokens(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  Tokens t(static_cast<size_t>(n));
  for (int32_t& v : t)
    v = static_cast<int32_t>(rng() % static_cast<uint32_t>(loaded().config.vocab_size));
  return t;
}

inline Tokens concat(Tokens a, const Tokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct Completion {
  Tokens tokens;
  int64_t reused = -1;
  std::vector<float> logits;  // the rows its tokens were sampled from, [tokens, vocab]
};

// Runs one request to the end on `engine`.
inline Completion complete(Engine& engine, const Tokens& prompt, SamplingParams p,
                           bool logits = false) {
  Completion c;
  p.token_logits = logits;
  const int64_t vocab = loaded().config.vocab_size;
  RequestEvents e;
  e.on_token = [&](int32_t t) { c.tokens.push_back(t); };
  e.on_start = [&](int64_t reused) { c.reused = reused; };
  if (logits)
    e.on_logits = [&](int64_t, const float* row) {
      c.logits.insert(c.logits.end(), row, row + vocab);
    };
  engine.submit(prompt, p, std::move(e));
  engine.run_until_idle();
  return c;
}

// The same request alone on a fresh engine without prefix reuse.
inline Completion fresh(const Tokens& prompt, const SamplingParams& p, bool logits = false,
                        KVDType dtype = KVDType::kF32) {
  KVCache cache(loaded().config, static_cast<int64_t>(prompt.size()) + p.max_new_tokens, dtype);
  EngineOptions o;
  o.prefix_cache = false;
  Engine engine(*loaded().model, cache, o);
  return complete(engine, prompt, p, logits);
}

}  // namespace dsinfer::test
