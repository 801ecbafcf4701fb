// The engine across ranks (src/engine/step_orders.h, Engine::follow): rank 0's orders survive
// the trip as bytes (and malformed bytes are an Error, not a wrong step); a follower that applies
// them takes the same steps as the leader: the same tokens, finish reasons and prompt logits,
// with joins, a cancel and chunked prefill between steps; a leader that dies mid-run releases its
// follower with an Error. The two ranks run in two threads of one process, each with its own
// copy of the model, joined by a two-party Comm that carries only the engine's broadcasts (the
// model itself is a world of one, as a tensor-parallel shard would be at mp1).
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "engine/engine.h"
#include "engine/step_orders.h"
#include "model/transformer.h"
#include "test_support.h"

namespace dsinfer::engine_ranks_test {
namespace {

using Tokens = std::vector<int32_t>;

TEST(StepOrders, RoundTripEveryField) {
  StepOrders o;
  Submission s;
  s.id = 41;
  s.prompt = {5, 6, 7};
  s.params.temperature = 0.7f;
  s.params.top_p = 0.9f;
  s.params.top_k = 12;
  s.params.max_new_tokens = 33;
  s.params.stop_ids = {1, 2};
  s.params.seed = 1ull << 60;
  s.params.choice = 3;
  s.params.prompt_logits = true;
  s.params.token_logits = true;
  s.params.repetition_penalty = 1.3f;
  s.params.frequency_penalty = -0.5f;
  s.params.presence_penalty = 0.25f;
  s.params.logit_bias = {{3, -100.0f}, {70000, 2.5f}};
  s.params.min_tokens = 4;
  s.params.min_p = 0.05f;
  s.params.grammar = {OutputGrammar::Kind::kJsonSchema, R"({"type": "object"})", false, true};
  o.submissions = {s, Submission{42, {9}, {}}};
  o.cancels = {7, 8};
  o.draft = false;
  const StepOrders back = decode_orders(encode_orders(o));
  EXPECT_FALSE(back.draft);
  ASSERT_EQ(back.submissions.size(), 2u);
  const Submission& b = back.submissions[0];
  EXPECT_EQ(b.id, 41);
  EXPECT_EQ(b.prompt, s.prompt);
  EXPECT_EQ(b.params.temperature, 0.7f);
  EXPECT_EQ(b.params.top_p, 0.9f);
  EXPECT_EQ(b.params.top_k, 12);
  EXPECT_EQ(b.params.max_new_tokens, 33);
  EXPECT_EQ(b.params.stop_ids, s.params.stop_ids);
  EXPECT_EQ(b.params.seed, 1ull << 60);
  EXPECT_EQ(b.params.choice, 3);
  EXPECT_TRUE(b.params.prompt_logits);
  EXPECT_TRUE(b.params.token_logits);
  EXPECT_EQ(b.params.repetition_penalty, 1.3f);
  EXPECT_EQ(b.params.frequency_penalty, -0.5f);
  EXPECT_EQ(b.params.presence_penalty, 0.25f);
  EXPECT_EQ(b.params.logit_bias, s.params.logit_bias);
  EXPECT_EQ(b.params.min_tokens, 4);
  EXPECT_EQ(b.params.min_p, 0.05f);
  EXPECT_EQ(b.params.grammar.kind, OutputGrammar::Kind::kJsonSchema);
  EXPECT_EQ(b.params.grammar.text, s.params.grammar.text);
  EXPECT_FALSE(b.params.grammar.strict);
  EXPECT_TRUE(b.params.grammar.after_reasoning);
  EXPECT_EQ(back.submissions[1].params.grammar.kind, OutputGrammar::Kind::kNone);
  EXPECT_EQ(back.submissions[1].prompt, Tokens{9});
  EXPECT_EQ(back.cancels, (std::vector<RequestId>{7, 8}));
  StepOrders abort;
  abort.kind = StepOrders::Kind::kAbort;
  abort.reason = "disk full";
  EXPECT_EQ(decode_orders(encode_orders(abort)).reason, "disk full");
}

TEST(StepOrders, MalformedBytesAreAnError) {
  StepOrders o;
  o.submissions = {Submission{1, {5, 6, 7}, {}}};
  const std::string bytes = encode_orders(o);
  for (size_t cut = 0; cut < bytes.size(); ++cut)
    EXPECT_THROW(decode_orders(bytes.substr(0, cut)), Error) << "cut at " << cut;
  EXPECT_THROW(decode_orders(bytes + "x"), Error);
  EXPECT_THROW(decode_orders("?"), Error);
  std::string huge = bytes;
  const uint64_t n = ~0ull;
  std::memcpy(huge.data() + 1, &n, sizeof n);  // a submission count far past the bytes
  EXPECT_THROW(decode_orders(huge), Error);
}

// Two ranks in one process: rank 0's broadcasts queue up for rank 1. Only what the engine uses.
class PairComm : public Comm {
 public:
  struct Wire {
    std::mutex mutex;
    std::condition_variable ready;
    std::deque<std::string> messages;
  };
  PairComm(std::shared_ptr<Wire> wire, int rank) : wire_(std::move(wire)), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return 2; }
  const char* name() const override { return "pair"; }
  void broadcast(std::string& bytes, int root) override {
    std::unique_lock<std::mutex> lock(wire_->mutex);
    if (rank_ == root) {
      wire_->messages.push_back(bytes);
      wire_->ready.notify_all();
      return;
    }
    wire_->ready.wait(lock, [&] { return !wire_->messages.empty(); });
    bytes = wire_->messages.front();
    wire_->messages.pop_front();
  }
  void all_reduce_sum(float*, int64_t) override { fail("pair: no all_reduce"); }
  void all_gather(const float*, int64_t, float*) override { fail("pair: no all_gather"); }
  void barrier() override {}

 private:
  std::shared_ptr<Wire> wire_;
  int rank_;
};

struct Rank {
  std::unique_ptr<Comm> local = make_local_comm();
  ThreadPool pool{1};
  ModelConfig config;
  std::unique_ptr<Transformer> model;
  KVCache cache;
  PairComm pair;
  Rank(std::shared_ptr<PairComm::Wire> wire, int rank) : pair(std::move(wire), rank) {
    const std::string ckpt = test::convert_golden("tiny-v3");
    config = load_config(ckpt + "/config.json");
    model = Transformer::load(config, ckpt, *local, pool);
    cache = KVCache(config, 1024);
  }
  EngineOptions options(int64_t step_tokens) {
    EngineOptions o;
    o.ranks = &pair;
    o.step_tokens = step_tokens;
    return o;
  }
};

Tokens random_tokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  Tokens t(static_cast<size_t>(n));
  for (int32_t& v : t) v = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return t;
}

// What one rank saw of each request.
struct Seen {
  std::map<RequestId, Tokens> tokens;
  std::map<RequestId, std::string> finish;
  std::map<RequestId, std::vector<float>> logits;
  RequestEvents events(RequestId id) {
    RequestEvents e;
    e.on_token = [this, id](int32_t t) { tokens[id].push_back(t); };
    e.on_finish = [this, id](FinishReason r, const std::string&) {
      finish[id] = finish_reason_name(r);
    };
    e.on_logits = [this, id](int64_t, const float* row) {
      logits[id].insert(logits[id].end(), row, row + 64);
    };
    return e;
  }
};

TEST(EngineRanks, AFollowerTakesTheLeadersStepsWithJoinsCancelsAndChunkedPrefill) {
  auto wire = std::make_shared<PairComm::Wire>();
  Rank zero(wire, 0), one(wire, 1);
  const int vocab = zero.config.vocab_size;
  Seen led, followed;
  bool follower_paused = false, follower_stopped = false;
  std::thread follower([&] {
    EngineOptions o = one.options(7);
    o.follower_events = [&](RequestId id) { return followed.events(id); };
    Engine engine(*one.model, one.cache, o);
    EXPECT_THROW(engine.submit({1, 2}, {}, {}), Error) << "a follower takes no submissions";
    follower_paused = engine.follow();
    follower_stopped = !engine.follow();
  });
  {
    Engine engine(*zero.model, zero.cache, zero.options(7));  // 7 tokens a step: prompts in chunks
    SamplingParams sampled;
    sampled.temperature = 0.8f;
    sampled.max_new_tokens = 12;
    sampled.token_logits = true;  // Seen's on_logits reads every row
    SamplingParams scored;
    scored.max_new_tokens = 0;
    scored.prompt_logits = true;
    const RequestId a = engine.submit(random_tokens(20, vocab, 1), sampled, led.events(0));
    for (int s = 0; s < 4; ++s) engine.step();
    engine.submit(random_tokens(15, vocab, 2), sampled, led.events(1));  // joins while a decodes
    engine.step();
    engine.submit(random_tokens(9, vocab, 3), scored, led.events(2));
    for (int s = 0; s < 3; ++s) engine.step();
    engine.cancel(a);  // leaves mid-decode
    engine.run_until_idle();
    engine.stop();
  }
  follower.join();
  EXPECT_TRUE(follower_paused);
  EXPECT_TRUE(follower_stopped);
  EXPECT_EQ(led.finish.at(0), "cancelled");
  EXPECT_EQ(led.finish.at(1), "length");
  EXPECT_EQ(led.finish.at(2), "length");
  EXPECT_EQ(led.tokens.at(1).size(), 12u);
  EXPECT_EQ(led.logits.at(2).size(), 9u * 64);  // every prompt row of the scored request
  EXPECT_EQ(followed.finish, led.finish);
  EXPECT_EQ(followed.tokens, led.tokens);
  EXPECT_EQ(followed.logits.at(2), led.logits.at(2));
}

TEST(EngineRanks, ALeaderThatDiesMidRunReleasesItsFollowerWithAnError) {
  auto wire = std::make_shared<PairComm::Wire>();
  Rank zero(wire, 0), one(wire, 1);
  std::string error;
  std::thread follower([&] {
    Engine engine(*one.model, one.cache, one.options(64));
    try {
      engine.follow();
    } catch (const Error& e) {
      error = e.what();
    }
  });
  {
    Engine engine(*zero.model, zero.cache, zero.options(64));
    engine.submit(random_tokens(10, zero.config.vocab_size, 4), {}, {});
    engine.step();
    // leaves scope without run_until_idle(), pause() or stop(): as when rank 0 throws
  }
  follower.join();
  EXPECT_NE(error.find("rank 0 failed"), std::string::npos) << error;
}

}  // namespace
}  // namespace dsinfer::engine_ranks_test
