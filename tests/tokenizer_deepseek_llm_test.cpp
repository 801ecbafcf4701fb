// The DeepSeek-LLM vocab (the base of DeepSeek-V2's tokenizer) through the same tokenizer code:
// six Split regexes (including `\s+$` and a long letter class), 13 single-character added tokens
// that are "normalized": true and also byte-alphabet characters, and no tokenizer_config.json.
// tokenizer.RECONSTRUCTED-from-gguf.json reproduces llama.cpp's vectors with HF tokenizers 0.23.2
// (tests/data/tokenizer/deepseek-llm, see tests/data/README.md).
#include <gtest/gtest.h>

#include <sstream>

#include "core/error.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer::tokenizer_deepseek_llm_test {
namespace {

using test::data_path;
using test::read_file;
using Ids = std::vector<int32_t>;
using test::parse_out;
using test::split_inp;

const Tokenizer& llm() {
  static const Tokenizer t = [] {
    const std::string path =
        data_path("tokenizer/deepseek-llm/tokenizer.RECONSTRUCTED-from-gguf.json");
    return Tokenizer::from_strings(read_file(path), "", path);
  }();
  return t;
}

void check_vectors(const std::string& dir) {
  const auto cases = split_inp(read_file(data_path(dir + "/ggml-vocab-deepseek-llm.gguf.inp")));
  const auto expected = parse_out(read_file(data_path(dir + "/ggml-vocab-deepseek-llm.gguf.out")));
  ASSERT_EQ(cases.size(), 46u);
  ASSERT_EQ(expected.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(llm().encode(cases[i], false), expected[i])
        << dir << " case " << i << ": \"" << cases[i] << "\"";
  }
}

TEST(TokenizerDeepSeekLlm, LlamaCppVectors) {
  check_vectors("tokenizer/deepseek-llm");
  check_vectors("tokenizer/deepseek-llm/older");
}

TEST(TokenizerDeepSeekLlm, VocabAndAddedTokens) {
  const Tokenizer& t = llm();
  EXPECT_EQ(t.vocab_size(), 100015);
  EXPECT_EQ(t.bos_id(), -1);  // no tokenizer_config.json
  EXPECT_EQ(t.chat_template(), "");
  EXPECT_EQ(t.token_to_id("<｜begin▁of▁sentence｜>"), 100000);
  EXPECT_EQ(t.token_to_id("ü"), 100014);
  EXPECT_TRUE(t.is_special(100001));
  EXPECT_FALSE(t.is_special(100014));
  EXPECT_EQ(t.encode("Führer", false), (Ids{37, 100014, 71, 6245}));
  EXPECT_EQ(t.encode("Führer", true),
            (Ids{37, 100014, 71, 6245}));  // no add_bos_token without a config
  // The ByteLevel decoder maps "ü" (a byte-alphabet character) to the byte 0xFC, which is not
  // UTF-8: HF decodes these 13 added tokens to U+FFFD.
  EXPECT_EQ(t.decode({37, 100014, 71, 6245}, false), "F\xEF\xBF\xBDhrer");
  EXPECT_EQ(t.token_bytes(100014), "\xFC");
  // Bytes whose alphabet character is missing from this vocab (never in valid UTF-8) are dropped
  // as HF's BPE drops unknown characters when there is no unk token.
  EXPECT_EQ(t.encode("a\xFC", false), t.encode("a", false));
}

TEST(TokenizerDeepSeekLlm, TwoTokenizersOnOneThread) {
  // The per-thread word cache is keyed by tokenizer.
  const Tokenizer v3 = Tokenizer::load(data_path("tokenizer/deepseek-v3"));
  const std::string text = "Hello world, this is a test of 12345 and 中文.";
  const Ids a = llm().encode(text, false);
  const Ids b = v3.encode(text, false);
  EXPECT_NE(a, b);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(llm().encode(text, false), a);
    EXPECT_EQ(v3.encode(text, false), b);
  }
  EXPECT_EQ(llm().decode(a, false), text);
  EXPECT_EQ(v3.decode(b, false), text);
}

}  // namespace
}  // namespace dsinfer::tokenizer_deepseek_llm_test
