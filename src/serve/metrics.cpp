#include "serve/metrics.h"

#include <sstream>

namespace dsinfer {

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_[i];
  sum_ += value;
  ++count_;
}

std::string Histogram::render(const std::string& name, const std::string& help) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::ostringstream out;
  out << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out << name << "_bucket{le=\"" << bounds_[i] << "\"} " << cumulative << "\n";
  }
  out << name << "_bucket{le=\"+Inf\"} " << count_ << "\n"
      << name << "_sum " << sum_ << "\n"
      << name << "_count " << count_ << "\n";
  return out.str();
}

std::string ServerMetrics::render() const {
  std::ostringstream out;
  auto metric = [&](const char* name, const char* type, const char* help, int64_t value) {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n"
        << name << " " << value << "\n";
  };
  metric("dsinfer_requests_running", "gauge", "Requests admitted to the engine and not finished.",
         requests_running);
  metric("dsinfer_requests_waiting", "gauge", "Requests queued for admission.", requests_waiting);
  metric("dsinfer_requests_finished_total", "counter", "Requests that ended normally.",
         requests_finished);
  metric("dsinfer_requests_cancelled_total", "counter",
         "Requests cancelled (client gone, stop string).", requests_cancelled);
  metric("dsinfer_requests_abandoned_total", "counter",
         "Requests whose client hung up before they were read (never admitted).",
         requests_abandoned);
  metric("dsinfer_requests_failed_total", "counter", "Requests that ended in an error.",
         requests_failed);
  metric("dsinfer_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.",
         prompt_tokens);
  metric("dsinfer_generation_tokens_total", "counter", "Generated tokens.", generation_tokens);
  metric("dsinfer_prefix_cache_hit_tokens_total", "counter",
         "Prompt tokens taken from the cache instead of prefilled.", prefix_cache_hit_tokens);
  metric("dsinfer_mtp_draft_tokens_total", "counter",
         "Tokens drafted by the MTP module and verified (--mtp on).", mtp_drafted);
  metric("dsinfer_mtp_accepted_tokens_total", "counter", "MTP drafts the model agreed with.",
         mtp_accepted);
  const int64_t block_bytes = kv_block_positions * kv_bytes_per_position;
  metric("dsinfer_kv_cache_budget_positions", "gauge",
         "Positions the KV cache may hold (--kv-cache-tokens).",
         kv_budget_blocks * kv_block_positions);
  metric("dsinfer_kv_cache_budget_bytes", "gauge", "Bytes the KV cache may take.",
         kv_budget_blocks * block_bytes);
  metric("dsinfer_kv_cache_used_positions", "gauge",
         "Positions in blocks held by sequences or the prefix cache (shared blocks counted once).",
         kv_used_blocks * kv_block_positions);
  metric("dsinfer_kv_cache_used_bytes", "gauge", "Bytes of those blocks.",
         kv_used_blocks * block_bytes);
  metric("dsinfer_prefix_cache_blocks", "gauge",
         "Blocks the prefix cache indexes (in use or idle).", prefix_cache_blocks);
  metric("dsinfer_prefix_cache_evictions_total", "counter",
         "Idle cached blocks evicted to make room.", prefix_cache_evictions);
  out << ttft.render("dsinfer_time_to_first_token_seconds",
                     "From the request's arrival to its first token.");
  out << inter_token.render("dsinfer_inter_token_latency_seconds",
                            "Between consecutive tokens of a request.");
  out << e2e.render("dsinfer_e2e_request_latency_seconds",
                    "From the request's arrival to its last token.");
  return out.str();
}

}  // namespace dsinfer
