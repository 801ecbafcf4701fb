#include "engine/eval_case.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_excerpt.h"
#include "engine/scoring.h"
#include "io/json_file.h"

namespace dsinfer {

using json = nlohmann::json;

namespace {

std::vector<std::vector<int32_t>> token_rows(const json& j, const std::string& what,
                                             const std::string& path) {
  check(j.is_array(), path, ": ", what, " must be a list of token-id lists");
  std::vector<std::vector<int32_t>> rows;
  for (const json& row : j) {
    check(row.is_array(), path, ": ", what, " must be a list of token-id lists");
    std::vector<int32_t> ids;
    for (const json& t : row)
      ids.push_back(
          static_cast<int32_t>(json_integer(t, 0, INT32_MAX, path + ": a token of " + what)));
    rows.push_back(std::move(ids));
  }
  return rows;
}

}  // namespace

EvalCase read_eval_case(const std::string& path) {
  return parse_eval_case(read_json_file(path, "case file"), path);
}

EvalCase parse_eval_case(const json& j, const std::string& path) {
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
    check(row.size() == c.prefill.size(), path,
          ": each decode_tokens row needs one token per prefill row (", c.prefill.size(), ")");
  if (j.contains("generate")) {
    const json& g = j["generate"];
    c.has_generate = true;
    check(g.is_object() && g.contains("prompts") && g.contains("max_new_tokens"), path,
          ": generate needs prompts and max_new_tokens");
    c.prompts = token_rows(g["prompts"], "generate.prompts", path);
    c.max_new_tokens = static_cast<int>(
        json_integer(g["max_new_tokens"], 0, INT32_MAX, path + ": generate.max_new_tokens"));
    if (g.contains("eos_id"))
      c.eos_id =
          static_cast<int>(json_integer(g["eos_id"], -1, INT32_MAX, path + ": generate.eos_id"));
    if (g.contains("temperature")) {
      check(g["temperature"].is_number(), path, ": generate.temperature must be a number, got ",
            json_excerpt(g["temperature"]));
      c.temperature = g["temperature"].get<float>();
    }
  }
  return c;
}

std::vector<float> eval_case_logits(Transformer& model, const EvalCase& c,
                                    const std::string& origin, KVDType kv_dtype) {
  const ModelConfig& config = model.config();
  const int batch = static_cast<int>(c.prefill.size());
  if (batch == 0) return {};
  const int prefill_len = static_cast<int>(c.prefill[0].size());
  const int steps = 1 + static_cast<int>(c.decode.size());
  const int64_t vocab = config.vocab_size;
  check(prefill_len + steps - 1 <= config.max_seq_len, origin,
        ": prefill plus decode steps exceed max_seq_len (", config.max_seq_len, ")");
  std::vector<float> logits(static_cast<size_t>(steps) * batch * vocab);
  // Row b as one sequence (its prefill then its forced decode tokens), scored in one engine step
  // with every row's logits; batch invariance makes them the bits of the reference's loop of one
  // prefill call and one call per decode step. Logits of position prefill_len - 1 + s are step s.
  std::vector<std::vector<int32_t>> rows;
  for (int b = 0; b < batch; ++b) {
    rows.push_back(c.prefill[b]);
    for (const auto& step : c.decode) rows.back().push_back(step[b]);
  }
  score_sequences(
      model, rows,
      [&](int b, int64_t position, const float* row) {
        const int64_t s = position - (prefill_len - 1);
        if (s >= 0) std::copy(row, row + vocab, logits.data() + (s * batch + b) * vocab);
      },
      kv_dtype);
  return logits;
}

std::vector<LogitsRow> compare_logit_rows(const float* ours, const float* ref, int64_t rows,
                                          int64_t vocab) {
  std::vector<LogitsRow> out;
  for (int64_t row = 0; row < rows; ++row) {
    const float* a = ours + row * vocab;
    const float* r = ref + row * vocab;
    double max_diff = 0, max_ref = 0;
    for (int64_t i = 0; i < vocab; ++i) {
      max_diff = std::max(max_diff, std::fabs(static_cast<double>(a[i]) - r[i]));
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(r[i])));
    }
    out.push_back({max_ref > 0 ? max_diff / max_ref : max_diff,
                   std::max_element(a, a + vocab) - a == std::max_element(r, r + vocab) - r});
  }
  return out;
}

LogitsComparison summarize(const std::vector<LogitsRow>& rows) {
  LogitsComparison out;
  out.rows = static_cast<int>(rows.size());
  std::vector<double> ratios;
  for (const LogitsRow& row : rows) {
    ratios.push_back(row.ratio);
    out.worst_ratio = std::max(out.worst_ratio, row.ratio);
    out.far_rows += row.ratio > 0.1;
    out.argmax_mismatches += !row.same_argmax;
  }
  if (!ratios.empty()) {
    std::sort(ratios.begin(), ratios.end());
    out.median_ratio = ratios[ratios.size() / 2];
  }
  return out;
}

LogitsComparison compare_logits(const float* ours, const float* ref, int64_t rows, int64_t vocab) {
  return summarize(compare_logit_rows(ours, ref, rows, vocab));
}

}  // namespace dsinfer
