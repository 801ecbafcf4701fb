// The BPE model, its merge table and the GPT-2 byte alphabet (bpe_internal.h).
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "tokenizer/bpe_internal.h"

namespace dsinfer::tokenizer_detail {

// ---------------------------------------------------------------------------------------------
// GPT-2 byte alphabet: the printable bytes ! .. ~, ¡ .. ¬ and ® .. ÿ stand for themselves; the
// other 68 bytes, in increasing order, become U+0100, U+0101, ...

ByteAlphabet::ByteAlphabet() {
  std::fill(std::begin(cp_to_byte), std::end(cp_to_byte), int16_t(-1));
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    byte_to_cp[b] = printable ? b : next++;
    cp_to_byte[byte_to_cp[b]] = int16_t(b);
  }
}

const ByteAlphabet& ByteAlphabet::get() {
  static const ByteAlphabet alphabet;
  return alphabet;
}

std::string ByteAlphabet::map(std::string_view bytes) const {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) append_utf8(out, byte_to_cp[b]);
  return out;
}

bool ByteAlphabet::unmap(std::string_view s, std::string& out) const {
  const size_t start = out.size();
  size_t i = 0;
  while (i < s.size()) {
    size_t bad;
    bool truncated;
    const size_t len = utf8_sequence(s, i, &bad, &truncated);
    if (len == 0 || len > 2) {  // every alphabet character is U+0021..U+0143: 1 or 2 bytes
      out.resize(start);
      return false;
    }
    const auto* p = reinterpret_cast<const uint8_t*>(s.data()) + i;
    const uint32_t cp = len == 1 ? p[0] : ((p[0] & 0x1Fu) << 6) | (p[1] & 0x3Fu);
    if (cp >= 512 || cp_to_byte[cp] < 0) {
      out.resize(start);
      return false;
    }
    out += char(cp_to_byte[cp]);
    i += len;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// String hashing (FNV-1a over 8-byte blocks; the vocab is hashed once at load, words per encode)

size_t StringHash::operator()(std::string_view s) const noexcept {
  uint64_t h = 0xcbf29ce484222325ull ^ s.size();
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t block;
    std::memcpy(&block, s.data() + i, 8);
    h = (h ^ block) * 0x100000001b3ull;
    h ^= h >> 32;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, s.data() + i, s.size() - i);
  h = (h ^ tail) * 0x9E3779B97F4A7C15ull;
  return size_t(h ^ (h >> 29));
}

// ---------------------------------------------------------------------------------------------
// TokenMap

void TokenMap::reserve(size_t n) {
  arena_.reserve(n * 8);
  offsets_.reserve(n + 1);
  values_.reserve(n);
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  if (cap > slots_.size()) rehash(cap);
}

void TokenMap::rehash(size_t capacity) {
  slots_.assign(capacity, Slot{0, kEmpty});
  mask_ = capacity - 1;
  for (uint32_t e = 0; e < values_.size(); ++e) {
    const uint64_t h = StringHash{}(key(e));
    uint64_t i = h & mask_;
    while (slots_[i].entry != kEmpty) i = (i + 1) & mask_;
    slots_[i] = Slot{uint32_t(h >> 32), e};
  }
}

void TokenMap::set(std::string_view k, int32_t value) {
  if ((values_.size() + 1) * 2 > slots_.size()) rehash(std::max<size_t>(16, slots_.size() * 2));
  const uint64_t h = StringHash{}(k);
  const uint32_t tag = uint32_t(h >> 32);
  uint64_t i = h & mask_;
  for (; slots_[i].entry != kEmpty; i = (i + 1) & mask_) {
    if (slots_[i].tag == tag && key(slots_[i].entry) == k) {
      values_[slots_[i].entry] = value;
      return;
    }
  }
  check(arena_.size() + k.size() < (uint64_t(1) << 32), "tokenizer: vocab too large");
  slots_[i] = Slot{tag, uint32_t(values_.size())};
  arena_.append(k);
  offsets_.push_back(uint32_t(arena_.size()));
  values_.push_back(value);
}

// ---------------------------------------------------------------------------------------------
// JsonReader

std::string_view JsonReader::string(std::string& buf) {
  expect('"');
  const size_t start = i_;
  // Fast scan: no escapes.
  while (i_ < s_.size()) {
    const unsigned char c = static_cast<unsigned char>(s_[i_]);
    if (c == '"') {
      ++i_;
      return s_.substr(start, i_ - 1 - start);
    }
    if (c == '\\') break;
    if (c < 0x20) throw FastPathFailed{};
    i_ += c < 0x80 ? 1 : multibyte_length();
  }
  if (i_ >= s_.size()) throw FastPathFailed{};
  buf.assign(s_.substr(start, i_ - start));
  return escaped_string(buf);
}

std::string_view JsonReader::escaped_string(std::string& buf) {
  while (i_ < s_.size()) {
    const unsigned char c = static_cast<unsigned char>(s_[i_]);
    if (c == '"') {
      ++i_;
      return buf;
    }
    if (c < 0x20) throw FastPathFailed{};
    if (c == '\\') {
      ++i_;
      escape(buf);
    } else if (c < 0x80) {
      buf += char(c);
      ++i_;
    } else {
      const size_t len = multibyte_length();
      buf.append(s_.substr(i_, len));
      i_ += len;
    }
  }
  throw FastPathFailed{};
}

size_t JsonReader::multibyte_length() const {
  size_t bad;
  bool truncated;
  const size_t len = utf8_sequence(s_, i_, &bad, &truncated);
  if (len == 0) throw FastPathFailed{};
  return len;
}

void JsonReader::escape(std::string& buf) {
  if (i_ >= s_.size()) throw FastPathFailed{};
  const char e = s_[i_++];
  switch (e) {
    case '"':
    case '\\':
    case '/':
      buf += e;
      return;
    case 'b':
      buf += '\b';
      return;
    case 'f':
      buf += '\f';
      return;
    case 'n':
      buf += '\n';
      return;
    case 'r':
      buf += '\r';
      return;
    case 't':
      buf += '\t';
      return;
    case 'u': {
      uint32_t cp = hex4();
      if (cp >= 0xDC00 && cp <= 0xDFFF) throw FastPathFailed{};  // lone low surrogate
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (i_ + 2 > s_.size() || s_[i_] != '\\' || s_[i_ + 1] != 'u') throw FastPathFailed{};
        i_ += 2;
        const uint32_t lo = hex4();
        if (lo < 0xDC00 || lo > 0xDFFF) throw FastPathFailed{};
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      }
      append_utf8(buf, cp);
      return;
    }
    default:
      throw FastPathFailed{};
  }
}

uint32_t JsonReader::hex4() {
  if (i_ + 4 > s_.size()) throw FastPathFailed{};
  uint32_t v = 0;
  for (int k = 0; k < 4; ++k) {
    const char c = s_[i_++];
    v <<= 4;
    if (c >= '0' && c <= '9') {
      v |= uint32_t(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      v |= uint32_t(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      v |= uint32_t(c - 'A' + 10);
    } else {
      throw FastPathFailed{};
    }
  }
  return v;
}

int64_t JsonReader::integer() {
  ws();
  bool negative = false;
  if (i_ < s_.size() && s_[i_] == '-') {
    negative = true;
    ++i_;
  }
  const size_t start = i_;
  int64_t v = 0;
  while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
    // more than 15 digits leave the fast path before v can overflow (found by fuzz_tokenizer)
    if (i_ - start == 15) throw FastPathFailed{};
    v = v * 10 + (s_[i_] - '0');
    ++i_;
  }
  const size_t digits = i_ - start;
  if (digits == 0 || digits > 15 || (digits > 1 && s_[start] == '0')) throw FastPathFailed{};
  if (i_ < s_.size() && (s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E')) throw FastPathFailed{};
  return negative ? -v : v;
}

void JsonReader::skip_value(int depth) {
  if (depth > 64) throw FastPathFailed{};
  std::string buf;
  const char c = peek();
  if (c == '"') {
    string(buf);
  } else if (c == '{') {
    ++i_;
    if (consume('}')) return;
    do {
      string(buf);
      expect(':');
      skip_value(depth + 1);
    } while (consume(','));
    expect('}');
  } else if (c == '[') {
    ++i_;
    if (consume(']')) return;
    do {
      skip_value(depth + 1);
    } while (consume(','));
    expect(']');
  } else if (c == 't' || c == 'f' || c == 'n') {
    for (std::string_view word :
         {std::string_view("true"), std::string_view("false"), std::string_view("null")}) {
      if (s_.substr(i_, word.size()) == word) {
        i_ += word.size();
        return;
      }
    }
    throw FastPathFailed{};
  } else if (c == '-' || (c >= '0' && c <= '9')) {
    const size_t start = i_;
    while (i_ < s_.size() && (std::strchr("+-.eE0123456789", s_[i_]) != nullptr && s_[i_] != '\0'))
      ++i_;
    if (i_ == start) throw FastPathFailed{};
  } else {
    throw FastPathFailed{};
  }
}

void locate_model_tables(std::string_view text, JsonRange& vocab, JsonRange& merges) {
  JsonReader r(text);
  std::string buf;
  bool model_seen = false;
  r.expect('{');
  if (r.consume('}')) throw FastPathFailed{};
  do {
    const std::string key(r.string(buf));
    r.expect(':');
    if (key != "model") {
      r.skip_value();
      continue;
    }
    if (model_seen) throw FastPathFailed{};
    model_seen = true;
    r.expect('{');
    if (r.consume('}')) throw FastPathFailed{};
    do {
      const std::string field(r.string(buf));
      r.expect(':');
      JsonRange* range = field == "vocab" ? &vocab : field == "merges" ? &merges : nullptr;
      if (range == nullptr) {
        r.skip_value();
        continue;
      }
      if (range->found) throw FastPathFailed{};
      r.ws();
      range->begin = r.pos();
      r.skip_value();
      range->end = r.pos();
      range->found = true;
    } while (r.consume(','));
    r.expect('}');
  } while (r.consume(','));
  r.expect('}');
  r.ws();
  if (r.pos() != text.size() || !vocab.found || !merges.found) throw FastPathFailed{};
}

// ---------------------------------------------------------------------------------------------
// MergeTable

void MergeTable::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  if (cap <= slots_.size()) return;
  std::vector<Entry> old = std::move(slots_);
  slots_.assign(cap, Entry{kEmpty, 0, 0});
  mask_ = cap - 1;
  count_ = 0;
  for (const Entry& e : old) {
    if (e.key != kEmpty) insert(int32_t(e.key >> 32), int32_t(uint32_t(e.key)), e.rank, e.new_id);
  }
}

void MergeTable::grow() { reserve(std::max<size_t>(count_ + 1, slots_.size())); }

void MergeTable::insert(int32_t a, int32_t b, uint32_t rank, int32_t new_id) {
  if ((count_ + 1) * 2 > slots_.size()) grow();
  const uint64_t key = make_key(a, b);
  for (uint64_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
    Entry& e = slots_[i];
    if (e.key == key) {
      e.rank = rank, e.new_id = new_id;
      return;
    }
    if (e.key == kEmpty) {
      e = Entry{key, rank, new_id};
      ++count_;
      return;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// BpeModel

void BpeModel::finish_setup() {
  const ByteAlphabet& alphabet = ByteAlphabet::get();
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    append_utf8(ch, alphabet.byte_to_cp[b]);
    byte_ids[b] = vocab.find(ch).value_or(-1);
  }
}

// HF Word::merge_all: a queue of candidate merges ordered by (rank, position); a popped candidate
// is dropped when its left symbol is gone, is last, or no longer forms a pair that merges into
// the same id; otherwise the pair merges and the new pairs with both neighbours are queued.
void BpeModel::merge_symbols(BpeScratch& scratch) const {
  auto& sym = scratch.symbols;
  auto& queue = scratch.queue;
  queue.clear();
  // std heap functions build a max-heap: "less" means later (higher rank, then higher position).
  const auto later = [](const BpeScratch::Candidate& x, const BpeScratch::Candidate& y) {
    return x.rank != y.rank ? x.rank > y.rank : x.pos > y.pos;
  };
  for (size_t i = 0; i + 1 < sym.size(); ++i) {
    if (const MergeTable::Entry* m = merges.find(sym[i].id, sym[i + 1].id)) {
      queue.push_back({m->rank, uint32_t(i), m->new_id});
    }
  }
  std::make_heap(queue.begin(), queue.end(), later);
  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), later);
    const BpeScratch::Candidate top = queue.back();
    queue.pop_back();
    BpeScratch::Symbol& left = sym[top.pos];
    if (!left.alive || left.next < 0) continue;
    BpeScratch::Symbol& right = sym[size_t(left.next)];
    const MergeTable::Entry* m = merges.find(left.id, right.id);
    if (m == nullptr || m->new_id != top.new_id) continue;
    // Merge right into left.
    left.id = top.new_id;
    right.alive = 0;
    left.next = right.next;
    if (left.next >= 0) sym[size_t(left.next)].prev = int32_t(top.pos);
    if (left.prev >= 0) {
      if (const MergeTable::Entry* p = merges.find(sym[size_t(left.prev)].id, left.id)) {
        queue.push_back({p->rank, uint32_t(left.prev), p->new_id});
        std::push_heap(queue.begin(), queue.end(), later);
      }
    }
    if (left.next >= 0) {
      if (const MergeTable::Entry* n = merges.find(left.id, sym[size_t(left.next)].id)) {
        queue.push_back({n->rank, top.pos, n->new_id});
        std::push_heap(queue.begin(), queue.end(), later);
      }
    }
  }
}

void BpeModel::encode_word(std::string_view word, BpeScratch& scratch,
                           std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges) {
    const std::string* key = nullptr;
    if (byte_level) {
      scratch.mapped = ByteAlphabet::get().map(word);
      key = &scratch.mapped;
    }
    if (auto id = key ? vocab.find(*key) : vocab.find(word)) {
      out.push_back(*id);
      return;
    }
  }
  auto& sym = scratch.symbols;
  sym.clear();
  // HF BPE::merge_word: a character that is not in the vocab becomes unk (fused with a preceding
  // unk when fuse_unk) or is dropped when there is no unk token.
  bool last_was_unk = false;
  auto add = [&](int32_t id) {
    if (id >= 0) {
      sym.push_back({id, int32_t(sym.size()) - 1, int32_t(sym.size()) + 1, 1});
      last_was_unk = false;
    } else if (unk_id) {
      if (!(fuse_unk && last_was_unk))
        sym.push_back({*unk_id, int32_t(sym.size()) - 1, int32_t(sym.size()) + 1, 1});
      last_was_unk = true;
    }
  };
  if (byte_level) {
    for (unsigned char b : word) add(byte_ids[b]);
  } else {
    size_t i = 0;
    while (i < word.size()) {
      size_t bad;
      bool truncated;
      size_t len = utf8_sequence(word, i, &bad, &truncated);
      if (len == 0) len = bad;
      add(vocab.find(word.substr(i, len)).value_or(-1));
      i += len;
    }
  }
  if (sym.empty()) return;
  sym.back().next = -1;
  if (sym.size() > 1) merge_symbols(scratch);
  for (const auto& s : sym) {
    if (s.alive) out.push_back(s.id);
  }
}

}  // namespace dsinfer::tokenizer_detail
