// Negative log-likelihood of every next token. The reference golden generator fed one token per
// forward call; here the engine scores the whole sequence in one step with every row's logits,
// which batch invariance makes the same numbers. Every rank calls it with the same tokens.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/transformer.h"

namespace dsinfer {

// nll[t] = -log softmax(logits after tokens[0..t])[tokens[t+1]] (natural log, double), for
// t < tokens.size() - 1. Sequences longer than max_seq_len are an Error.
std::vector<double> sequence_nll(Transformer& model, const std::vector<int32_t>& tokens);

// The token sequences of a perplexity case ({"tokens": [[ids...], ...]}, the golden ppl schema),
// checked; `origin` names it in errors.
std::vector<std::vector<int32_t>> parse_perplexity_case(const nlohmann::json& j,
                                                        const std::string& origin);

// -log softmax(logits)[target] in double.
double token_nll(const float* logits, int64_t vocab, int32_t target);

}  // namespace dsinfer
