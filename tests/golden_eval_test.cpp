// Golden conformance: each tiny checkpoint converted with `dsinfer convert` at model-parallel N,
// then run through `dsinfer eval` at world size N (mpirun for N > 1; skipped without it) on the
// reference's case, must reproduce the reference's fp32 logits
// (max|ours - ref| <= 1e-3 * max|ref| per row, same argmax) and greedy completions exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "model/config.h"
#include "test_support.h"

namespace dsinfer::golden_eval_test {
namespace {

using json = nlohmann::json;
using test::data_path;

struct GoldenCase {
  std::string model;
  int world_size;
};

std::string case_name(const ::testing::TestParamInfo<GoldenCase>& info) {
  std::string name = info.param.model + "_mp" + std::to_string(info.param.world_size);
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

class GoldenEval : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(GoldenEval, LogitsAndGreedyCompletionsMatchReference) {
  const GoldenCase& gc = GetParam();
  if (gc.world_size > 1 && !test::has_mpirun())
    GTEST_SKIP() << "mpirun not installed (apt-get install openmpi-bin libopenmpi-dev)";
  const std::string golden = data_path("golden/" + gc.model);
  const std::string tag = "ref-mp" + std::to_string(gc.world_size) + "-fp32";
  const std::string ckpt = test::convert_golden(gc.model, gc.world_size);
  const std::string out = test::scratch_dir("out") + "/eval";
  const std::string args =
      "eval --ckpt-path " + ckpt + " --case " + golden + "/" + tag + ".json --out " + out;
  auto r = gc.world_size == 1 ? test::run_dsinfer(args) : test::run_mpi(gc.world_size, args);
  ASSERT_EQ(r.exit_code, 0) << r.err;

  const double worst =
      test::expect_logits_match(out + ".safetensors", golden + "/" + tag + ".safetensors");
  std::printf("[ golden ] %s %s at %d rank(s): worst max|d|/max|ref| = %.3g\n", gc.model.c_str(),
              tag.c_str(), gc.world_size, worst);
  RecordProperty("worst_ratio", std::to_string(worst));
  const json expected = json::parse(test::read_file(golden + "/" + tag + ".json"));
  const json got = json::parse(test::read_file(out + ".json"));
  EXPECT_EQ(got["completions"], expected["generate"]["completions"]);
}

// --huge-pages reads the shards into the process's own huge-page memory: the same bits as the map
// (tiny-v3 at one rank, and tiny-v2 at 2 ranks of `run`, which passes the flag on to its ranks).
TEST(GoldenEvalHugePages, TheSameLogitsAsTheMappedShards) {
  for (const auto& [model, world] : {std::pair<std::string, int>{"tiny-v3", 1}, {"tiny-v2", 2}}) {
    SCOPED_TRACE(model);
    const std::string golden = data_path("golden/" + model);
    const std::string tag = "ref-mp" + std::to_string(world) + "-fp32";
    const std::string ckpt = test::convert_golden(model, world);
    const std::string run = world == 1 ? "" : "run -n " + std::to_string(world) + " --comm gloo ";
    std::string outs[2];
    for (int huge = 0; huge < 2; ++huge) {
      outs[huge] = test::scratch_dir("out-" + model + std::to_string(huge)) + "/eval";
      auto r = test::run_dsinfer(std::string(huge ? "--huge-pages " : "") + "--threads 1 " + run +
                                 "eval --ckpt-path " + ckpt + " --case " + golden + "/" + tag +
                                 ".json --out " + outs[huge]);
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    EXPECT_EQ(test::read_file(outs[1] + ".safetensors"), test::read_file(outs[0] + ".safetensors"));
    test::expect_logits_match(outs[1] + ".safetensors", golden + "/" + tag + ".safetensors");
  }
}

// --dump writes the scoring step's named intermediates; its logits rows are the ones eval wrote
// (row (b, prefill_len - 1 + s) of the step is step s of sequence b), and every layer is there.
TEST(GoldenEvalDump, IntermediatesHoldEveryLayerAndTheWrittenLogits) {
  const std::string golden = data_path("golden/tiny-v3");
  const std::string ckpt = test::convert_golden("tiny-v3", 1);
  const std::string out = test::scratch_dir("out") + "/eval";
  auto r = test::run_dsinfer("eval --dump --ckpt-path " + ckpt + " --case " + golden +
                             "/ref-mp1-fp32.json --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json c = json::parse(test::read_file(golden + "/ref-mp1-fp32.json"));
  const int64_t batch = static_cast<int64_t>(c["prefill_tokens"].size());
  const int64_t prefill = static_cast<int64_t>(c["prefill_tokens"][0].size());
  const int64_t steps = 1 + static_cast<int64_t>(c["decode_tokens"].size());
  const int64_t length = prefill + steps - 1;
  const SafetensorsFile dump(out + ".intermediates.safetensors");
  const SafetensorsFile logits(out + ".safetensors");
  const auto& written = logits.tensors().at("logits");
  const int64_t vocab = written.shape[2];
  const ModelConfig config = load_config(ckpt + "/config.json");
  for (int layer = 0; layer < config.n_layers; ++layer)
    for (const char* what : {"attn_out", "ffn_out", "out"}) {
      const std::string name = "layers." + std::to_string(layer) + "." + what;
      ASSERT_TRUE(dump.tensors().count(name)) << name;
      EXPECT_EQ(dump.tensors().at(name).shape, (std::vector<int64_t>{batch * length, config.dim}))
          << name;
    }
  const auto& rows = dump.tensors().at("logits");
  ASSERT_EQ(rows.shape, (std::vector<int64_t>{batch * length, vocab}));
  const float* all = reinterpret_cast<const float*>(rows.data);
  const float* got = reinterpret_cast<const float*>(written.data);
  for (int64_t s = 0; s < steps; ++s)
    for (int64_t b = 0; b < batch; ++b)
      EXPECT_EQ(0, std::memcmp(all + (b * length + prefill - 1 + s) * vocab,
                               got + (s * batch + b) * vocab, vocab * 4))
          << "step " << s << " row " << b;
}

INSTANTIATE_TEST_SUITE_P(SingleProcess, GoldenEval,
                         ::testing::Values(GoldenCase{"tiny-v3", 1}, GoldenCase{"tiny-v2", 1},
                                           GoldenCase{"tiny-v2-lite", 1}),
                         case_name);

// Tensor parallelism across processes (mpirun): the reference's mp2/mp4 runs.
INSTANTIATE_TEST_SUITE_P(Mpi, GoldenEval,
                         ::testing::Values(GoldenCase{"tiny-v3", 2}, GoldenCase{"tiny-v2", 2},
                                           GoldenCase{"tiny-v2", 4}, GoldenCase{"tiny-v2-lite", 2},
                                           GoldenCase{"tiny-v2-lite", 4}),
                         case_name);

}  // namespace
}  // namespace dsinfer::golden_eval_test
