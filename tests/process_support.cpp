// The test helpers that start processes (test_support.h declares them): the dsinfer binary, its
// ranks, mpirun, any shell command. Only the process, golden and slow test binaries link this
// file, and only they wait for the dsinfer binary to be built: a unit test that starts a process
// fails to link.
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "comm/backends.h"
#include "test_support.h"

namespace dsinfer::test {

CommandResult run_command(const std::string& command, const std::string& input) {
  std::string dir = scratch_dir("cmd");
  std::string in = dir + "/stdin", out = dir + "/stdout", err = dir + "/stderr";
  write_file(in, input);
  std::string cmd = command + " <" + in + " >" + out + " 2>" + err;
  const auto start = std::chrono::steady_clock::now();
  int status = std::system(cmd.c_str());
  CommandResult result;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = read_file(out);
  result.err = read_file(err);
  return result;
}

CommandResult run_dsinfer(const std::string& args, const std::string& input) {
  return run_command(std::string(DSINFER_BIN) + " " + args, input);
}

bool has_mpirun() { return std::system("command -v mpirun >/dev/null 2>&1") == 0; }

CommandResult run_mpi(int ranks, const std::string& args, const std::string& input, int timeout_s) {
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  return run_command("timeout " + std::to_string(timeout_s) + " mpirun -n " +
                         std::to_string(ranks) + " --oversubscribe --bind-to none " + DSINFER_BIN +
                         " --threads 1 " + args,
                     input);
}

std::string backend_unavailable(const std::string& backend) {
  if (!comm_backend_built(backend)) return "dsinfer was built without the " + backend + " backend";
  if (backend == "mpi" && !has_mpirun())
    return "mpirun not installed (apt-get install openmpi-bin libopenmpi-dev)";
  return "";
}

CommandResult run_ranks(const std::string& backend, int ranks, const std::string& args,
                        const std::string& input, int timeout_s) {
  if (backend == "mpi") return run_mpi(ranks, args, input, timeout_s);
  return run_command("timeout " + std::to_string(timeout_s) + " " + DSINFER_BIN +
                         " --threads 1 run -n " + std::to_string(ranks) + " --comm " + backend +
                         " " + args,
                     input);
}

}  // namespace dsinfer::test
