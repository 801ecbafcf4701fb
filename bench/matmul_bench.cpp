// Matrix kernel throughput on DeepSeek-V3 shapes, per ISA variant: GEMV (decode: GB/s of
// weights streamed, to compare with the read bandwidth `dsinfer bench` measures) and GEMM
// (prefill: GFLOP/s, to compare with its FMA peak).
//
//   matmul_bench [THREADS] [TOKENS...]      (default: all hardware threads; tokens 1 4 64 512)
//
// DSINFER_ISA=NAME (avx512, avx2, scalar) measures that variant only (else every one the CPU runs);
// MATMUL_SHAPE=TEXT only the shapes whose name contains TEXT; MATMUL_GEMV_AB=ROUNDS runs each GEMV
// (up to 4 tokens) under Intel's and AMD's streaming (kernels/linear.h GemvTuning) alternately,
// ROUNDS times (the host's bandwidth moves between runs: compare within a round); MATMUL_MB=N sets
// the weights' working set (default 256 MB, far past the caches; 1 keeps one copy of each shape,
// which for the 14 MB expert matrices stays in a 32 MB L3: is a kernel bound by its own work or
// by memory?); MATMUL_FAST=1
// runs fast mode (activations rounded to bf16: AMX or VDPBF16PS from kFastGemmMinTokens tokens),
// MATMUL_INT8=1 int8 mode (each copy repacked as int8 first: kernels/int8_matrix.h);
// MATMUL_VARIANT=1 the batch-variant kernels (`--batch-variant`: no canonical order);
// MATMUL_GFLOP=N the work of each measurement (default 20: at 512 tokens one or two calls).
//
// Weights are random fp8 codes with block scales (and bf16 for the head shape), several copies
// so that the working set is far larger than the caches, in 2 MB transparent huge pages as
// dsinfer reads shards by default (io/mapped_file).
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/cpu.h"
#include "core/thread_pool.h"
#include "kernels/int8_matrix.h"
#include "kernels/linear.h"

namespace {

using namespace dsinfer;
using Clock = std::chrono::steady_clock;

// Multiply-adds x 2 each measurement runs at least (MATMUL_GFLOP, default 20): one call of a
// 512-token expert GEMM is 15 GFLOP, and a single call on a shared host is noise.
int64_t work_flops() {
  const char* g = std::getenv("MATMUL_GFLOP");
  return static_cast<int64_t>((g ? std::atof(g) : 20.0) * 1e9);
}

// Bytes of weights each shape cycles through (MATMUL_MB, default 256 MB).
int64_t working_set_bytes() {
  const char* mb = std::getenv("MATMUL_MB");
  const int64_t n = mb && *mb ? std::atoll(mb) : 256;
  return std::max<int64_t>(1, n) << 20;
}

struct Shape {
  const char* name;
  DType dtype;
  int64_t rows, cols;
};

// An anonymous mapping in transparent huge pages where the kernel gives them.
class HugeBuffer {
 public:
  explicit HugeBuffer(size_t bytes) : bytes_(bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      std::perror("matmul_bench: mmap");
      std::exit(1);
    }
    madvise(p, bytes, MADV_HUGEPAGE);
    data_ = static_cast<uint8_t*>(p);
  }
  ~HugeBuffer() { munmap(data_, bytes_); }
  HugeBuffer(const HugeBuffer&) = delete;
  HugeBuffer& operator=(const HugeBuffer&) = delete;
  uint8_t* data() const { return data_; }
  size_t size() const { return bytes_; }

 private:
  size_t bytes_;
  uint8_t* data_;
};

// Copies of one matrix that together exceed the caches (>= 256 MB).
struct Matrices {
  static int64_t elem(const Shape& s) { return s.dtype == DType::kF8E4M3 ? 1 : 2; }
  // bytes of one copy (int4: packed nibbles, quant_row_bytes)
  static int64_t copy_bytes(const Shape& s) {
    if (s.dtype == kInt4Storage) return s.rows * quant_row_bytes(QuantFormat::kInt4, s.cols);
    return s.rows * s.cols * elem(s);
  }
  static int64_t copies_of(const Shape& s) {
    return std::max<int64_t>(1, working_set_bytes() / copy_bytes(s));
  }
  HugeBuffer data;
  std::vector<float> scales;
  std::vector<uint16_t> group_scales;  // int4: one fp16 per row per 128 columns, shared by copies
  std::vector<WeightMatrix> copies;
  std::vector<std::unique_ptr<Int8Matrix>> int8_forms;  // MATMUL_INT8=1

  // int8 mode's form of every copy
  void repack(ThreadPool& pool) {
    for (WeightMatrix& w : copies) {
      int8_forms.push_back(std::make_unique<Int8Matrix>(repack_int8(w, pool)));
      w.int8 = int8_forms.back().get();
    }
  }

  explicit Matrices(const Shape& s) : data(static_cast<size_t>(copies_of(s) * copy_bytes(s))) {
    const WeightMatrix one{s.dtype, s.rows, s.cols, nullptr, nullptr};
    const int64_t bytes = copy_bytes(s), n = copies_of(s);
    std::mt19937 rng(1);
    for (size_t i = 0; i < data.size(); ++i) {
      uint8_t b = static_cast<uint8_t>(rng());
      const bool int4 = s.dtype == kInt4Storage;                  // any byte is two valid nibbles
      if (!int4 && elem(s) == 1 && (b & 0x7f) == 0x7f) b = 0x3f;  // no NaN codes
      if (!int4 && elem(s) == 2 && (i & 1)) b = static_cast<uint8_t>(0x3c + (b & 3));  // bf16 ~1
      data.data()[i] = b;
    }
    const int64_t n_scales = ceil_div(s.rows, kFp8Block) * one.scale_cols();
    scales.assign(static_cast<size_t>(n_scales * n), 1e-3f);
    group_scales.assign(static_cast<size_t>(s.rows * quant_groups(s.cols)), f32_to_f16(1e-3f));
    for (int64_t i = 0; i < n; ++i) {
      copies.push_back({s.dtype, s.rows, s.cols, data.data() + i * bytes,
                        s.dtype == DType::kF8E4M3 ? scales.data() + i * n_scales : nullptr});
      if (s.dtype == kInt4Storage) copies.back().group_scale = group_scales.data();
    }
  }
};

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

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
      {"dense w1 18432x7168 fp8", DType::kF8E4M3, 18432, 7168},
      {"head 129280x7168 bf16", DType::kBF16, 129280, 7168},
      {"big 129280x7168 fp8", DType::kF8E4M3, 129280, 7168},
      {"head-ish 64640x7168 bf16", DType::kBF16, 64640, 7168},
      {"w1-ish 2048x7168 bf16", DType::kBF16, 2048, 7168},
      {"expert w1 2048x7168 int4", kInt4Storage, 2048, 7168},
      {"expert w2 7168x2048 int4", kInt4Storage, 7168, 2048},
  };
  std::printf("%d threads\n", pool.size());
  std::printf("%-26s %-7s %6s %10s %10s %10s\n", "shape", "isa", "tokens", "ms/call", "GB/s",
              "GFLOP/s");
  const char* only_shape = std::getenv("MATMUL_SHAPE");
  const char* ab = std::getenv("MATMUL_GEMV_AB");
  const int ab_rounds = ab ? std::atoi(ab) : 0;
  KernelConfig base = cpu_kernel_config();
  if (const char* fast = std::getenv("MATMUL_FAST"); fast && std::string(fast) == "1")
    base.act = ActDType::kBF16;
  const char* int8 = std::getenv("MATMUL_INT8");
  if (int8 && std::string(int8) == "1") base.act = ActDType::kInt8;
  if (const char* variant = std::getenv("MATMUL_VARIANT"); variant && std::string(variant) == "1")
    base.batch_invariant = false;
  std::printf("activations %s, %s\n", act_dtype_name(base.act),
              base.batch_invariant ? "batch invariant" : "batch variant");
  // (Intel's and AMD Zen 5's GemvTuning, kernels/kernel_config.h)
  const std::pair<const char*, GemvTuning> kStreamings[] = {
      {"intel", gemv_tuning_of(CpuFamily::kIntel)},
      {"amd", gemv_tuning_of(CpuFamily::kZen5)},
  };
  for (const Shape& s : shapes) {
    if (only_shape && std::string(s.name).find(only_shape) == std::string::npos) continue;
    Matrices m(s);
    if (base.int8()) m.repack(pool);
    for (Isa isa : supported_isas()) {
      if (const char* only = std::getenv("DSINFER_ISA");
          only && *only && std::string(only) != isa_name(isa))
        continue;
      for (int64_t n : token_counts) {
        // the head sees one row per sequence: decode batches (up to 16 here), never a prefill
        if (s.dtype == DType::kBF16 && n > 16) continue;
        std::vector<float> x(static_cast<size_t>(n * s.cols)), y(static_cast<size_t>(n * s.rows));
        std::mt19937 rng(2);
        std::normal_distribution<float> normal;
        for (float& v : x) v = normal(rng);
        const int64_t flops = 2 * n * s.rows * s.cols;
        const int calls = static_cast<int>(std::max<int64_t>(
            static_cast<int64_t>(m.copies.size()),
            std::min<int64_t>(200, work_flops() / (flops * (isa == Isa::kScalar ? 8 : 1)))));
        KernelConfig k = with_isa(base, isa);
        auto run = [&](const char* label) {
          linear(k, x.data(), n, m.copies[0], y.data(), pool);  // warm-up
          const auto start = Clock::now();
          for (int c = 0; c < calls; ++c)
            linear(k, x.data(), n, m.copies[c % m.copies.size()], y.data(), pool);
          const double per_call = seconds_since(start) / calls;
          std::printf("%-26s %-7s %6lld %10.3f %10.2f %10.1f\n", s.name, label,
                      static_cast<long long>(n), per_call * 1e3,
                      m.copies[0].bytes() / per_call / 1e9, flops / per_call / 1e9);
        };
        if (ab_rounds > 0 && n <= 4) {
          for (int round = 0; round < ab_rounds; ++round)
            for (const auto& [name, tuning] : kStreamings) {
              k.gemv = tuning;
              run(name);
            }
        } else {
          run(isa_name(isa));
        }
      }
    }
  }
  return 0;
}
