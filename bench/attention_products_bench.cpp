// Fast-mode prefill attention's per-head products, as attend_as_bf16_matrices runs them: one block
// of 64 queries against the bf16-rounded cache (scores: entries [keys, 576]; P x L: the latents
// transposed, [512, keys]) and W_v (fp8 [128, 512]), each on one thread through
// bf16dot_matmul_serial, best of 30 timings of 20 calls (operands in the caches, as there).
//   build/attention_products_bench [KEYS...]   (default 288 512; needs AVX512_BF16)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "kernels/matmul_bf16dot.h"

namespace {

using namespace dsinfer;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Product {
  const char* name;
  int64_t rows, cols;
  DType dtype;
};

void run(const Product& p, int64_t tokens, std::mt19937& rng) {
  const int64_t elem = p.dtype == DType::kF8E4M3 ? 1 : 2;
  std::vector<uint8_t> data(static_cast<size_t>(p.rows * p.cols * elem));
  for (size_t i = 0; i < data.size(); ++i) {
    const uint8_t b = static_cast<uint8_t>(rng());
    data[i] = elem == 1 ? static_cast<uint8_t>(b & 0x77)  // fp8: no NaN codes
              : (i & 1) ? static_cast<uint8_t>(0x3c + (b & 3))
                        : b;  // bf16 near 1
  }
  std::vector<float> scales(
      static_cast<size_t>(ceil_div(p.rows, kFp8Block) * ceil_div(p.cols, kFp8Block)), 1e-2f);
  const WeightMatrix w{p.dtype, p.rows, p.cols, data.data(),
                       p.dtype == DType::kF8E4M3 ? scales.data() : nullptr};
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(tokens * p.cols)),
      y(static_cast<size_t>(tokens * p.rows));
  for (float& v : x) v = uniform(rng);
  double best = 1e30;
  for (int round = 0; round < 30; ++round) {
    constexpr int kCalls = 20;
    const double t0 = now_seconds();
    for (int i = 0; i < kCalls; ++i)
      bf16dot_matmul_serial(x.data(), tokens, p.cols, w, y.data(), p.rows);
    best = std::min(best, (now_seconds() - t0) / kCalls);
  }
  const double flops = 2.0 * static_cast<double>(tokens * p.rows * p.cols);
  std::printf("%-28s %6.1f us  %6.1f GFLOP/s\n", p.name, best * 1e6, flops / best / 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  if (!cpu_supports(Isa::kAvx512)) {
    std::fprintf(stderr, "attention_products_bench: this CPU has no AVX512_BF16\n");
    return 1;
  }
  std::vector<int64_t> keys;
  for (int i = 1; i < argc; ++i) keys.push_back(std::atoll(argv[i]));
  if (keys.empty()) keys = {288, 512};
  for (const int64_t k : keys)
    if (k < 1 || k > 1 << 20) {
      std::fprintf(stderr, "attention_products_bench: keys %lld is not in [1, 1048576]\n",
                   static_cast<long long>(k));
      return 1;
    }
  std::mt19937 rng(1);
  constexpr int64_t kQueries = 64, kLatent = 512, kEntry = 576, kValue = 128;
  std::printf("1 thread, %lld queries (one block), VDPBF16PS\n", static_cast<long long>(kQueries));
  char names[3][64];
  for (const int64_t k : keys) {
    std::snprintf(names[0], sizeof names[0], "scores %lld x %lld bf16", static_cast<long long>(k),
                  static_cast<long long>(kEntry));
    std::snprintf(names[1], sizeof names[1], "P x L %lld x %lld bf16",
                  static_cast<long long>(kLatent), static_cast<long long>(k));
    run({names[0], k, kEntry, DType::kBF16}, kQueries, rng);
    run({names[1], kLatent, k, DType::kBF16}, kQueries, rng);
  }
  std::snprintf(names[2], sizeof names[2], "W_v %lld x %lld fp8", static_cast<long long>(kValue),
                static_cast<long long>(kLatent));
  run({names[2], kValue, kLatent, DType::kF8E4M3}, kQueries, rng);
  return 0;
}
