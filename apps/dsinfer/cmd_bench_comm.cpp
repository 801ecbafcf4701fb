// dsinfer bench-comm: latency of the collectives the tensor-parallel forward pass makes, on
// whatever backend this process was started with (mpirun, torchrun-style environment, `dsinfer
// run -n N --comm ...`). A benchmark, not a test: every rank runs the same loops; rank 0 prints
// median / p90 / min microseconds per call (its own clock, each call timed separately after a
// barrier and a warm-up). With --config it also times one decode step's worth of collectives of
// that model (batch 1): the embedding, attention and feed-forward all_reduces and the logits
// all_gather, so the cost can be set against decode tokens/s.
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <vector>

#include "comm/backends.h"
#include "commands.h"
#include "core/error.h"
#include "core/log.h"
#include "model/config.h"

namespace dsinfer::cli {

namespace {

struct BenchCommOptions {
  std::vector<int64_t> reduce_floats = {7168};  // V3's dim
  int64_t gather_floats = 129280;               // V3's vocabulary, split over the ranks
  int iters = 2000;
  int warmup = 200;
  std::string config_path;
};

struct Stats {
  double median_us = 0, p90_us = 0, min_us = 0, mean_us = 0;
};

Stats summarize(std::vector<double> us) {
  Stats s;
  if (us.empty()) return s;
  std::sort(us.begin(), us.end());
  s.min_us = us.front();
  const size_t mid = us.size() / 2;
  s.median_us = us.size() % 2 ? us[mid] : (us[mid - 1] + us[mid]) / 2;
  s.p90_us = us[std::min(us.size() - 1, us.size() * 9 / 10)];
  s.mean_us = std::accumulate(us.begin(), us.end(), 0.0) / static_cast<double>(us.size());
  return s;
}

// Times `iters` calls of body after `warmup` untimed ones; a barrier first so that every rank
// starts together.
template <class F>
Stats time_calls(Comm& comm, int warmup, int iters, F&& body) {
  for (int i = 0; i < warmup; ++i) body();
  comm.barrier();
  std::vector<double> us;
  us.reserve(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    const double t0 = now_seconds();
    body();
    us.push_back((now_seconds() - t0) * 1e6);
  }
  return summarize(std::move(us));
}

void print_line(const Comm& comm, const std::string& what, const Stats& s, int iters) {
  if (comm.rank() != 0) return;
  std::printf("%-52s median %10.2f us  p90 %10.2f us  min %10.2f us  mean %10.2f us  (%d calls)\n",
              what.c_str(), s.median_us, s.p90_us, s.min_us, s.mean_us, iters);
  std::fflush(stdout);
}

void run_bench_comm(const BenchCommOptions& o) {
  ModelConfig config;
  if (!o.config_path.empty()) config = load_config(o.config_path);
  auto comm = make_comm();
  const int world = comm->world_size(), rank = comm->rank();
  if (rank == 0) {
    std::printf("bench-comm: backend %s, world size %d, %d warm-up + %d timed calls each\n",
                comm->name(), world, o.warmup, o.iters);
    std::fflush(stdout);
  }

  // all_reduce_sum at each length; each result is checked once (every rank contributes rank + 1)
  for (const int64_t floats : o.reduce_floats) {
    std::vector<float> buf(static_cast<size_t>(floats));
    std::fill(buf.begin(), buf.end(), static_cast<float>(rank + 1));
    comm->all_reduce_sum(buf.data(), floats);
    const float want = static_cast<float>(world) * static_cast<float>(world + 1) / 2;
    check(std::all_of(buf.begin(), buf.end(), [&](float v) { return v == want; }),
          "bench-comm: all_reduce_sum of ", floats, " floats gave a wrong sum on rank ", rank);
    const Stats s =
        time_calls(*comm, o.warmup, o.iters, [&] { comm->all_reduce_sum(buf.data(), floats); });
    print_line(*comm, "all_reduce_sum " + std::to_string(floats) + " floats", s, o.iters);
  }

  // all_gather of a vocabulary split over the ranks
  const int64_t per_rank = (o.gather_floats + world - 1) / world;
  std::vector<float> in(static_cast<size_t>(per_rank), static_cast<float>(rank));
  std::vector<float> out(static_cast<size_t>(per_rank * world));
  Stats s = time_calls(*comm, o.warmup, o.iters,
                       [&] { comm->all_gather(in.data(), per_rank, out.data()); });
  for (int r = 0; r < world; ++r)
    check(out[static_cast<size_t>(r * per_rank)] == static_cast<float>(r),
          "bench-comm: all_gather misplaced rank ", r, "'s block on rank ", rank);
  print_line(*comm, "all_gather " + std::to_string(per_rank) + " floats per rank", s, o.iters);

  s = time_calls(*comm, o.warmup, o.iters, [&] { comm->barrier(); });
  print_line(*comm, "barrier", s, o.iters);

  if (o.config_path.empty()) return;
  // One decode step of batch 1 (transformer.cpp, attention.cpp, moe.cpp): the embedding's
  // all_reduce, per layer one after wo and one after the dense MLP or the MoE (its routed and
  // shared experts' partial sums reduced together); then the head's all_gather. `dsinfer bench`
  // counts what the model really makes (its collectives table); tests/bench_test.cpp checks both.
  const int reduces = 1 + 2 * config.n_layers;
  const int64_t dim = config.dim;
  const int64_t vocab_local = config.vocab_size / world;
  std::vector<float> h(static_cast<size_t>(dim), 1.0f);
  std::vector<float> logits_local(static_cast<size_t>(vocab_local), 0.0f);
  std::vector<float> logits(static_cast<size_t>(vocab_local * world));
  // as many all_reduces as the single collectives above, but at least 10 steps (a median of one
  // or two steps says little)
  const int steps = std::max(10, o.iters / reduces);
  s = time_calls(*comm, std::max(1, o.warmup / reduces), steps, [&] {
    for (int i = 0; i < reduces; ++i) comm->all_reduce_sum(h.data(), dim);
    comm->all_gather(logits_local.data(), vocab_local, logits.data());
  });
  print_line(*comm,
             "decode step: " + std::to_string(reduces) + " x all_reduce " + std::to_string(dim) +
                 " + gather " + std::to_string(vocab_local),
             s, steps);
  if (rank == 0) {
    std::printf("  => collectives alone cap decode at %.1f tokens/s (batch 1, median)\n",
                1e6 / s.median_us);
    std::fflush(stdout);
  }
}

}  // namespace

Command register_bench_comm(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("bench-comm",
                                     "benchmark: latency of all_reduce_sum / all_gather / barrier "
                                     "on the backend this process was started "
                                     "with (e.g. `dsinfer run -n 2 --comm gloo bench-comm`); rank "
                                     "0 prints median/p90 microseconds");
  auto o = std::make_shared<BenchCommOptions>();
  sub->add_option("--floats", o->reduce_floats,
                  "all_reduce_sum vector lengths, comma-separated (default 7168, V3's dim; a "
                  "decode step of batch B "
                  "reduces B x 7168, a prefill of T tokens T x 7168)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  sub->add_option("--gather-floats", o->gather_floats,
                  "all_gather total length, split over the ranks (default 129280, V3's vocabulary)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  sub->add_option("--iters", o->iters,
                  "timed calls per collective (default 2000; the --config decode step gets as many "
                  "all_reduces, "
                  "at least 10 steps)")
      ->check(CLI::Range(1, 10000000));
  sub->add_option("--warmup", o->warmup, "untimed calls first (default 200)")
      ->check(CLI::Range(0, 10000000));
  sub->add_option(
      "--config", o->config_path,
      "also time one batch-1 decode step's collectives of this model config (configs/*.json or HF "
      "config.json)");
  return {sub, [o] { run_bench_comm(*o); }};
}

}  // namespace dsinfer::cli
