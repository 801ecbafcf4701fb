// Internals of the tokenizer (src/tokenizer/tokenizer.h): the BPE model, the merge table, the
// GPT-2 byte alphabet (UTF-8 itself: core/utf8.h). Not part of the public interface.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/utf8.h"

namespace dsinfer::tokenizer_detail {

// ---- GPT-2 byte alphabet (bytes_to_unicode) ----

struct ByteAlphabet {
  uint32_t byte_to_cp[256];
  // cp (< 512) -> byte, -1 if cp is not in the alphabet
  int16_t cp_to_byte[512];
  ByteAlphabet();
  static const ByteAlphabet& get();
  std::string map(std::string_view bytes) const;  // bytes -> alphabet string (UTF-8)
  // Alphabet string -> bytes; false if some character is not in the alphabet (or s is not UTF-8).
  bool unmap(std::string_view s, std::string& out) const;
};

// ---- transparent string hashing for heterogeneous lookups ----

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept;
};
struct StringEq {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const noexcept { return a == b; }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, StringEq>;

// ---- token string -> id: open addressing over one arena of keys (quick to build and probe) ----

class TokenMap {
 public:
  void reserve(size_t n);
  // A repeated key takes the new value (as a JSON object read into a hash map).
  void set(std::string_view key, int32_t value);
  std::optional<int32_t> find(std::string_view key) const {
    if (slots_.empty()) return std::nullopt;
    const uint64_t h = StringHash{}(key);
    const uint32_t tag = uint32_t(h >> 32);
    for (uint64_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.entry == kEmpty) return std::nullopt;
      if (slot.tag == tag && this->key(slot.entry) == key) return values_[slot.entry];
    }
  }
  size_t size() const { return values_.size(); }
  std::string_view key(size_t entry) const {
    return std::string_view(arena_).substr(offsets_[entry], offsets_[entry + 1] - offsets_[entry]);
  }
  int32_t value(size_t entry) const { return values_[entry]; }

 private:
  static constexpr uint32_t kEmpty = ~uint32_t{0};
  struct Slot {
    uint32_t tag;
    uint32_t entry;
  };
  void rehash(size_t capacity);
  std::vector<Slot> slots_;
  uint64_t mask_ = 0;
  std::string arena_;
  std::vector<uint32_t> offsets_{0};  // entry i is arena_[offsets_[i], offsets_[i + 1])
  std::vector<int32_t> values_;
};

// ---- a minimal JSON reader for the two big tables of tokenizer.json (model.vocab and
// model.merges), so that they need no DOM. Anything unexpected throws FastPathFailed and the
// caller parses the whole file with nlohmann::json instead (which also gives the error message).

struct FastPathFailed {};

class JsonReader {
 public:
  explicit JsonReader(std::string_view text, size_t pos = 0) : s_(text), i_(pos) {}
  size_t pos() const { return i_; }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t'))
      ++i_;
  }
  char peek() {
    ws();
    return i_ < s_.size() ? s_[i_] : '\0';
  }
  void expect(char c) {
    if (peek() != c) throw FastPathFailed{};
    ++i_;
  }
  bool consume(char c) {
    if (peek() != c) return false;
    ++i_;
    return true;
  }
  // A string value: a view of the text itself when it has no escapes, else decoded into buf.
  std::string_view string(std::string& buf);
  int64_t integer();
  void skip_value(int depth = 0);

 private:
  // string()'s slow path, from the first backslash: buf holds the text before it.
  std::string_view escaped_string(std::string& buf);
  // The escape after a backslash (i_ past it) onto buf.
  void escape(std::string& buf);
  // The length of the UTF-8 sequence at i_ (a non-ASCII lead byte); invalid text leaves the fast
  // path (the full parser names it).
  size_t multibyte_length() const;
  uint32_t hex4();
  std::string_view s_;
  size_t i_;
};

struct JsonRange {
  size_t begin = 0, end = 0;
  bool found = false;
};
// Finds the values of model.vocab and model.merges; throws FastPathFailed if the text does not
// have the expected shape (one top-level object, one "model" object holding both).
void locate_model_tables(std::string_view text, JsonRange& vocab, JsonRange& merges);

// ---- merge table: (left id, right id) -> (rank, merged id), open addressing ----

class MergeTable {
 public:
  struct Entry {
    uint64_t key;
    uint32_t rank;
    int32_t new_id;
  };
  void reserve(size_t n);
  // A later merge of the same pair replaces the earlier one (HF collects into a hash map).
  void insert(int32_t a, int32_t b, uint32_t rank, int32_t new_id);
  const Entry* find(int32_t a, int32_t b) const {
    if (slots_.empty()) return nullptr;
    const uint64_t key = make_key(a, b);
    for (uint64_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      const Entry& e = slots_[i];
      if (e.key == key) return &e;
      if (e.key == kEmpty) return nullptr;
    }
  }
  size_t size() const { return count_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t make_key(int32_t a, int32_t b) {
    return (uint64_t(uint32_t(a)) << 32) | uint32_t(b);
  }
  static uint64_t hash(uint64_t k) {
    k ^= k >> 31;
    k *= 0x9E3779B97F4A7C15ull;
    k ^= k >> 29;
    return k;
  }
  void grow();
  std::vector<Entry> slots_;
  uint64_t mask_ = 0;
  size_t count_ = 0;
};

// ---- the BPE model ----

struct BpeScratch {
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    int32_t alive;
  };
  struct Candidate {
    uint32_t rank;
    uint32_t pos;
    int32_t new_id;
  };
  std::vector<Symbol> symbols;
  std::vector<Candidate> queue;
  std::string mapped;
};

class BpeModel {
 public:
  TokenMap vocab;                        // token -> id
  std::vector<std::string> id_to_token;  // id -> token ("" where has_id is false)
  std::vector<uint8_t> has_id;
  MergeTable merges;
  std::optional<int32_t> unk_id;
  bool fuse_unk = false;
  bool ignore_merges = false;
  // When the pre-tokenizer ends with ByteLevel every input byte is one symbol, the id of its
  // alphabet character (-1 if that character is not in the vocab).
  bool byte_level = false;
  int32_t byte_ids[256];

  size_t size() const { return vocab.size(); }  // HF BPE::get_vocab_size
  void finish_setup();                          // fills byte_ids
  // Tokenizes one pre-token word (raw bytes) and appends its ids. Empty words give nothing.
  void encode_word(std::string_view word, BpeScratch& scratch, std::vector<int32_t>& out) const;

 private:
  void merge_symbols(BpeScratch& scratch) const;
};

}  // namespace dsinfer::tokenizer_detail
