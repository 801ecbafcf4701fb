// dsinfer bench-comm: runs at 1 and 2 ranks on each backend (mpi through mpirun, gloo through
// `dsinfer run --comm gloo`), rank 0 alone prints one table, every number parses and is
// plausible. Speed is never asserted (bench/README.md has the measured latencies).
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <sstream>
#include <tuple>

#include "test_support.h"

namespace dsinfer::bench_comm_test {
namespace {

using test::data_path;

constexpr int kIters = 30;

struct Row {
  std::string what;
  double median = -1, p90 = -1, min = -1, mean = -1;
  int calls = 0;
};

// The result rows of bench-comm's stdout ("<what>  median X us  p90 X us  min X us  mean X us  (N
// calls)").
std::vector<Row> parse_rows(const std::string& out) {
  static const std::regex row(
      R"(^(\S.*?)\s+median\s+([0-9.]+) us\s+p90\s+([0-9.]+) us\s+min\s+([0-9.]+) us\s+mean\s+([0-9.]+) us\s+\((\d+) calls\)$)");
  std::vector<Row> rows;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    rows.push_back({m[1], std::stod(m[2]), std::stod(m[3]), std::stod(m[4]), std::stod(m[5]),
                    std::stoi(m[6])});
  }
  return rows;
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(BenchComm, Help) {
  auto r = test::run_dsinfer("bench-comm --help");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* option : {"--floats", "--gather-floats", "--iters", "--warmup", "--config"})
    EXPECT_CONTAINS(r.out, option);
  EXPECT_CONTAINS(r.out, "median");
}

TEST(BenchComm, OneProcessWithoutLauncher) {
  auto r =
      test::run_dsinfer("--threads 1 bench-comm --iters " + std::to_string(kIters) + " --warmup 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "bench-comm: backend local, world size 1");
  const auto rows = parse_rows(r.out);
  ASSERT_EQ(rows.size(), 3u)
      << r.out;  // all_reduce, all_gather, barrier; no decode step without --config
  for (const Row& row : rows) {
    EXPECT_GE(row.min, 0) << row.what;  // a no-op may take 0.00 us at one process
    EXPECT_EQ(row.calls, kIters) << row.what;
  }
}

class BenchCommRanks : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  void SetUp() override {
    if (std::string why = test::backend_unavailable(std::get<0>(GetParam())); !why.empty())
      GTEST_SKIP() << why;
  }
};

TEST_P(BenchCommRanks, RankZeroPrintsOneTable) {
  const auto& [backend, ranks] = GetParam();
  // tiny-v3's HF config: the decode-step line (its all_reduces and the logits' all_gather) runs too
  const std::string config = data_path("golden/tiny-v3/hf/config.json");
  auto r = test::run_ranks(backend, ranks,
                           "bench-comm --iters " + std::to_string(kIters) +
                               " --warmup 2 --floats 1000 --gather-floats 4000 --config " + config,
                           /*input=*/"", /*timeout_s=*/120);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string header =
      "bench-comm: backend " + backend + ", world size " + std::to_string(ranks) + ",";
  EXPECT_EQ(count_of(r.out, "bench-comm: backend"), 1u) << r.out;  // rank 0 only
  EXPECT_CONTAINS(r.out, header);
  EXPECT_EQ(count_of(r.out, "tokens/s"), 1u) << r.out;

  const auto rows = parse_rows(r.out);
  ASSERT_EQ(rows.size(), 4u) << r.out;
  EXPECT_EQ(rows[0].what, "all_reduce_sum 1000 floats");
  EXPECT_EQ(rows[1].what,
            "all_gather " + std::to_string((4000 + ranks - 1) / ranks) + " floats per rank");
  EXPECT_EQ(rows[2].what, "barrier");
  // 1 + 2 per layer (3 layers), as the model makes them (bench_test.cpp counts the model's)
  EXPECT_EQ(rows[3].what.rfind("decode step: 7 x all_reduce ", 0), 0u) << rows[3].what;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& row = rows[i];
    SCOPED_TRACE(row.what);
    EXPECT_LE(row.min, row.median);
    EXPECT_LE(row.median, row.p90);
    EXPECT_LE(row.min, row.mean);
    EXPECT_EQ(row.calls, i < 3 ? kIters : 10);  // the decode step: at least 10 steps
    if (ranks > 1) {
      EXPECT_GT(row.min, 0);  // a collective between processes takes time
    } else {
      EXPECT_GE(row.min, 0);
    }
  }
  // the tokens/s ceiling is a positive number
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(cap decode at ([0-9.]+) tokens/s)")))
      << r.out;
  EXPECT_GT(std::stod(m[1]), 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, BenchCommRanks,
                         ::testing::Combine(::testing::Values("mpi", "gloo"),
                                            ::testing::Values(1, 2)),
                         [](const auto& info) {
                           return test::backend_test_name(std::get<0>(info.param)) +
                                  std::to_string(std::get<1>(info.param)) +
                                  (std::get<1>(info.param) == 1 ? "Rank" : "Ranks");
                         });

// Every gloo all_reduce algorithm (DSINFER_GLOO_ALLREDUCE) sums right at 2 and 3 ranks (3: not a
// power of two, which halving-doubling and bcube treat specially), at lengths on both sides of
// `auto`'s switch and below the world size (bench-comm checks every sum).
class GlooAllreduceAlgorithms : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  void SetUp() override {
    if (std::string why = test::backend_unavailable("gloo"); !why.empty()) GTEST_SKIP() << why;
  }
};

TEST_P(GlooAllreduceAlgorithms, SumsRightAtEveryLength) {
  const auto& [algorithm, ranks] = GetParam();
  const std::string lengths = "1,2,1000,65536,65537,200000";
  auto r = test::run_command("DSINFER_GLOO_ALLREDUCE=" + algorithm + " timeout 120 " + DSINFER_BIN +
                             " --threads 1 run -n " + std::to_string(ranks) +
                             " --comm gloo bench-comm --iters 3 --warmup 1 --floats " + lengths);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto rows = parse_rows(r.out);
  ASSERT_EQ(rows.size(), 8u) << r.out;  // six lengths, all_gather, barrier
  EXPECT_EQ(rows[0].what, "all_reduce_sum 1 floats");
  EXPECT_EQ(rows[5].what, "all_reduce_sum 200000 floats");
}

INSTANTIATE_TEST_SUITE_P(Gloo, GlooAllreduceAlgorithms,
                         ::testing::Combine(::testing::Values("auto", "ring", "bcube",
                                                              "halving-doubling", "ring-chunked"),
                                            ::testing::Values(2, 3)),
                         [](const auto& info) {
                           std::string name = std::get<0>(info.param);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name + std::to_string(std::get<1>(info.param)) + "Ranks";
                         });

TEST(GlooAllreduceAlgorithms, UnknownNameIsOneClearError) {
  if (std::string why = test::backend_unavailable("gloo"); !why.empty()) GTEST_SKIP() << why;
  auto r = test::run_command("DSINFER_GLOO_ALLREDUCE=tree timeout 60 " + std::string(DSINFER_BIN) +
                             " --threads 1 run -n 2 --comm gloo bench-comm --iters 1 --warmup 0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_CONTAINS(r.err,
                  "DSINFER_GLOO_ALLREDUCE=tree is not one of auto, ring, bcube, halving-doubling, "
                  "ring-chunked");
}

}  // namespace
}  // namespace dsinfer::bench_comm_test
