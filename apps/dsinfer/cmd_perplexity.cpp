// dsinfer perplexity: the negative log-likelihood of every next token of each sequence, fed one
// token at a time through the KV cache from position 0 (as the reference golden generator did).
// Input: token-id sequences from a case file (golden ppl schema: {"tokens": [[ids...], ...]}) or
// a text file, tokenized with the checkpoint's tokenizer (BOS first) and cut into windows of
// max_seq_len tokens.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "comm/backends.h"
#include "commands.h"
#include "core/error.h"
#include "core/log.h"
#include "core/read_file.h"
#include "engine/model_comparison.h"
#include "engine/perplexity.h"
#include "io/json_file.h"
#include "model_options.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer::cli {

using json = nlohmann::json;

namespace {

struct PerplexityOptions {
  ModelOptions model;
  std::string input_file;
  std::string case_file;
  std::string reference_ckpt_path;
  std::string reference_act;  // the reference's --act-dtype (empty: the model's)
  bool verbose = false;
  bool as_json = false;
};

std::vector<std::vector<int32_t>> read_text_tokens(const std::string& path,
                                                   const std::string& tokenizer_dir,
                                                   int max_seq_len) {
  // a regular file or a pipe, at most 256 MiB (was read whole whatever it was: /dev/zero forever)
  const std::string text = read_input_file(path, "--input-file", 256 << 20, /*allow_streams=*/true);
  const Tokenizer tokenizer = Tokenizer::load(tokenizer_dir);
  const std::vector<int32_t> ids = tokenizer.encode(text, /*add_special_tokens=*/true);
  std::vector<std::vector<int32_t>> windows;
  for (size_t start = 0; start + 1 < ids.size(); start += max_seq_len)
    windows.emplace_back(ids.begin() + start,
                         ids.begin() + std::min(ids.size(), start + max_seq_len));
  if (!windows.empty() && windows.back().size() < 2) windows.pop_back();
  check(!windows.empty(), path, ": fewer than 2 tokens to score", empty_input_hint(path));
  return windows;
}

// --reference-ckpt-path: the model against the same model in another format, position by position.
void run_comparison(const PerplexityOptions& o, const ModelConfig& config,
                    const std::vector<std::vector<int32_t>>& sequences, Comm& comm,
                    Transformer& model) {
  ModelOptions reference_options = o.model;
  if (!o.reference_ckpt_path.empty()) reference_options.ckpt_path = o.reference_ckpt_path;
  KernelConfig reference_kernels = *o.model.kernels;
  if (!o.reference_act.empty()) reference_kernels.act = parse_act_dtype(o.reference_act);
  reference_options.kernels = &reference_kernels;
  auto reference = reference_options.load_model(config, comm);
  const double start = now_seconds();
  const ModelComparison c = compare_models(*reference, model, sequences);
  log_info("perplexity: compared ", c.positions, " positions in ", sequences.size(),
           " sequences in ", now_seconds() - start, " s");
  if (comm.rank() != 0) return;
  const double ppl = std::exp(c.mean_nll), ref_ppl = std::exp(c.reference_mean_nll);
  if (o.as_json) {
    const json out = {{"positions", c.positions},
                      {"mean_nll", c.mean_nll},
                      {"perplexity", ppl},
                      {"reference_mean_nll", c.reference_mean_nll},
                      {"reference_perplexity", ref_ppl},
                      {"perplexity_change", ppl / ref_ppl - 1},
                      {"mean_kl", c.mean_kl},
                      {"max_kl", c.max_kl},
                      {"top1_agreement", c.top1_agreement}};
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf(
        "positions %lld\nperplexity %.4f\nreference_perplexity %.4f (%+.2f%%)\nmean_kl "
        "%.6f\nmax_kl %.6f\n"
        "top1_agreement %.4f\n",
        static_cast<long long>(c.positions), ppl, ref_ppl, 100 * (ppl / ref_ppl - 1), c.mean_kl,
        c.max_kl, c.top1_agreement);
  }
}

void run_perplexity(const PerplexityOptions& o) {
  check(o.input_file.empty() != o.case_file.empty(), "give exactly one of --input-file and --case");
  check(o.reference_ckpt_path.empty() || std::filesystem::is_directory(o.reference_ckpt_path),
        "--reference-ckpt-path ", o.reference_ckpt_path, " is not a directory");
  const ModelConfig config = o.model.load_config();
  const auto sequences =
      o.case_file.empty()
          ? read_text_tokens(o.input_file, o.model.ckpt_path, config.max_seq_len)
          : parse_perplexity_case(read_json_file(o.case_file, "case file"), o.case_file);
  auto comm = make_comm();
  auto model = o.model.load_model(config, *comm);
  if (!o.reference_ckpt_path.empty() || !o.reference_act.empty())
    return run_comparison(o, config, sequences, *comm, *model);
  json nll_rows = json::array();
  double total = 0;
  int64_t count = 0;
  const double start = now_seconds();
  for (size_t s = 0; s < sequences.size(); ++s) {
    const std::vector<double> nll = sequence_nll(*model, sequences[s]);
    for (double v : nll) total += v;
    count += static_cast<int64_t>(nll.size());
    nll_rows.push_back(nll);
    if (o.verbose && !o.as_json && comm->rank() == 0)
      for (size_t t = 0; t < nll.size(); ++t)
        std::printf("seq %zu pos %zu token %d nll %.6f\n", s, t + 1, sequences[s][t + 1], nll[t]);
  }
  const double mean = total / static_cast<double>(count);
  log_info("perplexity: ", count, " tokens in ", sequences.size(), " sequences, ",
           count / (now_seconds() - start), " tokens/s");
  if (comm->rank() != 0) return;  // every rank computed the same numbers; rank 0 prints them
  if (o.as_json) {
    json out = {{"mean_nll", mean}, {"perplexity", std::exp(mean)}, {"nll", nll_rows}};
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("mean_nll %.6f\nperplexity %.4f\n", mean, std::exp(mean));
  }
}

}  // namespace

Command register_perplexity(CLI::App& app, const KernelConfig& kernels) {
  CLI::App* sub = app.add_subcommand(
      "perplexity", "negative log-likelihood and perplexity of token sequences or text");
  auto o = std::make_shared<PerplexityOptions>();
  o->model.add_to(sub, kernels);
  sub->add_option("--input-file", o->input_file,
                  "text file to score (tokenized with the checkpoint's tokenizer)");
  sub->add_option("--case", o->case_file,
                  "JSON file {\"tokens\": [[ids...], ...]} (golden ppl schema)");
  sub->add_option(
      "--reference-ckpt-path", o->reference_ckpt_path,
      "also load this checkpoint of the same model (e.g. the exact fp8 one) and compare: both "
      "perplexities, mean and max KL(reference || model) per position, top-1 agreement");
  sub->add_option("--reference-act-dtype", o->reference_act,
                  "compare against the model (or --reference-ckpt-path) run with these "
                  "activations: e.g. --act-dtype int8 --reference-act-dtype f32 measures what "
                  "int8 mode costs")
      ->check(CLI::IsMember({"f32", "bf16", "int8"}));
  sub->add_flag("--verbose", o->verbose, "also print every token's NLL");
  sub->add_flag("--json", o->as_json,
                "print {\"mean_nll\", \"perplexity\", \"nll\": [[...], ...]} as JSON");
  return {sub, [o] { run_perplexity(*o); }};
}

}  // namespace dsinfer::cli
