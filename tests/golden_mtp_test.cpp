// The multi-token-prediction module against the story model's MTP golden
// (tests/data/golden/tiny-v3-story/mtp-fp32.json, computed by the fp32 training code that made the
// checkpoint): teacher-forced over 4 held-out sequences, the MTP's greedy token for t_{i+2} at
// every position i and its log-prob (within 1e-3), and the greedy acceptance (MTP argmax at i ==
// main argmax at i + 1) of 0.667 exactly. Negative controls show the test tells the right module
// from near misses: the concat halves swapped, the hidden state taken before the final norm.
// At position 0 the embedding is zeroed, so the draft there ignores t_1. The same at mp2.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "model/transformer.h"
#include "parallel/comm.h"
#include "test_support.h"

namespace dsinfer::golden_mtp_test {
namespace {

using json = nlohmann::json;

struct Draft {
  std::vector<int32_t> token;      // MTP argmax at each position i (for t_{i+2})
  std::vector<double> logprob;     // its log-softmax
  std::vector<int32_t> main_next;  // main argmax at each position i (for t_{i+1})
};

int32_t argmax(const float* row, int64_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

double log_softmax_at(const float* row, int64_t n, int64_t at) {
  const float mx = *std::max_element(row, row + n);
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += std::exp(static_cast<double>(row[j]) - mx);
  return static_cast<double>(row[at]) - mx - std::log(sum);
}

enum class Variant { kRight, kPreNormHidden };

// Teacher-forced: the main model over all of `tokens`, then the MTP over positions 0 .. n-2
// with t_{i+1} and the main hidden state at i.
Draft drafts(Transformer& m, const std::vector<int32_t>& tokens,
             Variant variant = Variant::kRight) {
  const int64_t n = static_cast<int64_t>(tokens.size()), vocab = m.config().vocab_size;
  KVCache cache(m.config(), n);
  const SeqId seq = cache.create(n);
  Step step;
  step.add(seq, 0, tokens.data(), n, /*all_logits=*/true);
  step.want_hidden = true;
  StepOutput out;
  TensorDump dump;
  if (variant == Variant::kPreNormHidden) m.add_observer(&dump);
  m.forward(step, cache, out);
  if (variant == Variant::kPreNormHidden) m.remove_observer(&dump);
  std::vector<float> hidden = out.hidden;
  if (variant == Variant::kPreNormHidden)
    hidden = *dump.find("layers." + std::to_string(m.config().n_layers - 1) + ".out");
  Draft d;
  for (int64_t i = 0; i + 1 < n; ++i)
    d.main_next.push_back(argmax(out.logits.data() + i * vocab, vocab));
  KVCache mtp_cache = m.make_mtp_cache(n);
  const SeqId mseq = mtp_cache.create(n);
  Step mstep;
  mstep.add(mseq, 0, tokens.data() + 1, n - 1, /*all_logits=*/true);
  StepOutput mout;
  m.forward_mtp(mstep, hidden.data(), mtp_cache, mout);
  EXPECT_EQ(static_cast<int64_t>(mout.logits.size()), (n - 1) * vocab);
  for (int64_t i = 0; i + 1 < n; ++i) {
    const float* row = mout.logits.data() + i * vocab;
    d.token.push_back(argmax(row, vocab));
    d.logprob.push_back(log_softmax_at(row, vocab, d.token.back()));
  }
  return d;
}

const json& golden() {
  static const json g =
      json::parse(test::read_file(test::data_path("golden/tiny-v3-story/mtp-fp32.json")));
  return g;
}

// Rewrites a safetensors file with eh_proj's two input halves swapped: the same as feeding
// [hnorm(h) | enorm(e)], the order the paper's equation suggests.
void write_swapped_halves(const std::string& from, const std::string& to) {
  SafetensorsFile in(from);
  std::vector<SafetensorsWriter::Entry> entries;
  for (const auto& [name, t] : in.tensors()) entries.push_back({name, t.dtype, t.shape});
  SafetensorsWriter out(to, entries);
  for (const auto& [name, t] : in.tensors()) {
    if (name != "mtp.eh_proj.weight") {
      out.write(name, t.data, t.n_bytes);
      continue;
    }
    const size_t rows = t.shape[0], half = t.shape[1] / 2 * dtype_size(t.dtype);
    std::vector<uint8_t> swapped(t.n_bytes);
    for (size_t r = 0; r < rows; ++r) {
      std::copy_n(t.data + r * 2 * half + half, half, swapped.data() + r * 2 * half);
      std::copy_n(t.data + r * 2 * half, half, swapped.data() + r * 2 * half + half);
    }
    out.write(name, swapped.data(), swapped.size());
  }
  out.finish();
}

struct Loaded {
  std::unique_ptr<Comm> comm = make_local_comm();
  ThreadPool pool{2};
  std::string ckpt = test::convert_golden("tiny-v3-story", 1, false, /*keep_mtp=*/true);
  ModelConfig config = load_config(ckpt + "/config.json");
  std::unique_ptr<Transformer> model = Transformer::load(config, ckpt, *comm, pool);
  Loaded() { model->load_mtp(ckpt); }
};

TEST(GoldenMtp, DraftsAndAcceptanceMatchTheTrainingCode) {
  Loaded l;
  const json& g = golden();
  int accepted = 0, total = 0, golden_accepted = 0;
  double worst = 0;
  for (size_t b = 0; b < g["tokens"].size(); ++b) {
    const std::vector<int32_t> tokens = g["tokens"][b];
    const Draft d = drafts(*l.model, tokens);
    const std::vector<int32_t> want = g["mtp_greedy_token"][b];
    const std::vector<double> want_lp = g["mtp_greedy_logprob"][b];
    const std::vector<int32_t> main_next = g["main_greedy_token_at_i_plus_1"][b];
    ASSERT_EQ(want.size() + 1, d.token.size());  // the golden stops at i = n - 3 (t_{i+2} known)
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(d.token[i], want[i]) << "sequence " << b << " position " << i;
      EXPECT_NEAR(d.logprob[i], want_lp[i], 1e-3) << "sequence " << b << " position " << i;
      worst = std::max(worst, std::abs(d.logprob[i] - want_lp[i]));
      EXPECT_EQ(d.main_next[i + 1], main_next[i]) << "sequence " << b << " position " << i;
      accepted += d.token[i] == d.main_next[i + 1];
      golden_accepted += want[i] == main_next[i];
      ++total;
    }
  }
  EXPECT_EQ(accepted, golden_accepted);
  EXPECT_NEAR(static_cast<double>(accepted) / total, g["greedy_acceptance_rate"].get<double>(),
              1e-12);
  std::cout << "MTP drafts: acceptance " << accepted << "/" << total << ", worst |d logprob| "
            << worst << "\n";
}

int mismatches(const Draft& d, const json& want) {
  int n = 0;
  for (size_t i = 0; i < want.size(); ++i) n += d.token[i] != want[i].get<int32_t>();
  return n;
}

TEST(GoldenMtp, NearMissesOfTheModuleGiveOtherDrafts) {
  Loaded l;
  const json& g = golden();
  const std::vector<int32_t> tokens = g["tokens"][0];
  EXPECT_EQ(mismatches(drafts(*l.model, tokens), g["mtp_greedy_token"][0]), 0);
  EXPECT_GT(mismatches(drafts(*l.model, tokens, Variant::kPreNormHidden), g["mtp_greedy_token"][0]),
            10);

  const std::string swapped = test::scratch_dir("mtp-swapped");
  for (const char* f : {"config.json", "model0-mp1.safetensors"})
    std::filesystem::copy_file(l.ckpt + "/" + f, swapped + "/" + f);
  write_swapped_halves(l.ckpt + "/mtp0-mp1.safetensors", swapped + "/mtp0-mp1.safetensors");
  auto other = Transformer::load(l.config, swapped, *l.comm, l.pool);
  other->load_mtp(swapped);
  EXPECT_GT(mismatches(drafts(*other, tokens), g["mtp_greedy_token"][0]), 10);

  // position 0 sees a zero embedding: its draft does not depend on t_1
  std::vector<int32_t> changed = tokens;
  changed[1] = changed[1] == 5 ? 6 : 5;
  const Draft a = drafts(*l.model, tokens), c = drafts(*l.model, changed);
  EXPECT_EQ(a.token[0], c.token[0]);
  EXPECT_EQ(a.logprob[0], c.logprob[0]);
  EXPECT_NE(a.logprob[1], c.logprob[1]);  // position 1 does: h_1 saw the new t_1
}

// forward_mtp runs the block body forward does: observers see its parts (the block as layer
// n_layers, as the checkpoints number it) and dumps get its tensors, the logits among them.
TEST(GoldenMtp, ThePassReportsToObserversAsLayerNLayers) {
  Loaded l;
  const std::vector<int32_t> tokens = golden()["tokens"][0];
  const int64_t n = static_cast<int64_t>(tokens.size()), L = l.config.n_layers;
  KVCache cache(l.config, n);
  Step step;
  step.add(cache.create(n), 0, tokens.data(), n, /*all_logits=*/true);
  step.want_hidden = true;
  StepOutput out;
  l.model->forward(step, cache, out);
  const ForwardStats main = l.model->stats();
  // the same shape of step for the MTP: n rows from position 0 (the next tokens, any last one)
  std::vector<int32_t> next(tokens.begin() + 1, tokens.end());
  next.push_back(tokens[0]);
  KVCache mtp_cache = l.model->make_mtp_cache(n);
  Step mstep;
  mstep.add(mtp_cache.create(n), 0, next.data(), n, /*all_logits=*/true);
  StepOutput mout;
  TensorDump dump;
  l.model->add_observer(&dump);
  l.model->forward_mtp(mstep, out.hidden.data(), mtp_cache, mout);
  l.model->remove_observer(&dump);
  const ForwardStats& mtp = l.model->stats();
  // one block's attention against the main pass's L blocks of the same shape
  EXPECT_GT(mtp.part(ForwardPart::kAttention).macs, 0);
  EXPECT_EQ(main.part(ForwardPart::kAttention).macs, L * mtp.part(ForwardPart::kAttention).macs);
  EXPECT_GT(mtp.part(ForwardPart::kMoe).macs + mtp.part(ForwardPart::kDenseMlp).macs, 0);
  EXPECT_EQ(mtp.part(ForwardPart::kHead).macs, main.part(ForwardPart::kHead).macs);
  for (const char* name : {"mtp.eh_proj", "attn_out", "ffn_out", "out"}) {
    const std::string full =
        name[0] == 'm' ? std::string(name) : "layers." + std::to_string(L) + "." + name;
    EXPECT_NE(dump.find(full), nullptr) << full;
  }
  const std::vector<float>* logits = dump.find("logits");
  ASSERT_NE(logits, nullptr);
  EXPECT_EQ(*logits, mout.logits);
}

TEST(GoldenMtp, AMissingModuleIsAClearError) {
  const std::string ckpt = test::convert_golden("tiny-v3-story");
  std::unique_ptr<Comm> comm = make_local_comm();
  ThreadPool pool(1);
  auto model = Transformer::load(load_config(ckpt + "/config.json"), ckpt, *comm, pool);
  try {
    model->load_mtp(ckpt);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--keep-mtp"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dsinfer::golden_mtp_test
