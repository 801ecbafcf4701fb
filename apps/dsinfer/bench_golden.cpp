#include "bench_golden.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <vector>

#include "convert/convert.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/eval_case.h"
#include "io/safetensors.h"
#include "kernels/linear.h"
#include "model/weights.h"
#include "parallel/comm.h"

namespace dsinfer::cli {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// A directory that is removed when this goes away.
struct TempDir {
  std::string path;
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "dsinfer-golden-XXXXXX").string();
    check(mkdtemp(pattern.data()) != nullptr, "bench: cannot create a temporary directory under ",
          fs::temp_directory_path().string());
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// The logits tensor [steps, batch, vocab] of a golden file, as fp32.
std::vector<float> golden_logits(const std::string& path, size_t expected) {
  const SafetensorsFile file(path);
  const TensorView& t = file.get("logits");
  check(t.dtype == DType::kF32, path, ": logits are ", dtype_name(t.dtype), ", not F32");
  check(t.n_bytes == expected * sizeof(float), path, ": logits hold ", t.n_bytes / sizeof(float),
        " values, the case makes ", expected);
  const float* p = reinterpret_cast<const float*>(t.data);
  return std::vector<float>(p, p + expected);
}

json summary(const LogitsComparison& c) {
  return {{"median_ratio", c.median_ratio},
          {"worst_ratio", c.worst_ratio},
          {"far_rows", c.far_rows},
          {"argmax_mismatches", c.argmax_mismatches}};
}

}  // namespace

json compare_with_golden(const std::string& dir, ThreadPool& pool, const KernelConfig& kernels) {
  const std::string hf = dir + "/hf", case_path = dir + "/ref-mp1-fp32.json";
  check(fs::is_directory(hf), "bench --golden: ", hf,
        " is not a directory (a golden model dir has hf/ and ref-mp1-*)");
  const EvalCase ec = read_eval_case(case_path);
  check(!ec.prefill.empty(), case_path, ": no prefill_tokens to compare");
  TempDir ckpt;
  log_info("bench: converting ", hf, " for the golden comparison");
  const ModelConfig hf_config = load_config(hf + "/config.json");
  convert_checkpoint({hf, ckpt.path, hf_config.n_routed_experts, 1});
  const ModelConfig config = load_config(ckpt.path + "/config.json");
  auto local = make_local_comm();
  KernelConfig exact_kernels = kernels, fast_kernels = kernels;
  exact_kernels.act = ActDType::kF32;
  fast_kernels.act = ActDType::kBF16;
  auto model = Transformer::load(config, ckpt.path, *local, pool, exact_kernels);

  const std::vector<float> exact = eval_case_logits(*model, ec, case_path);
  // the KV cache in bf16 (--kv-cache-dtype bf16), as the demo keeps its own
  const std::vector<float> exact_bf16_kv = eval_case_logits(*model, ec, case_path, KVDType::kBF16);
  model->set_kernels(fast_kernels);
  const std::vector<float> fast = eval_case_logits(*model, ec, case_path);
  const std::vector<float> fast_bf16_kv = eval_case_logits(*model, ec, case_path, KVDType::kBF16);

  const int64_t vocab = config.vocab_size, rows = static_cast<int64_t>(exact.size()) / vocab;
  const std::vector<float> ref = golden_logits(dir + "/ref-mp1-fp32.safetensors", exact.size());
  const std::vector<float> demo = golden_logits(dir + "/ref-mp1-bf16.safetensors", exact.size());
  return {{"dir", dir},
          {"rows", rows},
          {"exact", summary(compare_logits(exact.data(), ref.data(), rows, vocab))},
          {"fast", summary(compare_logits(fast.data(), ref.data(), rows, vocab))},
          {"exact_bf16_kv", summary(compare_logits(exact_bf16_kv.data(), ref.data(), rows, vocab))},
          {"fast_bf16_kv", summary(compare_logits(fast_bf16_kv.data(), ref.data(), rows, vocab))},
          {"demo_bf16", summary(compare_logits(demo.data(), ref.data(), rows, vocab))}};
}

void print_golden_comparison(const json& c) {
  std::printf(
      "\ngolden %s: %d rows of logits against the reference's fp32 run, max|d|/max|ref| per row\n",
      c["dir"].get<std::string>().c_str(), c["rows"].get<int>());
  std::printf("                       median      worst  rows>0.1  argmax differs\n");
  const std::pair<const char*, const char*> rows[] = {{"exact", "exact mode"},
                                                      {"exact_bf16_kv", "exact, bf16 KV"},
                                                      {"fast", "fast mode"},
                                                      {"fast_bf16_kv", "fast, bf16 KV"},
                                                      {"demo_bf16", "demo's bf16 run"}};
  for (const auto& [key, label] : rows) {
    if (!c.contains(key)) continue;
    const json& s = c[key];
    std::printf("  %-16s %10.3g %10.3g %9d %15d\n", label, s["median_ratio"].get<double>(),
                s["worst_ratio"].get<double>(), s["far_rows"].get<int>(),
                s["argmax_mismatches"].get<int>());
  }
}

}  // namespace dsinfer::cli
