// dsinfer eval: the conformance tool. Runs a golden case file through the model exactly as the
// reference golden generator did: prefill rows from position 0, then each decode row one step at
// a time (logits of the last position after every step), then greedy generation of the case's
// prompts. Writes PREFIX.safetensors (tensor "logits" f32 [steps, batch, vocab]) and
// PREFIX.json ({"completions": [[ids...], ...]}).
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/generate.h"
#include "io/safetensors.h"
#include "model_options.h"
#include "parallel/comm.h"

namespace dsinfer::cli {

using json = nlohmann::json;

namespace {

struct EvalCase {
  std::vector<std::vector<int32_t>> prefill;  // [batch, prefill_len]
  std::vector<std::vector<int32_t>> decode;   // [steps, batch]
  std::vector<std::vector<int32_t>> prompts;
  int max_new_tokens = 0;
  int eos_id = -1;
  float temperature = 0;
  bool has_generate = false;
};

std::vector<std::vector<int32_t>> token_rows(const json& j, const std::string& what, const std::string& path) {
  check(j.is_array(), path, ": ", what, " must be a list of token-id lists");
  std::vector<std::vector<int32_t>> rows;
  for (const json& row : j) {
    check(row.is_array(), path, ": ", what, " must be a list of token-id lists");
    std::vector<int32_t> ids;
    for (const json& t : row) {
      check(t.is_number_integer(), path, ": ", what, " holds a non-integer token ", t.dump());
      ids.push_back(t.get<int32_t>());
    }
    rows.push_back(std::move(ids));
  }
  return rows;
}

EvalCase read_case(const std::string& path) {
  std::ifstream in(path);
  check(in.good(), "cannot read case file ", path);
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    fail(path, " is not valid JSON (", e.what(), ")");
  }
  check(j.is_object() && (j.contains("prefill_tokens") || j.contains("generate")), path,
        ": neither prefill_tokens nor generate");
  EvalCase c;
  if (j.contains("prefill_tokens")) {
    c.prefill = token_rows(j["prefill_tokens"], "prefill_tokens", path);
    check(!c.prefill.empty() && !c.prefill[0].empty(), path, ": prefill_tokens is empty");
    for (const auto& row : c.prefill)
      check(row.size() == c.prefill[0].size(), path, ": prefill_tokens rows differ in length");
  }
  if (j.contains("decode_tokens")) c.decode = token_rows(j["decode_tokens"], "decode_tokens", path);
  for (const auto& row : c.decode)
    check(row.size() == c.prefill.size(), path, ": each decode_tokens row needs one token per prefill row (",
          c.prefill.size(), ")");
  if (j.contains("generate")) {
    const json& g = j["generate"];
    c.has_generate = true;
    c.prompts = token_rows(g.at("prompts"), "generate.prompts", path);
    c.max_new_tokens = g.at("max_new_tokens").get<int>();
    c.eos_id = g.value("eos_id", -1);
    c.temperature = g.value("temperature", 0.0f);
  }
  return c;
}

void run_eval(const ModelOptions& model_options, const std::string& case_path, const std::string& out_prefix,
              uint64_t seed) {
  const EvalCase ec = read_case(case_path);
  const ModelConfig config = model_options.load_config();
  // check the case against the config's limits before the (possibly long) load
  if (ec.has_generate) check_prompts(config, ec.prompts);
  if (!ec.prefill.empty()) check_prompts(config, ec.prefill);
  auto comm = make_comm();
  auto model = model_options.load_model(config, *comm);

  // logits of the last position after the prefill and after each decode step
  const int batch = static_cast<int>(ec.prefill.size());
  const int prefill_len = batch ? static_cast<int>(ec.prefill[0].size()) : 0;
  const int steps = batch ? 1 + static_cast<int>(ec.decode.size()) : 0;
  const int64_t vocab = config.vocab_size;
  std::vector<float> logits(static_cast<size_t>(steps) * batch * vocab);  // [steps, batch, vocab]
  if (batch) {
    check(prefill_len + steps - 1 <= config.max_seq_len, case_path,
          ": prefill plus decode steps exceed max_seq_len (", config.max_seq_len, ")");
    KVCache cache(config, batch, prefill_len + steps - 1);
    const double t0 = now_seconds();
    std::vector<int32_t> tokens;
    for (const auto& row : ec.prefill) tokens.insert(tokens.end(), row.begin(), row.end());
    model->forward(tokens.data(), batch, prefill_len, 0, cache, logits.data());
    const double t1 = now_seconds();
    for (size_t s = 0; s < ec.decode.size(); ++s)
      model->forward(ec.decode[s].data(), batch, 1, prefill_len + static_cast<int>(s), cache,
                     logits.data() + (s + 1) * batch * vocab);
    const double t2 = now_seconds();
    log_info("eval: prefill ", batch, "x", prefill_len, " in ", (t1 - t0) * 1e3, " ms; ",
             ec.decode.size(), " decode steps of batch ", batch, " at ",
             ec.decode.empty() ? 0.0 : ec.decode.size() / (t2 - t1), " steps/s");
  }

  json out = json::object();
  if (ec.has_generate) {
    Sampler sampler(seed);
    GenerateOptions options;
    options.max_new_tokens = ec.max_new_tokens;
    options.eos_id = ec.eos_id;
    options.temperature = ec.temperature;
    GenerateStats stats;
    out["completions"] = generate(*model, ec.prompts, options, sampler, nullptr, &stats);
    log_info("eval: prefill of ", stats.prompt_tokens, " prompt tokens in ", stats.prefill_seconds,
             " s; generated ", stats.generated_tokens, " tokens (", ec.prompts.size(), " rows) in ",
             stats.decode_seconds, " s: ", stats.generated_tokens / std::max(stats.decode_seconds, 1e-9),
             " tokens/s");
  }

  if (comm->rank() != 0) return;  // every rank holds the same logits; rank 0 writes them
  SafetensorsWriter writer(out_prefix + ".safetensors",
                           {{"logits", DType::kF32, {steps, batch, vocab}}});
  writer.write("logits", logits.data(), logits.size() * sizeof(float));
  writer.finish();
  std::ofstream json_out(out_prefix + ".json");
  check(json_out.good(), "cannot write ", out_prefix, ".json");
  json_out << out.dump() << "\n";
  log_info("eval: wrote ", out_prefix, ".safetensors and ", out_prefix, ".json");
}

}  // namespace

Command register_eval(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "eval", "conformance run of a golden case file: prefill, decode steps, greedy generation");
  auto model = std::make_shared<ModelOptions>();
  auto case_path = std::make_shared<std::string>();
  auto out_prefix = std::make_shared<std::string>();
  auto seed = std::make_shared<uint64_t>(965);
  model->add_to(sub);
  sub->add_option("--case", *case_path, "case file (golden schema: prefill_tokens, decode_tokens, generate)")
      ->required();
  sub->add_option("--out", *out_prefix, "output prefix: writes PREFIX.safetensors and PREFIX.json")->required();
  sub->add_option("--seed", *seed, "sampling seed (used only when the case asks for temperature > 0)");
  return {sub, [=] { run_eval(*model, *case_path, *out_prefix, *seed); }};
}

}  // namespace dsinfer::cli
