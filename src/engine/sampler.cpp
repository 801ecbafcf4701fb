#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"

namespace dsinfer {

int64_t Sampler::sample(const float* logits, int64_t n, float temperature) {
  if (temperature <= 0) return argmax(logits, n);
  const float t = std::max(temperature, 1e-5f);
  probs_.resize(n);
  for (int64_t i = 0; i < n; ++i) probs_[i] = logits[i] / t;
  softmax(probs_.data(), n);
  // probs / E with E ~ Exponential(1): the largest ratio wins with probability probs[i]
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  int64_t best = 0;
  double best_value = -1;
  for (int64_t i = 0; i < n; ++i) {
    const double e = -std::log1p(-uniform(rng_));  // Exponential(1), never 0 for u in [0, 1)
    const double value = probs_[i] / e;
    if (value > best_value) {
      best_value = value;
      best = i;
    }
  }
  return best;
}

}  // namespace dsinfer
