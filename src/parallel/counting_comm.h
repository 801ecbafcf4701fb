// A Comm that forwards to another and counts the collectives of the forward pass (calls, bytes,
// seconds per kind), so a decode step's communication is a number `dsinfer bench` can show and a
// test can assert (issue 15: 182 collectives per V3 decode step before the MoE merge).
#pragma once

#include <cstdint>

#include "parallel/comm.h"

namespace dsinfer {

struct CollectiveCount {
  int64_t calls = 0;
  int64_t bytes = 0;   // of one rank's data: n floats x 4 (all_gather: its own part)
  double seconds = 0;  // wall time inside the calls, this rank
  void add(const CollectiveCount& o) {
    calls += o.calls;
    bytes += o.bytes;
    seconds += o.seconds;
  }
};

struct CollectiveStats {
  CollectiveCount all_reduce, all_gather;
  int64_t calls() const { return all_reduce.calls + all_gather.calls; }
  double seconds() const { return all_reduce.seconds + all_gather.seconds; }
  void add(const CollectiveStats& o) {
    all_reduce.add(o.all_reduce);
    all_gather.add(o.all_gather);
  }
};

class CountingComm final : public Comm {
 public:
  explicit CountingComm(Comm& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  const char* name() const override { return inner_.name(); }
  void all_reduce_sum(float* data, int64_t n) override;
  void all_gather(const float* in, int64_t n, float* out) override;
  // Not counted: they carry commands and checks, not the forward pass's activations.
  void broadcast(std::string& bytes, int root) override { inner_.broadcast(bytes, root); }
  void barrier() override { inner_.barrier(); }
  std::vector<std::string> all_gather_bytes(const std::string& mine) override {
    return inner_.all_gather_bytes(mine);
  }
  void expect_agreed_failure() override { inner_.expect_agreed_failure(); }

  const CollectiveStats& stats() const { return stats_; }
  void reset() { stats_ = {}; }

 private:
  Comm& inner_;
  CollectiveStats stats_;
};

}  // namespace dsinfer
