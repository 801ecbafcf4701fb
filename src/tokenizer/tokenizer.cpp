// Byte-level BPE tokenizer as Hugging Face `tokenizers` (0.23) runs a tokenizer.json; see
// tokenizer.h for the pipeline and bpe_internal.h / bpe_model.cpp for the BPE model itself.
#include "tokenizer/tokenizer.h"

#include <oniguruma.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "core/log.h"
#include "tokenizer/bpe_internal.h"

namespace dsinfer {
namespace tokenizer_detail {

using json = nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Oniguruma

// HF builds every regex with the Rust `onig` crate's Regex::new: UTF-8, no options,
// Syntax::default() = OnigDefaultSyntax, which is ONIG_SYNTAX_ONIGURUMA in Oniguruma 6.9.
class Regex {
 public:
  Regex(const std::string& pattern, const std::string& what) {
    static std::once_flag once;
    std::call_once(once, [] {
      OnigEncoding encodings[1] = {ONIG_ENCODING_UTF8};
      onig_initialize(encodings, 1);
    });
    OnigErrorInfo info;
    const auto* p = reinterpret_cast<const OnigUChar*>(pattern.data());
    const int r = onig_new(&re_, p, p + pattern.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
                           ONIG_SYNTAX_ONIGURUMA, &info);
    if (r != ONIG_NORMAL) {
      OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN + 1] = {};
      onig_error_code_to_str(message, r, &info);
      re_ = nullptr;
      fail(what, ": bad regex \"", pattern, "\": ", reinterpret_cast<const char*>(message));
    }
  }
  ~Regex() {
    if (re_) onig_free(re_);
  }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  OnigRegex get() const { return re_; }

 private:
  OnigRegex re_ = nullptr;
};

class Region {
 public:
  Region() : region_(onig_region_new()) {
    check(region_ != nullptr, "tokenizer: out of memory (onig_region_new)");
  }
  ~Region() { onig_region_free(region_, 1); }
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
  OnigRegion* get() const { return region_; }

 private:
  OnigRegion* region_;
};

// The regex that the ByteLevel pre-tokenizer splits with when use_regex is true (a constant of
// HF's byte_level.rs, not part of tokenizer.json).
const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// ---------------------------------------------------------------------------------------------
// Added tokens

struct AddedToken {
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
  bool operator==(const AddedToken&) const = default;
};

// Rust char::is_whitespace / regex \s (Unicode White_Space).
bool is_white_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

uint32_t decode_cp(std::string_view s, size_t i, size_t len) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data()) + i;
  switch (len) {
    case 1:
      return p[0];
    case 2:
      return ((p[0] & 0x1Fu) << 6) | (p[1] & 0x3Fu);
    case 3:
      return ((p[0] & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
    default:
      return ((p[0] & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) |
             (p[3] & 0x3Fu);
  }
}

// Byte trie over the added tokens' contents for leftmost-longest matching.
class Trie {
 public:
  Trie() { nodes_.emplace_back(); }
  bool empty() const { return nodes_.size() == 1; }
  void insert(std::string_view key, int32_t id) {
    if (key.empty()) return;
    first_byte_[static_cast<unsigned char>(key[0])] = true;
    int32_t node = 0;
    for (unsigned char c : key) {
      int32_t next = child(node, c);
      if (next < 0) {
        next = int32_t(nodes_.size());
        nodes_[size_t(node)].kids.emplace_back(c, next);
        nodes_.emplace_back();
      }
      node = next;
    }
    nodes_[size_t(node)].id = id;
  }
  // Longest key starting at text[i]: its end (exclusive) and id, or id -1.
  std::pair<size_t, int32_t> longest_at(std::string_view text, size_t i) const {
    std::pair<size_t, int32_t> best{0, -1};
    int32_t node = 0;
    for (size_t j = i; j < text.size(); ++j) {
      node = child(node, static_cast<unsigned char>(text[j]));
      if (node < 0) break;
      if (nodes_[size_t(node)].id >= 0) best = {j + 1, nodes_[size_t(node)].id};
    }
    return best;
  }
  bool may_start(unsigned char c) const { return first_byte_[c]; }

 private:
  struct Node {
    int32_t id = -1;
    std::vector<std::pair<unsigned char, int32_t>> kids;
  };
  int32_t child(int32_t node, unsigned char c) const {
    for (const auto& [k, n] : nodes_[size_t(node)].kids) {
      if (k == c) return n;
    }
    return -1;
  }
  std::vector<Node> nodes_;
  bool first_byte_[256] = {};
};

// ---------------------------------------------------------------------------------------------
// Pre-tokenizer steps

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct PreStep {
  enum class Kind { kSplit, kByteLevel } kind = Kind::kSplit;
  // Split
  std::unique_ptr<Regex> regex;  // null for a literal ("String") pattern
  std::string literal;
  Behavior behavior = Behavior::kIsolated;
  bool invert = false;
  // ByteLevel
  bool add_prefix_space = true;
  bool use_regex = true;
};

// ---------------------------------------------------------------------------------------------
// Impl

struct Impl {
  std::string origin;
  uint64_t serial = 0;  // tells apart tokenizers in the per-thread word cache
  BpeModel model;
  std::vector<PreStep> steps;
  std::unique_ptr<Regex> gpt2_regex;  // for a ByteLevel step with use_regex

  std::unordered_map<int32_t, AddedToken> added_by_id;
  StringMap<int32_t> added_map;  // content -> id
  Trie raw_trie;                 // "normalized": false
  Trie normalized_trie;          // "normalized": true

  // id -> bytes the ByteLevel decoder gives for its token; flags: 1 = has a token, 2 = special
  std::vector<uint32_t> dec_offset;  // size max_id + 2
  std::string dec_bytes;
  std::vector<uint8_t> flags;
  int64_t n_ids = 0;

  std::string bos_token, eos_token, chat_template;
  int32_t bos_id = -1, eos_id = -1;
  bool add_bos = false, add_eos = false;

  std::optional<std::string_view> bytes_of(int32_t id) const {
    if (id < 0 || size_t(id) >= flags.size() || !(flags[size_t(id)] & 1)) return std::nullopt;
    return std::string_view(dec_bytes).substr(dec_offset[size_t(id)],
                                              dec_offset[size_t(id) + 1] - dec_offset[size_t(id)]);
  }
  bool special(int32_t id) const {
    return id >= 0 && size_t(id) < flags.size() && (flags[size_t(id)] & 2);
  }
  std::optional<int32_t> lookup(std::string_view token) const {
    if (auto it = added_map.find(token); it != added_map.end()) return it->second;
    return model.vocab.find(token);
  }
};

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

void load_model(Impl& t, const json& root, const FastTables* fast) {
  const json* m = member(root, "model");
  if (!m || !m->is_object()) fail("no \"model\" object");
  if (const json* type = member(*m, "type"); type && *type != "BPE")
    fail("model type ", type->dump(), " is not supported (only BPE)");
  if (const json* d = member(*m, "dropout"); d && d->get<double>() != 0.0)
    fail("BPE dropout is not supported");
  if (get_bool(*m, "byte_fallback", false)) fail("BPE byte_fallback is not supported");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (const json* v = member(*m, key); v && !v->get<std::string>().empty())
      fail("BPE ", key, " is not supported");
  }
  BpeModel& model = t.model;
  model.fuse_unk = get_bool(*m, "fuse_unk", false);
  model.ignore_merges = get_bool(*m, "ignore_merges", false);

  // vocab
  int64_t max_id = -1;
  auto add_token = [&](std::string_view token, int64_t id) {
    if (id < 0 || id >= (int64_t(1) << 24))
      fail("vocab entry \"", token, "\" has id ", id, " out of range");
    model.vocab.set(token, int32_t(id));
    max_id = std::max(max_id, id);
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
    const json* vocab = member(*m, "vocab");
    if (!vocab || !vocab->is_object()) fail("model has no \"vocab\" object");
    model.vocab.reserve(vocab->size());
    for (auto it = vocab->begin(); it != vocab->end(); ++it) {
      if (!it.value().is_number_integer()) fail("vocab entry \"", it.key(), "\" has no integer id");
      add_token(it.key(), it.value().get<int64_t>());
    }
  }
  model.id_to_token.assign(size_t(max_id + 1), std::string());
  model.has_id.assign(size_t(max_id + 1), 0);
  for (size_t e = 0; e < model.vocab.size(); ++e) {
    const auto id = size_t(model.vocab.value(e));
    if (!model.has_id[id]) {
      model.id_to_token[id] = model.vocab.key(e);
      model.has_id[id] = 1;
    }
  }
  if (const json* unk = member(*m, "unk_token")) {
    const auto id = model.vocab.find(unk->get<std::string>());
    if (!id) fail("unk_token \"", unk->get<std::string>(), "\" is not in the vocab");
    model.unk_id = *id;
  }

  // merges (HF: "a b" strings, lines starting with "#version" skipped and not ranked, or [a, b])
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
    const json* merges = member(*m, "merges");
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
      fail("normalizer ", n->dump().substr(0, 200), " is not supported (only none)");
  }
  if (const json* p = member(root, "pre_tokenizer")) add_pre_tokenizer(t, *p, "pre_tokenizer");
  t.model.byte_level = !t.steps.empty() && t.steps.back().kind == PreStep::Kind::kByteLevel;
  if (const json* pp = member(root, "post_processor")) {
    if (!member(*pp, "type") || (*pp)["type"] != "ByteLevel") {
      fail("post_processor ", pp->dump().substr(0, 200), " is not supported (only ByteLevel)");
    }
  }
  const json* d = member(root, "decoder");
  if (!d || !member(*d, "type") || (*d)["type"] != "ByteLevel") {
    fail("decoder ", d ? d->dump().substr(0, 200) : std::string("null"),
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
  if (v.is_object() && member(v, "content")) return v["content"].get<std::string>();
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
    if (!v) return;
    token = token_content(*v, key);
    id = t.lookup(token).value_or(-1);
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
        if (member(e, "name") && e["name"] == "default" && member(e, "template"))
          t.chat_template = e["template"].get<std::string>();
      }
    } else {
      fail("tokenizer_config.json: \"chat_template\" is neither a string nor a list");
    }
  }
}

std::string read_whole_file(const std::string& path, bool required) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (required) fail("tokenizer: cannot open ", path);
    return {};
  }
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) fail("tokenizer: cannot read ", path);
  return std::move(s).str();
}

// ---------------------------------------------------------------------------------------------
// Encoding

// Per-thread word cache (HF keeps one per thread as well): word bytes -> ids, open addressing
// over flat arrays so that a miss costs no allocation. Cleared when full.
class WordCache {
 public:
  uint64_t owner = 0;  // Impl::serial of the tokenizer the entries belong to
  static constexpr size_t kCapacity = 1 << 16;  // entries
  static constexpr size_t kMaxWordLength = 256;

  bool find(std::string_view word, uint64_t h, std::vector<int32_t>& out) const {
    if (slots_.empty()) return false;
    const uint32_t tag = uint32_t(h >> 32);
    for (uint64_t i = h & kMask;; i = (i + 1) & kMask) {
      const Slot& slot = slots_[i];
      if (slot.entry == kEmpty) return false;
      if (slot.tag == tag && key(slot.entry) == word) {
        out.insert(out.end(), ids_.begin() + id_off_[slot.entry],
                   ids_.begin() + id_off_[slot.entry + 1]);
        return true;
      }
    }
  }
  void insert(std::string_view word, uint64_t h, const int32_t* ids, size_t n) {
    if (slots_.empty() || key_off_.size() > kCapacity) clear();
    uint64_t i = h & kMask;
    while (slots_[i].entry != kEmpty) i = (i + 1) & kMask;
    slots_[i] = Slot{uint32_t(h >> 32), uint32_t(key_off_.size() - 1)};
    keys_.append(word);
    key_off_.push_back(uint32_t(keys_.size()));
    ids_.insert(ids_.end(), ids, ids + n);
    id_off_.push_back(uint32_t(ids_.size()));
  }
  void clear() {
    slots_.assign(kMask + 1, Slot{0, kEmpty});
    keys_.clear();
    ids_.clear();
    key_off_.assign(1, 0);
    id_off_.assign(1, 0);
  }

 private:
  static constexpr uint64_t kMask = 2 * kCapacity - 1;  // load factor <= 1/2
  static constexpr uint32_t kEmpty = ~uint32_t{0};
  struct Slot {
    uint32_t tag;
    uint32_t entry;
  };
  std::string_view key(uint32_t e) const {
    return std::string_view(keys_).substr(key_off_[e], key_off_[e + 1] - key_off_[e]);
  }
  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<uint32_t> key_off_{0};
  std::vector<int32_t> ids_;
  std::vector<uint32_t> id_off_{0};
};
thread_local WordCache t_word_cache;

struct Scratch {
  Region region;
  std::vector<std::string_view> pieces, next;
  struct Match {
    size_t begin, end;
    bool is_match;
  };
  std::vector<Match> matches, merged;
  std::deque<std::string> arena;  // strings made by ByteLevel add_prefix_space
  BpeScratch bpe;
};

// Reused by every encode on a thread (nothing in an encode calls back into another one).
thread_local Scratch t_scratch;

// onig crate FindMatches + HF Pattern::find_matches: the matches of re in s and the gaps between
// them, in order, covering s.
void find_matches(OnigRegex re, std::string_view s, Scratch& sc) {
  sc.matches.clear();
  const auto* begin = reinterpret_cast<const OnigUChar*>(s.data());
  const auto* end = begin + s.size();
  OnigRegion* region = sc.region.get();
  size_t prev = 0, last_end = 0;
  bool skip_next_empty = false;
  while (last_end <= s.size()) {
    onig_region_clear(region);
    const int r = onig_search(re, begin, end, begin + last_end, end, region, ONIG_OPTION_NONE);
    if (r == ONIG_MISMATCH) break;
    if (r < 0) {
      OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN + 1] = {};
      onig_error_code_to_str(message, r);
      fail("tokenizer: regex search failed: ", reinterpret_cast<const char*>(message));
    }
    const size_t ms = size_t(region->beg[0]), me = size_t(region->end[0]);
    last_end = me;
    if (ms == me) {
      size_t step = 1;
      if (last_end < s.size()) {
        size_t bad;
        bool truncated;
        step = std::max<size_t>(1, utf8_sequence(s, last_end, &bad, &truncated));
      }
      last_end += step;
      if (skip_next_empty) {
        skip_next_empty = false;
        continue;
      }
    } else {
      skip_next_empty = true;
    }
    if (prev != ms) sc.matches.push_back({prev, ms, false});
    sc.matches.push_back({ms, me, true});
    prev = me;
  }
  if (prev != s.size()) sc.matches.push_back({prev, s.size(), false});
}

void find_literal(std::string_view needle, std::string_view s, Scratch& sc) {
  sc.matches.clear();
  size_t prev = 0;
  for (size_t at = s.find(needle); at != std::string_view::npos;
       at = s.find(needle, at + needle.size())) {
    if (prev != at) sc.matches.push_back({prev, at, false});
    sc.matches.push_back({at, at + needle.size(), true});
    prev = at + needle.size();
  }
  if (prev != s.size()) sc.matches.push_back({prev, s.size(), false});
}

// HF NormalizedString::split: turns the (range, is_match) list into pieces by the behavior;
// empty pieces are dropped (PreTokenizedString::split).
void split_piece(std::string_view s, Behavior behavior, Scratch& sc,
                 std::vector<std::string_view>& out) {
  if (s.empty()) return;
  auto& m = sc.matches;
  auto emit = [&](size_t b, size_t e) {
    if (e > b) out.push_back(s.substr(b, e - b));
  };
  switch (behavior) {
    case Behavior::kIsolated:
      for (const auto& x : m) emit(x.begin, x.end);
      break;
    case Behavior::kRemoved:
      for (const auto& x : m) {
        if (!x.is_match) emit(x.begin, x.end);
      }
      break;
    case Behavior::kContiguous:
    case Behavior::kMergedWithPrevious: {
      auto& r = sc.merged;
      r.clear();
      bool previous_match = false;
      for (const auto& x : m) {
        const bool extend = behavior == Behavior::kContiguous ? x.is_match == previous_match
                                                              : (x.is_match && !previous_match);
        if (extend && !r.empty()) {
          r.back().end = x.end;
        } else {
          r.push_back(x);
        }
        previous_match = x.is_match;
      }
      for (const auto& x : r) emit(x.begin, x.end);
      break;
    }
    case Behavior::kMergedWithNext: {
      auto& r = sc.merged;
      r.clear();
      bool previous_match = false;
      for (size_t k = m.size(); k-- > 0;) {
        const auto& x = m[k];
        if (x.is_match && !previous_match && !r.empty()) {
          r.back().begin = x.begin;
        } else {
          r.push_back(x);
        }
        previous_match = x.is_match;
      }
      for (size_t k = r.size(); k-- > 0;) emit(r[k].begin, r[k].end);
      break;
    }
  }
}

// Runs the pre-tokenizer steps on one valid UTF-8 run; the words are left in sc.pieces.
void pre_tokenize_run(const Impl& t, std::string_view run, Scratch& sc) {
  sc.pieces.clear();
  sc.pieces.push_back(run);
  for (const PreStep& step : t.steps) {
    sc.next.clear();
    for (std::string_view piece : sc.pieces) {
      if (step.kind == PreStep::Kind::kSplit) {
        if (step.regex) {
          find_matches(step.regex->get(), piece, sc);
        } else {
          find_literal(step.literal, piece, sc);
        }
        if (step.invert) {
          for (auto& x : sc.matches) x.is_match = !x.is_match;
        }
        split_piece(piece, step.behavior, sc, sc.next);
      } else {  // ByteLevel: optional prefix space and GPT-2 split; the bytes map in the model
        if (step.add_prefix_space && !piece.empty() && piece[0] != ' ') {
          sc.arena.push_back(" ");
          sc.arena.back().append(piece);
          piece = sc.arena.back();
        }
        if (step.use_regex) {
          find_matches(t.gpt2_regex->get(), piece, sc);
          split_piece(piece, Behavior::kIsolated, sc, sc.next);
        } else if (!piece.empty()) {
          sc.next.push_back(piece);
        }
      }
    }
    sc.pieces.swap(sc.next);
  }
}

// Cuts the added tokens out of text (HF AddedVocabulary::find_matches with a leftmost-longest
// automaton) and calls f(segment, id) for each piece in order; id is -1 for ordinary text.
template <typename F>
void scan_added(const Impl& t, const Trie& trie, std::string_view text, F&& f) {
  if (trie.empty()) {
    if (!text.empty()) f(text, -1);
    return;
  }
  size_t start_offset = 0, i = 0;
  while (i < text.size()) {
    if (!trie.may_start(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    auto [stop, id] = trie.longest_at(text, i);
    if (id < 0) {
      ++i;
      continue;
    }
    size_t start = i;
    const AddedToken& tok = t.added_by_id.at(id);
    if (tok.lstrip) {  // take the white space before the token, back to the previous split
      size_t b = start;
      while (b > start_offset) {
        size_t c = b - 1;
        while (c > start_offset && (static_cast<unsigned char>(text[c]) & 0xC0) == 0x80) --c;
        size_t bad;
        bool truncated;
        const size_t len = utf8_sequence(text, c, &bad, &truncated);
        if (len != b - c || !is_white_space(decode_cp(text, c, len))) break;
        b = c;
      }
      start = b;
    }
    if (tok.rstrip) {
      while (stop < text.size()) {
        size_t bad;
        bool truncated;
        const size_t len = utf8_sequence(text, stop, &bad, &truncated);
        if (len == 0 || !is_white_space(decode_cp(text, stop, len))) break;
        stop += len;
      }
    }
    if (start_offset < start) f(text.substr(start_offset, start - start_offset), -1);
    f(text.substr(start, stop - start), id);
    start_offset = i = stop;
  }
  if (start_offset < text.size()) f(text.substr(start_offset), -1);
}

// The whole pipeline up to the model: f(word, id) with id >= 0 for added tokens, and id -1 for
// words that go to the BPE model.
template <typename F>
void for_each_word(const Impl& t, std::string_view text, Scratch& sc, F&& f) {
  auto words_of = [&](std::string_view segment) {
    // Valid UTF-8 runs go through the pre-tokenizer; each maximal ill-formed subsequence is a word.
    size_t run_start = 0, i = 0;
    auto flush = [&](size_t end) {
      if (end > run_start) {
        pre_tokenize_run(t, segment.substr(run_start, end - run_start), sc);
        for (std::string_view w : sc.pieces) f(w, -1);
      }
    };
    while (i < segment.size()) {
      if (static_cast<unsigned char>(segment[i]) < 0x80) {
        ++i;
        continue;
      }
      size_t bad;
      bool truncated;
      const size_t len = utf8_sequence(segment, i, &bad, &truncated);
      if (len) {
        i += len;
        continue;
      }
      flush(i);
      f(segment.substr(i, bad), -1);
      i += bad;
      run_start = i;
    }
    flush(segment.size());
    sc.arena.clear();
  };
  scan_added(t, t.raw_trie, text, [&](std::string_view seg, int32_t id) {
    if (id >= 0) {
      f(seg, id);
      return;
    }
    scan_added(t, t.normalized_trie, seg, [&](std::string_view seg2, int32_t id2) {
      if (id2 >= 0) {
        f(seg2, id2);
      } else {
        words_of(seg2);
      }
    });
  });
}

void encode_word_cached(const Impl& t, std::string_view word, Scratch& sc,
                        std::vector<int32_t>& out) {
  const BpeModel& model = t.model;
  if (word.size() == 1 && model.byte_level && !model.ignore_merges) {
    const int32_t id = model.byte_ids[static_cast<unsigned char>(word[0])];
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  if (word.size() > WordCache::kMaxWordLength) {
    model.encode_word(word, sc.bpe, out);
    return;
  }
  WordCache& cache = t_word_cache;
  if (cache.owner != t.serial) {
    cache.clear();
    cache.owner = t.serial;
  }
  const uint64_t h = StringHash{}(word);
  if (cache.find(word, h, out)) return;
  const size_t before = out.size();
  model.encode_word(word, sc.bpe, out);
  cache.insert(word, h, out.data() + before, out.size() - before);
}

std::atomic<uint64_t> g_serial{0};

}  // namespace tokenizer_detail

using namespace tokenizer_detail;

// ---------------------------------------------------------------------------------------------
// Tokenizer

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
    impl->serial = ++g_serial;
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

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const Impl& t = *impl_;
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (add_special_tokens && t.add_bos && t.bos_id >= 0) ids.push_back(t.bos_id);
  Scratch& sc = t_scratch;
  for_each_word(t, text, sc, [&](std::string_view word, int32_t id) {
    if (id >= 0) {
      ids.push_back(id);
    } else {
      encode_word_cached(t, word, sc, ids);
    }
  });
  if (add_special_tokens && t.add_eos && t.eos_id >= 0) ids.push_back(t.eos_id);
  return ids;
}

std::vector<std::string> Tokenizer::pre_tokenize(std::string_view text) const {
  std::vector<std::string> words;
  Scratch& sc = t_scratch;
  for_each_word(*impl_, text, sc,
                [&](std::string_view word, int32_t) { words.emplace_back(word); });
  return words;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  const Impl& t = *impl_;
  std::string bytes;
  for (int32_t id : ids) {
    check(id >= 0, "tokenizer: cannot decode negative token id ", id);
    auto b = t.bytes_of(id);
    if (!b) continue;  // no token with this id: HF skips it
    if (skip_special_tokens && t.special(id)) continue;
    bytes.append(*b);
  }
  std::string out;
  out.reserve(bytes.size());
  utf8_lossy_append(bytes, out, true);
  return out;
}

int32_t Tokenizer::bos_id() const { return impl_->bos_id; }
int32_t Tokenizer::eos_id() const { return impl_->eos_id; }
const std::string& Tokenizer::bos_token() const { return impl_->bos_token; }
const std::string& Tokenizer::eos_token() const { return impl_->eos_token; }
bool Tokenizer::add_bos_token() const { return impl_->add_bos; }
bool Tokenizer::add_eos_token() const { return impl_->add_eos; }
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  return impl_->lookup(token);
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  const Impl& t = *impl_;
  if (auto it = t.added_by_id.find(id); it != t.added_by_id.end()) return it->second.content;
  if (id >= 0 && size_t(id) < t.model.has_id.size() && t.model.has_id[size_t(id)])
    return t.model.id_to_token[size_t(id)];
  return std::nullopt;
}

int64_t Tokenizer::vocab_size() const { return impl_->n_ids; }
bool Tokenizer::is_special(int32_t id) const { return impl_->special(id); }
std::optional<std::string_view> Tokenizer::token_bytes(int32_t id) const {
  return impl_->bytes_of(id);
}

// ---------------------------------------------------------------------------------------------
// UTF-8 (String::from_utf8_lossy) and streaming

size_t utf8_lossy_append(std::string_view bytes, std::string& out, bool final) {
  size_t i = 0;
  while (i < bytes.size()) {
    size_t j = i;
    while (j < bytes.size() && static_cast<unsigned char>(bytes[j]) < 0x80) ++j;
    out.append(bytes.data() + i, j - i);
    i = j;
    if (i == bytes.size()) break;
    size_t bad;
    bool truncated;
    const size_t len = utf8_sequence(bytes, i, &bad, &truncated);
    if (len) {
      out.append(bytes.data() + i, len);
      i += len;
    } else if (truncated && !final) {
      break;  // the next bytes may complete this character
    } else {
      out += "\xEF\xBF\xBD";
      i += bad;
    }
  }
  return i;
}

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string StreamDecoder::push(int32_t id) {
  check(id >= 0, "tokenizer: cannot decode negative token id ", id);
  const Impl& t = *tokenizer_.impl_;
  auto b = t.bytes_of(id);
  if (!b || (skip_special_tokens_ && t.special(id))) return {};
  pending_.append(*b);
  std::string out;
  const size_t used = utf8_lossy_append(pending_, out, false);
  pending_.erase(0, used);
  return out;
}

std::string StreamDecoder::finish() {
  std::string out;
  utf8_lossy_append(pending_, out, true);
  pending_.clear();
  return out;
}

}  // namespace dsinfer
