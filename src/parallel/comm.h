// The collectives the tensor-parallel forward pass needs (REFERENCE.md section 4). Only the
// world of one exists so far; gloo and MPI backends implement the same interface later.
#pragma once

#include <cstdint>
#include <memory>

namespace dsinfer {

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // In place: data[i] = sum over ranks of data[i].
  virtual void all_reduce_sum(float* data, int64_t n) = 0;
  // out[world_size * n] = concatenation of every rank's in[n], in rank order.
  virtual void all_gather(const float* in, int64_t n, float* out) = 0;
  virtual void barrier() = 0;
};

// World of one: every collective is the identity.
std::unique_ptr<Comm> make_local_comm();

}  // namespace dsinfer
