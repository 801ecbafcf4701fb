// dsinfer eval: the conformance tool. Gives a golden case file's logits as the reference golden
// generator computed them (the last position's after the prefill from position 0 and after each
// decode step; here each row is one sequence scored in one engine step, which batch invariance
// makes the same numbers), then greedy generation of the case's prompts. Writes PREFIX.safetensors
// (tensor "logits" f32 [steps, batch, vocab]) and PREFIX.json ({"completions": [[ids...], ...]}).
// With --dump, also PREFIX.intermediates.safetensors: the named intermediates of the scoring step
// (embed, layers.L.attn_out / ffn_out / out, final_hidden, logits; f32 [rows, cols], rows sequence
// by sequence as the case's batch rows, each its prefill then its decode tokens), this rank's view
// (after each all_reduce).
#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "comm/backends.h"
#include "commands.h"
#include "core/error.h"
#include "core/log.h"
#include "core/write_file.h"
#include "engine/eval_case.h"
#include "engine/generate.h"
#include "io/safetensors.h"
#include "model_options.h"

namespace dsinfer::cli {

using json = nlohmann::json;

namespace {

void run_eval(const ModelOptions& model_options, const std::string& case_path,
              const std::string& out_prefix, uint64_t seed, bool dump) {
  // a prefix, not a directory: "" or "dir/" wrote hidden files named ".json"
  check(
      !out_prefix.empty() && out_prefix.back() != '/' && !std::filesystem::is_directory(out_prefix),
      "--out ", out_prefix.empty() ? "\"\"" : out_prefix,
      " must be a file prefix (PREFIX.json and PREFIX.safetensors are written), e.g. ",
      out_prefix.empty() ? "out/eval"
                         : out_prefix + (out_prefix.back() == '/' ? "" : "/") + "eval");
  const EvalCase ec = read_eval_case(case_path);
  const ModelConfig config = model_options.load_config();
  // check the case against the config's limits before the (possibly long) load
  if (ec.has_generate) check_prompts(config, ec.prompts);
  if (!ec.prefill.empty()) check_prompts(config, ec.prefill);
  auto comm = make_comm();
  auto model = model_options.load_model(config, *comm);

  // logits of the last position after the prefill and after each decode step
  const int batch = static_cast<int>(ec.prefill.size());
  const int steps = batch ? 1 + static_cast<int>(ec.decode.size()) : 0;
  const int64_t vocab = config.vocab_size;
  const double t0 = now_seconds();
  TensorDump intermediates;
  if (dump) model->add_observer(&intermediates);
  // [steps, batch, vocab]
  const std::vector<float> logits =
      eval_case_logits(*model, ec, case_path, model_options.kv_dtype());
  if (dump) model->remove_observer(&intermediates);
  if (batch)
    log_info("eval: prefill ", batch, "x", ec.prefill[0].size(), " and ", ec.decode.size(),
             " decode steps in ", (now_seconds() - t0) * 1e3, " ms");

  json out = json::object();
  if (ec.has_generate) {
    Sampler sampler(seed);
    GenerateOptions options;
    options.max_new_tokens = ec.max_new_tokens;
    options.eos_id = ec.eos_id;
    options.temperature = ec.temperature;
    options.kv_dtype = model_options.kv_dtype();
    GenerateStats stats;
    out["completions"] = generate(*model, ec.prompts, options, sampler, nullptr, &stats);
    log_info("eval: prefill of ", stats.prompt_tokens, " prompt tokens in ", stats.prefill_seconds,
             " s; generated ", stats.generated_tokens, " tokens (", ec.prompts.size(), " rows) in ",
             stats.decode_seconds,
             " s: ", stats.generated_tokens / std::max(stats.decode_seconds, 1e-9), " tokens/s");
  }

  if (comm->rank() != 0) return;  // every rank holds the same logits; rank 0 writes them
  SafetensorsWriter writer(out_prefix + ".safetensors",
                           {{"logits", DType::kF32, {steps, batch, vocab}}});
  writer.write("logits", logits.data(), logits.size() * sizeof(float));
  writer.finish();
  write_file_atomically(out_prefix + ".json", out.dump() + "\n");
  if (dump && batch) {
    intermediates.write(out_prefix + ".intermediates.safetensors");
    log_info("eval: wrote ", intermediates.size(), " intermediates to ", out_prefix,
             ".intermediates.safetensors");
  }
  log_info("eval: wrote ", out_prefix, ".safetensors and ", out_prefix, ".json");
}

}  // namespace

Command register_eval(CLI::App& app, const KernelConfig& kernels) {
  CLI::App* sub = app.add_subcommand(
      "eval", "conformance run of a golden case file: prefill, decode steps, greedy generation");
  auto model = std::make_shared<ModelOptions>();
  auto case_path = std::make_shared<std::string>();
  auto out_prefix = std::make_shared<std::string>();
  auto seed = std::make_shared<uint64_t>(965);
  auto dump = std::make_shared<bool>(false);
  model->add_to(sub, kernels);
  model->add_kv_cache_dtype_to(sub);
  sub->add_option("--case", *case_path,
                  "case file (golden schema: prefill_tokens, decode_tokens, generate)")
      ->required();
  sub->add_option("--out", *out_prefix, "output prefix: writes PREFIX.safetensors and PREFIX.json")
      ->required();
  sub->add_option("--seed", *seed,
                  "sampling seed (used only when the case asks for temperature > 0)");
  sub->add_flag(
      "--dump", *dump,
      "also write PREFIX.intermediates.safetensors: the scoring step's named intermediates (embed, "
      "layers.L.attn_out/ffn_out/out, final_hidden, logits)");
  return {sub, [=] { run_eval(*model, *case_path, *out_prefix, *seed, *dump); }};
}

}  // namespace dsinfer::cli
