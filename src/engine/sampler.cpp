#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

#include "engine/sampling.h"
#include "kernels/ops.h"

namespace dsinfer {

int64_t Sampler::sample(const float* logits, int64_t n, float temperature) {
  if (temperature <= 0) return argmax(logits, n);
  const float t = std::max(temperature, 1e-5f);
  probs_.resize(n);
  for (int64_t i = 0; i < n; ++i) probs_[i] = logits[i] / t;
  softmax(probs_.data(), n);
  // one draw of the generator per token, in order (its stream, not a keyed one)
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  return exponential_race(probs_.data(), n, [&](int64_t) { return uniform(rng_); });
}

}  // namespace dsinfer
