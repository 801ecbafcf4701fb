#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace dsinfer {

namespace {
// The rotary dimension index at which a wavelength completes `rotations` turns over the
// original context (YaRN), in double as the reference's Python floats.
double correction_dim(double rotations, int dim, double base, int original_seq_len) {
  return dim * std::log(original_seq_len / (rotations * 2 * std::numbers::pi)) /
         (2 * std::log(base));
}
}  // namespace

std::vector<float> rope_frequencies(const ModelConfig& c) {
  const int dim = c.qk_rope_head_dim;
  std::vector<float> freqs(dim / 2);
  for (int i = 0; i < dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    freqs[i] = 1.0f / std::pow(static_cast<float>(c.rope_theta), exponent);
  }
  if (c.max_seq_len > c.original_seq_len) {
    double low = std::floor(correction_dim(c.beta_fast, dim, c.rope_theta, c.original_seq_len));
    double high = std::ceil(correction_dim(c.beta_slow, dim, c.rope_theta, c.original_seq_len));
    low = std::max(low, 0.0);
    high = std::min(high, static_cast<double>(dim - 1));
    if (low == high) high += 0.001;
    const float factor = static_cast<float>(c.rope_factor);
    for (int i = 0; i < dim / 2; ++i) {
      float ramp =
          (static_cast<float>(i) - static_cast<float>(low)) / static_cast<float>(high - low);
      ramp = std::clamp(ramp, 0.0f, 1.0f);
      const float smooth = 1.0f - ramp;
      freqs[i] = freqs[i] / factor * (1.0f - smooth) + freqs[i] * smooth;
    }
  }
  return freqs;
}

float attention_softmax_scale(const ModelConfig& c) {
  double scale = std::pow(static_cast<double>(c.qk_head_dim()), -0.5);
  if (c.max_seq_len > c.original_seq_len) {
    const double mscale = 0.1 * c.mscale * std::log(c.rope_factor) + 1.0;
    scale = scale * mscale * mscale;
  }
  return static_cast<float>(scale);
}

Rope::Rope(const ModelConfig& config) : freqs_(rope_frequencies(config)) {}

void Rope::prepare(int64_t start_pos, int64_t n_positions) {
  std::vector<int64_t> positions(static_cast<size_t>(n_positions));
  for (int64_t p = 0; p < n_positions; ++p) positions[p] = start_pos + p;
  prepare(positions);
}

void Rope::prepare(const std::vector<int64_t>& positions) {
  const int64_t half = half_dim(), n_positions = static_cast<int64_t>(positions.size());
  cos_.resize(n_positions * half);
  sin_.resize(n_positions * half);
  for (int64_t p = 0; p < n_positions; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      // The reference forms the angle in fp32 (outer product of positions and frequencies).
      const float angle = static_cast<float>(positions[p]) * freqs_[i];
      cos_[p * half + i] = static_cast<float>(std::cos(static_cast<double>(angle)));
      sin_[p * half + i] = static_cast<float>(std::sin(static_cast<double>(angle)));
    }
  }
}

void Rope::apply(float* x, int64_t index) const {
  const int64_t half = half_dim();
  const float* c = cos_.data() + index * half;
  const float* s = sin_.data() + index * half;
  for (int64_t i = 0; i < half; ++i) {
    const float re = x[2 * i], im = x[2 * i + 1];
    x[2 * i] = re * c[i] - im * s[i];
    x[2 * i + 1] = re * s[i] + im * c[i];
  }
}

}  // namespace dsinfer
