// dsinfer tokenize: the checkpoint's tokenizer from the command line. Prints the ids of each
// input as one line of space-separated integers; --decode prints the text of given ids.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "chat/chat_formatter.h"
#include "commands.h"
#include "core/error.h"
#include "core/read_file.h"
#include "text_lines.h"

namespace dsinfer::cli {

using json = nlohmann::json;

namespace {

struct TokenizeOptions {
  std::string tokenizer_path;
  std::string text;
  bool has_text = false;
  std::string input_file;
  bool add_special_tokens = false;
  bool chat = false;
  std::string decode;
  bool has_decode = false;  // (given, if empty: zero ids decode to an empty line)
  bool skip_special_tokens = false;
};

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    check(used == word.size() && v >= INT32_MIN && v <= INT32_MAX, "--decode: \"", word,
          "\" is not a token id");
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

void print_ids(const std::vector<int32_t>& ids) {
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
  std::printf("%s\n", line.c_str());
}

void run_tokenize(const TokenizeOptions& o) {
  // one input, never one silently ignored beside another (PROBE-3 U4)
  check(o.has_text + !o.input_file.empty() + o.has_decode == 1,
        "give exactly one of --text, --input-file and --decode");
  const Tokenizer tokenizer = Tokenizer::load(o.tokenizer_path);
  if (o.has_decode) {
    const std::string text = tokenizer.decode(parse_ids(o.decode), o.skip_special_tokens);
    std::printf("%s\n", text.c_str());
    return;
  }
  std::vector<std::string> inputs;
  if (o.has_text) {
    inputs.push_back(o.text);
  } else {
    // as generate's --input-file: a regular file or a pipe, at most 256 MiB (never /dev/zero, a
    // directory, or a FIFO nobody opens for writing)
    const std::string text =
        read_input_file(o.input_file, "--input-file", 256 << 20, /*allow_streams=*/true);
    int line_number = 0;
    for (const std::string& line : split_lines(text)) {
      ++line_number;
      if (line.empty()) continue;
      json j;
      try {
        j = json::parse(line);
      } catch (const json::exception& e) {
        fail(o.input_file, ":", line_number, ": not a JSON string (", e.what(), ")");
      }
      check(j.is_string(), o.input_file, ":", line_number, ": each line must be one JSON string");
      inputs.push_back(j.get<std::string>());
    }
  }
  std::unique_ptr<ChatFormatter> chat;
  if (o.chat) chat = std::make_unique<ChatFormatter>(tokenizer);
  for (const std::string& text : inputs) {
    if (chat)
      print_ids(chat->prompt_ids(json::array({{{"role", "user"}, {"content", text}}})));
    else
      print_ids(tokenizer.encode(text, o.add_special_tokens));
  }
}

}  // namespace

Command register_tokenize(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "tokenize", "encode text to token ids or decode ids with a checkpoint's tokenizer");
  auto o = std::make_shared<TokenizeOptions>();
  sub->add_option("--tokenizer-path", o->tokenizer_path,
                  "directory with tokenizer.json (and tokenizer_config.json)")
      ->required();
  sub->add_option_function<std::string>(
      "--text", [o](const std::string& s) { o->text = s, o->has_text = true; }, "text to encode");
  sub->add_option("--input-file", o->input_file,
                  "JSONL file: each line one JSON string, one output line each");
  sub->add_flag("--add-special-tokens", o->add_special_tokens,
                "add BOS as transformers does (add_bos_token)");
  sub->add_flag("--chat", o->chat,
                "apply the chat template to the text as a single user message first");
  sub->add_option_function<std::string>(
      "--decode", [o](const std::string& s) { o->decode = s, o->has_decode = true; },
      "space-separated ids to decode to text instead");
  sub->add_flag("--skip-special-tokens", o->skip_special_tokens,
                "with --decode: leave out special tokens");
  return {sub, [o] { run_tokenize(*o); }};
}

}  // namespace dsinfer::cli
