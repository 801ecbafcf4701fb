#include "core/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <system_error>
#include <utility>

#include "core/error.h"

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

// Tens of microseconds of polling (pause is ~10-140 cycles) before a thread sleeps.
constexpr int kSpinIterations = 2000;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Polls `done` up to kSpinIterations times; true if it became true.
template <typename Pred>
bool spin_until(Pred done) {
  for (int i = 0; i < kSpinIterations; ++i) {
    if (done()) return true;
    cpu_relax();
  }
  return done();
}

// Chunk `index` of `parts` over [0, n), aligned to `grain`.
std::pair<int64_t, int64_t> chunk(int64_t n, int64_t grain, int index, int parts) {
  const int64_t units = (n + grain - 1) / grain;
  const int64_t begin_unit = units * index / parts;
  const int64_t end_unit = units * (index + 1) / parts;
  return {std::min(n, begin_unit * grain), std::min(n, end_unit * grain)};
}
}  // namespace

int ThreadPool::default_thread_count() {
  const int machine = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int allowed = machine;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) allowed = std::max(1, CPU_COUNT(&set));
  if (allowed < machine) return allowed;  // pinned: the launcher already gave this rank its share
  return std::max(1, allowed / local_ranks());
}

int ThreadPool::local_ranks() {
  for (const char* name : {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"})
    if (const char* v = std::getenv(name); v && std::atoi(v) > 0) return std::atoi(v);
  return 1;
}

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = default_thread_count();
  n_threads_ = n_threads;
  try {
    for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
  } catch (const std::system_error& e) {
    // the system refused a thread (memory for its stack, a pids limit): stop the ones started,
    // which wait on members an unwinding constructor would destroy under them
    const size_t started = workers_.size() + 1;
    stop_workers();
    fail("cannot start ", n_threads_, " threads: the system refused the thread after ", started,
         " (", e.what(), "); use --threads ", started, " or fewer, or raise the process's limits");
  }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& worker : workers_) worker.join();
  workers_.clear();
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    auto has_work = [&] {
      return stop_.load(std::memory_order_acquire) ||
             generation_.load(std::memory_order_acquire) != seen;
    };
    if (!spin_until(has_work)) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, has_work);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    // job_ fields were written before the release increment of generation_ that we acquired
    seen = generation_.load(std::memory_order_acquire);
    auto [begin, end] = chunk(job_n_, job_grain_, index, n_threads_);
    if (begin < end) run_chunk(*job_, begin, end);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);
      done_.notify_one();
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
    error_ = nullptr;
    pending_.store(n_threads_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  auto [begin, end] = chunk(n, grain, 0, n_threads_);
  if (begin < end) run_chunk(fn, begin, end);
  // Wait for every worker even when this thread's chunk threw: they still use fn.
  auto all_done = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  std::exception_ptr error;
  {
    if (!spin_until(all_done)) {
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, all_done);
    }
    std::lock_guard<std::mutex> lock(mutex_);
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
