// The collectives the tensor-parallel forward pass needs (docs/REFERENCE.md section 4), plus a byte
// broadcast for rank 0's input (prompts, commands) and a byte all-gather for the ranks' check that
// they loaded the same model. Here: the interface and the world of one; the real backends (mpi,
// gloo) and the choice between them are comm/backends.h, linked only by what launches ranks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"

namespace dsinfer {

// A failed collective: the ranks can no longer agree, so callers must not carry on after it.
class CommError : public Error {
 public:
  using Error::Error;
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // The backend's name ("local", "mpi"), for logs.
  virtual const char* name() const = 0;
  // In place: data[i] = sum over ranks of data[i].
  virtual void all_reduce_sum(float* data, int64_t n) = 0;
  // out[world_size * n] = concatenation of every rank's in[n], in rank order.
  virtual void all_gather(const float* in, int64_t n, float* out) = 0;
  // Every rank's `bytes` becomes root's `bytes` (any length, binary safe). Paced by rank 0's
  // input (a person typing), so backends with timeouts do not time it out.
  virtual void broadcast(std::string& bytes, int root) = 0;
  virtual void barrier() = 0;
  // Every rank's `mine`, in rank order (small, once-per-run exchanges). The default broadcasts
  // each rank's bytes in turn.
  virtual std::vector<std::string> all_gather_bytes(const std::string& mine);
  // Every rank reached the same error from a collective that completed (check_ranks_agree's) and
  // is about to throw it: this rank's exit is then no death for its peers to report, so a slower
  // peer still finishes the collective and fails with that error, not with "lost its connection"
  // (gloo: the peer watch says goodbye). Default: nothing to do.
  virtual void expect_agreed_failure() {}
};

// World of one: every collective is the identity.
std::unique_ptr<Comm> make_local_comm();

// This machine's name (for messages that say which rank ran where); "?" when unknown.
std::string host_name();

}  // namespace dsinfer
