// Structured output's cost per token: build/grammar_mask_bench [TOKENIZER_DIR] [VOCAB] [TOKENS]
// Compiles JSON Schemas and a GBNF grammar against the tokenizer's vocabulary (padded to VOCAB ids,
// 129280 for DeepSeek V3 / R1) and times, over seeded random walks through each grammar (each step
// draws one of the ids the mask allows), the mask of allowed ids (TokenConstraint::next_allowed)
// and the matcher's accept: the work the engine adds to a constrained request's every draw.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "grammar/grammar_engine.h"
#include "tokenizer/tokenizer.h"

using namespace dsinfer;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

struct Case {
  const char* name;
  OutputGrammar grammar;
};

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : DSINFER_TOKENIZER_DATA "/deepseek-v3";
  const int64_t vocab = argc > 2 ? std::stoll(argv[2]) : 129280;
  const int64_t want = argc > 3 ? std::stoll(argv[3]) : 2000;
  const Tokenizer tokenizer = Tokenizer::load(dir);
  auto t0 = std::chrono::steady_clock::now();
  GrammarEngine engine(grammar_vocabulary(tokenizer, vocab));
  std::printf("vocabulary %lld ids: grammar engine ready in %.0f ms\n",
              static_cast<long long>(vocab), 1e3 * seconds_since(t0));
  const std::vector<Case> cases = {
      {"json_schema person",
       {OutputGrammar::Kind::kJsonSchema,
        R"({"type":"object","properties":{"name":{"type":"string","maxLength":24},
            "age":{"type":"integer","minimum":0,"maximum":120},"email":{"type":"string",
            "format":"email"},"tags":{"type":"array","items":{"type":"string","maxLength":8},
            "maxItems":4}},"required":["name","age","email","tags"],"additionalProperties":false})",
        true}},
      {"json_object", {OutputGrammar::Kind::kJsonObject, "", false}},
      {"gbnf list",
       {OutputGrammar::Kind::kGbnf, R"(root ::= item ("\n" item){0,5}
item ::= "- " [a-z ]{1,30})",
        false}},
  };
  std::printf("%-20s %10s %12s %12s %12s %8s\n", "grammar", "compile ms", "mask us/tok", "p99 us",
              "accept us", "tokens");
  for (const Case& c : cases) {
    SamplingParams p;
    p.grammar = c.grammar;
    p.stop_ids = {tokenizer.eos_id()};
    t0 = std::chrono::steady_clock::now();
    engine.validate(p.grammar);
    const double compile_ms = 1e3 * seconds_since(t0);
    std::vector<double> mask_us;
    double accept_s = 0;
    std::mt19937_64 rng(1);
    std::vector<uint32_t> allowed;
    while (static_cast<int64_t>(mask_us.size()) < want) {
      auto constraint = engine.constraint(p);
      for (int step = 0; step < 400 && !constraint->complete(); ++step) {
        t0 = std::chrono::steady_clock::now();
        const bool masked = constraint->next_allowed(allowed);
        mask_us.push_back(1e6 * seconds_since(t0));
        std::vector<int32_t> ids;  // the allowed ids, one drawn uniformly
        for (int64_t id = 0; id < vocab; ++id)
          if (!masked || allowed_bit(allowed.data(), id)) ids.push_back(static_cast<int32_t>(id));
        if (ids.empty()) break;
        const int32_t id = ids[rng() % ids.size()];
        if (id == tokenizer.eos_id()) break;
        t0 = std::chrono::steady_clock::now();
        constraint->accept(id);
        accept_s += seconds_since(t0);
      }
    }
    std::vector<double> sorted = mask_us;
    std::sort(sorted.begin(), sorted.end());
    double sum = 0;
    for (double us : mask_us) sum += us;
    const size_t n = mask_us.size();
    std::printf("%-20s %10.1f %12.1f %12.1f %12.1f %8zu\n", c.name, compile_ms, sum / n,
                sorted[std::min(n - 1, n * 99 / 100)], 1e6 * accept_s / n, n);
  }
  return 0;
}
