// Fast mode's decode attention kernels (kernels/fast_decode_attention.h) on one thread: one query's
// 64 heads (a V3 rank's share on 2 threads) against KEYS cached entries of 576 (512 latent + 64
// rope), from an f32 and from a bf16 cache; best of 20 timings, GFLOP/s counting
// 2 x heads x (576 + 512) per key. Each kernel only where the CPU runs it.
//   build/decode_attention_bench [KEYS...]   (default 17 4096 16384)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "core/cpu.h"
#include "core/dtype.h"
#include "kernels/fast_decode_attention.h"
#include "kernels/matmul_amx.h"

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

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> keys;
  for (int i = 1; i < argc; ++i) keys.push_back(std::atoll(argv[i]));
  if (keys.empty()) keys = {17, 4096, 16384};
  std::mt19937 rng(1);
  for (int64_t k : keys) {
    if (amx_usable()) run("amx", amx_decode_attention, k, rng);
    if (cpu_supports(Isa::kAvx512)) run("bf16dot", bf16dot_decode_attention, k, rng);
  }
}
