// Exact mode's and fast mode's decode attention kernels (kernels/fast_decode_attention.h) on one
// thread: one query's 64 heads (a V3 rank's share on 2 threads) against KEYS cached entries of 576
// (512 latent + 64 rope), from an f32 and from a bf16 cache; best of 20 timings, GFLOP/s counting
// 2 x heads x (576 + 512) per key. Each kernel only where the CPU runs it.
// Then the thread split of attend_per_query_split (attention.cpp) for a rank with 16 heads (V3 at
// mp8) and with 128 (mp1): one query's heads from a bf16 cache on a pool of THREADS (default: the
// machine's),
// split by heads (each thread its heads, as before the position split) against split by
// positions (items of a segment of kDecodeSplitKeys keys and decode_heads_per_item heads, then the
// merge).
//   build/decode_attention_bench [--threads T] [KEYS...]   (default 17 4096 16384)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/cpu.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/fast_decode_attention.h"
#include "kernels/linear.h"
#include "kernels/matmul_amx.h"
#include "kernels/ops.h"

namespace {

using namespace dsinfer;

constexpr int64_t kHeads = 64, kEntry = 576, kLora = 512;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void run(const char* name, void (*attend)(ConstMatView, const CachedBlocks&, float, MatView),
         int64_t keys, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> f32(static_cast<size_t>(keys * kEntry)), q(kHeads * kEntry),
      out(kHeads * kLora);
  for (float& v : f32) v = normal(rng);
  for (float& v : q) v = normal(rng);
  std::vector<uint16_t> bf16;
  for (float v : f32) bf16.push_back(f32_to_bf16(v));
  for (const bool as_bf16 : {false, true}) {
    std::vector<WeightMatrix> blocks;
    for (int64_t k = 0; k < keys; k += kAttentionBlockKeys) {
      const int64_t rows = std::min(kAttentionBlockKeys, keys - k);
      const uint8_t* data = as_bf16 ? reinterpret_cast<const uint8_t*>(bf16.data() + k * kEntry)
                                    : reinterpret_cast<const uint8_t*>(f32.data() + k * kEntry);
      blocks.push_back({as_bf16 ? DType::kBF16 : DType::kF32, rows, kEntry, data, nullptr});
    }
    const CachedBlocks cached{blocks, keys};
    const int calls = static_cast<int>(std::max<int64_t>(1, 200000 / keys));
    double best = 1e30;
    for (int t = 0; t < 20; ++t) {
      const double start = now_seconds();
      for (int c = 0; c < calls; ++c)
        attend(ConstMatView(q.data(), kHeads, kEntry), cached, 0.07f,
               MatView(out.data(), kHeads, kLora));
      best = std::min(best, (now_seconds() - start) / calls);
    }
    const double flops = 2.0 * kHeads * (kEntry + kLora) * static_cast<double>(keys);
    std::printf("%-8s %-4s cache  keys %6lld  %9.1f us  %7.1f GFLOP/s\n", name,
                as_bf16 ? "bf16" : "f32", static_cast<long long>(keys), best * 1e6,
                flops / best * 1e-9);
  }
}

// Exact mode's decode attention as attention.cpp's attend_per_query runs it for one query on one
// thread: the scores by dot_rows per cache block (the heads as tokens), the whole-row softmax,
// the attended latents by combine_rows / accumulate_rows (the heads as sets, each entry's 512
// latent columns read in place).
void exact_decode_attention(ConstMatView q_cat, const CachedBlocks& keys, float scale,
                            MatView out) {
  const Isa isa = best_isa();
  const int64_t heads = q_cat.rows, n_keys = keys.n_keys;
  thread_local std::vector<float> scores;
  scores.resize(static_cast<size_t>(heads * n_keys));  // [heads, n_keys]
  int64_t first = 0;
  for (const WeightMatrix& block : keys.blocks) {
    dot_rows(isa, q_cat, block, MatView(scores.data() + first, heads, block.rows, n_keys));
    first += block.rows;
  }
  for (int64_t h = 0; h < heads; ++h) {
    float* row = scores.data() + h * n_keys;
    for (int64_t t = 0; t < n_keys; ++t) row[t] *= scale;
    softmax(row, n_keys);
  }
  first = 0;
  for (const WeightMatrix& block : keys.blocks) {
    const WeightMatrix latents = block.leading_columns(out.cols);
    const ConstMatView block_scores(scores.data() + first, heads, block.rows, n_keys);
    if (first == 0)
      combine_rows(isa, latents, {0, block.rows}, block_scores, out);
    else
      accumulate_rows(isa, latents, {0, block.rows}, block_scores, out);
    first += block.rows;
  }
}

// The best of 20 timings of `attend`, in seconds.
template <class F>
double best_of(F attend, int calls) {
  double best = 1e30;
  for (int t = 0; t < 20; ++t) {
    const double start = now_seconds();
    for (int c = 0; c < calls; ++c) attend();
    best = std::min(best, (now_seconds() - start) / calls);
  }
  return best;
}

void run_thread_split(const char* name, DecodeSegmentKernel kernel, int64_t kRankHeads,
                      int64_t keys, ThreadPool& pool, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> bf16(static_cast<size_t>(keys * kEntry));
  for (uint16_t& v : bf16) v = f32_to_bf16(normal(rng));
  std::vector<float> q(kRankHeads * kEntry), out(kRankHeads * kLora);
  for (float& v : q) v = normal(rng);
  std::vector<WeightMatrix> blocks;
  for (int64_t k = 0; k < keys; k += kAttentionBlockKeys)
    blocks.push_back({DType::kBF16, std::min(kAttentionBlockKeys, keys - k), kEntry,
                      reinterpret_cast<const uint8_t*>(bf16.data() + k * kEntry), nullptr});
  const CachedBlocks cached{blocks, keys};
  const int64_t segments = decode_segments(keys);
  std::vector<float> o(static_cast<size_t>(segments * kRankHeads * kLora)),
      max(static_cast<size_t>(segments * kRankHeads)), sum(max.size());
  std::vector<DecodeSegmentState> states;
  for (int64_t s = 0; s < segments; ++s)
    states.push_back({MatView(o.data() + s * kRankHeads * kLora, kRankHeads, kLora),
                      max.data() + s * kRankHeads, sum.data() + s * kRankHeads});
  const int calls = static_cast<int>(std::max<int64_t>(1, 100000 / keys));
  const double by_heads = best_of(
      [&] {
        pool.parallel_for(kRankHeads, [&](int64_t h0, int64_t h1) {
          decode_attention_split(kernel, ConstMatView(q.data() + h0 * kEntry, h1 - h0, kEntry),
                                 cached, 0.07f, MatView(out.data() + h0 * kLora, h1 - h0, kLora));
        });
      },
      calls);
  const int64_t group = decode_heads_per_item(kRankHeads, segments, pool.size());
  const int64_t groups = ceil_div(kRankHeads, group);
  const double by_positions = best_of(
      [&] {
        pool.parallel_for(segments * groups, [&](int64_t i0, int64_t i1) {
          for (int64_t i = i0; i < i1; ++i) {
            const int64_t s = i / groups, h0 = (i % groups) * group;
            const int64_t heads = std::min(group, kRankHeads - h0);
            const DecodeSegmentState& all = states[static_cast<size_t>(s)];
            kernel(ConstMatView(q.data() + h0 * kEntry, heads, kEntry), decode_segment(cached, s),
                   0.07f,
                   DecodeSegmentState{all.o.rows_from(h0, heads), all.max + h0, all.sum + h0});
          }
        });
        merge_decode_segments(states, 0.07f, MatView(out.data(), kRankHeads, kLora));
      },
      calls);
  const double flops = 2.0 * kRankHeads * (kEntry + kLora) * static_cast<double>(keys);
  std::printf(
      "%-8s %3lld heads, %d threads, keys %6lld: by heads %9.1f us %7.1f GFLOP/s, "
      "by positions %9.1f us %7.1f GFLOP/s\n",
      name, static_cast<long long>(kRankHeads), pool.size(), static_cast<long long>(keys),
      by_heads * 1e6, flops / by_heads * 1e-9, by_positions * 1e6, flops / by_positions * 1e-9);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> keys;
  int threads = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--threads" && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else
      keys.push_back(std::atoll(argv[i]));
  }
  if (keys.empty()) keys = {17, 4096, 16384};
  std::mt19937 rng(1);
  for (int64_t k : keys) {
    run("exact", exact_decode_attention, k, rng);
    if (amx_usable()) run("amx", amx_decode_attention, k, rng);
    if (cpu_supports(Isa::kAvx512)) run("bf16dot", bf16dot_decode_attention, k, rng);
  }
  ThreadPool pool(threads);
  for (int64_t heads : {16, 128})
    for (int64_t k : keys) {
      if (amx_usable()) run_thread_split("amx", amx_decode_segment, heads, k, pool, rng);
      if (cpu_supports(Isa::kAvx512))
        run_thread_split("bf16dot", bf16dot_decode_segment, heads, k, pool, rng);
    }
}
