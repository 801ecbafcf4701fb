// Where the local launcher's ranks run (`dsinfer run -n N --bind numa|socket|none`): each rank
// pinned to the CPUs of one NUMA node or socket, and its memory (the shard's pages it faults in,
// its buffers) preferred on that node, so a rank reads its weights from local memory. Read from
// sysfs (/sys/devices/system); a machine with one node or socket binds nothing.
#pragma once

#include <string>
#include <vector>

namespace dsinfer {

enum class BindMode { kNone, kNuma, kSocket };

// "none", "numa", "socket"; anything else is an Error naming the value.
BindMode parse_bind_mode(const std::string& name);
const char* bind_mode_name(BindMode mode);

// "0-3,8,10-11" -> {0, 1, 2, 3, 8, 10, 11}; an Error naming `origin` for anything malformed.
std::vector<int> parse_cpu_list(const std::string& text, const std::string& origin);
// {0, 1, 2, 3, 8} -> "0-3,8"
std::string format_cpu_list(const std::vector<int>& cpus);

// One place a rank can be bound to: a NUMA node, or a socket with the nodes its CPUs belong to.
struct Domain {
  int id = 0;
  std::vector<int> cpus;   // online CPUs, ascending
  std::vector<int> nodes;  // NUMA nodes of its memory, ascending
};

struct Topology {
  std::vector<Domain>
      numa_nodes;               // at least one (a kernel without NUMA: node 0 = every online CPU)
  std::vector<Domain> sockets;  // at least one
  const std::vector<Domain>& domains(BindMode mode) const {
    return mode == BindMode::kSocket ? sockets : numa_nodes;
  }
};

// Reads <sysfs>/devices/system/{node,cpu}; sysfs is "/sys" but for tests.
Topology read_topology(const std::string& sysfs = "/sys");

// What one rank gets; empty cpus = not bound (run where the kernel puts it).
struct RankPlacement {
  std::vector<int> cpus;
  std::vector<int> nodes;  // memory: preferred (one node) or interleaved (several)
};

// Ranks over the domains of `mode`, in order, contiguous: with R ranks and D domains, rank r gets
// domains [r D / R, (r + 1) D / R) when R <= D; when R > D, ranks r with the same r D / R share
// that domain and split its CPUs evenly (so their thread pools do not overlap). kNone, or a
// machine with one domain: nothing bound.
std::vector<RankPlacement> plan_placement(BindMode mode, int ranks, const Topology& topology);

// One line per rank for the launcher's log: "rank 0: cpus 0-7, memory node 0".
std::string describe_placement(BindMode mode, const std::vector<RankPlacement>& plan,
                               const Topology& topology);

// In a rank's process before exec (async-signal-safe enough for a fork child: no allocation):
// pins the calling thread (and so what it execs) and sets its memory policy. Returns 0 or an errno.
int apply_placement(const RankPlacement& placement);

}  // namespace dsinfer
