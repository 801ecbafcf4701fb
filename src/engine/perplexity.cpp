#include "engine/perplexity.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace dsinfer {

double token_nll(const float* logits, int64_t vocab, int32_t target) {
  const float max_logit = *std::max_element(logits, logits + vocab);
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - max_logit);
  return std::log(sum) + max_logit - logits[target];
}

std::vector<double> sequence_nll(Transformer& model, const std::vector<int32_t>& tokens) {
  const ModelConfig& c = model.config();
  check(tokens.size() >= 2, "a sequence needs at least 2 tokens to score, got ", tokens.size());
  check(static_cast<int64_t>(tokens.size()) <= c.max_seq_len, "sequence of ", tokens.size(),
        " tokens exceeds max_seq_len (", c.max_seq_len, ")");
  for (int32_t t : tokens)
    check(t >= 0 && t < c.vocab_size, "token id ", t, " is outside the vocabulary [0, ", c.vocab_size, ")");
  const int n = static_cast<int>(tokens.size());
  KVCache cache(c, 1, n - 1);
  std::vector<float> logits(c.vocab_size);
  std::vector<double> nll(n - 1);
  for (int t = 0; t + 1 < n; ++t) {
    model.forward(&tokens[t], 1, 1, t, cache, logits.data());
    nll[t] = token_nll(logits.data(), c.vocab_size, tokens[t + 1]);
  }
  return nll;
}

}  // namespace dsinfer
