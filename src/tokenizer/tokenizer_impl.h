// Internals of the tokenizer shared by its loading (tokenizer_load.cpp) and its encoding and
// decoding (tokenizer.cpp): the Oniguruma wrappers, added tokens, the pre-tokenizer steps and the
// loaded tokenizer itself (Impl). Not part of the public interface.
#pragma once

#include <oniguruma.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"
#include "tokenizer/bpe_internal.h"

namespace dsinfer::tokenizer_detail {

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
inline bool is_white_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
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

// A unique number per loaded tokenizer (the per-thread word cache tells tokenizers apart by it).
uint64_t next_tokenizer_serial();

}  // namespace dsinfer::tokenizer_detail
