// Watching a forward call without weaving bookkeeping through the layer loop: the transformer
// tells each observer when a part of the pass has finished (with what it needs to count that
// part) and, to observers that ask for them, hands over named intermediate tensors. Two ship with
// the model: ForwardStatsCounter (bytes, multiply-adds and time per part, for `dsinfer bench`)
// and TensorDump (named intermediates to a safetensors file, for `dsinfer eval --dump`).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/layers.h"
#include "model/shard_plan.h"
#include "model/step.h"
#include "model/weights.h"

namespace dsinfer {

enum class ForwardPart { kAttention, kDenseMlp, kMoe, kHead, kOther, kCount };
const char* forward_part_name(ForwardPart part);

// One finished part of a forward call.
struct ForwardEvent {
  ForwardPart part;
  int layer = -1;      // -1 outside the layers (embedding, head)
  double seconds = 0;  // wall time of the part
  const Step* step = nullptr;
  const LayerWeights* weights = nullptr;  // the layer's, for attention / MLP / MoE parts
  const int* experts = nullptr;           // MoE: every row's chosen experts [rows, n_activated]
};

class ForwardObserver {
 public:
  virtual ~ForwardObserver() = default;
  virtual void begin(const Step& step) {}
  virtual void part_done(const ForwardEvent& event) {}
  // Whether tensor() should be called (copying intermediates costs time; only dumps ask).
  virtual bool wants_tensors() const { return false; }
  // `name` (e.g. "layers.3.ffn_out") [rows, cols], valid during the call.
  virtual void tensor(const std::string& name, const float* data, int64_t rows, int64_t cols) {}
};

struct PartStats {
  double seconds = 0;
  int64_t weight_bytes = 0;
  int64_t macs = 0;
};

// What one forward call did on this rank, counted as it ran: the bytes of weights it read (every
// matrix it used once per call, as the kernels stream them: attention, dense and shared MLPs, the
// router, each routed expert that some token of the call chose, the head, and one embedding row
// per token of this rank's vocabulary block) and the multiply-adds of its matrix products and of
// attention (scores and values over the cache, absorbed wkv_b); per part of the model, with the
// wall time that part took (where the time goes).
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

class ForwardStatsCounter : public ForwardObserver {
 public:
  ForwardStatsCounter(const ModelConfig& config, const ModelWeights& weights, const ShardPlan& plan)
      : config_(config), weights_(weights), plan_(plan) {}
  void begin(const Step& step) override;
  void part_done(const ForwardEvent& event) override;
  const ForwardStats& stats() const { return stats_; }

 private:
  const ModelConfig& config_;
  const ModelWeights& weights_;
  const ShardPlan& plan_;
  ForwardStats stats_;
  std::vector<int64_t> expert_tokens_;  // per local expert, tokens routed to it
};

// Keeps every named intermediate of the last forward call (rows as the step holds them) and
// writes them to a safetensors file (F32, shape [rows, cols]).
class TensorDump : public ForwardObserver {
 public:
  void begin(const Step& step) override { tensors_.clear(); }
  bool wants_tensors() const override { return true; }
  void tensor(const std::string& name, const float* data, int64_t rows, int64_t cols) override;
  void write(const std::string& path) const;
  size_t size() const { return tensors_.size(); }
  // The rows of one intermediate, or null when the last call had none of that name.
  const std::vector<float>* find(const std::string& name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second.data;
  }

 private:
  struct Tensor {
    int64_t rows, cols;
    std::vector<float> data;
  };
  std::map<std::string, Tensor> tensors_;
};

}  // namespace dsinfer
