// Backend selection: the launcher's environment says how this process was started.
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "comm/backends.h"
#include "core/error.h"
#include "core/log.h"

namespace dsinfer {

// gloo_comm.cpp and mpi_comm.cpp: whether the backend was compiled in.
bool gloo_built();
bool mpi_built();

namespace {

std::string g_forced;

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

std::string choose_backend() {
  if (!g_forced.empty()) return g_forced;
  if (std::string e = env("DSINFER_COMM"); !e.empty()) return e;
  if (!env("OMPI_COMM_WORLD_SIZE").empty()) return "mpi";
  if (std::string w = env("WORLD_SIZE"); !w.empty()) {
    char* end = nullptr;
    const long n = std::strtol(w.c_str(), &end, 10);
    check(end != w.c_str() && *end == '\0' && n >= 1, "WORLD_SIZE=", w,
          " is not a positive integer");
    if (n > 1) return "gloo";
  }
  return "local";
}

}  // namespace

void set_comm_backend(const std::string& name) { g_forced = name; }

bool comm_backend_built(const std::string& name) {
  return name == "local" || (name == "mpi" && mpi_built()) || (name == "gloo" && gloo_built());
}

std::unique_ptr<Comm> make_comm() {
  const std::string backend = choose_backend();
  std::unique_ptr<Comm> comm;
  if (backend == "local")
    comm = make_local_comm();
  else if (backend == "mpi")
    comm = make_mpi_comm();
  else if (backend == "gloo")
    comm = make_gloo_comm();
  else
    fail("unknown communication backend '", backend,
         "' (--comm or DSINFER_COMM: local, mpi or gloo)");
  // Every rank computes the same thing; only rank 0 talks unless asked to.
  if (comm->rank() != 0 && log_level() < LogLevel::kDebug) set_log_level(LogLevel::kQuiet);
  if (comm->world_size() > 1)
    log_info("comm: ", comm->name(), " backend, rank ", comm->rank(), " of ", comm->world_size());
  return comm;
}

}  // namespace dsinfer
