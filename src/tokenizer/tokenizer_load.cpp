// Loading a tokenizer.json (and tokenizer_config.json) into the tokenizer's tables, as Hugging
// Face `tokenizers` reads them; errors name the file and the field.
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_set>

#include "core/error.h"
#include "core/json_excerpt.h"
#include "core/log.h"
#include "core/read_file.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"

namespace dsinfer {
namespace tokenizer_detail {

using json = nlohmann::json;

std::atomic<uint64_t> g_serial{0};
uint64_t next_tokenizer_serial() { return ++g_serial; }

// ---------------------------------------------------------------------------------------------
// Loading

const json* member(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

bool get_bool(const json& j, const char* key, bool fallback) {
  const json* v = member(j, key);
  if (!v) return fallback;
  if (!v->is_boolean()) fail("field \"", key, "\" must be true or false");
  return v->get<bool>();
}

// Where the fast path found model.vocab and model.merges in the tokenizer.json text.
struct FastTables {
  std::string_view text;
  JsonRange vocab, merges;
};

// The "model" object's options this tokenizer supports (BPE without dropout or byte fallback).
void check_model_options(const json& m, BpeModel& model) {
  if (const json* type = member(m, "type"); type && *type != "BPE")
    fail("model type ", json_excerpt(*type), " is not supported (only BPE)");
  if (const json* d = member(m, "dropout"); d && d->get<double>() != 0.0)
    fail("BPE dropout is not supported");
  if (get_bool(m, "byte_fallback", false)) fail("BPE byte_fallback is not supported");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (const json* v = member(m, key); v && !v->get<std::string>().empty())
      fail("BPE ", key, " is not supported");
  }
  model.fuse_unk = get_bool(m, "fuse_unk", false);
  model.ignore_merges = get_bool(m, "ignore_merges", false);
}

// model.vocab, then the id tables (as long as the largest id) and the unknown token's id.
void load_vocab(const json& m, const FastTables* fast, BpeModel& model) {
  int64_t max_id = -1;
  std::string max_token;
  auto add_token = [&](std::string_view token, int64_t id) {
    if (id < 0 || id >= (int64_t(1) << 24))
      fail("vocab entry \"", token, "\" has id ", id, " out of range");
    model.vocab.set(token, int32_t(id));
    if (id > max_id) {
      max_id = id;
      max_token = token;
    }
  };
  if (fast) {
    JsonReader r(fast->text, fast->vocab.begin);
    std::string buf;
    model.vocab.reserve((fast->vocab.end - fast->vocab.begin) / 12 + 16);
    r.expect('{');
    if (!r.consume('}')) {
      do {
        const std::string_view token = r.string(buf);
        r.expect(':');
        add_token(token, r.integer());
      } while (r.consume(','));
      r.expect('}');
    }
  } else {
    const json* vocab = member(m, "vocab");
    if (!vocab || !vocab->is_object()) fail("model has no \"vocab\" object");
    model.vocab.reserve(vocab->size());
    for (auto it = vocab->begin(); it != vocab->end(); ++it) {
      if (!it.value().is_number_integer()) fail("vocab entry \"", it.key(), "\" has no integer id");
      add_token(it.key(), it.value().get<int64_t>());
    }
  }
  // The id tables are as long as the largest id: a few entries with huge ids would make a file of
  // bytes cost gigabytes. Real vocabularies are dense (DeepSeek's: 0 .. 127999, no holes).
  constexpr int64_t kMaxUnusedIds = int64_t(1) << 20;
  if (max_id >= int64_t(model.vocab.size()) + kMaxUnusedIds)
    fail("vocab entry \"", max_token, "\" has id ", max_id, ", far beyond the vocabulary's ",
         model.vocab.size(), " entries (at most ", kMaxUnusedIds, " ids may be unused)");
  model.id_to_token.assign(size_t(max_id + 1), std::string());
  model.has_id.assign(size_t(max_id + 1), 0);
  for (size_t e = 0; e < model.vocab.size(); ++e) {
    const auto id = size_t(model.vocab.value(e));
    if (!model.has_id[id]) {
      model.id_to_token[id] = model.vocab.key(e);
      model.has_id[id] = 1;
    }
  }
  if (const json* unk = member(m, "unk_token")) {
    const auto id = model.vocab.find(unk->get<std::string>());
    if (!id) fail("unk_token \"", unk->get<std::string>(), "\" is not in the vocab");
    model.unk_id = *id;
  }
}

// model.merges (HF: "a b" strings, lines starting with "#version" skipped and not ranked, or
// [a, b]), ranked in file order; every token must be in the vocab.
void load_merges(const json& m, const FastTables* fast, BpeModel& model) {
  auto id_of = [&](std::string_view token, size_t line) {
    const auto id = model.vocab.find(token);
    if (!id) fail("merge ", line, ": token \"", token, "\" is not in the vocab");
    return *id;
  };
  std::string joined;
  uint32_t rank = 0;
  size_t line = 0;
  auto add_merge = [&](std::string_view a, std::string_view b) {
    const int32_t a_id = id_of(a, line);
    const int32_t b_id = id_of(b, line);
    joined.assign(a);
    joined.append(b);
    model.merges.insert(a_id, b_id, rank++, id_of(joined, line));
  };
  auto add_merge_line = [&](std::string_view s) {
    if (s.substr(0, 8) == "#version") return;
    const size_t space = s.find(' ');
    if (space == std::string_view::npos || s.find(' ', space + 1) != std::string_view::npos) {
      fail("merge ", line, " \"", s, "\" is not two tokens separated by one space");
    }
    add_merge(s.substr(0, space), s.substr(space + 1));
  };
  if (fast) {
    JsonReader r(fast->text, fast->merges.begin);
    std::string buf_a, buf_b;
    model.merges.reserve((fast->merges.end - fast->merges.begin) / 10 + 16);
    r.expect('[');
    if (!r.consume(']')) {
      do {
        ++line;
        const char c = r.peek();
        if (c == '"') {
          add_merge_line(r.string(buf_a));
        } else if (c == '[') {
          r.expect('[');
          const std::string_view a = r.string(buf_a);
          r.expect(',');
          const std::string_view b = r.string(buf_b);
          r.expect(']');
          add_merge(a, b);
        } else {
          throw FastPathFailed{};
        }
      } while (r.consume(','));
      r.expect(']');
    }
  } else {
    const json* merges = member(m, "merges");
    if (!merges || !merges->is_array()) fail("model has no \"merges\" array");
    model.merges.reserve(merges->size());
    for (const json& entry : *merges) {
      ++line;
      if (entry.is_string()) {
        add_merge_line(entry.get_ref<const std::string&>());
      } else if (entry.is_array() && entry.size() == 2 && entry[0].is_string() &&
                 entry[1].is_string()) {
        add_merge(entry[0].get_ref<const std::string&>(), entry[1].get_ref<const std::string&>());
      } else {
        fail("merge ", line, " is neither \"a b\" nor [\"a\", \"b\"]");
      }
    }
  }
}

void load_model(Impl& t, const json& root, const FastTables* fast) {
  const json* m = member(root, "model");
  if (!m || !m->is_object()) fail("no \"model\" object");
  check_model_options(*m, t.model);
  load_vocab(*m, fast, t.model);
  load_merges(*m, fast, t.model);
}

Behavior parse_behavior(const json& step) {
  const json* b = member(step, "behavior");
  if (!b) fail("Split pre-tokenizer has no \"behavior\"");
  const std::string s = b->get<std::string>();
  if (s == "Removed") return Behavior::kRemoved;
  if (s == "Isolated") return Behavior::kIsolated;
  if (s == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (s == "MergedWithNext") return Behavior::kMergedWithNext;
  if (s == "Contiguous") return Behavior::kContiguous;
  fail("Split pre-tokenizer behavior \"", s, "\" is unknown");
}

void add_pre_tokenizer(Impl& t, const json& p, const std::string& where) {
  const json* type = member(p, "type");
  if (!type || !type->is_string()) fail(where, " has no \"type\"");
  const std::string kind = type->get<std::string>();
  if (kind == "Sequence") {
    const json* list = member(p, "pretokenizers");
    if (!list || !list->is_array()) fail(where, " (Sequence) has no \"pretokenizers\" array");
    for (size_t i = 0; i < list->size(); ++i)
      add_pre_tokenizer(t, (*list)[i], cat(where, "[", i, "]"));
    return;
  }
  if (!t.steps.empty() && t.steps.back().kind == PreStep::Kind::kByteLevel) {
    fail(where, ": a pre-tokenizer after ByteLevel is not supported");
  }
  PreStep step;
  if (kind == "Split") {
    const json* pattern = member(p, "pattern");
    if (!pattern || !pattern->is_object()) fail(where, " (Split) has no \"pattern\" object");
    if (const json* re = member(*pattern, "Regex")) {
      step.regex = std::make_unique<Regex>(re->get<std::string>(), where);
    } else if (const json* lit = member(*pattern, "String")) {
      step.literal = lit->get<std::string>();
      if (step.literal.empty()) fail(where, " (Split) has an empty String pattern");
    } else {
      fail(where, " (Split) pattern is neither Regex nor String");
    }
    step.behavior = parse_behavior(p);
    step.invert = get_bool(p, "invert", false);
  } else if (kind == "ByteLevel") {
    step.kind = PreStep::Kind::kByteLevel;
    step.add_prefix_space = get_bool(p, "add_prefix_space", true);
    step.use_regex = get_bool(p, "use_regex", true);
    if (step.use_regex && !t.gpt2_regex)
      t.gpt2_regex = std::make_unique<Regex>(kGpt2Pattern, where);
  } else {
    fail(where, ": pre-tokenizer type \"", kind, "\" is not supported");
  }
  t.steps.push_back(std::move(step));
}

void load_pipeline(Impl& t, const json& root) {
  if (const json* n = member(root, "normalizer")) {
    const bool empty_sequence = member(*n, "type") && (*n)["type"] == "Sequence" &&
                                member(*n, "normalizers") && (*n)["normalizers"].is_array() &&
                                (*n)["normalizers"].empty();
    if (!empty_sequence)
      fail("normalizer ", json_excerpt(*n, 200), " is not supported (only none)");
  }
  if (const json* p = member(root, "pre_tokenizer")) add_pre_tokenizer(t, *p, "pre_tokenizer");
  t.model.byte_level = !t.steps.empty() && t.steps.back().kind == PreStep::Kind::kByteLevel;
  if (const json* pp = member(root, "post_processor")) {
    if (!member(*pp, "type") || (*pp)["type"] != "ByteLevel") {
      fail("post_processor ", json_excerpt(*pp, 200), " is not supported (only ByteLevel)");
    }
  }
  const json* d = member(root, "decoder");
  if (!d || !member(*d, "type") || (*d)["type"] != "ByteLevel") {
    fail("decoder ", d ? json_excerpt(*d, 200) : std::string("null"),
         " is not supported (only ByteLevel)");
  }
}

// HF deserialization: the tokens are added in file order with AddedVocabulary::add_tokens, which
// gives a token the id of an existing added token or model token with the same content, and
// otherwise the next free id after the model's vocab size; the "id" in the file is only checked.
void load_added_tokens(Impl& t, const json& root) {
  static const json kNone = json::array();
  const json* list = member(root, "added_tokens");
  if (!list) list = &kNone;
  if (!list->is_array()) fail("\"added_tokens\" is not an array");
  int64_t next_id = int64_t(t.model.size());
  std::unordered_set<std::string> special_set;
  for (const json& e : *list) {
    AddedToken tok;
    const json* content = member(e, "content");
    if (!content || !content->is_string()) fail("an added token has no \"content\"");
    tok.content = content->get<std::string>();
    tok.special = get_bool(e, "special", false);
    tok.normalized = get_bool(e, "normalized", !tok.special);
    tok.lstrip = get_bool(e, "lstrip", false);
    tok.rstrip = get_bool(e, "rstrip", false);
    tok.single_word = get_bool(e, "single_word", false);
    if (tok.single_word) fail("added token \"", tok.content, "\": single_word is not supported");
    if (tok.content.empty()) continue;
    if (auto it = t.added_map.find(tok.content);
        it != t.added_map.end() && t.added_by_id[it->second] == tok)
      continue;
    int32_t id;
    if (auto existing = t.lookup(tok.content)) {
      id = *existing;
    } else {
      if (next_id >= (int64_t(1) << 24)) fail("too many added tokens");
      id = int32_t(next_id++);
    }
    if (const json* file_id = member(e, "id");
        file_id && file_id->is_number_integer() && file_id->get<int64_t>() != id) {
      log_info("tokenizer: ", t.origin, ": added token \"", tok.content, "\" has id ",
               file_id->get<int64_t>(), " in the file but gets id ", id, " (as in HF tokenizers)");
    }
    t.added_map[tok.content] = id;
    if (tok.special) special_set.insert(tok.content);
    t.added_by_id[id] = tok;
  }
  for (const auto& [id, tok] : t.added_by_id) {
    (tok.normalized ? t.normalized_trie : t.raw_trie).insert(tok.content, id);
  }
  // Decode tables (HF: added token content first, then the model's token; "special" is a
  // property of the token string).
  int64_t max_id = int64_t(t.model.id_to_token.size()) - 1;
  for (const auto& [id, tok] : t.added_by_id) max_id = std::max<int64_t>(max_id, id);
  const size_t n = size_t(max_id + 1);
  t.flags.assign(n, 0);
  t.dec_offset.assign(n + 1, 0);
  const ByteAlphabet& alphabet = ByteAlphabet::get();
  for (size_t id = 0; id < n; ++id) {
    t.dec_offset[id] = uint32_t(t.dec_bytes.size());
    const std::string* token = nullptr;
    if (auto it = t.added_by_id.find(int32_t(id)); it != t.added_by_id.end()) {
      token = &it->second.content;
    } else if (id < t.model.has_id.size() && t.model.has_id[id]) {
      token = &t.model.id_to_token[id];
    }
    if (!token) continue;
    t.flags[id] = 1 | (special_set.count(*token) ? 2 : 0);
    ++t.n_ids;
    if (!alphabet.unmap(*token, t.dec_bytes)) t.dec_bytes += *token;
  }
  t.dec_offset[n] = uint32_t(t.dec_bytes.size());
}

std::string token_content(const json& v, const char* key) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && member(v, "content") && v["content"].is_string())
    return v["content"].get<std::string>();
  fail("tokenizer_config.json: \"", key, "\" is neither a string nor {\"content\": ...}");
}

void load_config(Impl& t, const std::string& text) {
  if (text.empty()) return;
  json c;
  try {
    c = json::parse(text);
  } catch (const json::exception& e) {
    fail("tokenizer_config.json is not valid JSON: ", e.what());
  }
  if (!c.is_object()) fail("tokenizer_config.json is not a JSON object");
  auto special = [&](const char* key, std::string& token, int32_t& id) {
    const json* v = member(c, key);
    if (!v || v->is_null()) return;
    token = token_content(*v, key);
    // transformers would add it as a new token past the model's vocabulary; here BOS would just
    // vanish from every prompt (or EOS never stop a completion): refuse the mismatch instead
    const std::optional<int32_t> found = t.lookup(token);
    check(found.has_value(), "tokenizer_config.json: ", key, " ", json_excerpt(json(token)),
          " is not a token of tokenizer.json (neither in its vocabulary nor in its added_tokens)");
    id = *found;
  };
  special("bos_token", t.bos_token, t.bos_id);
  special("eos_token", t.eos_token, t.eos_id);
  // transformers' LlamaTokenizer(Fast) puts BOS in front by default; other classes follow the flag.
  const json* cls = member(c, "tokenizer_class");
  const bool llama = cls && cls->is_string() &&
                     (cls->get<std::string>() == "LlamaTokenizerFast" ||
                      cls->get<std::string>() == "LlamaTokenizer");
  t.add_bos = get_bool(c, "add_bos_token", llama);
  t.add_eos = get_bool(c, "add_eos_token", false);
  if (const json* tpl = member(c, "chat_template")) {
    if (tpl->is_string()) {
      t.chat_template = tpl->get<std::string>();
    } else if (tpl->is_array()) {  // [{"name": ..., "template": ...}]: the "default" one
      for (const json& e : *tpl) {
        if (member(e, "name") && e["name"] == "default" && member(e, "template") &&
            e["template"].is_string())
          t.chat_template = e["template"].get<std::string>();
      }
      check(!t.chat_template.empty(),
            "tokenizer_config.json: \"chat_template\" is a list without a \"default\" entry "
            "holding a template string");
    } else {
      fail("tokenizer_config.json: \"chat_template\" is neither a string nor a list");
    }
  }
}

std::string read_whole_file(const std::string& path, bool required) {
  // an optional file may be absent; one that is there but cannot be read is an error, not "empty"
  struct stat st {};
  if (!required && ::stat(path.c_str(), &st) != 0 && errno == ENOENT) return {};
  return read_input_file(path, "tokenizer file", int64_t{1} << 30);
}

}  // namespace tokenizer_detail

using namespace tokenizer_detail;

Tokenizer Tokenizer::load(const std::string& dir) {
  const std::string json_path = dir + "/tokenizer.json";
  const std::string config_path = dir + "/tokenizer_config.json";
  const std::string text = read_whole_file(json_path, true);
  const std::string config = read_whole_file(config_path, false);
  return from_strings(text, config, json_path);
}

Tokenizer Tokenizer::from_strings(const std::string& tokenizer_json,
                                  const std::string& tokenizer_config_json,
                                  const std::string& origin) {
  // Fast path: model.vocab and model.merges (nearly all of the file) are read straight from the
  // text and only the rest goes through nlohmann::json. Anything unusual falls back to parsing
  // the whole file with nlohmann::json, which also gives the error messages.
  auto build = [&](const json& root, const FastTables* fast) {
    auto impl = std::make_shared<Impl>();
    impl->origin = origin;
    impl->serial = next_tokenizer_serial();
    if (!root.is_object()) fail("not a JSON object");
    load_model(*impl, root, fast);
    load_pipeline(*impl, root);
    load_added_tokens(*impl, root);
    if (impl->flags.empty()) fail("the vocab is empty");
    impl->model.finish_setup();
    load_config(*impl, tokenizer_config_json);
    return impl;
  };
  std::shared_ptr<Impl> impl;
  try {
    try {
      FastTables fast{tokenizer_json, {}, {}};
      locate_model_tables(tokenizer_json, fast.vocab, fast.merges);
      const JsonRange& first = fast.vocab.begin < fast.merges.begin ? fast.vocab : fast.merges;
      const JsonRange& second = fast.vocab.begin < fast.merges.begin ? fast.merges : fast.vocab;
      std::string rest;
      rest.reserve(first.begin + (second.begin - first.end) + (tokenizer_json.size() - second.end) +
                   4);
      rest.append(tokenizer_json, 0, first.begin);
      rest.append(&first == &fast.vocab ? "{}" : "[]");
      rest.append(tokenizer_json, first.end, second.begin - first.end);
      rest.append(&second == &fast.vocab ? "{}" : "[]");
      rest.append(tokenizer_json, second.end, std::string::npos);
      const json root = json::parse(rest);
      impl = build(root, &fast);
    } catch (const FastPathFailed&) {
    } catch (const json::parse_error&) {
    }
    if (!impl) {
      json root;
      try {
        root = json::parse(tokenizer_json);
      } catch (const json::exception& e) {
        fail("not valid JSON: ", e.what());
      }
      impl = build(root, nullptr);
    }
  } catch (const json::exception& e) {
    fail("tokenizer ", origin, ": ", e.what());
  } catch (const Error& e) {
    fail("tokenizer ", origin, ": ", e.what());
  }
  return Tokenizer(std::move(impl));
}

}  // namespace dsinfer
