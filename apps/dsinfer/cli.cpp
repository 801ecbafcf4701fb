#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "comm/backends.h"
#include "commands.h"
#include "core/error.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "io/mapped_file.h"
#include "kernels/linear.h"

namespace dsinfer::cli {

namespace {
int g_stdout_errno = 0;  // the reason of the first failed write_stdout

// --huge-pages relies on transparent huge pages for anonymous memory being "always" or "madvise".
void warn_if_no_huge_pages() {
  const char* path = "/sys/kernel/mm/transparent_hugepage/enabled";
  std::ifstream in(path);
  std::string mode;
  if (!std::getline(in, mode)) {
    log_info("warning: --huge-pages: cannot read ", path,
             "; the shards may end up in 4 KB pages anyway");
    return;
  }
  if (mode.find("[never]") != std::string::npos)
    log_info("warning: --huge-pages: transparent huge pages are off (", path,
             " says never); the shards are copied into 4 KB pages (echo madvise > ", path, ")");
}
// "the commands: convert, generate, ..." for messages about a missing or unknown command.
std::string command_list(CLI::App& app) {
  std::string names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    names += (names.empty() ? "" : ", ") + sub->get_name();
  return "the commands: " + names + " (dsinfer COMMAND --help)";
}

}  // namespace

void write_stdout(std::string_view text) {
  errno = 0;
  const bool ok =
      std::fwrite(text.data(), 1, text.size(), stdout) == text.size() && std::fflush(stdout) == 0;
  if (!ok && g_stdout_errno == 0) g_stdout_errno = errno != 0 ? errno : EIO;
}

void flush_stdout() {
  errno = 0;
  if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return;
  // an earlier, implicit flush may have failed (its errno long gone, unless write_stdout kept it)
  const int err = g_stdout_errno != 0 ? g_stdout_errno : errno != 0 ? errno : EIO;
  std::clearerr(stdout);
  fail("cannot write the results to stdout: ", std::strerror(err));
}

namespace {

// The options before the command (`run` passes them on to its ranks).
struct GlobalOptions {
  int threads = 0;
  bool quiet = false, debug = false;
  std::string comm_backend;
  std::string act = "f32";
  bool fast = false, batch_variant = false, huge_pages = false, no_huge_pages = false;
};

void add_global_options(CLI::App& app, GlobalOptions& o) {
  app.add_option(
      "--threads", o.threads,
      "worker threads (default: the CPUs this process may use, shared among the ranks on "
      "this machine)");
  app.add_flag("-q,--quiet", o.quiet, "only errors on stderr");
  app.add_flag("--debug", o.debug, "debug logging on stderr");
  CLI::Option* act_option =
      app.add_option(
             "--act-dtype", o.act,
             "activations entering the matrix products: f32 (exact, the default), bf16 (fast mode: "
             "rounded to bf16, weights exact, fp32 accumulation; AMX tiles where the CPU has them) "
             "or int8 (int8 mode: linear weights repacked as int8 at load, activations quantized "
             "per 128 columns, integer dot products; the rest as bf16)")
          ->check(CLI::IsMember({"f32", "bf16", "int8"}));
  app.add_flag("--fast", o.fast, "fast mode: the same as --act-dtype bf16")->excludes(act_option);
  app.add_flag(
      "--batch-variant", o.batch_variant,
      "opt out of batch invariance: matrix products of 8 or more tokens (prefill) sum in a faster "
      "order, so a sequence's logits then depend (within rounding) on its batch mates and on how "
      "its prompt was chunked; by default they never do");
  auto* huge_flag = app.add_flag("--huge-pages", o.huge_pages,
                                 "always read the checkpoint's shards into this process's own "
                                 "memory in 2 MB transparent huge pages "
                                 "instead of mapping the page cache's 4 KB pages (decode 6-40% "
                                 "faster: fewer TLB misses; a copy at load, "
                                 "memory not shared with other processes). Default: shards of 256 "
                                 "MB or more when they fit in this "
                                 "rank's share of the available memory");
  app.add_flag(
         "--no-huge-pages", o.no_huge_pages,
         "always map the shards in the page cache (no copy at load; processes share the memory)")
      ->excludes(huge_flag);
  app.add_option("--comm", o.comm_backend,
                 "communication backend: local, mpi or gloo (default: DSINFER_COMM, else from the "
                 "launcher's environment: mpirun -> mpi, WORLD_SIZE > 1 -> gloo, else local)")
      ->check(CLI::IsMember({"local", "mpi", "gloo"}));
}

// Applies the parsed global options (threads, logging, backend, huge pages) and returns the
// kernel configuration they and the CPU give; `global_args` gets what `run` passes on.
KernelConfig apply_global_options(GlobalOptions& o, std::vector<std::string>& global_args) {
  if (o.threads > 0) ThreadPool::set_default_threads(o.threads);
  if (o.quiet) set_log_level(LogLevel::kQuiet);
  if (o.debug) set_log_level(LogLevel::kDebug);
  set_comm_backend(o.comm_backend);
  if (o.fast) o.act = "bf16";
  KernelConfig kernels = with_environment_overrides(cpu_kernel_config());
  kernels.act = parse_act_dtype(o.act);
  kernels.batch_invariant = !o.batch_variant;
  log_debug("kernels: ", describe(kernels));
  if (o.act != "f32") global_args.insert(global_args.end(), {"--act-dtype", o.act});
  if (o.batch_variant) global_args.push_back("--batch-variant");
  // int8 mode reads its repacked copy, never the shard's matrices after load: a huge-page copy
  // of the shard would only double the memory (mapped, the page cache may drop those pages)
  const bool map_shards = o.no_huge_pages || kernels.int8();
  set_read_into_huge_pages(o.huge_pages ? HugePages::kOn
                           : map_shards ? HugePages::kOff
                                        : HugePages::kAuto,
                           ThreadPool::local_ranks());  // they load at the same time
  if (o.huge_pages) {
    global_args.push_back("--huge-pages");
    warn_if_no_huge_pages();
  }
  if (o.no_huge_pages) global_args.push_back("--no-huge-pages");
  if (o.threads > 0)
    global_args.insert(global_args.end(), {"--threads", std::to_string(o.threads)});
  if (o.quiet) global_args.push_back("--quiet");
  if (o.debug) global_args.push_back("--debug");
  return kernels;
}

}  // namespace

int run_cli(int argc, char** argv) {
  CLI::App app{
      "dsinfer: DeepSeek (V2, V2-Lite, V3, V3.1, R1) inference on CPUs, compatible with the\n"
      "reference DeepSeek-V3 demo (same shards, same numbers, same flags)."};
  app.require_subcommand(0, 1);  // none is our own error below, naming the commands
  GlobalOptions options;
  add_global_options(app, options);
  KernelConfig kernels;  // filled in once the command line is parsed
  std::vector<Command> commands = {
      register_convert(app),           register_fp8_cast_bf16(app),
      register_eval(app, kernels),     register_perplexity(app, kernels),
      register_generate(app, kernels), register_tokenize(app)};
  commands.push_back(register_bench(app, kernels));
  commands.push_back(register_bench_comm(app));
  commands.push_back(register_make_random(app));
  commands.push_back(register_serve(app, kernels));
  std::vector<std::string> global_args;  // what `run` passes on to its ranks
  commands.push_back(register_run(app, global_args));
  // A file-size limit (ulimit -f) then fails the write that crosses it, with a message naming the
  // file, instead of killing the process with SIGXFSZ halfway through an output.
  std::signal(SIGXFSZ, SIG_IGN);
  try {
    app.parse(argc, argv);
    if (app.get_subcommands().empty()) throw Error("no command given; " + command_list(app));
    kernels = apply_global_options(options, global_args);
    for (const Command& command : commands)
      if (command.parser->parsed()) command.run();
    flush_stdout();
  } catch (const CLI::ParseError& e) {
    // --help (and the like) succeed; a bad command line is status 1 and an `error:` line like
    // every other error, not CLI11's own codes (104-114)
    if (e.get_exit_code() == 0) return app.exit(e);
    std::string message = e.what();
    if (app.get_subcommands().empty() && dynamic_cast<const CLI::ExtrasError*>(&e))
      message += " (not a command; " + command_list(app) + ")";
    std::fprintf(stderr, "error: %s\nRun with --help for more information.\n", message.c_str());
    return 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace dsinfer::cli
