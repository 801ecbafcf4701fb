#include "core/thread_pool.h"

#include <algorithm>
#include <memory>
#include <utility>

namespace dsinfer {

namespace {
int g_default_threads = 0;
// Set while this thread runs a chunk of some pool's job: a parallel_for from inside a job
// must not hand work to the (busy) workers, or it would overwrite the running job.
thread_local bool t_in_job = false;

struct InJob {
  bool saved = t_in_job;
  InJob() { t_in_job = true; }
  ~InJob() { t_in_job = saved; }
};

// Chunk `index` of `parts` over [0, n), aligned to `grain`.
std::pair<int64_t, int64_t> chunk(int64_t n, int64_t grain, int index, int parts) {
  const int64_t units = (n + grain - 1) / grain;
  const int64_t begin_unit = units * index / parts;
  const int64_t end_unit = units * (index + 1) / parts;
  return {std::min(n, begin_unit * grain), std::min(n, end_unit * grain)};
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0)
    n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t)>* job;
    int64_t n, grain;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = job_n_;
      grain = job_grain_;
    }
    auto [begin, end] = chunk(n, grain, index, n_threads_);
    if (begin < end) run_chunk(*job, begin, end);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }
}

void ThreadPool::run_chunk(const std::function<void(int64_t, int64_t)>& fn, int64_t begin,
                           int64_t end) {
  InJob in_job;
  try {
    fn(begin, end);
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_) error_ = std::current_exception();
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                              int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (n_threads_ == 1 || n <= grain || t_in_job) {
    fn(0, n);  // the workers stay idle (or busy with the job that called us)
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    job_grain_ = grain;
    pending_ = n_threads_ - 1;
    error_ = nullptr;
    ++generation_;
  }
  wake_.notify_all();
  auto [begin, end] = chunk(n, grain, 0, n_threads_);
  if (begin < end) run_chunk(fn, begin, end);
  std::exception_ptr error;
  {
    // Wait for every worker even when this thread's chunk threw: they still use fn.
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
    error = std::exchange(error_, nullptr);
  }
  if (error) std::rethrow_exception(error);
}

void ThreadPool::set_default_threads(int n_threads) { g_default_threads = n_threads; }

ThreadPool& ThreadPool::global() {
  static ThreadPool pool(g_default_threads);
  return pool;
}

}  // namespace dsinfer
