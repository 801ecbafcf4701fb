#include "bench_report.h"

#include <cstdio>
#include <string>

#include "bench_golden.h"

namespace dsinfer::cli {

using json = nlohmann::json;

const json& headline_decode(const json& decodes) {
  for (const json& d : decodes)
    if (d["batch"] == 1) return d;
  return decodes.at(0);
}

const json& headline_prefill(const json& prefills) {
  const json* best = &prefills.at(0);
  for (const json& p : prefills) {
    const int len = p["tokens"], best_len = (*best)["tokens"];
    if (best_len != 512 && (len == 512 || len > best_len)) best = &p;
  }
  return *best;
}

void print_collectives(const char* title, const json& c, double step_seconds) {
  std::printf("  %-22s %9s %9s %9s  share of the step\n", title, "calls", "KB", "ms");
  for (const char* kind : {"all_reduce", "all_gather"}) {
    const json& k = c[kind];
    const double sec = k["seconds"];
    std::printf("    %-20s %9.0f %9.1f %9.3f  %5.3f\n", kind, k["calls"].get<double>(),
                k["bytes"].get<double>() / 1e3, 1e3 * sec,
                step_seconds > 0 ? sec / step_seconds : 0.0);
  }
}

void print_parts(const char* title, const json& parts, bool decode) {
  double total = 0;
  for (const json& p : parts) total += p["seconds"].get<double>();
  std::printf("  %-22s %9s  share %9s %9s\n", title, "ms", decode ? "MB" : "GFLOP",
              decode ? "GB/s" : "GFLOP/s");
  for (const json& p : parts) {
    const double sec = p["seconds"],
                 amount = decode ? p["weight_bytes"].get<double>() : p["flops"].get<double>();
    std::printf("    %-20s %9.2f  %5.3f %9.1f %9.1f\n", p["part"].get<std::string>().c_str(),
                1e3 * sec, sec / total, amount / (decode ? 1e6 : 1e9),
                sec > 0 ? amount / sec / 1e9 : 0.0);
  }
}

namespace {

// Decode at depth: per depth, the step, attention's time and rate, and the extra over depth 16.
void print_depths(const json& depths, const std::string& ceiling_name) {
  if (!depths.empty()) {
    std::printf(
        "\ndecode at depth (%s cache; synthetic entries)  tokens/s  ms/step  attention ms  "
        "attention GFLOP/s  "
        "extra over depth 16: ms  GFLOP/s  fraction of %s\n",
        depths[0]["kv_cache_dtype"].get<std::string>().c_str(), ceiling_name.c_str());
    for (const json& d : depths)
      std::printf("  depth %6lld batch %-3d %26.2f %8.2f %13.2f %17.1f %24.2f %8.1f %6.3f\n",
                  static_cast<long long>(d["depth"].get<int64_t>()), d["batch"].get<int>(),
                  d["tokens_per_s"].get<double>(), d["ms_per_step"].get<double>(),
                  d["attention_ms_per_step"].get<double>(), d["attention_gflops"].get<double>(),
                  d["extra_ms_over_depth_16"].get<double>(),
                  d["extra_gflops_over_depth_16"].get<double>(),
                  d["extra_flop_fraction"].get<double>());
  }
}

// The conversations benchmark (prefix cache): per run, then per turn.
void print_conversations(const json& conversations) {
  for (const json& v : conversations) {
    std::printf(
        "\nconversations: %d users x %d turns, system prompt %d, user turns %d, answers %d; prefix "
        "cache %s: "
        "%.1f s\n",
        v["users"].get<int>(), v["turns"].get<int>(), v["system_prompt_tokens"].get<int>(),
        v["user_tokens"].get<int>(), v["answer_tokens"].get<int>(),
        v["prefix_cache"].get<bool>() ? "on" : "off", v["seconds"].get<double>());
    std::printf(
        "  prompt tokens %lld, from the cache %lld of an ideal %lld (%.3f); peak KV %lld "
        "positions, %.1f MiB; "
        "evictions %lld\n",
        static_cast<long long>(v["prompt_tokens"].get<int64_t>()),
        static_cast<long long>(v["reused_tokens"].get<int64_t>()),
        static_cast<long long>(v["ideal_reused_tokens"].get<int64_t>()),
        v["hit_of_ideal"].get<double>(),
        static_cast<long long>(v["peak_kv_positions"].get<int64_t>()),
        v["peak_kv_bytes"].get<double>() / (1 << 20),
        static_cast<long long>(v["evictions"].get<int64_t>()));
    std::printf("  turn  prompt tokens  reused  TTFT mean/p90 s   TPOT mean ms\n");
    for (const json& t : v["by_turn"])
      std::printf("  %4d %14lld %7lld %8.3f %7.3f %12.1f\n", t["turn"].get<int>(),
                  static_cast<long long>(t["prompt_tokens"].get<int64_t>()),
                  static_cast<long long>(t["reused_tokens"].get<int64_t>()),
                  t["ttft_mean_s"].get<double>(), t["ttft_p90_s"].get<double>(),
                  1e3 * t["tpot_mean_s"].get<double>());
  }
}

void print_servings(const json& servings) {
  if (!servings.empty()) {
    std::printf(
        "\nserving    requests  tokens/s  per-seq tok/s  TTFT mean/p90 s  TPOT mean/p90 ms  "
        "longest step ms\n");
    for (const json& v : servings)
      std::printf("  conc %-3d %7d %9.2f %10.2f %12.3f %6.3f %10.1f %6.1f %12.1f\n",
                  v["concurrency"].get<int>(), v["requests"].get<int>(),
                  v["tokens_per_s"].get<double>(), v["per_sequence_tokens_per_s"].get<double>(),
                  v["ttft_mean_s"].get<double>(), v["ttft_p90_s"].get<double>(),
                  1e3 * v["tpot_mean_s"].get<double>(), 1e3 * v["tpot_p90_s"].get<double>(),
                  1e3 * v["max_step_s"].get<double>());
  }
}

void print_mtps(const json& mtps) {
  if (!mtps.empty()) {
    std::printf(
        "\nmtp             decode ms  verify ms (x)    draft ms (x)   verify/decode bytes  "
        "break-even "
        "acceptance  speedup at 0.667 / 0.85\n");
    for (const json& m : mtps)
      for (const json& k : m["by_drafts"]) {
        const double d = m["decode_ms"], v = k["verify_ms"], dr = k["draft_ms"];
        const double even = k["break_even_acceptance"];
        std::printf("  batch %-3d k=%d %8.2f %9.2f (%.2f) %9.2f (%.2f) %12.2f %18s %14.2f / %.2f\n",
                    m["batch"].get<int>(), k["drafts"].get<int>(), d, v, v / d, dr, dr / d,
                    k["verify_weight_bytes_rank0"].get<double>() /
                        m["decode_weight_bytes_rank0"].get<double>(),
                    even > 1 ? "never" : std::to_string(even).substr(0, 4).c_str(),
                    k["speedup_at_0.667"].get<double>(), k["speedup_at_0.85"].get<double>());
      }
  }
}

}  // namespace

void print_bench_report(const json& out) {
  const json &decodes = out["decode"], &prefills = out["prefill"], &depths = out["depth"],
             &mtps = out["mtp"];
  const json &servings = out["serving"], &conversations = out["conversations"],
             &ceilings = out["ceilings"];
  const std::string ceiling_name = out["prefill_ceiling_name"];
  std::printf("dsinfer bench: %s\n", out["ckpt_path"].get<std::string>().c_str());
  std::printf(
      "isa %s, %d threads x %d rank(s), activations %s, %s\n",
      out["isa"].get<std::string>().c_str(), out["threads"].get<int>(),
      out["world_size"].get<int>(), out["act_dtype"].get<std::string>().c_str(),
      out["batch_invariant"].get<bool>() ? "batch invariant" : "batch variant (--batch-variant)");
  std::printf("\nceilings (all ranks at once, summed)      total    per rank\n");
  auto ceiling_row = [&](const char* name, const char* key, const char* unit) {
    std::printf("  %-34s %9.1f", name, ceilings[key].get<double>());
    for (const json& r : ceilings["per_rank"]) std::printf(" %9.1f", r[key].get<double>());
    std::printf("  %s\n", unit);
  };
  ceiling_row("streaming read bandwidth", "read_gbps", "GB/s");
  ceiling_row("fp32 FMA peak", "fma_f32_gflops", "GFLOP/s");
  ceiling_row("bf16 dot peak", "bf16_dot_gflops", "GFLOP/s");
  ceiling_row("AMX bf16 peak", "amx_bf16_gflops", "GFLOP/s");
  ceiling_row("int8 dot peak", "int8_dot_gops", "GOP/s");
  std::printf("\ndecode     tokens/s  ms/step  MB/token  GB/s     bw fraction\n");
  for (const json& d : decodes)
    std::printf("  batch %-3d %8.2f %8.2f %9.2f %7.2f  %.3f\n", d["batch"].get<int>(),
                d["tokens_per_s"].get<double>(), d["ms_per_step"].get<double>(),
                d["weight_bytes_per_token"].get<double>() / 1e6, d["gbps"].get<double>(),
                d["bw_fraction"].get<double>());
  std::printf("\nprefill    tokens/s  seconds  GFLOP     GFLOP/s  fraction of %s\n",
              ceiling_name.c_str());
  for (const json& p : prefills)
    std::printf("  %4d tokens %6.2f %8.3f %9.2f %7.2f  %.3f\n", p["tokens"].get<int>(),
                p["tokens_per_s"].get<double>(), p["seconds"].get<double>(),
                p["flops"].get<double>() / 1e9, p["gflops"].get<double>(),
                p["flop_fraction"].get<double>());
  print_depths(depths, ceiling_name);
  print_conversations(conversations);
  print_servings(servings);
  print_mtps(mtps);
  std::printf(
      "\nwhere the time goes (rank 0, one forward call; attention and mlp include their norms)\n");
  const json &decode = headline_decode(decodes), &prefill = headline_prefill(prefills);
  const std::string decode_title = "decode batch " + std::to_string(decode["batch"].get<int>());
  print_parts(decode_title.c_str(), decode["parts_rank0"], /*decode=*/true);
  const std::string prefill_title =
      "prefill " + std::to_string(prefill["tokens"].get<int>()) + " tokens";
  print_parts(prefill_title.c_str(), prefill["parts_rank0"], /*decode=*/false);
  std::printf("\ncollectives (rank 0, one forward call; bytes of its own part)\n");
  print_collectives(decode_title.c_str(), decode["collectives_rank0"],
                    decode["ms_per_step"].get<double>() / 1e3);
  print_collectives(prefill_title.c_str(), prefill["collectives_rank0"],
                    prefill["seconds"].get<double>());
  if (!out["golden"].is_null()) print_golden_comparison(out["golden"]);
  std::printf("\ndecode_bw_fraction=%.3f prefill_flop_fraction=%.3f\n",
              out["decode_bw_fraction"].get<double>(), out["prefill_flop_fraction"].get<double>());
}

}  // namespace dsinfer::cli
