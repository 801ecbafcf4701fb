// parallel/placement: CPU lists, the topology read from sysfs (fake trees for machines we do not
// have), the plan of ranks over NUMA nodes and sockets, and binding a real process.
#include "parallel/placement.h"

#include <gtest/gtest.h>
#include <linux/mempolicy.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "core/error.h"
#include "test_support.h"

namespace dsinfer::placement_test {
namespace {

namespace fs = std::filesystem;

TEST(Placement, CpuListsParseAndFormat) {
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11\n", "x"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpu_list("5", "x"), (std::vector<int>{5}));
  EXPECT_EQ(parse_cpu_list("\n", "x"), (std::vector<int>{}));  // a memory-only node
  EXPECT_EQ(format_cpu_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(format_cpu_list({7}), "7");
  for (const char* bad : {"0-", "a", "3-1", "1,,2", "-1", "99999999"}) {
    try {
      parse_cpu_list(bad, "node0/cpulist");
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_CONTAINS(e.what(), "node0/cpulist");
    }
  }
}

TEST(Placement, BindModeNames) {
  EXPECT_EQ(parse_bind_mode("numa"), BindMode::kNuma);
  EXPECT_EQ(parse_bind_mode("socket"), BindMode::kSocket);
  EXPECT_EQ(parse_bind_mode("none"), BindMode::kNone);
  try {
    parse_bind_mode("cores");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_CONTAINS(e.what(), "--bind cores");
  }
}

// A sysfs tree: nodes[i] = cpulist of node i; packages[c] = socket of CPU c.
std::string fake_sysfs(const std::string& name, const std::vector<std::string>& nodes,
                       const std::vector<int>& packages) {
  const std::string root = test::scratch_dir(name);
  const std::string sys = root + "/devices/system";
  fs::create_directories(sys + "/node");
  for (size_t i = 0; i < nodes.size(); ++i) {
    fs::create_directories(sys + "/node/node" + std::to_string(i));
    test::write_file(sys + "/node/node" + std::to_string(i) + "/cpulist", nodes[i] + "\n");
  }
  test::write_file(sys + "/node/online",
                   "0-" + std::to_string(nodes.size() - 1) + "\n");  // not a node
  for (size_t c = 0; c < packages.size(); ++c) {
    fs::create_directories(sys + "/cpu/cpu" + std::to_string(c) + "/topology");
    test::write_file(sys + "/cpu/cpu" + std::to_string(c) + "/topology/physical_package_id",
                     std::to_string(packages[c]));
  }
  test::write_file(sys + "/cpu/online", "0-" + std::to_string(packages.size() - 1) + "\n");
  return root;
}

// Two sockets of two NUMA nodes of four CPUs (an EPYC in NPS2 per socket, scaled down), and a
// memory-only node 4 (CXL) that holds no rank.
Topology two_sockets() {
  return read_topology(fake_sysfs("sysfs-2s", {"0-3", "4-7", "8-11", "12-15", ""},
                                  {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1}));
}

TEST(Placement, ReadsNodesAndSocketsFromSysfs) {
  const Topology t = two_sockets();
  ASSERT_EQ(t.numa_nodes.size(), 4u);
  EXPECT_EQ(t.numa_nodes[2].cpus, (std::vector<int>{8, 9, 10, 11}));
  EXPECT_EQ(t.numa_nodes[2].nodes, (std::vector<int>{2}));
  ASSERT_EQ(t.sockets.size(), 2u);
  EXPECT_EQ(format_cpu_list(t.sockets[1].cpus), "8-15");
  EXPECT_EQ(t.sockets[1].nodes, (std::vector<int>{2, 3}));
  // no node directory (a kernel without NUMA): one node of every online CPU
  const Topology flat = read_topology(test::scratch_dir("sysfs-none"));
  ASSERT_EQ(flat.numa_nodes.size(), 1u);
  EXPECT_FALSE(flat.numa_nodes[0].cpus.empty());
  EXPECT_EQ(flat.sockets.size(), 1u);
}

TEST(Placement, RanksGetWholeDomainsOrSplitOne) {
  const Topology t = two_sockets();
  auto cpus = [](const std::vector<RankPlacement>& plan) {
    std::vector<std::string> out;
    for (const RankPlacement& p : plan)
      out.push_back(format_cpu_list(p.cpus) + " @" + format_cpu_list(p.nodes));
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(cpus(plan_placement(BindMode::kNuma, 4, t)),
            (V{"0-3 @0", "4-7 @1", "8-11 @2", "12-15 @3"}));
  EXPECT_EQ(cpus(plan_placement(BindMode::kNuma, 2, t)), (V{"0-7 @0-1", "8-15 @2-3"}));
  EXPECT_EQ(cpus(plan_placement(BindMode::kNuma, 1, t)), (V{"0-15 @0-3"}));
  // 8 ranks on 4 nodes: two per node, each half of its CPUs (their thread pools do not overlap)
  EXPECT_EQ(
      cpus(plan_placement(BindMode::kNuma, 8, t)),
      (V{"0-1 @0", "2-3 @0", "4-5 @1", "6-7 @1", "8-9 @2", "10-11 @2", "12-13 @3", "14-15 @3"}));
  // 3 ranks on 4 nodes: contiguous blocks of r D / R
  EXPECT_EQ(cpus(plan_placement(BindMode::kNuma, 3, t)), (V{"0-3 @0", "4-7 @1", "8-15 @2-3"}));
  EXPECT_EQ(cpus(plan_placement(BindMode::kSocket, 2, t)), (V{"0-7 @0-1", "8-15 @2-3"}));
  EXPECT_EQ(cpus(plan_placement(BindMode::kSocket, 4, t)),
            (V{"0-3 @0-1", "4-7 @0-1", "8-11 @2-3", "12-15 @2-3"}));
  // more ranks than CPUs in a domain: some share a CPU, none is left without one
  const auto crowded = plan_placement(BindMode::kNuma, 24, t);
  for (const RankPlacement& p : crowded) EXPECT_FALSE(p.cpus.empty());
  EXPECT_EQ(cpus(plan_placement(BindMode::kNone, 4, t)),
            (V{"(none) @(none)", "(none) @(none)", "(none) @(none)", "(none) @(none)"}));
  const std::string log =
      describe_placement(BindMode::kNuma, plan_placement(BindMode::kNuma, 2, t), t);
  EXPECT_CONTAINS(log, "4 NUMA node(s), 2 socket(s)");
  EXPECT_CONTAINS(log, "rank 1: cpus 8-15, memory interleaved over nodes 2-3");
}

TEST(Placement, OneNodeBindsNothing) {
  const Topology t = read_topology(fake_sysfs("sysfs-1n", {"0-1"}, {0, 0}));
  for (BindMode mode : {BindMode::kNuma, BindMode::kSocket}) {
    const auto plan = plan_placement(mode, 2, t);
    ASSERT_EQ(plan.size(), 2u);
    for (const RankPlacement& p : plan) EXPECT_TRUE(p.cpus.empty() && p.nodes.empty());
    EXPECT_CONTAINS(describe_placement(mode, plan, t), "nothing to bind");
  }
}

// On this machine: a child bound to its first CPU and first node has that affinity and a
// preferred-node memory policy.
TEST(Placement, ApplyPinsTheProcessAndPrefersItsNode) {
  const Topology t = read_topology();
  RankPlacement p;
  p.cpus = {t.numa_nodes[0].cpus[0]};
  p.nodes = {t.numa_nodes[0].id};
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (apply_placement(p) != 0) _exit(2);
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) != 1 ||
        !CPU_ISSET(p.cpus[0], &set))
      _exit(3);
    int mode = -1;
    unsigned long mask[16] = {};
    if (syscall(SYS_get_mempolicy, &mode, mask, 1024UL, nullptr, 0UL) != 0) _exit(4);
    if (mode != MPOL_PREFERRED || mask[0] != (1UL << p.nodes[0])) _exit(5);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: apply failed, 3: affinity, 4: get_mempolicy, 5: policy";
}

}  // namespace
}  // namespace dsinfer::placement_test
