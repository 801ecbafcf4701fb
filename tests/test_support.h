// Helpers shared by the tests: data paths, scratch directories, running the dsinfer binary.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/eval_case.h"

namespace dsinfer::test {

// tests/data/<relative>
std::string data_path(const std::string& relative);
// A fresh, empty directory under the build tree, unique per test.
std::string scratch_dir(const std::string& name);

struct CommandResult {
  int exit_code = -1;
  std::string out;     // stdout
  std::string err;     // stderr
  double seconds = 0;  // wall time of the command
};
// The helpers from here to backend_unavailable start processes: they live in process_support.cpp,
// which only the process, golden and slow test binaries link (unit tests start none).
// Runs a shell command line (no redirections of its own) with stdin from `input`.
CommandResult run_command(const std::string& command, const std::string& input = "");
// Runs `dsinfer <args>` (args already shell-quoted where needed) with stdin from `input`.
CommandResult run_dsinfer(const std::string& args, const std::string& input = "");
// Runs `mpirun -n <ranks> dsinfer --threads 1 <args>` (oversubscribed, unbound, as root allowed),
// killed after timeout_s. Tests skip when has_mpirun() is false.
CommandResult run_mpi(int ranks, const std::string& args, const std::string& input = "",
                      int timeout_s = 120);
bool has_mpirun();
// Multi-process backends of the tests: "mpi" (mpirun) and "gloo" (`dsinfer run -n N --comm gloo`,
// the torchrun-style environment). Why `backend` cannot run here ("" when it can): mpirun is
// missing or dsinfer was built without it; tests GTEST_SKIP with it.
std::string backend_unavailable(const std::string& backend);
// `dsinfer --threads 1 <args>` on `ranks` local ranks of `backend` (run_mpi for mpi), killed after
// timeout_s.
CommandResult run_ranks(const std::string& backend, int ranks, const std::string& args,
                        const std::string& input = "", int timeout_s = 120);
// "mpi" -> "Mpi": parameter names for test suites instantiated per backend.
std::string backend_test_name(const std::string& backend);
// A model name as a gtest parameter name: "tiny-v2-lite" -> "tiny_v2_lite".
std::string model_test_name(const ::testing::TestParamInfo<std::string>& info);

// Converts (in this process, as `dsinfer convert` does) tests/data/golden/<model>/hf at
// model-parallel `world_size` into a fresh scratch directory (with the DeepSeek-V3 tokenizer files
// beside the shards when asked); returns it. `formats`: convert's format flags ("--experts-int4",
// "--int8", both), each set in its own directory.
std::string convert_golden(const std::string& model, int world_size = 1,
                           bool with_tokenizer = false, bool keep_mtp = false,
                           const std::string& formats = "");  // keep_mtp: convert --keep-mtp

// Compares logits [steps, batch, vocab] in two safetensors files ("logits" tensor) with the
// golden acceptance rule: per row max|ours - ref| <= 1e-3 max|ref| and the same argmax
// (EXPECTs per row). Returns the worst ratio.
double expect_logits_match(const std::string& ours_path, const std::string& ref_path);
// The same comparison without expectations: per row, max|ours - ref| / max|ref| and whether the
// argmax agrees (engine/eval_case.h).
std::vector<LogitsRow> compare_logits(const std::string& ours_path, const std::string& ref_path);

// Our logits and the reference demo's own bf16 run (ref-mp1-bf16) each against a golden's fp32
// logits (ref-mp1-fp32): the yardstick of the lossy modes. Prints one line, tagged `label`.
struct AgainstDemo {
  LogitsComparison ours, demo;
  int kept = 0, demo_kept = 0;  // rows whose argmax agrees with fp32's
  size_t rows = 0;
};
AgainstDemo compare_with_demos_bf16(const std::string& ours_path, const std::string& golden_dir,
                                    const std::string& label);

// llama.cpp tokenizer test vectors: a .inp file holds cases each followed by
// "\n__ggml_vocab_test__\n"; a .out file holds one line of space-separated ids per case.
std::vector<std::string> split_inp(const std::string& text);
std::vector<std::vector<int32_t>> parse_out(const std::string& text);

// The message of the dsinfer::Error that body throws (a test failure if it throws none).
std::string error_of(const std::function<void()>& body);

std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& text);
std::string sha256_hex(const void* data, size_t n);

}  // namespace dsinfer::test

namespace dsinfer::test {
// Whether this build runs under AddressSanitizer: several times slower, and its quarantine holds up
// to 256 MiB of freed memory (resident memory says nothing about growth there).
#if defined(__SANITIZE_ADDRESS__)  // gcc
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)  // clang
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif
}  // namespace dsinfer::test

// SIGBUS tests hang under AddressSanitizer (its SIGBUS handling and ours; not yet understood),
// so they run in the Release build only.
#define SKIP_UNDER_ASAN()                    \
  if (!::dsinfer::test::kAddressSanitizer) { \
  } else                                     \
    GTEST_SKIP() << "SIGBUS death tests hang under AddressSanitizer"

#define EXPECT_CONTAINS(haystack, needle)                          \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
      << "message \"" << (haystack) << "\" lacks \"" << (needle) << "\""
