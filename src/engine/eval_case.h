// Golden case files (the schema of tests/data/golden/*/ref-mp*-*.json) and what a model makes of
// them: `dsinfer eval` writes the logits for the conformance tests, `dsinfer bench --golden`
// compares fast and exact mode with the reference demo's own bf16 run.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/transformer.h"

namespace dsinfer {

struct EvalCase {
  std::vector<std::vector<int32_t>> prefill;  // [batch, prefill_len]
  std::vector<std::vector<int32_t>> decode;   // [steps, batch]
  std::vector<std::vector<int32_t>> prompts;
  int max_new_tokens = 0;
  int eos_id = -1;
  float temperature = 0;
  bool has_generate = false;
};

// Reads and checks a case file; errors name the file and the field.
EvalCase read_eval_case(const std::string& path);
// The same for a parsed case (`origin` names it in errors).
EvalCase parse_eval_case(const nlohmann::json& j, const std::string& origin);

// The last position's logits after the prefill (rows from position 0) and after each decode
// step, as the reference golden generator ran it: [1 + decode steps, batch, vocab]. Empty when
// the case has no prefill. `origin` names the case in errors.
std::vector<float> eval_case_logits(Transformer& model, const EvalCase& c,
                                    const std::string& origin, KVDType kv_dtype = KVDType::kF32);

// Row by row (rows of `vocab` logits): max|ours - ref| / max|ref| and whether the argmax agrees.
struct LogitsRow {
  double ratio;
  bool same_argmax;
};
std::vector<LogitsRow> compare_logit_rows(const float* ours, const float* ref, int64_t rows,
                                          int64_t vocab);

// The same, summarised.
struct LogitsComparison {
  int rows = 0;
  double median_ratio = 0;
  double worst_ratio = 0;
  int far_rows = 0;  // rows with a ratio over 0.1 (e.g. a flipped expert choice)
  int argmax_mismatches = 0;
};
LogitsComparison summarize(const std::vector<LogitsRow>& rows);
LogitsComparison compare_logits(const float* ours, const float* ref, int64_t rows, int64_t vocab);

}  // namespace dsinfer
