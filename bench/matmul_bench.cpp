// Matrix kernel throughput on DeepSeek-V3 shapes, per ISA variant: GEMV (decode: GB/s of
// weights streamed, to compare with the read bandwidth `dsinfer bench` measures) and GEMM
// (prefill: GFLOP/s, to compare with its FMA peak).
//
//   matmul_bench [THREADS] [TOKENS...]      (default: all hardware threads; tokens 1 4 64 512)
//
// DSINFER_ISA=NAME (avx512, avx2, scalar) measures that variant only (else every one the CPU runs);
// MATMUL_SHAPE=TEXT only the shapes whose name contains TEXT.
//
// Weights are random fp8 codes with block scales (and bf16 for the head shape), several copies
// so that the working set is far larger than the caches.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/cpu.h"
#include "core/thread_pool.h"
#include "kernels/linear.h"

namespace {

using namespace dsinfer;
using Clock = std::chrono::steady_clock;

struct Shape {
  const char* name;
  DType dtype;
  int64_t rows, cols;
};

// Copies of one matrix that together exceed the caches (>= 256 MB).
struct Matrices {
  std::vector<uint8_t> data;
  std::vector<float> scales;
  std::vector<WeightMatrix> copies;

  explicit Matrices(const Shape& s) {
    const WeightMatrix one{s.dtype, s.rows, s.cols, nullptr, nullptr};
    const int64_t elem = s.dtype == DType::kF8E4M3 ? 1 : 2;
    const int64_t bytes = s.rows * s.cols * elem;
    const int64_t n = std::max<int64_t>(1, (int64_t{256} << 20) / bytes);
    data.resize(static_cast<size_t>(bytes * n));
    std::mt19937 rng(1);
    for (size_t i = 0; i < data.size(); ++i) {
      uint8_t b = static_cast<uint8_t>(rng());
      if (elem == 1 && (b & 0x7f) == 0x7f) b = 0x3f;                // no NaN codes
      if (elem == 2 && (i & 1)) b = static_cast<uint8_t>(0x3c + (b & 3));  // bf16 high byte: ~1
      data[i] = b;
    }
    const int64_t n_scales = ceil_div(s.rows, kFp8Block) * one.scale_cols();
    scales.assign(static_cast<size_t>(n_scales * n), 1e-3f);
    for (int64_t i = 0; i < n; ++i)
      copies.push_back({s.dtype, s.rows, s.cols, data.data() + i * bytes,
                        s.dtype == DType::kF8E4M3 ? scales.data() + i * n_scales : nullptr});
  }
};

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 0;
  std::vector<int64_t> token_counts;
  for (int i = 2; i < argc; ++i) token_counts.push_back(std::atoll(argv[i]));
  if (token_counts.empty()) token_counts = {1, 4, 64, 512};
  ThreadPool pool(threads);
  const Shape shapes[] = {
      {"wq_b 24576x1536 fp8", DType::kF8E4M3, 24576, 1536},
      {"wo 7168x16384 fp8", DType::kF8E4M3, 7168, 16384},
      {"expert w1 2048x7168 fp8", DType::kF8E4M3, 2048, 7168},
      {"expert w2 7168x2048 fp8", DType::kF8E4M3, 7168, 2048},
      {"head 129280x7168 bf16", DType::kBF16, 129280, 7168},
      {"big 129280x7168 fp8", DType::kF8E4M3, 129280, 7168},
      {"head-ish 64640x7168 bf16", DType::kBF16, 64640, 7168},
      {"w1-ish 2048x7168 bf16", DType::kBF16, 2048, 7168},
  };
  std::printf("%d threads\n", pool.size());
  std::printf("%-26s %-7s %6s %10s %10s %10s\n", "shape", "isa", "tokens", "ms/call", "GB/s", "GFLOP/s");
  const char* only_shape = std::getenv("MATMUL_SHAPE");
  for (const Shape& s : shapes) {
    if (only_shape && std::string(s.name).find(only_shape) == std::string::npos) continue;
    Matrices m(s);
    for (Isa isa : supported_isas()) {
      if (const char* only = std::getenv("DSINFER_ISA"); only && *only && std::string(only) != isa_name(isa)) continue;
      for (int64_t n : token_counts) {
        if (s.dtype == DType::kBF16 && n > 4) continue;  // the head sees one row per sequence
        std::vector<float> x(static_cast<size_t>(n * s.cols)), y(static_cast<size_t>(n * s.rows));
        std::mt19937 rng(2);
        std::normal_distribution<float> normal;
        for (float& v : x) v = normal(rng);
        const int64_t flops = 2 * n * s.rows * s.cols;
        const int calls = static_cast<int>(std::max<int64_t>(
            static_cast<int64_t>(m.copies.size()), std::min<int64_t>(200, int64_t{20'000'000'000} / (flops * (isa == Isa::kScalar ? 8 : 1)))));
        linear(x.data(), n, m.copies[0], y.data(), pool, isa);  // warm-up
        const auto start = Clock::now();
        for (int c = 0; c < calls; ++c) linear(x.data(), n, m.copies[c % m.copies.size()], y.data(), pool, isa);
        const double per_call = seconds_since(start) / calls;
        std::printf("%-26s %-7s %6lld %10.3f %10.2f %10.1f\n", s.name, isa_name(isa), static_cast<long long>(n),
                    per_call * 1e3, m.copies[0].bytes() / per_call / 1e9, flops / per_call / 1e9);
      }
    }
  }
  return 0;
}
