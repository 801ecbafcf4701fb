// The server's Prometheus metrics (GET /metrics, text format 0.0.4): counters, gauges and
// latency histograms, safe to update from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace dsinfer {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds)
      : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double value);
  // `name`_bucket{le=...} (cumulative), `name`_sum and `name`_count lines, with HELP and TYPE.
  std::string render(const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mutex_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); the last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

struct ServerMetrics {
  std::atomic<int64_t> requests_running{0}, requests_waiting{0};
  std::atomic<int64_t> requests_finished{0}, requests_failed{0}, requests_cancelled{0};
  std::atomic<int64_t> requests_abandoned{0};  // the client left before it was read
  std::atomic<int64_t> prompt_tokens{0}, generation_tokens{0}, prefix_cache_hit_tokens{0};
  std::atomic<int64_t> mtp_drafted{0}, mtp_accepted{0};  // speculative decoding (--mtp on)
  // The KV cache (set once at start, then after each step): its budget, the blocks in use (by
  // sequences or the prefix index), the blocks the prefix index holds, its evictions.
  std::atomic<int64_t> kv_block_positions{0}, kv_bytes_per_position{0}, kv_budget_blocks{0};
  std::atomic<int64_t> kv_used_blocks{0}, prefix_cache_blocks{0}, prefix_cache_evictions{0};
  Histogram ttft{{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 60}};
  Histogram inter_token{{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}};
  Histogram e2e{{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 60, 120, 300}};
  std::string render() const;
};

}  // namespace dsinfer
