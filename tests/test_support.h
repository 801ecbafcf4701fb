// Helpers shared by the tests: data paths, scratch directories, running the dsinfer binary.
#pragma once

#include <string>
#include <vector>

namespace dsinfer::test {

// tests/data/<relative>
std::string data_path(const std::string& relative);
// A fresh, empty directory under the build tree, unique per test.
std::string scratch_dir(const std::string& name);

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};
// Runs `dsinfer <args>` (args already shell-quoted where needed) with stdin from `input`.
CommandResult run_dsinfer(const std::string& args, const std::string& input = "");

std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& text);
std::string sha256_hex(const void* data, size_t n);

}  // namespace dsinfer::test
