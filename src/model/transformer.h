// The DeepSeek MLA + MoE transformer of one tensor-parallel rank (REFERENCE.md section 4).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "model/config.h"
#include "model/kv_cache.h"
#include "model/layers.h"
#include "model/rope.h"
#include "model/shard_plan.h"
#include "model/weights.h"
#include "parallel/comm.h"

namespace dsinfer {

class Transformer {
 public:
  Transformer(const ModelConfig& config, ModelWeights weights, const ShardPlan& plan, Comm& comm,
              ThreadPool& pool);

  // Maps <ckpt_dir>/model{rank}-mp{world}.safetensors for comm's rank and world size and binds
  // it to the config (errors name the file and tensor).
  static std::unique_ptr<Transformer> load(const ModelConfig& config, const std::string& ckpt_dir,
                                           Comm& comm, ThreadPool& pool);

  // Runs tokens [batch, seqlen] (row-major) at positions [start_pos, start_pos + seqlen) of
  // every row, filling the cache; writes the last position's logits [batch, vocab_size]
  // (gathered over ranks, so every rank holds all of them).
  void forward(const int32_t* tokens, int batch, int seqlen, int start_pos, KVCache& cache,
               float* logits);

  const ModelConfig& config() const { return config_; }
  const ShardPlan& plan() const { return plan_; }
  // Bytes of weights one decode step reads (attention, dense, shared, the activated experts'
  // share, head) on this rank; for throughput reports.
  int64_t weight_bytes() const;

 private:
  void embed(const int32_t* tokens, int64_t n, float* h);

  ModelConfig config_;
  ModelWeights weights_;
  ShardPlan plan_;
  Comm& comm_;
  ThreadPool& pool_;
  Rope rope_;
  Scratch scratch_;
  std::vector<float> h_, x_, y_, last_, logits_local_, gathered_;
};

}  // namespace dsinfer
