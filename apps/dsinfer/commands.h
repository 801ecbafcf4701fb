// Each subcommand lives in its own cmd_*.cpp and registers itself on the top-level CLI app.
// The commands that run a model take the command line's KernelConfig (filled in by main after
// parsing, before any command runs). A command's callback throws dsinfer::Error on bad input;
// main() turns that into one line on stderr and exit status 1.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/kernel_config.h"

namespace dsinfer::cli {

// A registered subcommand: its parser and what to run once all options are parsed.
struct Command {
  CLI::App* parser;
  std::function<void()> run;
};

Command register_convert(CLI::App& app);
Command register_fp8_cast_bf16(CLI::App& app);
Command register_eval(CLI::App& app, const KernelConfig& kernels);
Command register_perplexity(CLI::App& app, const KernelConfig& kernels);
Command register_generate(CLI::App& app, const KernelConfig& kernels);
Command register_tokenize(CLI::App& app);
Command register_bench(
    CLI::App& app,
    const KernelConfig& kernels);             // cmd_bench.cpp: decode/prefill against the ceilings
Command register_bench_comm(CLI::App& app);   // cmd_bench_comm.cpp: collective latencies
Command register_make_random(CLI::App& app);  // cmd_make_random.cpp: random HF checkpoints
Command register_serve(CLI::App& app,
                       const KernelConfig& kernels);  // cmd_serve.cpp: the OpenAI-compatible server
// `run -n N SUBCOMMAND...`: the ranks get `global_args` (the top-level --threads, -q, --debug as
// parsed, filled in before the command runs) in front of the subcommand.
Command register_run(CLI::App& app, const std::vector<std::string>& global_args);

// Flushes stdout; throws Error when any result written to it was lost (a full disk, a closed or
// broken file): results on stdout are checked like any other output file.
void flush_stdout();
// Writes and flushes at once (streamed tokens); a failure is kept, with its reason, for the next
// flush_stdout to report.
void write_stdout(std::string_view text);

// Runs the whole CLI (argv as given to main); returns the process exit status.
int run_cli(int argc, char** argv);

}  // namespace dsinfer::cli
