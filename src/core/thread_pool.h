// A persistent pool of worker threads. parallel_for splits [0, n) into one contiguous chunk per
// thread (the caller works too), so layers reuse hot threads instead of spawning per call.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dsinfer {

class ThreadPool {
 public:
  // n_threads counts the calling thread; 0 means default_thread_count().
  explicit ThreadPool(int n_threads = 0);

  // This process's share of the machine: the CPUs it may run on (its affinity mask, which
  // mpirun's binding or taskset narrows), divided among the ranks started on this machine
  // (LOCAL_WORLD_SIZE from torchrun or `dsinfer run`, OMPI_COMM_WORLD_LOCAL_SIZE from mpirun)
  // when the mask is the whole machine, so that ranks on one host do not oversubscribe it.
  static int default_thread_count();
  // The ranks started on this machine, by the launcher's word (1 without one).
  static int local_ranks();
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(begin, end) over disjoint chunks covering [0, n); returns when all are done.
  // Chunks are multiples of `grain` (except the last) so callers can keep blocks whole.
  // If fn throws, the first exception is rethrown here once every chunk has finished.
  // A call from inside fn (nested) runs serially on the calling thread; calls from several
  // outside threads at once take turns.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);

  // A process-wide pool, sized by set_default_threads() or the hardware.
  static ThreadPool& global();
  static void set_default_threads(int n_threads);

 private:
  void worker_loop(int index);
  void stop_workers();  // wakes every worker to return and joins it

  // Runs fn over this thread's chunk, keeping the first exception in error_.
  void run_chunk(const std::function<void(int64_t, int64_t)>& fn, int64_t begin, int64_t end);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex call_mutex_;  // one parallel_for at a time
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_grain_ = 1;
  // Workers and the caller spin briefly on these before sleeping on the condition variables:
  // decode calls parallel_for hundreds of times per token, and a futex wake-up per call would
  // cost more than many of the calls themselves.
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::exception_ptr error_;
};

}  // namespace dsinfer
