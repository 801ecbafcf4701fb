#include "parallel/placement.h"

#include <dirent.h>
#include <linux/mempolicy.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.h"

namespace dsinfer {

BindMode parse_bind_mode(const std::string& name) {
  if (name == "none") return BindMode::kNone;
  if (name == "numa") return BindMode::kNuma;
  if (name == "socket") return BindMode::kSocket;
  fail("--bind ", name, " is not one of numa, socket, none");
}

const char* bind_mode_name(BindMode mode) {
  switch (mode) {
    case BindMode::kNuma:
      return "numa";
    case BindMode::kSocket:
      return "socket";
    case BindMode::kNone:
      break;
  }
  return "none";
}

std::vector<int> parse_cpu_list(const std::string& text, const std::string& origin) {
  std::vector<int> out;
  std::string s = text;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  if (s.empty()) return out;
  std::stringstream parts(s);
  std::string part;
  auto number = [&](const std::string& t) {
    char* end = nullptr;
    const long v = std::strtol(t.c_str(), &end, 10);
    check(!t.empty() && end && *end == '\0' && v >= 0 && v < 65536, origin, ": \"", text,
          "\" is not a CPU list");
    return static_cast<int>(v);
  };
  while (std::getline(parts, part, ',')) {
    const size_t dash = part.find('-');
    const int first = number(part.substr(0, dash));
    const int last = dash == std::string::npos ? first : number(part.substr(dash + 1));
    check(first <= last, origin, ": \"", text, "\" is not a CPU list");
    for (int c = first; c <= last; ++c) out.push_back(c);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out.empty() ? "(none)" : out;
}

namespace {

bool read_text(const std::string& path, std::string& out) {
  std::ifstream f(path);
  if (!f) return false;
  std::ostringstream s;
  s << f.rdbuf();
  out = s.str();
  return true;
}

// The numbers n of the entries <prefix>n in a directory, ascending.
std::vector<int> numbered_entries(const std::string& dir, const std::string& prefix) {
  std::vector<int> out;
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos) continue;
    out.push_back(std::atoi(digits.c_str()));
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

Topology read_topology(const std::string& sysfs) {
  const std::string cpu_dir = sysfs + "/devices/system/cpu",
                    node_dir = sysfs + "/devices/system/node";
  std::string text;
  std::vector<int> online;
  if (read_text(cpu_dir + "/online", text)) online = parse_cpu_list(text, cpu_dir + "/online");
  if (online.empty())
    for (int c = 0, n = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)); c < std::max(1, n); ++c)
      online.push_back(c);
  auto is_online = [&](int c) { return std::binary_search(online.begin(), online.end(), c); };

  Topology t;
  std::map<int, int> node_of_cpu;
  for (int node : numbered_entries(node_dir, "node")) {
    const std::string path = node_dir + "/node" + std::to_string(node) + "/cpulist";
    if (!read_text(path, text)) continue;
    Domain d;
    d.id = node;
    d.nodes = {node};
    for (int c : parse_cpu_list(text, path))
      if (is_online(c)) d.cpus.push_back(c), node_of_cpu[c] = node;
    if (!d.cpus.empty()) t.numa_nodes.push_back(d);  // memory-only nodes (CXL, HBM) hold no rank
  }
  if (t.numa_nodes.empty()) t.numa_nodes.push_back({0, online, {0}});

  std::map<int, Domain> sockets;
  for (int c : online) {
    int package = 0;
    if (read_text(cpu_dir + "/cpu" + std::to_string(c) + "/topology/physical_package_id", text))
      package = std::max(0, std::atoi(text.c_str()));
    Domain& d = sockets[package];
    d.id = package;
    d.cpus.push_back(c);
    const auto node = node_of_cpu.find(c);
    const int n = node == node_of_cpu.end() ? 0 : node->second;
    if (std::find(d.nodes.begin(), d.nodes.end(), n) == d.nodes.end()) d.nodes.push_back(n);
  }
  for (auto& [id, d] : sockets) {
    std::sort(d.nodes.begin(), d.nodes.end());
    t.sockets.push_back(d);
  }
  return t;
}

std::vector<RankPlacement> plan_placement(BindMode mode, int ranks, const Topology& topology) {
  check(ranks >= 1, "placement: ranks must be >= 1");
  std::vector<RankPlacement> plan(static_cast<size_t>(ranks));
  const std::vector<Domain>& domains = topology.domains(mode);
  const int D = static_cast<int>(domains.size());
  if (mode == BindMode::kNone || D <= 1) return plan;
  for (int r = 0; r < ranks; ++r) {
    RankPlacement& p = plan[static_cast<size_t>(r)];
    if (ranks <= D) {
      for (int d = r * D / ranks; d < (r + 1) * D / ranks; ++d) {
        p.cpus.insert(p.cpus.end(), domains[d].cpus.begin(), domains[d].cpus.end());
        p.nodes.insert(p.nodes.end(), domains[d].nodes.begin(), domains[d].nodes.end());
      }
    } else {
      // the ranks sharing domain d: r0 .. r1 - 1 (those with r D / R == d)
      const int d = r * D / ranks;
      int r0 = r, r1 = r + 1;
      while (r0 > 0 && (r0 - 1) * D / ranks == d) --r0;
      while (r1 < ranks && r1 * D / ranks == d) ++r1;
      const std::vector<int>& cpus = domains[d].cpus;
      const int share = r1 - r0, k = r - r0, n = static_cast<int>(cpus.size());
      // more ranks than CPUs in the domain: several ranks on a CPU rather than none
      const int begin = std::min(k * n / share, n - 1),
                end = std::max(begin + 1, (k + 1) * n / share);
      p.cpus.assign(cpus.begin() + begin, cpus.begin() + end);
      p.nodes = domains[d].nodes;
    }
    std::sort(p.cpus.begin(), p.cpus.end());
    std::sort(p.nodes.begin(), p.nodes.end());
    p.nodes.erase(std::unique(p.nodes.begin(), p.nodes.end()), p.nodes.end());
  }
  return plan;
}

std::string describe_placement(BindMode mode, const std::vector<RankPlacement>& plan,
                               const Topology& topology) {
  const size_t D = topology.domains(mode).size();
  std::string out = std::string("--bind ") + bind_mode_name(mode) + ": " +
                    std::to_string(topology.numa_nodes.size()) + " NUMA node(s), " +
                    std::to_string(topology.sockets.size()) + " socket(s)";
  if (mode == BindMode::kNone) return out + "; ranks not bound";
  if (D <= 1)
    return out + "; one " + (mode == BindMode::kSocket ? "socket" : "node") + ": nothing to bind";
  for (size_t r = 0; r < plan.size(); ++r) {
    const RankPlacement& p = plan[r];
    out += "\n  rank " + std::to_string(r) + ": cpus " + format_cpu_list(p.cpus) +
           (p.nodes.size() == 1 ? ", memory node " : ", memory interleaved over nodes ") +
           format_cpu_list(p.nodes);
  }
  return out;
}

int apply_placement(const RankPlacement& placement) {
  if (placement.cpus.empty()) return 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : placement.cpus)
    if (c < CPU_SETSIZE) CPU_SET(c, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) return errno;
  if (placement.nodes.empty()) return 0;
  // preferred rather than bound: a shard larger than its node spills over instead of failing
  constexpr int kMaxNodes = 1024;
  unsigned long mask[kMaxNodes / (8 * sizeof(unsigned long))] = {};
  for (int n : placement.nodes)
    if (n < kMaxNodes)
      mask[n / (8 * sizeof(unsigned long))] |= 1UL << (n % (8 * sizeof(unsigned long)));
  const int mode = placement.nodes.size() == 1 ? MPOL_PREFERRED : MPOL_INTERLEAVE;
  if (syscall(SYS_set_mempolicy, mode, mask, static_cast<unsigned long>(kMaxNodes)) != 0)
    return errno;
  return 0;
}

}  // namespace dsinfer
