// The DeepSeek-V3 tokenizer (src/tokenizer/tokenizer.h) against Hugging Face `tokenizers`:
// llama.cpp's test vectors and extra encodings generated with HF tokenizers 0.23.2
// (tests/data/tokenizer/deepseek-v3), plus hard cases whose expectations follow from the
// tokenizer.json pipeline (the three Split regexes, ByteLevel, BPE by rank, ByteLevel decoding
// with String::from_utf8_lossy), small synthetic tokenizers, streaming and errors.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "test_support.h"

namespace dsinfer::tokenizer_test {
namespace {

using nlohmann::json;
using test::data_path;
using test::read_file;
using Ids = std::vector<int32_t>;
using test::parse_out;
using test::split_inp;
using Words = std::vector<std::string>;

const std::string kFffd = "\xEF\xBF\xBD";

const Tokenizer& v3() {
  static const Tokenizer t = Tokenizer::load(data_path("tokenizer/deepseek-v3"));
  return t;
}

// GPT-2 bytes_to_unicode, written out independently of the library: the character that stands
// for byte b in the vocab.
std::string byte_char(unsigned b) {
  unsigned cp = b;
  if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) {
    unsigned n = 0;
    for (unsigned x = 0; x < b; ++x) {
      if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE)) ++n;
    }
    cp = 256 + n;
  }
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

std::string byte_level(std::string_view bytes) {
  std::string s;
  for (unsigned char b : bytes) s += byte_char(b);
  return s;
}

// The id of the token for these raw bytes (looked up in byte-level form).
int32_t id_of_bytes(const Tokenizer& t, std::string_view bytes) {
  auto id = t.token_to_id(byte_level(bytes));
  EXPECT_TRUE(id.has_value()) << "no token for bytes \"" << bytes << "\"";
  return id.value_or(-1);
}

// Expected ids when each word is one token.
Ids one_token_per_word(const Tokenizer& t, const Words& words) {
  Ids ids;
  for (const auto& w : words) ids.push_back(id_of_bytes(t, w));
  return ids;
}

// ---------------------------------------------------------------------------------------------
// Real vectors

TEST(TokenizerV3, LlamaCppVectors) {
  const auto cases =
      split_inp(read_file(data_path("tokenizer/deepseek-v3/ggml-vocab-deepseek-v3.gguf.inp")));
  const auto expected =
      parse_out(read_file(data_path("tokenizer/deepseek-v3/ggml-vocab-deepseek-v3.gguf.out")));
  ASSERT_EQ(cases.size(), 46u);
  ASSERT_EQ(expected.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const Ids ids = v3().encode(cases[i], false);
    EXPECT_EQ(ids, expected[i]) << "case " << i << ": \"" << cases[i] << "\"";
    EXPECT_EQ(v3().decode(ids, false), cases[i]) << "case " << i;
    Ids with_bos = expected[i];
    with_bos.insert(with_bos.begin(), 0);
    EXPECT_EQ(v3().encode(cases[i], true), with_bos) << "case " << i;
  }
}

TEST(TokenizerV3, ExtraEncodingsFromHfTokenizers) {
  std::istringstream in(
      read_file(data_path("tokenizer/deepseek-v3/extra-encodings.generated.jsonl")));
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const json j = json::parse(line);
    const std::string text = j["text"].get<std::string>();
    const Ids expected = j["ids"].get<Ids>();
    const Ids ids = v3().encode(text, false);
    EXPECT_EQ(ids, expected) << "\"" << text << "\"";
    const std::string back = v3().decode(expected, false);
    EXPECT_EQ(back == text, j["decode_roundtrip"].get<bool>())
        << "\"" << text << "\" -> \"" << back << "\"";
    ++n;
  }
  EXPECT_EQ(n, 41);
}

TEST(TokenizerV3, VocabAndConfig) {
  const Tokenizer& t = v3();
  EXPECT_EQ(t.vocab_size(), 128815);
  EXPECT_EQ(t.bos_id(), 0);
  EXPECT_EQ(t.eos_id(), 1);
  EXPECT_EQ(t.bos_token(), "<｜begin▁of▁sentence｜>");
  EXPECT_EQ(t.eos_token(), "<｜end▁of▁sentence｜>");
  EXPECT_TRUE(t.add_bos_token());
  EXPECT_FALSE(t.add_eos_token());
  EXPECT_EQ(t.chat_template().rfind("{% if not add_generation_prompt is defined %}", 0), 0u);
  EXPECT_NE(t.chat_template().find("'<｜Assistant｜>'"), std::string::npos);

  EXPECT_EQ(t.token_to_id("<｜▁pad▁｜>"), 2);
  EXPECT_EQ(t.token_to_id("<｜User｜>"), 128803);
  EXPECT_EQ(t.token_to_id("<｜tool▁sep｜>"), 128814);
  EXPECT_EQ(t.token_to_id("<｜place▁holder▁no▁799｜>"), 128799);
  EXPECT_EQ(t.token_to_id("<|EOT|>"), 128805);
  EXPECT_EQ(t.token_to_id("Hi"), 23166);
  EXPECT_EQ(t.token_to_id("<｜User｜"), std::nullopt);
  EXPECT_EQ(t.id_to_token(128804), "<｜Assistant｜>");
  EXPECT_EQ(t.id_to_token(19923), "Hello");
  EXPECT_EQ(t.id_to_token(45948), "ĠHello");
  EXPECT_EQ(t.token_bytes(45948), " Hello");
  EXPECT_EQ(t.id_to_token(128815), std::nullopt);
  EXPECT_EQ(t.token_bytes(128815), std::nullopt);
  EXPECT_EQ(t.id_to_token(-1), std::nullopt);

  for (int32_t id : {0, 1, 2, 128000, 128400, 128799, 128805}) EXPECT_TRUE(t.is_special(id)) << id;
  for (int32_t id :
       {3, 23166, 127999, 128800, 128803, 128804, 128806, 128814, 128815, 129279, -1}) {
    EXPECT_FALSE(t.is_special(id)) << id;
  }
  // Every byte has a one-byte token.
  for (unsigned b = 0; b < 256; ++b) {
    const std::string bytes(1, char(b));
    EXPECT_EQ(t.token_bytes(id_of_bytes(t, bytes)), bytes) << b;
  }
}

TEST(TokenizerV3, BosWithAddSpecialTokens) {
  EXPECT_EQ(v3().encode("Hi", true), (Ids{0, 23166}));
  EXPECT_EQ(v3().encode("Hi", false), (Ids{23166}));
  EXPECT_EQ(v3().encode("", true), (Ids{0}));
  EXPECT_EQ(v3().encode("", false), Ids{});
  // A rendered chat prompt already has the BOS text: it is cut out as id 0.
  EXPECT_EQ(v3().encode("<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜>", false),
            (Ids{0, 128803, 23166, 128804}));
}

// ---------------------------------------------------------------------------------------------
// Pre-tokenization: expectations from the three Split regexes of tokenizer.json, applied in
// order to every piece, "Isolated" (matches and the gaps between them are pieces).

TEST(TokenizerV3, DigitsGroupInThrees) {
  EXPECT_EQ(v3().pre_tokenize("1234567"), (Words{"123", "456", "7"}));
  EXPECT_EQ(v3().encode("1234567", false), one_token_per_word(v3(), {"123", "456", "7"}));
  EXPECT_EQ(v3().pre_tokenize("x123y4567"), (Words{"x", "123", "y", "456", "7"}));
  // \p{N} includes other digits: Arabic-Indic and fullwidth digits group the same way.
  EXPECT_EQ(v3().pre_tokenize("١٢٣٤"), (Words{"١٢٣", "٤"}));
  EXPECT_EQ(v3().pre_tokenize("１２３４５"), (Words{"１２３", "４５"}));
}

TEST(TokenizerV3, MixedScripts) {
  EXPECT_EQ(v3().pre_tokenize("abc123456中文"), (Words{"abc", "123", "456", "中文"}));
  // Regex 1 cuts the digits; regex 2 isolates the CJK runs (U+4E00-U+9FA5, kana); regex 3 the rest.
  EXPECT_EQ(v3().pre_tokenize("我想在apple工作1314151天～"),
            (Words{"我想在", "apple", "工作", "131", "415", "1", "天", "～"}));
  EXPECT_EQ(v3().pre_tokenize("カタカナとひらがな"), (Words{"カタカナとひらがな"}));
  // Hangul is not in the CJK class: it is a letter run for regex 3.
  EXPECT_EQ(v3().pre_tokenize("한국어 텍스트"), (Words{"한국어", " 텍스트"}));
  EXPECT_EQ(v3().pre_tokenize("Hello, world!"), (Words{"Hello", ",", " world", "!"}));
  // Punctuation directly followed by ASCII letters stays together (regex 3, first branch).
  EXPECT_EQ(v3().pre_tokenize(".Net (normal)"), (Words{".Net", " (", "normal", ")"}));
  const std::string text = "Ελληνικά 中文 русский 123 日本語 😀";
  EXPECT_EQ(v3().decode(v3().encode(text, false), false), text);
}

TEST(TokenizerV3, Whitespace) {
  // \s+(?!\S) leaves the last space for the next word.
  EXPECT_EQ(v3().pre_tokenize("a   b"), (Words{"a", "  ", " b"}));
  EXPECT_EQ(v3().pre_tokenize("a   "), (Words{"a", "   "}));
  EXPECT_EQ(v3().pre_tokenize("\n\n\n"), (Words{"\n\n\n"}));
  EXPECT_EQ(v3().pre_tokenize("a\r\n\r\nb"), (Words{"a", "\r\n\r\n", "b"}));
  EXPECT_EQ(v3().pre_tokenize("a \n b"), (Words{"a", " \n", " b"}));
  EXPECT_EQ(v3().pre_tokenize("\t\ttabs"), (Words{"\t", "\ttabs"}));
  EXPECT_EQ(v3().pre_tokenize("x;\n\ny"), (Words{"x", ";\n\n", "y"}));
  const std::string spaces(100, ' ');
  EXPECT_EQ(v3().pre_tokenize(spaces + "x"), (Words{std::string(99, ' '), " x"}));
  for (const std::string& s :
       {spaces, spaces + "x" + spaces, std::string("\n\n\n"), std::string("\t \t\n \n\t"),
        std::string(1000, '\n'), std::string(" \u3000 \u00a0x")}) {
    const Ids ids = v3().encode(s, false);
    EXPECT_FALSE(ids.empty());
    EXPECT_EQ(v3().decode(ids, false), s);
  }
  EXPECT_EQ(v3().encode("\n\n\n", false), one_token_per_word(v3(), {"\n\n\n"}));
  EXPECT_EQ(v3().encode(" ", false), one_token_per_word(v3(), {" "}));
}

TEST(TokenizerV3, EmojiAndZeroWidthJoiner) {
  // 😶 and 🌫 are symbols (So); U+200D ZWJ (Cf) matches no branch of regex 3 and stays a gap;
  // U+FE0F (Mn) is a mark and matches [\p{L}\p{M}]+.
  EXPECT_EQ(v3().pre_tokenize("😶\u200d🌫\ufe0f"), (Words{"😶", "\u200d", "🌫", "\ufe0f"}));
  EXPECT_EQ(v3().pre_tokenize("🦙🦙 ✅"), (Words{"🦙🦙", " ✅"}));
  for (const std::string& s :
       {std::string("👨‍👩‍👧‍👦"), std::string("🏳️‍🌈 flag"),
        std::string("👍🏽👍🏿")}) {
    EXPECT_EQ(v3().decode(v3().encode(s, false), false), s);
  }
}

// ---------------------------------------------------------------------------------------------
// Added tokens

TEST(TokenizerV3, AddedTokensInText) {
  const Tokenizer& t = v3();
  EXPECT_EQ(t.pre_tokenize("a<｜User｜>b"), (Words{"a", "<｜User｜>", "b"}));
  EXPECT_EQ(t.encode("a<｜User｜>b", false),
            (Ids{id_of_bytes(t, "a"), 128803, id_of_bytes(t, "b")}));
  // Not special, but still cut out; special ones too.
  EXPECT_EQ(t.encode("<｜tool▁sep｜><|EOT|><｜end▁of▁sentence｜>", false),
            (Ids{128814, 128805, 1}));
  // A partial token is ordinary text; a complete one right after it is still found.
  const Ids partial = t.encode("<｜User｜", false);
  EXPECT_EQ(partial.size(), 4u);
  for (int32_t id : partial) EXPECT_LT(id, 128000);
  Ids expected = partial;
  expected.push_back(128803);
  EXPECT_EQ(t.encode("<｜User｜<｜User｜>", false), expected);
  EXPECT_EQ(t.decode(expected, false), "<｜User｜<｜User｜>");
  // Spaces around added tokens are not stripped (lstrip/rstrip false).
  EXPECT_EQ(t.pre_tokenize(" <｜User｜> hi"), (Words{" ", "<｜User｜>", " hi"}));
  // ASCII "<|User|>" is not the token (only <|EOT|> uses ASCII bars).
  EXPECT_EQ(t.token_to_id("<|User|>"), std::nullopt);
  for (int32_t id : t.encode("<|User|>", false)) EXPECT_LT(id, 128000);
}

// ---------------------------------------------------------------------------------------------
// Broken UTF-8 input and lossy decoding

TEST(TokenizerV3, BrokenUtf8Input) {
  const Tokenizer& t = v3();
  // Each maximal ill-formed subsequence is a word of its own made of byte tokens.
  EXPECT_EQ(t.pre_tokenize("a\xff"
                           "b"),
            (Words{"a", "\xff", "b"}));
  EXPECT_EQ(t.encode("a\xff"
                     "b",
                     false),
            one_token_per_word(t, {"a", "\xff", "b"}));
  EXPECT_EQ(t.decode(t.encode("a\xff"
                              "b",
                              false),
                     false),
            "a" + kFffd + "b");
  EXPECT_EQ(t.pre_tokenize("\xed\xa0\x80"), (Words{"\xed", "\xa0", "\x80"}));
  EXPECT_EQ(t.pre_tokenize("x\xe4\xb8"), (Words{"x", "\xe4\xb8"}));
  EXPECT_EQ(t.decode(t.encode("x\xe4\xb8", false), false), "x" + kFffd);
  EXPECT_EQ(t.decode(t.encode("\xe4\xb8\xad\xe4\xb8", false), false), "中" + kFffd);
  const std::string nasty =
      std::string("\x80\xc0\xc1\xf5\xff\xf0\x9f\x98 ok \xe2\x82\xac\xe2\x82") + '\0' + "z";
  const Ids ids = t.encode(nasty, false);
  EXPECT_FALSE(ids.empty());
  std::string raw;
  for (int32_t id : ids) raw += std::string(*t.token_bytes(id));
  EXPECT_EQ(raw, nasty);  // no byte lost or added
}

TEST(TokenizerV3, DecodeInvalidUtf8LikeFromUtf8Lossy) {
  const Tokenizer& t = v3();
  auto bytes = [&](std::initializer_list<unsigned> bs) {
    Ids ids;
    for (unsigned b : bs) ids.push_back(id_of_bytes(t, std::string(1, char(b))));
    return ids;
  };
  EXPECT_EQ(t.decode(bytes({0xE4, 0xB8, 0xAD}), false), "中");
  EXPECT_EQ(t.decode(bytes({0xE4}), false), kFffd);
  EXPECT_EQ(t.decode(bytes({0xE4, 0xB8}), false), kFffd);  // truncated: one U+FFFD
  EXPECT_EQ(t.decode(bytes({0xE4, 'a'}), false), kFffd + "a");
  EXPECT_EQ(t.decode(bytes({0xF0, 0x80}), false), kFffd + kFffd);  // F0 needs 90..BF next
  EXPECT_EQ(t.decode(bytes({0xED, 0xA0, 0x80}), false), kFffd + kFffd + kFffd);  // surrogate
  EXPECT_EQ(t.decode(bytes({0xC0, 0x80}), false), kFffd + kFffd);                // overlong
  EXPECT_EQ(t.decode(bytes({0xF4, 0x90, 0x80, 0x80}), false),
            kFffd + kFffd + kFffd + kFffd);  // > U+10FFFF
  EXPECT_EQ(t.decode(bytes({0xF0, 0x9F, 0x98, 'x'}), false), kFffd + "x");
  EXPECT_EQ(t.decode(bytes({'a', 0xFF, 'b', 0x80}), false), "a" + kFffd + "b" + kFffd);
  EXPECT_EQ(t.decode(bytes({0xF0, 0x9F, 0x98, 0x80}), false), "😀");
}

TEST(TokenizerV3, DecodeSpecialAndUnknownIds) {
  const Tokenizer& t = v3();
  const Ids ids{0, 128803, 23166, 128804, 1};
  EXPECT_EQ(t.decode(ids, false),
            "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜><｜end▁of▁sentence｜>");
  // Only ids flagged special are skipped: <｜User｜> and <｜Assistant｜> are not special.
  EXPECT_EQ(t.decode(ids, true), "<｜User｜>Hi<｜Assistant｜>");
  EXPECT_EQ(t.decode({128805, 2, 128000, 23166}, true), "Hi");
  EXPECT_EQ(t.decode({128805, 2, 128000, 23166}, false),
            "<|EOT|><｜▁pad▁｜><｜place▁holder▁no▁0｜>Hi");
  // Padding ids 128815..129279 (and any other id without a token) are skipped, as HF does.
  EXPECT_EQ(t.decode({23166, 128815, 129279, 5000000}, false), "Hi");
  EXPECT_THROW(t.decode({23166, -1}, false), Error);
  EXPECT_EQ(t.decode({}, false), "");
}

std::string stream_all_for_fuzz(const Tokenizer& t, const Ids& ids) {
  StreamDecoder d(t, false);
  std::string out;
  for (int32_t id : ids) out += d.push(id);
  return out + d.finish();
}

TEST(TokenizerV3, RandomTextLosesNoBytes) {
  // Random mixtures of ASCII, whitespace, digits, CJK, emoji, marks, added-token pieces and
  // stray bytes: the tokens' bytes always add up to the input, and valid UTF-8 round-trips.
  const Tokenizer& t = v3();
  const std::vector<std::string> atoms = {"a",         "Z",       "q",
                                          " ",         "  ",      "\t",
                                          "\n",        "\r\n",    "0",
                                          "12",        "7",       ".",
                                          ",",         "!",       "'",
                                          "(",         "$",       "\\",
                                          "中",        "文",      "ア",
                                          "ひ",        "한",      "é",
                                          "ß",         "\u0301",  "\u200d",
                                          "\ufe0f",    "😀",       "🌫",
                                          "\u00a0",    "\u3000",  "١",
                                          "Ж",         "ω",       "<｜User｜>",
                                          "<｜User｜", "｜>",     "<｜end▁of▁sentence｜>",
                                          "<|EOT|>",   "\xff",    "\xe4\xb8",
                                          "\x80",      "\xf0\x9f"};
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(state >> 33);
  };
  for (int round = 0; round < 1500; ++round) {
    std::string text;
    const uint32_t n = next() % 24;
    for (uint32_t k = 0; k < n; ++k) text += atoms[next() % atoms.size()];
    const Ids ids = t.encode(text, false);
    std::string raw;
    for (int32_t id : ids) raw += std::string(t.token_bytes(id).value_or("<missing>"));
    ASSERT_EQ(raw, text) << "round " << round;
    std::string lossy;
    utf8_lossy_append(text, lossy, true);
    ASSERT_EQ(t.decode(ids, false), lossy) << "round " << round;
    ASSERT_EQ(stream_all_for_fuzz(t, ids), lossy) << "round " << round;
  }
}

// ---------------------------------------------------------------------------------------------
// Streaming

std::string stream_all(const Tokenizer& t, const Ids& ids, bool skip,
                       std::vector<std::string>* pieces = nullptr) {
  StreamDecoder d(t, skip);
  std::string out;
  for (int32_t id : ids) {
    std::string p = d.push(id);
    if (pieces) pieces->push_back(p);
    out += p;
  }
  std::string last = d.finish();
  if (pieces) pieces->push_back(last);
  return out + last;
}

TEST(TokenizerV3, StreamDecoderMatchesDecodeForEveryPrefix) {
  const Tokenizer& t = v3();
  const std::vector<std::string> texts = {
      "中文和English混合，还有emoji 😶‍🌫️🦙 and ü ß ñ",
      "日本語のテキストとカタカナ、ひらがな。",
      "नमस्ते दुनिया مرحبا بالعالم Ελληνικά",
      "<｜User｜>你好<｜Assistant｜>👋🏽 世界<｜end▁of▁sentence｜>",
  };
  for (const std::string& text : texts) {
    const Ids ids = t.encode(text, false);
    for (bool skip : {false, true}) {
      for (size_t k = 0; k <= ids.size(); ++k) {
        const Ids prefix(ids.begin(), ids.begin() + std::ptrdiff_t(k));
        std::vector<std::string> pieces;
        EXPECT_EQ(stream_all(t, prefix, skip, &pieces), t.decode(prefix, skip))
            << text << " k=" << k;
        for (size_t p = 0; p + 1 < pieces.size(); ++p) {
          EXPECT_EQ(pieces[p].find(kFffd), std::string::npos) << "piece " << p << " of " << text;
        }
      }
    }
  }
}

TEST(TokenizerV3, StreamDecoderHoldsIncompleteCharacters) {
  const Tokenizer& t = v3();
  const int32_t e4 = id_of_bytes(t, "\xe4"), b8 = id_of_bytes(t, "\xb8"),
                ad = id_of_bytes(t, "\xad");
  StreamDecoder d(t, false);
  EXPECT_EQ(d.push(e4), "");
  EXPECT_EQ(d.push(b8), "");
  EXPECT_EQ(d.push(ad), "中");
  EXPECT_EQ(d.push(e4), "");
  EXPECT_EQ(d.push(id_of_bytes(t, "a")), kFffd + "a");
  EXPECT_EQ(d.push(e4), "");
  EXPECT_EQ(d.push(b8), "");
  EXPECT_EQ(d.finish(), kFffd);
  EXPECT_EQ(d.push(128815), "");  // no token
  EXPECT_EQ(d.push(23166), "Hi");
  EXPECT_EQ(d.finish(), "");
  StreamDecoder skipping(t, true);
  EXPECT_EQ(skipping.push(0), "");
  EXPECT_EQ(skipping.push(23166), "Hi");
  EXPECT_EQ(skipping.push(1), "");
  EXPECT_THROW(skipping.push(-3), Error);
}

// ---------------------------------------------------------------------------------------------
// Concurrency and the word cache

TEST(TokenizerV3, ThreadsAndCacheGiveTheSameIds) {
  const auto cases =
      split_inp(read_file(data_path("tokenizer/deepseek-v3/ggml-vocab-deepseek-v3.gguf.inp")));
  std::string all;
  for (const auto& c : cases) all += c;
  const Ids reference = v3().encode(all, false);
  EXPECT_EQ(v3().encode(all, false), reference);  // second time from the word cache
  std::vector<Ids> got(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] {
      for (int r = 0; r < 3; ++r) got[i] = v3().encode(all, false);
    });
  }
  for (auto& th : threads) th.join();
  for (const Ids& g : got) EXPECT_EQ(g, reference);
  const Tokenizer copy = v3();  // copies share the state
  EXPECT_EQ(copy.encode(all, false), reference);
}

TEST(TokenizerV3, SameResultWhateverTheJsonSpelling) {
  // tokenizer.json re-written with every non-ASCII character as a \u escape (surrogate pairs
  // beyond the BMP), the merges as ["a", "b"] pairs, and the keys in another order: the vocab
  // and merges are read by a fast reader, the rest by nlohmann::json; both must agree.
  const std::string original = read_file(data_path("tokenizer/deepseek-v3/tokenizer.json"));
  json j = json::parse(original);
  json pairs = json::array();
  for (const auto& m : j["model"]["merges"]) {
    const std::string s = m.get<std::string>();
    pairs.push_back({s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)});
  }
  j["model"]["merges"] = pairs;
  const std::string escaped = j.dump(-1, ' ', true);
  ASSERT_NE(escaped.find("\\u0120"), std::string::npos);
  const Tokenizer t = Tokenizer::from_strings(
      escaped, read_file(data_path("tokenizer/deepseek-v3/tokenizer_config.json")), "escaped");
  EXPECT_EQ(t.vocab_size(), v3().vocab_size());
  const auto cases =
      split_inp(read_file(data_path("tokenizer/deepseek-v3/ggml-vocab-deepseek-v3.gguf.inp")));
  for (const auto& c : cases) EXPECT_EQ(t.encode(c, true), v3().encode(c, true)) << c;
  for (int32_t id = 0; id < 128815; id += 97)
    EXPECT_EQ(t.id_to_token(id), v3().id_to_token(id)) << id;
}

// ---------------------------------------------------------------------------------------------
// Synthetic tokenizers: the BPE merge order and the added-token matching rules on small vocabs.

struct Synthetic {
  json vocab = json::object();
  json merges = json::array();
  json added = json::array();
  json pre_tokenizer =
      json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  int32_t next = 256;

  Synthetic() {
    for (unsigned b = 0; b < 256; ++b) vocab[byte_char(b)] = int32_t(b);
  }
  // Adds the merge "a b" (in byte-level form) and its result to the vocab.
  Synthetic& merge(const std::string& a, const std::string& b) {
    const std::string la = byte_level(a), lb = byte_level(b);
    merges.push_back(la + " " + lb);
    if (!vocab.contains(la + lb)) vocab[la + lb] = next++;
    return *this;
  }
  Synthetic& add(const std::string& content, bool special, bool normalized) {
    added.push_back({{"id", next},
                     {"content", content},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", normalized},
                     {"special", special}});
    ++next;
    return *this;
  }
  std::string json_text() const {
    json j = {{"version", "1.0"},
              {"added_tokens", added},
              {"normalizer", nullptr},
              {"pre_tokenizer", pre_tokenizer},
              {"post_processor", {{"type", "ByteLevel"}}},
              {"decoder", {{"type", "ByteLevel"}}},
              {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
    return j.dump();
  }
  Tokenizer build(const std::string& config = "") const {
    return Tokenizer::from_strings(json_text(), config, "synthetic");
  }
};

Ids ids_of(const Tokenizer& t, const Words& tokens) {
  Ids ids;
  for (const auto& s : tokens) ids.push_back(*t.token_to_id(byte_level(s)));
  return ids;
}

TEST(TokenizerSynthetic, LowestRankMergesFirst) {
  {
    const Tokenizer t = Synthetic().merge("a", "b").merge("b", "c").merge("ab", "c").build();
    EXPECT_EQ(t.encode("abc", false), ids_of(t, {"abc"}));
    EXPECT_EQ(t.encode("bc", false), ids_of(t, {"bc"}));
  }
  {
    // b c outranks a b, and there is no merge a + bc.
    const Tokenizer t = Synthetic().merge("b", "c").merge("a", "b").merge("ab", "c").build();
    EXPECT_EQ(t.encode("abc", false), ids_of(t, {"a", "bc"}));
    EXPECT_EQ(t.encode("abcab", false), ids_of(t, {"a", "bc", "ab"}));
  }
  {
    // Equal pairs merge leftmost first.
    const Tokenizer t = Synthetic().merge("a", "a").build();
    EXPECT_EQ(t.encode("aaa", false), ids_of(t, {"aa", "a"}));
    EXPECT_EQ(t.encode("aaaaa", false), ids_of(t, {"aa", "aa", "a"}));
    const Tokenizer t2 = Synthetic().merge("a", "a").merge("aa", "a").build();
    EXPECT_EQ(t2.encode("aaa", false), ids_of(t2, {"aaa"}));
    EXPECT_EQ(t2.encode("aaaa", false),
              ids_of(t2, {"aa", "aa"}));  // every rank-0 merge comes first
    const Tokenizer t3 = Synthetic().merge("a", "a").merge("aa", "aa").merge("aa", "a").build();
    EXPECT_EQ(t3.encode("aaaa", false), ids_of(t3, {"aaaa"}));
    EXPECT_EQ(t3.encode("aaaaaaa", false), ids_of(t3, {"aaaa", "aaa"}));
  }
  {
    // Multi-byte characters start as their bytes.
    const Tokenizer t = Synthetic().merge("\xe4", "\xb8").merge("\xe4\xb8", "\xad").build();
    EXPECT_EQ(t.encode("中中\xe4\xb8", false), ids_of(t, {"中", "中", "\xe4\xb8"}));
    EXPECT_EQ(t.decode(t.encode("中中\xe4\xb8", false), false), "中中" + kFffd);
  }
}

TEST(TokenizerSynthetic, AddedTokensLeftmostLongest) {
  Synthetic s;
  s.add("ab", false, false)
      .add("abc", false, false)
      .add("bcd", false, false)
      .add("<x>", true, false);
  const Tokenizer t = s.build();
  const int32_t ab = *t.token_to_id("ab"), abc = *t.token_to_id("abc"), bcd = *t.token_to_id("bcd");
  EXPECT_EQ(ab, 256);
  EXPECT_EQ(abc, 257);
  EXPECT_EQ(t.encode("xabcd", false), (Ids{'x', abc, 'd'}));  // leftmost wins, then longest
  EXPECT_EQ(t.encode("xbcd", false), (Ids{'x', bcd}));
  EXPECT_EQ(t.encode("abab", false), (Ids{ab, ab}));
  EXPECT_EQ(t.encode("a<x>b", false), (Ids{'a', 259, 'b'}));
  EXPECT_TRUE(t.is_special(259));
  EXPECT_FALSE(t.is_special(ab));
  EXPECT_EQ(t.decode(t.encode("xabcd<x>", false), true), "xabcd");
  EXPECT_EQ(t.vocab_size(), 260);
}

TEST(TokenizerSynthetic, NonNormalizedAddedTokensAreCutFirst) {
  // HF cuts the "normalized": false tokens out first and looks for the normalized ones only in
  // what is left, so "bc" wins over the longer, further left "abcd".
  Synthetic s;
  s.add("abcd", false, true).add("bc", false, false);
  const Tokenizer t = s.build();
  EXPECT_EQ(t.encode("abcd", false), (Ids{'a', 257, 'd'}));
  EXPECT_EQ(t.encode("abc abcd", false), (Ids{'a', 257, ' ', 'a', 257, 'd'}));
  Synthetic s2;
  s2.add("abcd", false, true).add("xy", false, false);
  EXPECT_EQ(s2.build().encode("xyabcd", false), (Ids{257, 256}));
}

TEST(TokenizerSynthetic, AddedTokenIdsFollowHfAssignment) {
  // HF ignores the file's ids: an added token gets the id of the same content in the vocab, or
  // the next id after the model's vocab size (in file order).
  Synthetic s;
  s.add("zz", true, false);
  s.added.push_back(
      {{"id", 999}, {"content", byte_level("a")}, {"special", true}, {"normalized", false}});
  s.added.push_back({{"id", 5000}, {"content", "yy"}, {"special", false}, {"normalized", false}});
  const Tokenizer t = s.build();
  EXPECT_EQ(t.token_to_id("zz"), 256);
  EXPECT_EQ(t.token_to_id("a"), int32_t('a'));
  EXPECT_TRUE(t.is_special('a'));
  EXPECT_EQ(t.token_to_id("yy"), 257);
  EXPECT_EQ(t.vocab_size(), 258);
}

TEST(TokenizerSynthetic, BosEosAndConfig) {
  Synthetic s;
  s.add("<s>", true, false).add("</s>", true, false);
  const Tokenizer plain = s.build();
  EXPECT_EQ(plain.bos_id(), -1);
  EXPECT_EQ(plain.encode("a", true), (Ids{'a'}));
  const Tokenizer llama = s.build(R"({"bos_token": "<s>", "eos_token": {"content": "</s>"},
                                      "tokenizer_class": "LlamaTokenizerFast", "chat_template": "T"})");
  EXPECT_EQ(llama.bos_id(), 256);
  EXPECT_EQ(llama.eos_id(), 257);
  EXPECT_EQ(llama.chat_template(), "T");
  EXPECT_EQ(llama.encode("a", true),
            (Ids{256, 'a'}));  // LlamaTokenizerFast: add_bos_token defaults on
  const Tokenizer both = s.build(R"({"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": true,
                                     "add_eos_token": true})");
  EXPECT_EQ(both.encode("a", true), (Ids{256, 'a', 257}));
  EXPECT_EQ(both.encode("a", false), (Ids{'a'}));
  const Tokenizer none = s.build(R"({"bos_token": "<s>", "add_bos_token": false})");
  EXPECT_EQ(none.encode("a", true), (Ids{'a'}));
}

TEST(TokenizerSynthetic, SplitBehaviors) {
  auto pieces = [](const std::string& behavior, bool invert) {
    Synthetic s;
    s.pre_tokenizer = {
        {"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"String", "-"}}},
           {"behavior", behavior},
           {"invert", invert}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
    return s.build().pre_tokenize("a-b--c-");
  };
  EXPECT_EQ(pieces("Isolated", false), (Words{"a", "-", "b", "-", "-", "c", "-"}));
  EXPECT_EQ(pieces("Removed", false), (Words{"a", "b", "c"}));
  EXPECT_EQ(pieces("MergedWithPrevious", false), (Words{"a-", "b-", "-", "c-"}));
  EXPECT_EQ(pieces("MergedWithNext", false), (Words{"a", "-b", "-", "-c", "-"}));
  EXPECT_EQ(pieces("Contiguous", false), (Words{"a", "-", "b", "--", "c", "-"}));
  EXPECT_EQ(pieces("Removed", true), (Words{"-", "-", "-", "-"}));
}

TEST(TokenizerSynthetic, ByteLevelPrefixSpaceAndGpt2Regex) {
  Synthetic s;
  s.pre_tokenizer = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  const Tokenizer t = s.build();
  EXPECT_EQ(t.pre_tokenize("Hello world's 42!"), (Words{" Hello", " world", "'s", " 42", "!"}));
  EXPECT_EQ(t.pre_tokenize(" x"), (Words{" x"}));
}

// ---------------------------------------------------------------------------------------------
// Errors

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TokenizerErrors, BadFilesNameTheProblem) {
  EXPECT_NE(
      error_of([] { Tokenizer::load("/nonexistent/dir"); }).find("/nonexistent/dir/tokenizer.json"),
      std::string::npos);
  const auto bad = [](const std::string& text, const std::string& config = "") {
    return error_of([&] { Tokenizer::from_strings(text, config, "ORIGIN"); });
  };
  EXPECT_NE(bad("{not json").find("ORIGIN"), std::string::npos);
  EXPECT_NE(bad("{not json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(bad("[]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(bad("{}").find("model"), std::string::npos);

  json j = json::parse(Synthetic().merge("a", "b").json_text());
  auto with = [&](const std::function<void(json&)>& edit) {
    json copy = j;
    edit(copy);
    return bad(copy.dump());
  };
  EXPECT_EQ(with([](json&) {}), "(no error)");
  EXPECT_NE(
      with([](json& c) { c["model"]["merges"].push_back("a QQ"); }).find("merge 2: token \"QQ\""),
      std::string::npos);
  EXPECT_NE(with([](json& c) { c["model"]["merges"].push_back("abc"); }).find("merge 2"),
            std::string::npos);
  EXPECT_NE(with([](json& c) { c["model"]["vocab"]["zz"] = "x"; }).find("zz"), std::string::npos);
  EXPECT_NE(with([](json& c) { c["model"]["vocab"]["zz"] = -4; }).find("out of range"),
            std::string::npos);
  EXPECT_NE(with([](json& c) { c["model"]["vocab"]["zz"] = 4.5; }).find("zz"), std::string::npos);
  // a few huge ids would make the id tables gigabytes (fuzz_tokenizer: 2 s and 0.6 GB for one
  // file of 1.4 KB); a hole of up to 2^20 ids is fine
  EXPECT_NE(with([](json& c) {
              c["model"]["vocab"]["zz"] = 10555555;
            }).find("\"zz\" has id 10555555, far beyond"),
            std::string::npos);
  EXPECT_EQ(with([](json& c) { c["model"]["vocab"]["zz"] = 1000000; }), "(no error)");
  EXPECT_NE(with([](json& c) { c["model"]["merges"].push_back(7); }).find("merge 2 is neither"),
            std::string::npos);
  EXPECT_NE(with([](json& c) { c["model"]["merges"].push_back({"a"}); }).find("merge 2 is neither"),
            std::string::npos);
  EXPECT_EQ(with([](json& c) { c["model"]["merges"].push_back({"a", "b"}); }), "(no error)");
  EXPECT_NE(bad(j.dump().substr(0, j.dump().size() - 1)).find("not valid JSON"), std::string::npos);
  EXPECT_NE(bad(j.dump() + "x").find("not valid JSON"), std::string::npos);
  EXPECT_NE(with([](json& c) { c["model"]["type"] = "WordPiece"; }).find("WordPiece"),
            std::string::npos);
  EXPECT_NE(with([](json& c) { c["model"].erase("merges"); }).find("merges"), std::string::npos);
  EXPECT_NE(with([](json& c) { c["decoder"] = nullptr; }).find("decoder"), std::string::npos);
  EXPECT_NE(with([](json& c) {
              c["normalizer"] = {{"type", "NFC"}};
            }).find("normalizer"),
            std::string::npos);
  EXPECT_NE(with([](json& c) {
              c["pre_tokenizer"] = {{"type", "Whitespace"}};
            }).find("Whitespace"),
            std::string::npos);
  EXPECT_NE(with([](json& c) {
              c["pre_tokenizer"] = {
                  {"type", "Split"}, {"pattern", {{"Regex", "(ab"}}}, {"behavior", "Isolated"}};
            }).find("bad regex \"(ab\""),
            std::string::npos);
  EXPECT_NE(with([](json& c) {
              c["pre_tokenizer"] = {
                  {"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Sideways"}};
            }).find("Sideways"),
            std::string::npos);
  EXPECT_NE(with([](json& c) {
              c["added_tokens"] = {{{"id", 3}, {"content", 7}}};
            }).find("content"),
            std::string::npos);
  EXPECT_NE(bad(j.dump(), "{oops").find("tokenizer_config.json"), std::string::npos);
  EXPECT_NE(bad(j.dump(), R"({"bos_token": 5})").find("bos_token"), std::string::npos);
  EXPECT_NE(bad(j.dump(), R"({"bos_token": {"content": 5}})").find("bos_token"), std::string::npos);
  // an id of 19 digits overflowed the fast JSON reader's int64 (UBSan, found by fuzz_tokenizer)
  EXPECT_NE(with([](json& c) { c["model"]["vocab"]["zz"] = 3333333333333333333; }), "(no error)");
}

// A special token the vocabulary lacks was dropped in silence (no BOS in any prompt, or no EOS to
// stop at); transformers would add it as a new id past the model's embedding.
TEST(TokenizerErrors, SpecialTokensMustBeInTheVocabulary) {
  const std::string text = read_file(data_path("tokenizer/deepseek-v3/tokenizer.json"));
  json config = json::parse(read_file(data_path("tokenizer/deepseek-v3/tokenizer_config.json")));
  EXPECT_EQ(error_of([&] { Tokenizer::from_strings(text, config.dump(), "V3"); }), "(no error)");
  for (const char* key : {"bos_token", "eos_token"}) {
    SCOPED_TRACE(key);
    json c = config;
    c[key] = "<|no such token|>";
    const std::string msg = error_of([&] { Tokenizer::from_strings(text, c.dump(), "V3"); });
    EXPECT_NE(msg.find(std::string("tokenizer_config.json: ") + key +
                       " \"<|no such token|>\" is not a token"),
              std::string::npos)
        << msg;
    c[key] = {{"content", "<|no such token|>"}, {"lstrip", false}};  // the AddedToken form
    EXPECT_NE(
        error_of([&] { Tokenizer::from_strings(text, c.dump(), "V3"); }).find("is not a token"),
        std::string::npos);
    c[key] = nullptr;  // null: no such special token, as transformers reads it
    EXPECT_EQ(error_of([&] { Tokenizer::from_strings(text, c.dump(), "V3"); }), "(no error)");
  }
}

}  // namespace
}  // namespace dsinfer::tokenizer_test

namespace dsinfer::tokenizer_test {
namespace {

// A chat_template list without a "default" entry was read as no template at all, and a missing
// tokenizer_config.json was reported only as "no chat_template" (issue 35's U10).
TEST(TokenizerErrors, AChatTemplateListWithoutADefaultIsNamed) {
  const std::string text = read_file(data_path("tokenizer/deepseek-v3/tokenizer.json"));
  json config = json::parse(read_file(data_path("tokenizer/deepseek-v3/tokenizer_config.json")));
  config["chat_template"] = json::array({{{"name", "tool_use"}, {"template", "x"}}});
  EXPECT_NE(error_of([&] {
              Tokenizer::from_strings(text, config.dump(), "V3");
            }).find("\"chat_template\" is a list without a \"default\" entry"),
            std::string::npos);
  config["chat_template"] = json::array({{{"name", "default"}, {"template", "{{ 1 }}"}}});
  EXPECT_EQ(error_of([&] { Tokenizer::from_strings(text, config.dump(), "V3"); }), "(no error)");
}

}  // namespace
}  // namespace dsinfer::tokenizer_test
