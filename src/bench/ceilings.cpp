#include "bench/ceilings.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "kernels/matmul_amx.h"

namespace dsinfer {

namespace bench_detail {

uint64_t read_sum_scalar(const uint8_t* p, int64_t bytes) {
  const auto* w = reinterpret_cast<const uint64_t*>(p);
  uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  for (int64_t i = 0; i < bytes / 8; i += 4) {
    a0 += w[i];
    a1 += w[i + 1];
    a2 += w[i + 2];
    a3 += w[i + 3];
  }
  return a0 + a1 + a2 + a3;
}

float fma_loop_scalar(int64_t iterations, float seed) {
  // the baseline ISA has no FMA instruction: a multiply and an add, 2 flops, per accumulator
  const float m = 0.999f, c = seed * 1e-3f;
  float acc[kAccumulators];
  for (int j = 0; j < kAccumulators; ++j) acc[j] = seed + static_cast<float>(j);
  for (int64_t i = 0; i < iterations; ++i)
    for (int j = 0; j < kAccumulators; ++j) acc[j] = acc[j] * m + c;
  float sum = 0;
  for (float v : acc) sum += v;
  return sum;
}

}  // namespace bench_detail

namespace {

using namespace bench_detail;

// Keeps the loops' results observable so that the compiler cannot drop them.
std::atomic<uint64_t> g_sink{0};

void sink(uint64_t v) { g_sink.fetch_add(v, std::memory_order_relaxed); }
void sink(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  sink(static_cast<uint64_t>(bits));
}

// An anonymous mapping (page aligned, transparent huge pages where the kernel allows), so
// that a 1 GB buffer neither sits on the heap nor gets copied.
class Mapping {
 public:
  explicit Mapping(int64_t bytes) : bytes_(bytes) {
    void* p = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    check(p != MAP_FAILED, "bench: cannot map a ", bytes, "-byte buffer for the bandwidth test");
    madvise(p, static_cast<size_t>(bytes), MADV_HUGEPAGE);
    data_ = static_cast<uint8_t*>(p);
  }
  ~Mapping() { munmap(data_, static_cast<size_t>(bytes_)); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  uint8_t* data() const { return data_; }

 private:
  int64_t bytes_;
  uint8_t* data_;
};

// Runs fn(thread) once on every thread of the pool (thread i always gets index i, so a part
// first touched by thread i is read by thread i: its pages sit on that thread's NUMA node).
void on_every_thread(ThreadPool& pool, const std::function<void(int)>& fn) {
  pool.parallel_for(pool.size(), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) fn(static_cast<int>(t));
  });
}

// Best rate (work / seconds) over `passes` timed runs of `body`; `sync` before each.
double best_rate(double work, int passes, const std::function<void()>& sync,
                 const std::function<void()>& body) {
  check(passes >= 1, "bench: passes must be >= 1");
  double best = 0;
  for (int p = 0; p < passes; ++p) {
    if (sync) sync();
    const double t0 = now_seconds();
    body();
    const double dt = now_seconds() - t0;
    if (dt > 0) best = std::max(best, work / dt);
  }
  return best;
}

// GFLOP/s of `loop` (flops_per_iteration each round) run for `iterations` rounds on every thread
// at once; best of `passes`.
double loop_gflops(ThreadPool& pool, float (*loop)(int64_t, float), int64_t flops_per_iteration,
                   int64_t iterations, int passes, const std::function<void()>& sync) {
  std::vector<float> results(pool.size() * 16);  // one cache line per thread
  const double gflop = static_cast<double>(iterations) * flops_per_iteration * pool.size() / 1e9;
  const double rate = best_rate(gflop, passes, sync, [&] {
    on_every_thread(
        pool, [&](int t) { results[t * 16] = loop(iterations, 1.0f + static_cast<float>(t)); });
  });
  for (int t = 0; t < pool.size(); ++t) sink(results[t * 16]);
  return rate;
}

// For a ceiling this CPU lacks: 0, after taking part in the other ranks' barriers.
double absent(int passes, const std::function<void()>& sync) {
  for (int p = 0; p < passes && sync; ++p) sync();
  return 0;
}

}  // namespace

double measure_read_bandwidth(ThreadPool& pool, Isa isa, int64_t bytes, int passes,
                              const std::function<void()>& sync) {
  check(cpu_supports(isa), "bench: this CPU cannot run ", isa_name(isa), " code");
  const int threads = pool.size();
  // each thread's part: a whole number of 2 MB pages, so no page is shared between threads
  constexpr int64_t kPage = int64_t{2} << 20;
  const int64_t part = std::max<int64_t>(kPage, bytes / threads / kPage * kPage);
  Mapping buffer(part * threads);
  on_every_thread(
      pool, [&](int t) { std::memset(buffer.data() + t * part, 1, static_cast<size_t>(part)); });
  auto read = isa == Isa::kAvx512 ? read_sum_avx512
              : isa == Isa::kAvx2 ? read_sum_avx2
                                  : read_sum_scalar;
  std::vector<uint64_t> sums(threads * 8);  // one cache line per thread: no false sharing
  const double gb = static_cast<double>(part) * threads / 1e9;
  const double rate = best_rate(gb, passes, sync, [&] {
    on_every_thread(pool, [&](int t) { sums[t * 8] = read(buffer.data() + t * part, part); });
  });
  for (int t = 0; t < threads; ++t) sink(sums[t * 8]);
  return rate;
}

double measure_fma_gflops(ThreadPool& pool, Isa isa, int64_t iterations, int passes,
                          const std::function<void()>& sync) {
  check(cpu_supports(isa), "bench: this CPU cannot run ", isa_name(isa), " code");
  auto loop = isa == Isa::kAvx512 ? fma_loop_avx512
              : isa == Isa::kAvx2 ? fma_loop_avx2
                                  : fma_loop_scalar;
  const int64_t per_iteration = isa == Isa::kAvx512 ? kFmaFlopsAvx512
                                : isa == Isa::kAvx2 ? kFmaFlopsAvx2
                                                    : kFmaFlopsScalar;
  return loop_gflops(pool, loop, per_iteration, iterations, passes, sync);
}

double measure_bf16_gflops(ThreadPool& pool, Isa isa, int64_t iterations, int passes,
                           const std::function<void()>& sync) {
  if (isa != Isa::kAvx512 || !cpu_supports(Isa::kAvx512)) return absent(passes, sync);
  return loop_gflops(pool, bf16_loop_avx512, kBf16FlopsAvx512, iterations, passes, sync);
}

double measure_int8_gops(ThreadPool& pool, Isa isa, bool vnni, int64_t iterations, int passes,
                         const std::function<void()>& sync) {
  if (isa == Isa::kAvx512 && vnni && cpu_supports(Isa::kAvx512) && cpu_has_avx512_vnni())
    return loop_gflops(pool, int8_loop_avx512vnni, kInt8OpsAvx512Vnni, iterations, passes, sync);
  if (isa == Isa::kScalar || !cpu_supports(Isa::kAvx2)) return absent(passes, sync);
  return loop_gflops(pool, int8_loop_avx2, kInt8OpsAvx2, iterations, passes, sync);
}

double measure_amx_gflops(ThreadPool& pool, int64_t iterations, int passes,
                          const std::function<void()>& sync) {
  if (!amx_usable()) return absent(passes, sync);
  return loop_gflops(pool, amx_loop, kAmxFlops, iterations, passes, sync);
}

Ceilings measure_ceilings(ThreadPool& pool, Isa isa, bool vnni, const CeilingOptions& o,
                          const std::function<void()>& sync) {
  Ceilings c;
  c.read_gbps = measure_read_bandwidth(pool, isa, o.buffer_bytes, o.passes, sync);
  c.fma_gflops = measure_fma_gflops(pool, isa, o.fma_iterations, o.passes, sync);
  c.bf16_gflops = measure_bf16_gflops(pool, isa, o.fma_iterations, o.passes, sync);
  c.int8_gops = measure_int8_gops(pool, isa, vnni, o.fma_iterations, o.passes, sync);
  // a tile product is 256 times the work of one vector FMA: fewer rounds for the same time
  c.amx_gflops =
      measure_amx_gflops(pool, std::max<int64_t>(1, o.fma_iterations / 64), o.passes, sync);
  return c;
}

}  // namespace dsinfer
