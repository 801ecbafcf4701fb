// HTTP request bodies of the OpenAI-compatible server, parsed as the server parses them: first
// byte picks the endpoint (chat completions, completions, tokenize), the rest is the body. The
// answer to a bad body is an ApiError (an HTTP 4xx) or Error; a parsed request (each prompt of a
// completions list) must fit the context and carry sampling parameters the engine accepts.
#include <cmath>
#include <nlohmann/json.hpp>

#include "chat/chat_formatter.h"
#include "core/error.h"
#include "engine/sampling.h"
#include "fuzz_support.h"
#include "serve/request.h"
#include "tokenizer/tokenizer.h"

using namespace dsinfer;
using json = nlohmann::json;

namespace {
constexpr int64_t kMaxSeqLen = 4096;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Tokenizer tokenizer = Tokenizer::from_strings(
      fuzz::read_data_file("tokenizer/deepseek-v3/tokenizer.json"),
      fuzz::read_data_file("tokenizer/deepseek-v3/tokenizer_config.json"), "deepseek-v3");
  static const ChatFormatter chat(tokenizer);
  if (size == 0) return 0;
  try {
    // as the server: a body that is not JSON, or nests too deep, is a 400 before any of this
    const json body = parse_body(std::string(fuzz::as_text(data + 1, size - 1)));
    if (data[0] % 3 == 2) {
      (void)tokenize_request(body, chat);
      return 0;
    }
    // (a completions body may hold a list of prompts: a Job each)
    const std::vector<Job> jobs =
        parse_requests(body, /*chat=*/data[0] % 3 == 0, chat, "dsinfer", kMaxSeqLen);
    if (jobs.empty() || jobs.size() > 64)
      fuzz::finding("a request parsed into 0 or over 64 prompts");
    for (const Job& job : jobs) {
      if (job.prompt.empty() ||
          static_cast<int64_t>(job.prompt.size()) + job.params.max_new_tokens > kMaxSeqLen)
        fuzz::finding("a parsed request does not fit the context");
      if (!(job.params.temperature >= 0) || !std::isfinite(job.params.temperature) ||
          !(job.params.top_p > 0))
        fuzz::finding("a parsed request has a bad temperature or top_p");
      if (job.n < 1 || job.n > 16) fuzz::finding("a parsed request has n outside 1..16");
      try {
        check_sampling(job.params);  // what the engine's submit checks: penalties, bias, min_p ...
      } catch (const Error& e) {
        fuzz::finding(std::string("a parsed request fails the engine's check: ") + e.what());
      }
      for (const auto& [id, bias] : job.params.logit_bias)
        if (id >= tokenizer.vocab_size()) fuzz::finding("a logit_bias id past the vocabulary");
    }
  } catch (const ApiError&) {
  } catch (const Error&) {
  }
  return 0;
}
