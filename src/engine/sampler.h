// Next-token choice as the reference's generate.py: temperature 0 takes the argmax; otherwise
// argmax(softmax(logits / T) / Exponential(1)), an "exponential race" that draws exactly from
// softmax(logits / T). The generator is seeded (--seed, default 965, the demo's seed); its
// stream differs from torch's, so sampled text matches the reference in distribution only.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace dsinfer {

class Sampler {
 public:
  explicit Sampler(uint64_t seed = 965) : seed_(seed), rng_(seed) {}
  // The seed (the engine keys each sequence's stream by it and the position, engine/sampling.h).
  uint64_t seed() const { return seed_; }
  // logits[n] (not modified); returns the chosen id.
  int64_t sample(const float* logits, int64_t n, float temperature);

 private:
  uint64_t seed_;
  std::mt19937_64 rng_;
  std::vector<float> probs_;
};

}  // namespace dsinfer
