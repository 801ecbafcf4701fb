#include "core/thread_pool.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace dsinfer::thread_pool_test {
namespace {

struct Chunk {
  int64_t begin, end;
  std::thread::id thread;
};

// Runs one parallel_for and checks its contract: every index in [0, n) exactly once, chunks
// contiguous and non-empty, every boundary a multiple of grain, at most pool.size() chunks.
void check_cover(ThreadPool& pool, int64_t n, int64_t grain) {
  SCOPED_TRACE(testing::Message() << "threads " << pool.size() << " n " << n << " grain " << grain);
  std::vector<std::atomic<int>> hits(static_cast<size_t>(std::max<int64_t>(n, 0)));
  std::mutex mutex;
  std::vector<Chunk> chunks;
  pool.parallel_for(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
        std::lock_guard<std::mutex> lock(mutex);
        chunks.push_back({begin, end, std::this_thread::get_id()});
      },
      grain);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "index " << i;
  if (n <= 0) {
    EXPECT_TRUE(chunks.empty());
    return;
  }
  EXPECT_LE(chunks.size(), static_cast<size_t>(pool.size()));
  std::sort(chunks.begin(), chunks.end(),
            [](const Chunk& a, const Chunk& b) { return a.begin < b.begin; });
  std::set<std::thread::id> threads;
  int64_t expect_begin = 0;
  const int64_t g = std::max<int64_t>(grain, 1);
  for (const Chunk& c : chunks) {
    EXPECT_EQ(c.begin, expect_begin);
    EXPECT_LT(c.begin, c.end);
    EXPECT_EQ(c.begin % g, 0) << c.begin;
    if (c.end != n) {
      EXPECT_EQ(c.end % g, 0) << c.end;
    }
    EXPECT_TRUE(threads.insert(c.thread).second) << "two chunks on one thread";
    expect_begin = c.end;
  }
  EXPECT_EQ(expect_begin, n);
}

TEST(ThreadPool, CoversEachIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 2, 3, 5, 7, 8, 15, 16, 17, 31, 100, 127, 128, 129, 1000, 4097})
      for (int64_t grain : {1, 2, 3, 16, 128, 1000}) check_cover(pool, n, grain);
  }
}

TEST(ThreadPool, RandomSizesAndGrains) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<int64_t> size(0, 5000);
  std::uniform_int_distribution<int64_t> grain(0, 300);  // 0 means 1
  for (int threads : {2, 3, 8}) {
    ThreadPool pool(threads);
    for (int i = 0; i < 60; ++i) check_cover(pool, size(rng), grain(rng));
  }
}

TEST(ThreadPool, NegativeOrZeroNCallsNothing) {
  ThreadPool pool(3);
  int calls = 0;
  pool.parallel_for(0, [&](int64_t, int64_t) { ++calls; });
  pool.parallel_for(-5, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(ThreadPool, FewerItemsThanThreads) {
  ThreadPool pool(8);
  for (int64_t n = 1; n < 8; ++n) check_cover(pool, n, 1);
  // n = 3 over 8 threads: three chunks of one index each.
  std::atomic<int> calls{0};
  pool.parallel_for(3, [&](int64_t b, int64_t e) {
    EXPECT_EQ(e - b, 1);
    ++calls;
  });
  EXPECT_EQ(calls.load(), 3);
}

TEST(ThreadPool, WorkIsSpreadOverThreads) {
  ThreadPool pool(4);
  std::mutex mutex;
  std::set<std::thread::id> seen;
  pool.parallel_for(4, [&](int64_t, int64_t) {
    std::lock_guard<std::mutex> lock(mutex);
    seen.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(seen.size(), 4u);
  EXPECT_TRUE(seen.count(std::this_thread::get_id())) << "the caller works too";
}

TEST(ThreadPool, RepeatedCallsReuseThePool) {
  ThreadPool pool(3);
  std::vector<int64_t> sums;
  for (int rep = 0; rep < 2000; ++rep) {
    const int64_t n = 1 + rep % 97;
    std::atomic<int64_t> sum{0};
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sum += i;
    });
    ASSERT_EQ(sum.load(), n * (n - 1) / 2) << rep;
  }
}

TEST(ThreadPool, ExceptionsReachTheCallerAfterAllChunksFinish) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t thrower : {int64_t{0}, int64_t{50}, int64_t{99}}) {
      std::atomic<int> finished{0};
      EXPECT_THROW(pool.parallel_for(100,
                                     [&](int64_t b, int64_t e) {
                                       if (b <= thrower && thrower < e)
                                         throw std::runtime_error("boom");
                                       std::this_thread::sleep_for(std::chrono::milliseconds(2));
                                       ++finished;
                                     }),
                   std::runtime_error);
      // Every chunk but the throwing one ran to its end before parallel_for returned.
      EXPECT_EQ(finished.load(), std::min<int>(threads, 100) - 1) << threads << " " << thrower;
      check_cover(pool, 100, 1);  // the pool still works
    }
  }
}

TEST(ThreadPool, NestedCallsRunSerially) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> hits(64 * 50);
  pool.parallel_for(64, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      pool.parallel_for(50, [&](int64_t ib, int64_t ie) {
        for (int64_t j = ib; j < ie; ++j) hits[static_cast<size_t>(i * 50 + j)].fetch_add(1);
      });
  });
  for (size_t k = 0; k < hits.size(); ++k) ASSERT_EQ(hits[k].load(), 1) << k;
}

TEST(ThreadPool, CallsFromSeveralThreadsTakeTurns) {
  ThreadPool pool(3);
  std::vector<std::thread> callers;
  std::atomic<int> bad{0};
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&, c] {
      for (int rep = 0; rep < 300; ++rep) {
        const int64_t n = 10 + (rep * 7 + c) % 90;
        std::atomic<int64_t> sum{0};
        pool.parallel_for(n, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) sum += i;
        });
        if (sum.load() != n * (n - 1) / 2) ++bad;
      }
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(ThreadPool, GlobalPoolWorks) {
  ThreadPool& pool = ThreadPool::global();
  EXPECT_GE(pool.size(), 1);
  EXPECT_EQ(&pool, &ThreadPool::global());
  check_cover(pool, 1000, 16);
}

// The default share: all allowed CPUs for one rank, split among the ranks of this machine, and
// the affinity mask alone once a launcher pinned the process.
TEST(ThreadPool, DefaultThreadCountSharesTheMachineAmongLocalRanks) {
  unsetenv("LOCAL_WORLD_SIZE");
  unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
  const int allowed = CPU_COUNT(&all);
  EXPECT_EQ(ThreadPool::default_thread_count(), allowed);
  EXPECT_EQ(ThreadPool(0).size(), allowed);
  if (allowed == static_cast<int>(std::thread::hardware_concurrency())) {
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    EXPECT_EQ(ThreadPool::default_thread_count(), std::max(1, allowed / 2));
    unsetenv("LOCAL_WORLD_SIZE");
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "1000", 1);
    EXPECT_EQ(ThreadPool::default_thread_count(), 1);  // never below one
    unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  }
  if (allowed > 1) {  // pinned to one CPU: that CPU, whatever the rank count
    cpu_set_t one;
    CPU_ZERO(&one);
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &all)) {
        CPU_SET(cpu, &one);
        break;
      }
    ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
    setenv("LOCAL_WORLD_SIZE", "4", 1);
    EXPECT_EQ(ThreadPool::default_thread_count(), 1);
    unsetenv("LOCAL_WORLD_SIZE");
    ASSERT_EQ(sched_setaffinity(0, sizeof all, &all), 0);
  }
}

}  // namespace
}  // namespace dsinfer::thread_pool_test
