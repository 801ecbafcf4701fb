// Byte-level BPE exactly as Hugging Face `tokenizers` runs DeepSeek's tokenizer.json, with
// transformers' BOS/EOS handling from tokenizer_config.json.
//
// Encoding (HF `Tokenizer::encode`, add_special_tokens as transformers does it):
//   1. added tokens are cut out of the text, leftmost-longest, first the ones with
//      "normalized": false, then (in the remaining text) the ones with "normalized": true; each
//      becomes its id whether it is special or not;
//   2. no normalizer (only an empty one is accepted);
//   3. the pre-tokenizer steps run in order on every remaining piece: Split (Oniguruma, UTF-8,
//      the Oniguruma syntax that the Rust `onig` crate uses by default, pattern strings from
//      tokenizer.json) and a final ByteLevel that maps bytes to the GPT-2 alphabet;
//   4. BPE: the lowest-ranked adjacent pair is merged until none is left (HF's queue order,
//      rank then position), per pre-token word, with a per-thread word cache.
//   With add_special_tokens, BOS is put in front when tokenizer_config.json says add_bos_token
//   (and EOS at the end for add_eos_token), as transformers' LlamaTokenizerFast does.
//   Input that is not valid UTF-8 (HF cannot receive it) does not fail: every maximal ill-formed
//   byte sequence becomes a word of its own and its bytes go through the byte alphabet.
//
// Decoding (HF `Tokenizer::decode` with the ByteLevel decoder): ids without a token are skipped
// (HF does the same), with skip_special_tokens the ids whose token is special are skipped, each
// token's characters map back to bytes (a token with a character outside the byte alphabet, such
// as "<｜User｜>", gives its own UTF-8 bytes), and the byte string is converted as Rust's
// String::from_utf8_lossy does (one U+FFFD per maximal ill-formed subsequence).
//
// A Tokenizer is cheap to copy (shared immutable state) and safe to use from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dsinfer {

namespace tokenizer_detail {
struct Impl;
}

class Tokenizer {
 public:
  // dir holds tokenizer.json and (optionally) tokenizer_config.json.
  static Tokenizer load(const std::string& dir);
  // origin names the source in error messages; tokenizer_config_json may be "".
  static Tokenizer from_strings(const std::string& tokenizer_json,
                                const std::string& tokenizer_config_json,
                                const std::string& origin);

  // add_special_tokens: prepend BOS when add_bos_token (transformers behaviour), append EOS when
  // add_eos_token.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  // Byte-level decode; invalid UTF-8 becomes U+FFFD as String::from_utf8_lossy does. Ids with no
  // token (e.g. the padding ids 128815..129279 of DeepSeek-V3) are skipped as HF skips them;
  // negative ids are an Error.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const;

  int32_t bos_id() const;  // from tokenizer_config bos_token looked up in the vocab; -1 if none
  int32_t eos_id() const;
  const std::string& bos_token() const;  // "" if none
  const std::string& eos_token() const;
  bool add_bos_token() const;
  bool add_eos_token() const;
  const std::string& chat_template() const;  // tokenizer_config.json "chat_template" ("" if none)

  std::optional<int32_t> token_to_id(
      std::string_view token) const;                         // added tokens first, then the model
  std::optional<std::string> id_to_token(int32_t id) const;  // the token string (byte-level form)
  int64_t vocab_size() const;                                // number of distinct ids
  bool is_special(int32_t id) const;

  // The pieces the model sees, in order: added tokens as they appear in the text and the
  // pre-tokenizer's words (raw bytes, before the byte alphabet). For tests and debugging.
  std::vector<std::string> pre_tokenize(std::string_view text) const;
  // The bytes a token decodes to before the UTF-8 conversion; nullopt if the id has no token.
  std::optional<std::string_view> token_bytes(int32_t id) const;

 private:
  explicit Tokenizer(std::shared_ptr<const tokenizer_detail::Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const tokenizer_detail::Impl> impl_;
  friend class StreamDecoder;
};

// Streaming decode for interactive output: push ids one at a time and get back the newly
// completed text. A UTF-8 character is never split: bytes that may still become a character wait
// for the next ids. The concatenation of all pieces plus finish() equals
// decode(all ids, skip_special_tokens).
class StreamDecoder {
 public:
  StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens);
  std::string push(int32_t id);
  // Flushes what is left (an unfinished character becomes U+FFFD) and resets the decoder.
  std::string finish();

 private:
  Tokenizer tokenizer_;
  bool skip_special_tokens_;
  std::string pending_;  // bytes not yet returned
};

// Appends bytes to out converted as Rust's String::from_utf8_lossy does. With final = false it
// stops before a trailing incomplete (but so far valid) character and returns how many bytes were
// consumed; with final = true it consumes everything.
size_t utf8_lossy_append(std::string_view bytes, std::string& out, bool final);

}  // namespace dsinfer
