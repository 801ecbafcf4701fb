#include "serve/token_channel.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace dsinfer {

TokenLogprob token_logprob(const float* row, int64_t vocab, int32_t token, int top) {
  float max = row[0];
  for (int64_t i = 1; i < vocab; ++i) max = std::max(max, row[i]);
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(row[i]) - max);
  const double log_z = max + std::log(sum);
  TokenLogprob out{token, static_cast<float>(row[token] - log_z), {}};
  if (top > 0) {
    std::vector<int32_t> ids(static_cast<size_t>(vocab));
    for (int64_t i = 0; i < vocab; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    std::partial_sort(ids.begin(), ids.begin() + top, ids.end(), [&](int32_t a, int32_t b) {
      return row[a] > row[b] || (row[a] == row[b] && a < b);
    });
    for (int k = 0; k < top; ++k)
      out.top.emplace_back(ids[k], static_cast<float>(row[ids[k]] - log_z));
  }
  return out;
}

bool Channel::next(std::vector<int32_t>& got, std::vector<TokenLogprob>& lps, bool& done,
                   double timeout_s) {
  std::unique_lock<std::mutex> lock(mutex);
  auto any = [&] { return !tokens.empty() || finished; };
  got.clear();
  lps.clear();
  done = false;
  if (timeout_s < 0)
    ready.wait(lock, any);
  else if (!ready.wait_for(lock, std::chrono::duration<double>(timeout_s), any))
    return false;
  got.assign(tokens.begin(), tokens.end());
  tokens.clear();
  lps.assign(logprobs.begin(), logprobs.end());
  logprobs.clear();
  done = finished && got.empty();
  return true;
}

}  // namespace dsinfer
