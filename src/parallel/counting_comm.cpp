#include "parallel/counting_comm.h"

#include <chrono>

namespace dsinfer {

namespace {
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

// A world of one makes no collectives: its calls are the identity and are not counted.
void CountingComm::all_reduce_sum(float* data, int64_t n) {
  if (inner_.world_size() == 1) return inner_.all_reduce_sum(data, n);
  const auto start = std::chrono::steady_clock::now();
  inner_.all_reduce_sum(data, n);
  stats_.all_reduce.add({1, n * static_cast<int64_t>(sizeof(float)), seconds_since(start)});
}

void CountingComm::all_gather(const float* in, int64_t n, float* out) {
  if (inner_.world_size() == 1) return inner_.all_gather(in, n, out);
  const auto start = std::chrono::steady_clock::now();
  inner_.all_gather(in, n, out);
  stats_.all_gather.add({1, n * static_cast<int64_t>(sizeof(float)), seconds_since(start)});
}

}  // namespace dsinfer
