// The two hardware ceilings that `dsinfer bench` compares the model against, measured with the
// model's own thread pool: streaming read bandwidth (decode is bound by it) and the peak rate of
// fused multiply-adds in a register loop (prefill is bound by it). Each measurement runs on every
// thread of the pool at once; `sync` (if given) runs before every timed pass so that several
// ranks of one machine can be made to measure at the same moment (a barrier).
#pragma once

#include <cstdint>
#include <functional>

#include "core/cpu.h"
#include "core/thread_pool.h"

namespace dsinfer {

// Streaming read bandwidth in GB/s (1e9 bytes/s): every thread reads its own contiguous part of
// a `bytes` buffer (allocated and first touched by that thread) with the widest loads `isa`
// has; the best of `passes` timed passes of the whole pool.
double measure_read_bandwidth(ThreadPool& pool, Isa isa, int64_t bytes, int passes,
                              const std::function<void()>& sync = {});

// Peak fp32 FMA rate in GFLOP/s (an FMA counts 2 flops), summed over the pool's threads: each
// thread runs a loop of independent vector FMAs (enough accumulators to cover the latency) for
// `iterations` rounds; best of `passes`. On kScalar it is plain multiply-add (no FMA
// instruction in the baseline ISA), which is what scalar kernels can reach.
double measure_fma_gflops(ThreadPool& pool, Isa isa, int64_t iterations, int passes,
                          const std::function<void()>& sync = {});

// Peak bf16 dot-product rate (AVX-512 BF16 vdpbf16ps: each bf16 pair is one multiply and one
// add, 2 flops) in GFLOP/s, as measure_fma_gflops. 0 unless isa is kAvx512 (which includes
// AVX512_BF16 here) and the CPU has it.
double measure_bf16_gflops(ThreadPool& pool, Isa isa, int64_t iterations, int passes,
                           const std::function<void()>& sync = {});

// Peak int8 dot-product rate in GOP/s (an int8 multiply-add is 2 ops), as measure_fma_gflops, of
// int8 mode's instructions on this CPU: VPDPBUSD where `vnni` (AVX512-VNNI, with isa kAvx512),
// else AVX2's VPMADDUBSW + VPMADDWD + VPADDD; 0 on kScalar.
double measure_int8_gops(ThreadPool& pool, Isa isa, bool vnni, int64_t iterations, int passes,
                         const std::function<void()>& sync = {});

// Peak AMX bf16 tile-product rate in GFLOP/s (TDPBF16PS: 16 x 16 x 32 multiply-adds each),
// as measure_fma_gflops; 0 where AMX is not usable (amx_usable()).
double measure_amx_gflops(ThreadPool& pool, int64_t iterations, int passes,
                          const std::function<void()>& sync = {});

// The three ceilings of one process, measured with the same pool, one after the other.
struct Ceilings {
  double read_gbps = 0;
  double fma_gflops = 0;   // fp32 FMA
  double bf16_gflops = 0;  // bf16 dot products; 0 where the ISA lacks them
  double amx_gflops = 0;   // AMX bf16 tiles; 0 where AMX is not usable
  double int8_gops = 0;    // int8 dot products (int8 mode's); 0 on the scalar ISA
};

struct CeilingOptions {
  int64_t buffer_bytes = int64_t{1} << 30;  // far larger than any cache
  int64_t fma_iterations = 20'000'000;      // ~0.05-0.1 s per pass on a 3 GHz core
  int passes = 3;
};

// `vnni`: int8 mode may run VPDPBUSD (KernelConfig::vnni).
Ceilings measure_ceilings(ThreadPool& pool, Isa isa, bool vnni, const CeilingOptions& options,
                          const std::function<void()>& sync = {});

namespace bench_detail {
// Per-ISA loops (ceilings_avx512.cpp, ceilings_avx2.cpp; scalar in ceilings.cpp), callable only
// when cpu_supports() says so. Each returns a value that depends on every load or accumulator
// so that the compiler cannot drop the work. read_sum_* need `bytes` a multiple of 256.
uint64_t read_sum_scalar(const uint8_t* p, int64_t bytes);
uint64_t read_sum_avx2(const uint8_t* p, int64_t bytes);
uint64_t read_sum_avx512(const uint8_t* p, int64_t bytes);
float fma_loop_scalar(int64_t iterations, float seed);
float fma_loop_avx2(int64_t iterations, float seed);
float fma_loop_avx512(int64_t iterations, float seed);
float bf16_loop_avx512(int64_t iterations, float seed);
float int8_loop_avx512vnni(int64_t iterations, float seed);  // ceilings_avx512vnni.cpp
float int8_loop_avx2(int64_t iterations, float seed);
float amx_loop(int64_t iterations, float seed);  // ceilings_amx.cpp; 4 TDPBF16PS an iteration
inline constexpr int64_t kAmxFlops = 4 * 16 * 16 * 32 * 2;

// Independent accumulators per loop: Zen 4 / Ice Lake class cores have an FMA latency of 4-5
// cycles and two FMA pipes, so at least 10 chains are needed to keep both busy; 12 fit the
// 16 ymm registers of AVX2 next to the two operands.
inline constexpr int kAccumulators = 12;
// Flops per iteration of each loop: accumulators x lanes x 2 (FMA, or a bf16 pair, is 2 flops).
inline constexpr int64_t kFmaFlopsScalar = kAccumulators * 2;
inline constexpr int64_t kFmaFlopsAvx2 = kAccumulators * 8 * 2;
inline constexpr int64_t kFmaFlopsAvx512 = kAccumulators * 16 * 2;
inline constexpr int64_t kBf16FlopsAvx512 = kAccumulators * 32 * 2;
inline constexpr int64_t kInt8OpsAvx512Vnni = kAccumulators * 64 * 2;
inline constexpr int64_t kInt8OpsAvx2 = kAccumulators * 32 * 2;
}  // namespace bench_detail

}  // namespace dsinfer
