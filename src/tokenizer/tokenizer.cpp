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
#include "tokenizer/tokenizer_impl.h"

namespace dsinfer {
namespace tokenizer_detail {

using json = nlohmann::json;

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
        if (len != b - c || !is_white_space(utf8_code_point(text, c, len))) break;
        b = c;
      }
      start = b;
    }
    if (tok.rstrip) {
      while (stop < text.size()) {
        size_t bad;
        bool truncated;
        const size_t len = utf8_sequence(text, stop, &bad, &truncated);
        if (len == 0 || !is_white_space(utf8_code_point(text, stop, len))) break;
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

}  // namespace tokenizer_detail

using namespace tokenizer_detail;

// ---------------------------------------------------------------------------------------------
// Tokenizer

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
