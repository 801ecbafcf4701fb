#include "kernels/ops.h"

#include <cmath>

#include "kernels/linear.h"

namespace dsinfer {

void rms_norm(const float* x, const float* weight, int64_t n_rows, int64_t dim, float eps,
              float* y) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    double sum_sq = 0;
    for (int64_t i = 0; i < dim; ++i) sum_sq += static_cast<double>(xr[i]) * xr[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(sum_sq / dim + eps));
    for (int64_t i = 0; i < dim; ++i) yr[i] = weight[i] * (xr[i] * inv);
  }
}

void silu_mul(float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) a[i] = a[i] / (1.0f + std::exp(-a[i])) * b[i];
}

void softmax(float* x, int64_t n) {
  static const bool avx2 = cpu_supports(Isa::kAvx2);
  if (avx2) return softmax_avx2(x, n);
  softmax_scalar(x, n);
}

void softmax_scalar(float* x, int64_t n) {
  float max_value = -INFINITY;
  for (int64_t i = 0; i < n; ++i) max_value = std::fmax(max_value, x[i]);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max_value);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void softmax_fast(Isa isa, float* x, int64_t n) {
  if (isa == Isa::kAvx512) return softmax_fast_avx512(x, n);
  softmax(x, n);
}

int64_t argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

}  // namespace dsinfer
