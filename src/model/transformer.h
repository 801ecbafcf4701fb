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
#include "model/step.h"
#include "model/weights.h"
#include "parallel/comm.h"

namespace dsinfer {

// What one forward call did on this rank, counted as it ran (for `dsinfer bench`): the bytes of
// weights it read (every matrix it used once per call, as the kernels stream them: attention,
// dense and shared MLPs, the router, each routed expert that some token of the call chose, the
// head, and one embedding row per token of this rank's vocabulary block) and the multiply-adds of
// its matrix products and of attention (scores and values over the cache, absorbed wkv_b); and
// per part of the model, the same counts with the wall time that part took (where the time goes).
enum class ForwardPart { kAttention, kDenseMlp, kMoe, kHead, kOther, kCount };
const char* forward_part_name(ForwardPart part);

struct PartStats {
  double seconds = 0;
  int64_t weight_bytes = 0;
  int64_t macs = 0;
};

struct ForwardStats {
  int64_t weight_bytes = 0;  // all parts
  int64_t macs = 0;
  // attention (MLA with its norms), dense MLP, MoE (router, shared and routed experts), head (final
  // norm, head, gather of the vocabulary), other (embedding, residual adds, the rest)
  PartStats parts[static_cast<int>(ForwardPart::kCount)];
  PartStats& part(ForwardPart p) { return parts[static_cast<int>(p)]; }
  const PartStats& part(ForwardPart p) const { return parts[static_cast<int>(p)]; }
  void add(ForwardPart p, int64_t bytes, int64_t mac_count) {
    part(p).weight_bytes += bytes;
    part(p).macs += mac_count;
    weight_bytes += bytes;
    macs += mac_count;
  }
};

class Transformer {
 public:
  Transformer(const ModelConfig& config, ModelWeights weights, const ShardPlan& plan, Comm& comm,
              ThreadPool& pool);

  // Maps <ckpt_dir>/model{rank}-mp{world}.safetensors for comm's rank and world size and binds
  // it to the config (errors name the file and tensor).
  static std::unique_ptr<Transformer> load(const ModelConfig& config, const std::string& ckpt_dir,
                                           Comm& comm, ThreadPool& pool);

  // One ragged step (model/step.h): every chunk's tokens at its sequence's next positions,
  // filling the cache and advancing each sequence's length; output.logits [logit_rows, vocab]
  // (gathered over ranks, so every rank holds all of them). A malformed step (a chunk that does
  // not continue its sequence, past its capacity, a sequence twice) is an Error before it runs.
  void forward(const Step& step, KVCache& cache, StepOutput& output);
  // The reference loop's call: tokens [batch, seqlen] (row-major) at positions [start_pos,
  // start_pos + seqlen) of sequences 0 .. batch-1; the last position's logits [batch, vocab].
  void forward(const int32_t* tokens, int batch, int seqlen, int start_pos, KVCache& cache,
               float* logits);

  const ModelConfig& config() const { return config_; }
  const ShardPlan& plan() const { return plan_; }
  Comm& comm() const { return comm_; }
  // Bytes of weights one decode step reads (attention, dense, shared, the activated experts'
  // share, head) on this rank; for throughput reports.
  int64_t weight_bytes() const;
  // The counts of the last forward call (reset at its start).
  const ForwardStats& stats() const { return stats_; }

 private:
  void embed(const int32_t* tokens, int64_t n, float* h);
  // ForwardStats of the embedding and the head, and of one layer once it has run.
  void count_ends(const int32_t* tokens, int64_t n, int64_t logit_rows);
  void count_layer(const LayerWeights& lw, const Step& step);

  ModelConfig config_;
  ModelWeights weights_;
  ShardPlan plan_;
  Comm& comm_;
  ThreadPool& pool_;
  Rope rope_;
  Scratch scratch_;
  std::vector<float> h_, x_, y_, last_, logits_local_, gathered_;
  std::vector<int64_t> positions_;  // each row's absolute position
  ForwardStats stats_;
  std::vector<int64_t> expert_tokens_;  // per local expert, tokens routed to it (stats only)
};

}  // namespace dsinfer
