// dsinfer generate: the reference's generate.py. Batch mode answers every line of --input-file
// as one batch and prints "Prompt: ...\nCompletion: ...\n\n" per line; interactive mode chats
// (">>> " prompt, /clear, /exit), streaming each completion. Counts and tokens/s go to stderr.
#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "chat/chat_formatter.h"
#include "comm/backends.h"
#include "commands.h"
#include "core/error.h"
#include "core/log.h"
#include "core/read_file.h"
#include "engine/engine.h"
#include "engine/generate.h"
#include "line_reader.h"
#include "model_options.h"
#include "text_lines.h"

namespace dsinfer::cli {

using json = nlohmann::json;

namespace {

struct GenerateCliOptions {
  ModelOptions model;
  std::string input_file;
  bool interactive = false;
  int max_new_tokens = 200;
  float temperature = 0.2f;
  uint64_t seed = 965;
  std::string system;
  int max_running = 0;          // batch: 0 = the reference's lockstep
  int64_t step_tokens = 0;      // batch with --max-running: the step budget
  int64_t kv_cache_tokens = 0;  // interactive: the cache budget (0: from the model and free memory)
};

// ", MTP drafts accepted 41/60 (0.68), 1.55 tokens per sequence step" when speculation ran (the
// steps it saved: without drafts a decoding sequence takes one token a step).
std::string mtp_summary(int64_t drafted, int64_t accepted, int64_t decode_row_steps,
                        int64_t decoded_tokens) {
  if (drafted == 0) return "";
  char text[96];
  std::snprintf(text, sizeof text, " (%.2f), %.2f tokens per sequence step",
                static_cast<double>(accepted) / static_cast<double>(drafted),
                static_cast<double>(decoded_tokens) /
                    static_cast<double>(std::max<int64_t>(decode_row_steps, 1)));
  return ", MTP drafts accepted " + std::to_string(accepted) + "/" + std::to_string(drafted) + text;
}

// "N tokens/s", or "- tokens/s" where nothing was timed (no token, or the only one came out of the
// prefill): dividing by a clamped zero printed 1e+09 tokens/s
std::string rate(int64_t tokens, double seconds) {
  if (tokens <= 0 || seconds <= 1e-6) return "- tokens/s";
  return cat(tokens / seconds, " tokens/s");
}

void report(const EngineStats& s, int64_t prompt_tokens) {
  log_info("[", prompt_tokens, " prompt tokens (", s.reused_tokens,
           " reused from the previous turn), ", s.generated_tokens, " completion tokens; prefill ",
           rate(s.prefilled_tokens, s.prefill_seconds), ", decode ",
           rate(s.generated_tokens, s.decode_seconds),
           mtp_summary(s.drafted, s.accepted, s.decode_row_steps, s.decoded_tokens), "]");
}

void report(const GenerateStats& s) {
  log_info("[", s.prompt_tokens, " prompt tokens, ", s.generated_tokens,
           " completion tokens; prefill ", rate(s.prompt_tokens, s.prefill_seconds), ", decode ",
           rate(s.generated_tokens, s.decode_seconds),
           mtp_summary(s.drafted, s.accepted, s.decode_row_steps, s.decoded_tokens), "]");
}

json with_system(const std::string& system, const json& messages) {
  if (system.empty()) return messages;
  json all = json::array({{{"role", "system"}, {"content", system}}});
  for (const json& m : messages) all.push_back(m);
  return all;
}

// Rank 0 alone reads the input (the file, stdin); every other rank gets what it read through
// Comm::broadcast, so all ranks tokenize and generate the same prompts in lockstep. A message is
// one kind byte and its payload.
constexpr char kLine = 'L', kEnd = 'E', kFailed = 'F';

// On rank 0 runs `read` (nullopt: end of input) and sends the result, or its error, to every
// rank; on the others returns what rank 0 sent (and fails when rank 0 failed).
std::optional<std::string> from_rank0(Comm& comm,
                                      const std::function<std::optional<std::string>()>& read) {
  std::string message;
  if (comm.rank() == 0) {
    std::optional<std::string> got;
    try {
      got = read();
    } catch (const Error& e) {
      if (comm.world_size() > 1) {
        message = std::string(1, kFailed) + e.what();
        comm.broadcast(message, 0);
      }
      throw;
    }
    message = got ? std::string(1, kLine) + *got : std::string(1, kEnd);
  }
  comm.broadcast(message, 0);
  check(!message.empty(), "rank ", comm.rank(), ": empty message from rank 0");
  if (message[0] == kFailed) fail("rank 0 failed: ", message.substr(1));
  if (message[0] == kEnd) return std::nullopt;
  return message.substr(1);
}

// A prompt file: a regular file or a pipe (<(cmd)), at most 256 MiB (not /dev/zero, not forever).
std::string read_text(const std::string& path) {
  return read_input_file(path, "--input-file", 256 << 20, true);
}

std::vector<std::string> prompt_lines(const std::string& text) {
  std::vector<std::string> prompts;
  for (const std::string& line : split_lines(text)) prompts.push_back(python_strip(line));
  return prompts;
}

void run_batch(const GenerateCliOptions& o, const ModelConfig& config, const Tokenizer& tokenizer,
               const ChatFormatter& chat) {
  auto comm = make_comm();
  log_info(config.summary());  // after make_comm, which quiets ranks other than 0
  const std::vector<std::string> prompts = prompt_lines(
      *from_rank0(*comm, [&]() -> std::optional<std::string> { return read_text(o.input_file); }));
  check(o.max_running > 0 || static_cast<int>(prompts.size()) <= config.max_batch_size,
        "Number of prompts in ", o.input_file, " (", prompts.size(),
        ") exceeds maximum batch size (max_batch_size=", config.max_batch_size,
        "; --max-running N answers any number of prompts, N at a time)");
  check(!prompts.empty(), o.input_file, " holds no prompts", empty_input_hint(o.input_file));
  std::vector<std::vector<int32_t>> prompt_ids;
  for (const std::string& p : prompts)
    prompt_ids.push_back(
        chat.prompt_ids(with_system(o.system, json::array({{{"role", "user"}, {"content", p}}}))));
  // Alone: before the (possibly long) load. With ranks: after load_model has made them agree on
  // the config, so that a bad prompt fails on every rank alike (and a rank with another
  // vocabulary is reported as another checkpoint, not as an odd token id on that rank alone).
  const bool alone = comm->world_size() == 1;
  const bool lockstep = o.max_running == 0;
  if (alone) check_prompts(config, prompt_ids, lockstep);
  auto model = o.model.load_model(config, *comm);
  if (!alone) check_prompts(config, prompt_ids, lockstep);
  // same seed and (after the all_gather) the same logits on every rank: the samples agree
  Sampler sampler(o.seed);
  GenerateOptions options{o.max_new_tokens,   tokenizer.eos_id(),   o.temperature,
                          o.max_running,      o.step_tokens,        o.model.mtp_on(),
                          o.model.mtp_auto(), o.model.draft_tokens, o.model.kv_dtype()};
  GenerateStats stats;
  const auto completions = generate(*model, prompt_ids, options, sampler, nullptr, &stats);
  report(stats);
  if (comm->rank() != 0) return;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string completion = tokenizer.decode(completions[i], /*skip_special_tokens=*/true);
    // whole strings: a prompt or completion may hold a NUL byte, where printf's %s would stop
    write_stdout("Prompt: " + prompts[i] + "\nCompletion: " + completion + "\n\n");
  }
  flush_stdout();
}

void run_interactive(const GenerateCliOptions& o, const ModelConfig& config,
                     const Tokenizer& tokenizer, const ChatFormatter& chat) {
  auto comm = make_comm();
  log_info(config.summary());  // after make_comm, which quiets ranks other than 0
  const bool root = comm->rank() == 0;
  auto model = o.model.load_model(config, *comm);
  // One engine for the whole chat: each turn's sequence stays in the cache when it ends, and the
  // next turn's prompt (the re-templated history) reuses the positions it shares with it and
  // prefills only the rest. Batch invariance makes that the same logits as a fresh prefill.
  KVCache cache(config, kv_budget_or_default(o.kv_cache_tokens, config, o.model.kv_dtype()),
                o.model.kv_dtype());
  EngineOptions engine_options;
  engine_options.mtp = o.model.mtp_on();
  engine_options.mtp_auto = o.model.mtp_auto();
  engine_options.draft_tokens = o.model.draft_tokens;
  Engine engine(*model, cache, engine_options);
  SamplingParams params;
  params.temperature = o.temperature;
  params.max_new_tokens = o.max_new_tokens;
  if (tokenizer.eos_id() >= 0) params.stop_ids = {tokenizer.eos_id()};
  params.seed = o.seed;
  std::optional<LineReader> reader;
  if (root) reader.emplace(">>> ");
  json messages = json::array();
  // every rank sees every line (and the end of input) and so takes the same branches
  // A stdout nobody can write to any more (a full disk, a closed file) ends the chat on every
  // rank at the next line, as an error.
  while (auto line = from_rank0(*comm, [&] {
           flush_stdout();
           return reader->read_line();
         })) {
    if (*line == "/exit") break;
    if (*line == "/clear") {
      messages.clear();
      engine.drop_prefix_cache();
      continue;
    }
    messages.push_back({{"role", "user"}, {"content", *line}});
    try {
      std::vector<int32_t> ids = chat.prompt_ids(with_system(o.system, messages));
      const int64_t prompt_tokens = static_cast<int64_t>(ids.size());
      StreamDecoder stream(tokenizer, /*skip_special_tokens=*/true);
      std::vector<int32_t> completion_ids;
      RequestEvents events;
      events.on_token = [&](int32_t token) {
        completion_ids.push_back(token);
        const std::string piece = stream.push(token);
        if (root) write_stdout(piece);
      };
      const EngineStats before = engine.stats();
      std::vector<Engine::Pending> turn;
      turn.push_back({std::move(ids), params, std::move(events)});
      engine.run_all(std::move(turn));
      const std::string rest = stream.finish();
      if (root) {
        write_stdout(rest + "\n");
      }
      report(engine.stats() - before, prompt_tokens);
      // the history holds the decoded text, re-templated next turn (as the reference does)
      messages.push_back(
          {{"role", "assistant"}, {"content", tokenizer.decode(completion_ids, true)}});
    } catch (const CommError&) {
      throw;  // the ranks no longer agree: end the session
    } catch (const Error& e) {
      // the same input fails the same way on every rank, so all of them drop the turn
      if (root) std::fprintf(stderr, "error: %s\n", e.what());
      messages.erase(messages.end() - 1);  // drop the turn that failed, keep the session
    }
  }
}

void run_generate(const GenerateCliOptions& o) {
  check(!o.input_file.empty() || o.interactive,
        "Either input-file or interactive mode must be specified");
  check(o.max_new_tokens >= 0, "--max-new-tokens must be >= 0");
  check(o.max_running >= 0 && o.step_tokens >= 0, "--max-running and --step-tokens must be >= 0");
  check(o.kv_cache_tokens >= 0 && o.kv_cache_tokens <= kMaxKVPositions,
        "--kv-cache-tokens must be in [0, ", kMaxKVPositions, "], got ", o.kv_cache_tokens);
  const ModelConfig config = o.model.load_config();
  const Tokenizer tokenizer = Tokenizer::load(o.model.ckpt_path);
  const ChatFormatter chat(tokenizer);
  if (o.interactive)
    run_interactive(o, config, tokenizer, chat);
  else
    run_batch(o, config, tokenizer, chat);
}

}  // namespace

Command register_generate(CLI::App& app, const KernelConfig& kernels) {
  CLI::App* sub = app.add_subcommand(
      "generate", "chat interactively or answer a file of prompts (generate.py)");
  auto o = std::make_shared<GenerateCliOptions>();
  o->model.add_to(sub, kernels);
  o->model.add_mtp_to(sub);
  o->model.add_kv_cache_dtype_to(sub);
  sub->add_option("--input-file", o->input_file,
                  "file of prompts, one per line, answered as one batch");
  sub->add_flag("--interactive", o->interactive,
                "chat: >>> prompt, /clear empties the history, /exit ends");
  sub->add_option("--max-new-tokens", o->max_new_tokens, "most tokens per completion")
      ->capture_default_str();
  sub->add_option("--temperature", o->temperature, "sampling temperature (0: greedy)")
      ->capture_default_str();
  sub->add_option("--seed", o->seed, "sampling seed")->capture_default_str();
  sub->add_option("--system", o->system, "a system message put before the conversation");
  sub->add_option(
      "--max-running", o->max_running,
      "batch: continuous batching, at most N prompts running at once (any number in the file; the "
      "same completions); default: the reference's lockstep batch of at most max_batch_size");
  sub->add_option("--step-tokens", o->step_tokens,
                  "batch with --max-running: most tokens per forward step (decode rows + prefill "
                  "chunks; 0: 256)");
  sub->add_option(
      "--kv-cache-tokens", o->kv_cache_tokens,
      "interactive: KV cache budget in positions (0: half the free memory, at least max_seq_len)");
  return {sub, [o] { run_generate(*o); }};
}

}  // namespace dsinfer::cli
