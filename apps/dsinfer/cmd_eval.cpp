#include "commands.h"
#include "core/error.h"

namespace dsinfer::cli {

Command register_eval(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("eval", "conformance run: prefill, decode steps and greedy generation of a case file");
  return {sub, [] { fail("eval: not implemented yet"); }};
}

}  // namespace dsinfer::cli
