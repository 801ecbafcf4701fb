// Structured output's test fixtures (structured_output_test, structured_output_samples_test): the
// random chat model and the story model with the DeepSeek-V3 tokenizer and a grammar engine over
// its vocabulary, requests run together on one engine, and JSON Schemas whose valid answers are
// bounded.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "grammar/grammar_engine.h"
#include "model/transformer.h"
#include "parallel/comm.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer::test {

using json = nlohmann::json;
using Tokens = std::vector<int32_t>;

inline const Tokenizer& tokenizer() {
  static const Tokenizer t = Tokenizer::load(data_path("tokenizer/deepseek-v3"));
  return t;
}

// The model with its grammar engine (the structured-output tests' pair).
struct ModelWithGrammar {
  std::unique_ptr<Comm> comm = make_local_comm();
  ThreadPool pool{2};
  ModelConfig config;
  std::unique_ptr<Transformer> model;
  std::unique_ptr<GrammarEngine> grammar;
  explicit ModelWithGrammar(const std::string& name) {
    const std::string ckpt = convert_golden(name);
    config = load_config(ckpt + "/config.json");
    model = Transformer::load(config, ckpt, *comm, pool);
    grammar = std::make_unique<GrammarEngine>(grammar_vocabulary(tokenizer(), config.vocab_size));
  }
};

inline ModelWithGrammar& model_with_grammar(const std::string& name) {
  static std::map<std::string, std::unique_ptr<ModelWithGrammar>> models;
  auto& m = models[name];
  if (!m) m = std::make_unique<ModelWithGrammar>(name);
  return *m;
}

struct Answer {
  Tokens tokens;
  FinishReason reason = FinishReason::kError;
  std::string error;
  std::string text() const { return tokenizer().decode(tokens, /*skip_special_tokens=*/false); }
};

// Runs every request together on one engine (step_tokens: the prefill chunk budget).
inline std::vector<Answer> run_together(ModelWithGrammar& m,
                                        const std::vector<std::pair<Tokens, SamplingParams>>& rs,
                                        int64_t step_tokens = 256) {
  int64_t positions = 0;
  for (const auto& [prompt, p] : rs)
    positions += static_cast<int64_t>(prompt.size()) + p.max_new_tokens + 64;
  KVCache cache(m.config, positions);
  EngineOptions o;
  o.step_tokens = step_tokens;
  o.max_running = 128;
  o.make_constraint = m.grammar->factory();
  Engine engine(*m.model, cache, o);
  std::vector<Answer> answers(rs.size());
  for (size_t i = 0; i < rs.size(); ++i) {
    RequestEvents e;
    e.on_token = [&answers, i](int32_t t) { answers[i].tokens.push_back(t); };
    e.on_finish = [&answers, i](FinishReason r, const std::string& why) {
      answers[i].reason = r;
      answers[i].error = why;
    };
    engine.submit(rs[i].first, rs[i].second, std::move(e));
  }
  engine.run_until_idle();
  return answers;
}

inline SamplingParams schema_params(const json& schema, uint64_t seed, float temperature = 1.0f) {
  SamplingParams p;
  p.temperature = temperature;
  p.seed = seed;
  p.max_new_tokens = 300;
  p.stop_ids = {tokenizer().eos_id()};
  p.grammar = {OutputGrammar::Kind::kJsonSchema, schema.dump(), /*strict=*/true};
  return p;
}

inline Tokens chat_prompt(const std::string& text) {
  return tokenizer().encode("<｜begin▁of▁sentence｜><｜User｜>" + text + "<｜Assistant｜>", false);
}

// Schemas whose every valid answer is bounded (a random model closes a free string or number
// only by chance, so those are bounded by maxLength and ranges).
inline std::vector<json> test_schemas() {
  return {
      json::parse(R"({"type": "object", "properties": {
          "name": {"type": "string", "maxLength": 12},
          "age": {"type": "integer", "minimum": 0, "maximum": 120},
          "member": {"type": "boolean"}},
        "required": ["name", "age", "member"], "additionalProperties": false})"),
      json::parse(R"({"type": "object", "properties": {
          "color": {"enum": ["red", "green", "blue"]},
          "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "minItems": 1,
                   "maxItems": 3},
          "nested": {"type": "object", "properties": {
              "x": {"type": "integer", "minimum": -5, "maximum": 5},
              "ok": {"anyOf": [{"type": "boolean"}, {"type": "null"}]}},
            "required": ["x", "ok"], "additionalProperties": false}},
        "required": ["color", "tags", "nested"], "additionalProperties": false})"),
      json::parse(R"({"$defs": {"point": {"type": "object", "properties": {
            "x": {"type": "integer", "minimum": 0, "maximum": 9},
            "label": {"type": "string", "maxLength": 4}},
          "required": ["x", "label"], "additionalProperties": false}},
        "type": "object", "properties": {
          "kind": {"const": "shape"},
          "when": {"type": "string", "format": "date"},
          "points": {"type": "array", "items": {"$ref": "#/$defs/point"}, "maxItems": 2}},
        "required": ["kind", "when", "points"], "additionalProperties": false})"),
  };
}

}  // namespace dsinfer::test
