// Checkpoints of other shapes than the logits goldens: the full 129280-token vocabulary
// (tiny-v3-chat) and a trained model with dim 64, rope dim 32 and 4 layers (tiny-v3-story).
// Their chat goldens record the reference's greedy completion ids for given prompt ids (batch
// of 5, and each interactive turn alone); `dsinfer eval` must reproduce them exactly.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace dsinfer::golden_chat_ids_test {
namespace {

using json = nlohmann::json;
using test::data_path;

class GoldenChatIds : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenChatIds, GreedyCompletionIdsMatchReference) {
  const std::string golden = data_path("golden/" + GetParam());
  const json config = json::parse(test::read_file(golden + "/hf/config.json"));
  const json chat = json::parse(test::read_file(golden + "/chat-mp1-fp32.json"));
  const std::string ckpt = test::convert_golden(GetParam());

  auto run = [&](const json& prompts, const std::string& name) {
    json c = {{"generate",
               {{"prompts", prompts},
                {"max_new_tokens", chat["max_new_tokens"]},
                {"eos_id", config["eos_token_id"]},
                {"temperature", 0.0}}}};
    const std::string dir = test::scratch_dir(name);
    test::write_file(dir + "/case.json", c.dump());
    auto r = test::run_dsinfer("eval --ckpt-path " + ckpt + " --case " + dir + "/case.json --out " +
                               dir + "/out");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(test::read_file(dir + "/out.json"))["completions"];
  };
  EXPECT_EQ(run(chat["batch"]["prompt_ids"], "batch"), chat["batch"]["completion_ids"]);
  int turn = 0;
  for (const json& t : chat["interactive"]) {
    if (!t.contains("prompt_ids")) continue;  // /clear and /exit
    EXPECT_EQ(run(json::array({t["prompt_ids"]}), "turn" + std::to_string(turn))[0],
              t["completion_ids"])
        << "interactive turn " << turn;
    ++turn;
  }
  EXPECT_GT(turn, 0);
}

INSTANTIATE_TEST_SUITE_P(OtherShapes, GoldenChatIds,
                         ::testing::Values("tiny-v3-chat", "tiny-v3-story"), [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace dsinfer::golden_chat_ids_test
