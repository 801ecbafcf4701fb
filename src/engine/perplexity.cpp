#include "engine/perplexity.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "core/json_excerpt.h"
#include "engine/scoring.h"

namespace dsinfer {

double token_nll(const float* logits, int64_t vocab, int32_t target) {
  const float max_logit = *std::max_element(logits, logits + vocab);
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - max_logit);
  return std::log(sum) + max_logit - logits[target];
}

namespace {
constexpr int64_t kScoreStepTokens = 512;
}  // namespace

std::vector<double> sequence_nll(Transformer& model, const std::vector<int32_t>& tokens) {
  const ModelConfig& c = model.config();
  check(tokens.size() >= 2, "a sequence needs at least 2 tokens to score, got ", tokens.size());
  check(static_cast<int64_t>(tokens.size()) <= c.max_seq_len, "sequence of ", tokens.size(),
        " tokens exceeds max_seq_len (", c.max_seq_len, ")");
  for (int32_t t : tokens)
    check(t >= 0 && t < c.vocab_size, "token id ", t, " is outside the vocabulary [0, ",
          c.vocab_size, ")");
  const int64_t n = static_cast<int64_t>(tokens.size());
  std::vector<double> nll(static_cast<size_t>(n - 1));
  // in steps of kScoreStepTokens: a whole 16k-token sequence at once held 16k x vocab logits
  // (8.5 GB at V3's vocabulary); this way a few hundred MB
  score_sequences(
      model, {tokens},
      [&](int, int64_t position, const float* logits) {
        if (position + 1 < n) nll[position] = token_nll(logits, c.vocab_size, tokens[position + 1]);
      },
      KVDType::kF32, kScoreStepTokens);
  return nll;
}

std::vector<std::vector<int32_t>> parse_perplexity_case(const nlohmann::json& j,
                                                        const std::string& path) {
  check(j.is_object() && j.contains("tokens") && j["tokens"].is_array(), path,
        ": expected {\"tokens\": [[ids...], ...]}");
  std::vector<std::vector<int32_t>> sequences;
  for (const nlohmann::json& row : j["tokens"]) {
    check(row.is_array(), path, ": tokens must be a list of token-id lists");
    std::vector<int32_t> ids;
    for (const nlohmann::json& t : row)
      ids.push_back(static_cast<int32_t>(json_integer(t, 0, INT32_MAX, path + ": a token")));
    sequences.push_back(std::move(ids));
  }
  check(!sequences.empty(), path, ": no sequences to score (tokens is empty)");
  return sequences;
}

}  // namespace dsinfer
