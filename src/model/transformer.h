// The DeepSeek MLA + MoE transformer of one tensor-parallel rank (docs/REFERENCE.md section 4).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/kernel_config.h"
#include "model/config.h"
#include "model/forward_observer.h"
#include "model/kv_cache.h"
#include "model/layers.h"
#include "model/rope.h"
#include "model/shard_plan.h"
#include "model/step.h"
#include "model/weights.h"
#include "parallel/comm.h"
#include "parallel/counting_comm.h"

namespace dsinfer {

class Transformer {
 public:
  // `kernels`: how every product of this model runs (exact or fast, batch invariance, ISA, tuning).
  Transformer(const ModelConfig& config, ModelWeights weights, const ShardPlan& plan, Comm& comm,
              ThreadPool& pool, const KernelConfig& kernels = cpu_kernel_config());

  // Maps <ckpt_dir>/model{rank}-mp{world}.safetensors for comm's rank and world size and binds
  // it to the config (errors name the file and tensor).
  static std::unique_ptr<Transformer> load(const ModelConfig& config, const std::string& ckpt_dir,
                                           Comm& comm, ThreadPool& pool,
                                           const KernelConfig& kernels = cpu_kernel_config());

  // One ragged step (model/step.h): every chunk's tokens at its sequence's next positions,
  // filling the cache and advancing each sequence's length; output.logits [logit_rows, vocab]
  // (gathered over ranks, so every rank holds all of them). A malformed step (a chunk that does
  // not continue its sequence, past its capacity, a sequence twice) is an Error before it runs.
  void forward(const Step& step, KVCache& cache, StepOutput& output);
  // The reference loop's call: tokens [batch, seqlen] (row-major) at positions [start_pos,
  // start_pos + seqlen) of sequences 0 .. batch-1; the last position's logits [batch, vocab].
  void forward(const int32_t* tokens, int batch, int seqlen, int start_pos, KVCache& cache,
               float* logits);

  // Multi-token prediction (model/mtp.cpp; docs/MTP.md). Maps mtp{rank}-mp{world}.safetensors
  // beside the shard (convert --keep-mtp); an Error naming the file when it is missing or does not
  // fit.
  void load_mtp(const std::string& ckpt_dir);
  bool has_mtp() const { return mtp_ != nullptr; }
  // The MTP block's own cache: one layer, budget in positions like the main cache's.
  KVCache make_mtp_cache(int64_t budget_positions, KVDType dtype = KVDType::kF32) const;
  // One ragged step of the MTP module. A chunk's rows are positions i of a sequence (continuing
  // its MTP cache); step.tokens holds t_{i+1} for each row, `hidden` [rows, dim] the main model's
  // final-norm hidden state at i (StepOutput::hidden of a step that asked for every row). Output
  // logits as forward's (each chunk's last row, or all): the draft distributions for t_{i+2}.
  // The embedding of position 0 is zeroed (what the checkpoints were trained with, as vLLM).
  // step.want_logits false: only the cache is filled (no head, no logits). Observers see it as a
  // pass of its own: embedding and eh_proj, the block as layer n_layers, the head.
  void forward_mtp(const Step& step, const float* hidden, KVCache& mtp_cache, StepOutput& output);

  const ModelConfig& config() const { return config_; }
  // The threads the forward pass runs on (idle between steps: the engine uses them then too).
  ThreadPool& pool() const { return pool_; }
  const ShardPlan& plan() const { return plan_; }
  const KernelConfig& kernels() const { return kernels_; }
  const ModelWeights& weights() const { return weights_; }
  // Later forward calls run with `kernels` (bench --golden runs one model exact and fast).
  // int8 mode repacks the weights (once) when first asked for.
  void set_kernels(const KernelConfig& kernels);
  Comm& comm() const { return comm_; }
  // Bytes of weights one decode step reads (attention, dense, shared, the activated experts'
  // share, head) on this rank; for throughput reports.
  int64_t weight_bytes() const;
  // The counts of the last forward call (reset at its start).
  const ForwardStats& stats() const { return counter_.stats(); }
  // The collectives the last forward call (or forward_mtp) made, per kind, on this rank, with
  // those a caller made since through collectives().
  const CollectiveStats& collective_stats() const { return collectives_.stats(); }
  // The model's ranks, counted with the forward pass's collectives (a caller's step-level
  // collectives over the same ranks, such as the vocab-parallel draw's).
  Comm& collectives() { return collectives_; }
  // Observers told of every later forward call (not owned; remove before destroying one).
  void add_observer(ForwardObserver* observer);
  void remove_observer(ForwardObserver* observer);

 private:
  void embed(const int32_t* tokens, int64_t n, float* h);
  void embed_with(const WeightMatrix& table, const int32_t* tokens, int64_t n, float* h);
  void check_step(const Step& step, const KVCache& cache);  // fills positions_
  // RMSNorm of the rows a step wants logits of (each chunk's last, or all) -> last [n_logits, dim];
  // with hidden_rows, of the rows it wants the hidden state of -> [hidden_rows, dim].
  void norm_logit_rows(const Step& step, const float* h, const std::vector<float>& norm,
                       float* last, bool hidden_rows = false) const;
  // Vocab-parallel head over last [n_logits, dim]: output.logits [n_logits, vocab] gathered, or
  // without `gather` this rank's [n_logits, vocab_local].
  void head_logits(const float* last, int64_t n_logits, const WeightMatrix& head, bool gather,
                   StepOutput& output);
  void tensor(const std::string& name, const float* data, int64_t rows, int64_t cols);
  // A pass (forward, forward_mtp): resets the collectives' counts, grows h_, x_, y_ to the step's
  // rows, tells the observers and starts the parts' clock.
  void begin_pass(const Step& step);
  // Tells the observers that `part` (of `layer`, with its weights and a MoE's routing) finished.
  void part_done(ForwardPart part, const Step& step, int layer = -1,
                 const LayerWeights* lw = nullptr, const int* experts = nullptr);
  // One transformer block over the step's rows, in place on the residual stream h_ [n, dim]:
  // h += attn(attn_norm(h)), then h += ffn(ffn_norm(h)). The observers see it as `layer` and its
  // tensors as layers.{layer}.*; the MTP block is layer n_layers (the checkpoints' number), the
  // only layer of its own cache.
  void block_forward(const ForwardContext& ctx, const LayerWeights& lw, int layer, const Step& step,
                     KVCache& cache);
  // The pass's end: `norm` over the rows the step wants (hidden states when asked), `head` over
  // those wanting logits (unless !step.want_logits), reported as the head part.
  void finish_pass(const Step& step, const std::vector<float>& norm, const WeightMatrix& head,
                   StepOutput& output);

  ModelConfig config_;
  ModelWeights weights_;
  ShardPlan plan_;
  Comm& comm_;
  CountingComm collectives_{comm_};  // the forward pass's collectives go through it
  ThreadPool& pool_;
  KernelConfig kernels_;
  Rope rope_;
  Scratch scratch_;
  std::vector<float> h_, x_, y_, last_, logits_local_, gathered_;
  double part_start_ = 0;           // when the part now running began (part_done)
  std::vector<int64_t> positions_;  // each row's absolute position
  std::unique_ptr<MtpWeights> mtp_;
  std::vector<float> mtp_in_;                              // [n, 2 dim] [enorm(e) | hnorm(h)]
  ForwardStatsCounter counter_{config_, weights_, plan_};  // always observing (bench reads it)
  std::vector<ForwardObserver*> observers_;                // counter_ first
  bool observers_want_tensors_ = false;
};

}  // namespace dsinfer
