// dsinfer bench: how close decode comes to the memory-bandwidth ceiling and prefill to the
// arithmetic ceiling, all measured in one run on this machine with the model's thread count.
// Order: ceilings first (their 1 GB buffer is gone before the weights fill the page cache), then
// load, one untimed prefill (faults the mapped weights in), the timed prefills, the decodes, and
// the ceilings again (the higher of the two measurements counts).
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/ceilings.h"
#include "bench/kernel_table.h"
#include "bench/model_bench.h"
#include "bench_golden.h"
#include "bench_report.h"
#include "comm/backends.h"
#include "commands.h"
#include "core/cpu.h"
#include "core/error.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "io/mapped_file.h"
#include "model_options.h"

namespace dsinfer::cli {

using json = nlohmann::json;

namespace {

struct BenchOptions {
  ModelOptions model;
  std::vector<int> batches = {1, 4};
  std::vector<int> prefill_lens = {64, 512};
  int decode_steps = 16;
  int warmup_steps = 4;
  int prompt_len = 16;
  int64_t bw_mb = 1024;
  int64_t fma_iterations = 20'000'000;
  int passes = 3;
  int runs = 2;
  uint64_t seed = 1;
  bool as_json = false;
  std::string golden;  // a golden model dir: compare exact and fast mode with the demo's bf16 run
  std::vector<int64_t> depths;  // decode at these depths (synthetic cache entries), beside depth 16
  std::vector<int> serving = {1, 4, 8};  // concurrencies of the serving-shaped runs; {0}: none
  int serving_requests = 0;              // 0: twice the concurrency
  ServingOptions serving_shape;
  ConversationOptions conversations{.users = 0};  // users 0: no conversation workload
  bool explain = false;     // --explain-kernels: print the plan table and nothing else
  std::string explain_cpu;  // its CPU family (empty: this machine's kernels)
  std::vector<int64_t> explain_tokens = {1, 2, 3, 4, 6, 8, 12, 16, 32, 64, 512};
};

double mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

json conversation_json(const ConversationResult& r) {
  json turns = json::array();
  for (size_t t = 0; t < r.ttft_seconds.size(); ++t)
    turns.push_back({{"turn", t + 1},
                     {"prompt_tokens", r.turn_prompt_tokens[t]},
                     {"reused_tokens", r.turn_reused[t]},
                     {"ttft_mean_s", mean(r.ttft_seconds[t])},
                     {"ttft_p90_s", percentile(r.ttft_seconds[t], 0.9)},
                     {"tpot_mean_s", mean(r.tpot_seconds[t])}});
  const ConversationOptions& o = r.options;
  return {{"users", o.users},
          {"turns", o.turns},
          {"system_prompt_tokens", o.system_len},
          {"user_tokens", o.user_len},
          {"answer_tokens", o.max_new_tokens},
          {"prefix_cache", o.prefix_cache},
          {"seconds", r.seconds},
          {"prompt_tokens", r.prompt_tokens},
          {"reused_tokens", r.reused_tokens},
          {"ideal_reused_tokens", r.ideal_reused_tokens},
          {"hit_of_ideal", r.ideal_reused_tokens > 0
                               ? static_cast<double>(r.reused_tokens) / r.ideal_reused_tokens
                               : 0.0},
          {"peak_kv_positions", r.peak_kv_blocks * kKVBlock},
          {"peak_kv_bytes", r.peak_kv_blocks * r.kv_bytes_per_block},
          {"evictions", r.evictions},
          {"by_turn", turns}};
}

json serving_json(const ServingResult& r) {
  return {{"concurrency", r.options.concurrency},
          {"requests", r.options.requests},
          {"prompt_len", r.options.prompt_len},
          {"max_new_tokens", r.options.max_new_tokens},
          {"stagger_steps", r.options.stagger_steps},
          {"step_tokens", r.options.step_tokens},
          {"seconds", r.seconds},
          {"steps", r.steps},
          {"generated_tokens", r.generated_tokens},
          {"tokens_per_s", r.tokens_per_s()},
          {"per_sequence_tokens_per_s", mean(r.tpot_seconds) > 0 ? 1 / mean(r.tpot_seconds) : 0.0},
          {"ttft_mean_s", mean(r.ttft_seconds)},
          {"ttft_p90_s", percentile(r.ttft_seconds, 0.9)},
          {"tpot_mean_s", mean(r.tpot_seconds)},
          {"tpot_p90_s", percentile(r.tpot_seconds, 0.9)},
          {"latency_mean_s", mean(r.latency_seconds)},
          {"max_step_s", r.max_step_seconds}};
}

// Every rank's values side by side ([world][n]), so rank 0 can report each rank and the sum.
std::vector<std::vector<double>> gather(Comm& comm, const std::vector<double>& mine) {
  const int64_t n = static_cast<int64_t>(mine.size());
  std::vector<float> in(mine.begin(), mine.end()), out(n * comm.world_size());
  comm.all_gather(in.data(), n, out.data());
  std::vector<std::vector<double>> all(comm.world_size());
  for (int r = 0; r < comm.world_size(); ++r)
    all[r].assign(out.begin() + r * n, out.begin() + (r + 1) * n);
  return all;
}

double sum_over_ranks(Comm& comm, double mine) {
  double total = 0;
  for (const auto& r : gather(comm, {mine})) total += r[0];
  return total;
}

// The fastest of `runs` results of measure() (a shared machine's neighbours only ever slow a run
// down). Every rank makes the same calls, so their collectives stay in step.
template <class Measure>
auto fastest(int runs, const Measure& measure) {
  auto best = measure();
  for (int run = 1; run < runs; ++run)
    if (auto again = measure(); again.seconds < best.seconds) best = again;
  return best;
}

// Rank 0's time, bytes and multiply-adds per part of the model, per forward call.
json parts_json(const PartTotals& totals, int calls) {
  json parts = json::array();
  for (int i = 0; i < static_cast<int>(ForwardPart::kCount); ++i) {
    const PartStats& p = totals.parts[i];
    parts.push_back({{"part", forward_part_name(static_cast<ForwardPart>(i))},
                     {"seconds", p.seconds / calls},
                     {"weight_bytes", static_cast<double>(p.weight_bytes) / calls},
                     {"flops", 2.0 * static_cast<double>(p.macs) / calls}});
  }
  return parts;
}

// Rank 0's collectives per forward call, per kind: calls, bytes (its own part) and seconds.
json collectives_json(const CollectiveStats& c, int calls) {
  auto kind = [&](const CollectiveCount& k) {
    return json{{"calls", static_cast<double>(k.calls) / calls},
                {"bytes", static_cast<double>(k.bytes) / calls},
                {"seconds", k.seconds / calls}};
  };
  return {{"all_reduce", kind(c.all_reduce)}, {"all_gather", kind(c.all_gather)}};
}

// --explain-kernels: which kernel serves each kind of this checkpoint's matrices at each token
// count, for this machine's kernel config or a typical CPU of another family. The shards are
// mapped, not read.
void run_explain(const BenchOptions& o) {
  KernelConfig kernels = *o.model.kernels;
  if (!o.explain_cpu.empty()) {
    KernelConfig typical = typical_kernel_config(parse_cpu_family(o.explain_cpu));
    typical.act = kernels.act;
    typical.batch_invariant = kernels.batch_invariant;
    kernels = typical;
  }
  const ModelConfig config = o.model.load_config();
  auto comm = make_comm();
  set_read_into_huge_pages(HugePages::kOff);
  auto model = o.model.load_model(config, *comm);
  if (comm->rank() != 0) return;
  if (!o.explain_cpu.empty()) std::printf("as on a typical %s CPU\n", o.explain_cpu.c_str());
  std::printf("%s", kernel_plan_table(matrix_kinds(*model), o.explain_tokens, kernels).c_str());
}

json measure_prefills(const BenchOptions& o, Transformer& model, Comm& comm) {
  json prefills = json::array();
  for (int len : o.prefill_lens) {
    log_info("bench: prefill of ", len, " tokens (", o.runs, " runs)");
    const PrefillResult r = fastest(o.runs, [&] { return bench_prefill(model, len, o.seed + 1); });
    const double flops = 2.0 * sum_over_ranks(comm, static_cast<double>(r.macs));
    const double gflops = flops / r.seconds / 1e9;
    prefills.push_back({{"tokens", len},
                        {"seconds", r.seconds},
                        {"tokens_per_s", r.tokens_per_s()},
                        {"flops", flops},
                        {"flops_rank0", 2.0 * static_cast<double>(r.macs)},
                        {"gflops", gflops},
                        {"parts_rank0", parts_json(r.parts, 1)},
                        {"collectives_rank0", collectives_json(r.collectives, 1)}});
  }
  return prefills;
}

json measure_decodes(const BenchOptions& o, Transformer& model, Comm& comm) {
  json decodes = json::array();
  for (int b : o.batches) {
    log_info("bench: decode at batch ", b, " (", o.runs, " runs of ", o.warmup_steps, " warm-up + ",
             o.decode_steps, " steps)");
    const DecodeResult r = fastest(o.runs, [&] {
      return bench_decode(model, b, o.prompt_len, o.warmup_steps, o.decode_steps, o.seed + 2);
    });
    const double bytes =
        sum_over_ranks(comm, static_cast<double>(r.weight_bytes));  // all steps, all ranks
    const double gbps = bytes / r.seconds / 1e9;
    decodes.push_back({{"batch", b},
                       {"steps", r.steps},
                       {"seconds", r.seconds},
                       {"tokens_per_s", r.tokens_per_s()},
                       {"ms_per_step", 1e3 * r.seconds / r.steps},
                       {"weight_bytes_per_step", bytes / r.steps},
                       {"weight_bytes_per_token", bytes / r.steps / b},
                       {"weight_bytes_per_token_rank0", r.bytes_per_token()},
                       {"gbps", gbps},
                       {"parts_rank0", parts_json(r.parts, r.steps)},
                       {"collectives_rank0", collectives_json(r.collectives, r.steps)}});
  }
  return decodes;
}

// Decode at depth: each batch at depth 16 and at every --depth; the extra time over depth 16
// against the extra flops (attention's, which grow with the depth) is what the depth costs.
json measure_depths(const BenchOptions& o, Transformer& model, Comm& comm) {
  json depths = json::array();
  if (o.depths.empty()) return depths;
  constexpr int64_t kBaseDepth = 16;
  const KVDType kv = o.model.kv_dtype();
  for (int b : o.batches) {
    double base_seconds = 0, base_flops = 0;
    std::vector<int64_t> all = {kBaseDepth};
    all.insert(all.end(), o.depths.begin(), o.depths.end());
    for (int64_t depth : all) {
      log_info("bench: decode at depth ", depth, ", batch ", b, " (", o.runs, " runs of ",
               o.warmup_steps, " warm-up + ", o.decode_steps, " steps)");
      const DecodeResult r = fastest(o.runs, [&] {
        return bench_decode_at_depth(model, b, depth, o.warmup_steps, o.decode_steps, o.seed + 5,
                                     kv);
      });
      const PartStats& att = r.parts.parts[static_cast<int>(ForwardPart::kAttention)];
      int64_t macs = 0;
      for (const PartStats& p : r.parts.parts) macs += p.macs;
      const double step_s = r.seconds / r.steps;
      const double flops = 2.0 * sum_over_ranks(comm, static_cast<double>(macs)) / r.steps;
      const double att_flops = 2.0 * sum_over_ranks(comm, static_cast<double>(att.macs)) / r.steps;
      if (depth == kBaseDepth) {
        base_seconds = step_s;
        base_flops = flops;
      }
      if (depth == kBaseDepth &&
          std::find(o.depths.begin(), o.depths.end(), kBaseDepth) != o.depths.end())
        continue;
      const double extra_s = step_s - base_seconds, extra_flops = flops - base_flops;
      depths.push_back(
          {{"depth", depth},
           {"batch", b},
           {"kv_cache_dtype", kv_dtype_name(kv)},
           {"tokens_per_s", r.tokens_per_s()},
           {"ms_per_step", 1e3 * step_s},
           {"attention_ms_per_step", 1e3 * att.seconds / r.steps},
           {"attention_gflops", att.seconds > 0 ? att_flops / (att.seconds / r.steps) / 1e9 : 0.0},
           {"weight_gbps",
            sum_over_ranks(comm, static_cast<double>(r.weight_bytes)) / r.seconds / 1e9},
           {"extra_ms_over_depth_16", 1e3 * extra_s},
           {"extra_gflops_over_depth_16", extra_s > 0 ? extra_flops / extra_s / 1e9 : 0.0},
           {"parts_rank0", parts_json(r.parts, r.steps)}});
    }
  }
  return depths;
}

json measure_mtp(const BenchOptions& o, Transformer& model) {
  json mtps = json::array();
  if (!o.model.mtp_on()) return mtps;
  for (int b : o.batches) {
    const int max_drafts = std::max(3, o.model.draft_tokens);
    log_info("bench: MTP speculation cost at batch ", b, ", 1 to ", max_drafts, " drafts (",
             o.decode_steps, " rounds)");
    const MtpCostResult m =
        bench_mtp(model, b, o.prompt_len, o.decode_steps, max_drafts, o.seed + 4);
    json per_k = json::array();
    for (int k = 1; k <= max_drafts; ++k)
      per_k.push_back({{"drafts", k},
                       {"verify_ms", 1e3 * m.verify_seconds[k - 1]},
                       {"draft_ms", 1e3 * m.draft_seconds[k - 1]},
                       {"verify_weight_bytes_rank0", m.verify_bytes[k - 1]},
                       {"break_even_acceptance", m.break_even_acceptance(k)},
                       {"speedup_at_0.667", m.speedup_at(k, 2.0 / 3)},
                       {"speedup_at_0.85", m.speedup_at(k, 0.85)},
                       {"verify_parts_rank0", parts_json(m.verify_parts[k - 1], m.rounds)}});
    mtps.push_back({{"batch", b},
                    {"decode_ms", 1e3 * m.decode_seconds},
                    {"decode_weight_bytes_rank0", m.decode_bytes},
                    {"decode_parts_rank0", parts_json(m.decode_parts, m.rounds)},
                    {"by_drafts", per_k}});
  }
  return mtps;
}

json measure_servings(const BenchOptions& o, Transformer& model) {
  json servings = json::array();
  for (int concurrency : o.serving) {
    if (concurrency == 0) continue;
    ServingOptions so = o.serving_shape;
    so.concurrency = concurrency;
    so.requests = o.serving_requests > 0 ? o.serving_requests : 2 * concurrency;
    so.seed = o.seed + 3;
    log_info("bench: serving ", so.requests, " requests at concurrency ", concurrency,
             " (prompts of ", so.prompt_len, ", ", so.max_new_tokens,
             " new tokens, one arriving every ", so.stagger_steps, " steps, step budget ",
             so.step_tokens, " tokens)");
    servings.push_back(serving_json(bench_serving(model, so)));
  }
  return servings;
}

json measure_conversations(const BenchOptions& o, Transformer& model) {
  json conversations = json::array();
  if (o.conversations.users == 0) return conversations;
  for (bool prefix : {true, false}) {
    ConversationOptions co = o.conversations;
    co.prefix_cache = prefix;
    co.seed = o.seed + 6;
    log_info("bench: ", co.users, " conversations x ", co.turns, " turns (system prompt ",
             co.system_len, ", user turns ", co.user_len, ", answers ", co.max_new_tokens,
             " tokens), prefix cache ", prefix ? "on" : "off");
    conversations.push_back(conversation_json(bench_conversations(model, co)));
  }
  return conversations;
}

// Every rank's ceilings (the higher of before and after) and their sums, as "ceilings" is in the
// JSON; `total` gets the sums.
json ceilings_json(Comm& comm, const Ceilings& before, const Ceilings& after, int64_t buffer_bytes,
                   Ceilings& total) {
  const Ceilings mine{
      std::max(before.read_gbps, after.read_gbps), std::max(before.fma_gflops, after.fma_gflops),
      std::max(before.bf16_gflops, after.bf16_gflops),
      std::max(before.amx_gflops, after.amx_gflops), std::max(before.int8_gops, after.int8_gops)};
  const auto per_rank = gather(
      comm, {mine.read_gbps, mine.fma_gflops, mine.bf16_gflops, mine.amx_gflops, mine.int8_gops});
  total = {};
  json ranks = json::array();
  for (const auto& r : per_rank) {
    total.read_gbps += r[0];
    total.fma_gflops += r[1];
    total.bf16_gflops += r[2];
    total.amx_gflops += r[3];
    total.int8_gops += r[4];
    ranks.push_back({{"read_gbps", r[0]},
                     {"fma_f32_gflops", r[1]},
                     {"bf16_dot_gflops", r[2]},
                     {"amx_bf16_gflops", r[3]},
                     {"int8_dot_gops", r[4]}});
  }
  return {{"read_gbps", total.read_gbps},
          {"fma_f32_gflops", total.fma_gflops},
          {"bf16_dot_gflops", total.bf16_gflops},
          {"amx_bf16_gflops", total.amx_gflops},
          {"int8_dot_gops", total.int8_gops},
          {"bw_buffer_bytes_per_rank", buffer_bytes},
          {"per_rank", ranks}};
}

void check_options(const BenchOptions& o, const ModelConfig& config) {
  check(!o.batches.empty() && !o.prefill_lens.empty(), "bench: --batch and --prefill need values");
  check(o.decode_steps >= 1 && o.warmup_steps >= 0 && o.prompt_len >= 1 && o.passes >= 1 &&
            o.runs >= 1 && o.bw_mb >= 1 && o.fma_iterations >= 1,
        "bench: steps, prompt length, passes, runs, --bw-mb and --fma-iterations must be positive");
  for (int b : o.batches)
    check(b >= 1 && b <= config.max_batch_size, "bench: batch ", b,
          " is outside [1, max_batch_size=", config.max_batch_size, "]");
}

void run_bench(const BenchOptions& o) {
  if (o.explain) return run_explain(o);
  const ModelConfig config = o.model.load_config();
  check_options(o, config);
  auto comm = make_comm();
  ThreadPool& pool = ThreadPool::global();
  const KernelConfig& kernels = *o.model.kernels;
  const Isa isa = kernels.isa;

  // ceilings: every rank measures at the same time (a barrier before each pass), so ranks that
  // share a machine share its memory bandwidth and cores as they do when running the model. They
  // are measured again after the model's runs and the higher value counts: on a shared machine a
  // single measurement can land in a slow moment and flatter every fraction. Exact mode's flop
  // ceiling is the fp32 FMA peak, fast mode's the AMX or bf16-dot peak where it runs those
  // kernels, int8 mode's the int8 dot peak (model_bench.h: prefill_ceiling).
  log_info("bench: ceilings with ", pool.size(), " threads x ", comm->world_size(), " rank(s), ",
           isa_name(isa));
  CeilingOptions co;
  co.buffer_bytes = o.bw_mb << 20;
  co.fma_iterations = o.fma_iterations;
  co.passes = o.passes;
  const Ceilings before = measure_ceilings(pool, isa, kernels.vnni, co, [&] { comm->barrier(); });
  check(prefill_ceiling_gflops(before, kernels) > 0, "bench: no ", act_dtype_name(kernels.act),
        " flop ceiling on this CPU (", isa_name(isa), ")");

  auto model = o.model.load_model(config, *comm);
  // the longest prefill untimed first: it faults the weights in and grows every buffer to its
  // largest size, so no timed run pays for first touches
  const int warm_len = *std::max_element(o.prefill_lens.begin(), o.prefill_lens.end());
  log_info("bench: warm-up prefill of ", warm_len, " tokens");
  bench_prefill(*model, warm_len, o.seed);

  json out = {{"ckpt_path", o.model.ckpt_path},
              {"isa", isa_name(isa)},
              {"threads", pool.size()},
              {"world_size", comm->world_size()},
              {"act_dtype", act_dtype_name(kernels.act)},
              {"batch_invariant", kernels.batch_invariant},
              {"prefill_ceiling", prefill_ceiling_key(prefill_ceiling(kernels))},
              {"prefill_ceiling_name", prefill_ceiling_name(prefill_ceiling(kernels))}};
  out["prefill"] = measure_prefills(o, *model, *comm);
  out["decode"] = measure_decodes(o, *model, *comm);
  out["depth"] = measure_depths(o, *model, *comm);
  out["mtp"] = measure_mtp(o, *model);
  out["serving"] = measure_servings(o, *model);
  out["conversations"] = measure_conversations(o, *model);
  log_info("bench: ceilings again");
  const Ceilings after = measure_ceilings(pool, isa, kernels.vnni, co, [&] { comm->barrier(); });
  Ceilings total;
  out["ceilings"] = ceilings_json(*comm, before, after, co.buffer_bytes, total);
  const double flop_ceiling = prefill_ceiling_gflops(total, kernels);
  for (json& p : out["prefill"]) p["flop_fraction"] = p["gflops"].get<double>() / flop_ceiling;
  for (json& d : out["decode"]) d["bw_fraction"] = d["gbps"].get<double>() / total.read_gbps;
  for (json& d : out["depth"]) {
    d["extra_flop_fraction"] = d["extra_gflops_over_depth_16"].get<double>() / flop_ceiling;
    d["attention_flop_fraction"] = d["attention_gflops"].get<double>() / flop_ceiling;
  }
  if (comm->rank() != 0) return;
  // rank 0 alone, on a tiny model in this process (no collectives)
  out["golden"] = o.golden.empty() ? json() : compare_with_golden(o.golden, pool, kernels);
  out["decode_bw_fraction"] = headline_decode(out["decode"])["bw_fraction"];
  out["prefill_flop_fraction"] = headline_prefill(out["prefill"])["flop_fraction"];
  if (o.as_json) {
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  print_bench_report(out);
}

}  // namespace

namespace {

// The multi-turn conversations and the serving-shaped runs.
void add_workload_options(CLI::App* sub, BenchOptions& o) {
  sub->add_option("--conversations", o.conversations.users,
                  "also a multi-turn workload of this many users (0: none), run with the prefix "
                  "cache on and off: "
                  "prefix-hit tokens against the ideal, peak KV, TTFT and TPOT per turn")
      ->capture_default_str();
  sub->add_option("--turns", o.conversations.turns, "turns per conversation")
      ->capture_default_str();
  sub->add_option("--system-prompt", o.conversations.system_len,
                  "tokens of the system prompt every conversation shares")
      ->capture_default_str();
  sub->add_option("--user-tokens", o.conversations.user_len, "new tokens per user turn")
      ->capture_default_str();
  sub->add_option("--answer-tokens", o.conversations.max_new_tokens, "tokens per answer")
      ->capture_default_str();
  sub->add_option("--serving", o.serving,
                  "concurrencies of the serving-shaped runs (staggered arrivals, chunked prefill "
                  "beside running "
                  "decodes; 0: none)")
      ->delimiter(',')
      ->capture_default_str();
  sub->add_option("--serving-requests", o.serving_requests,
                  "requests per serving run (0: twice the concurrency)")
      ->capture_default_str();
  sub->add_option("--serving-prompt", o.serving_shape.prompt_len,
                  "prompt tokens per serving request")
      ->capture_default_str();
  sub->add_option("--serving-new", o.serving_shape.max_new_tokens, "new tokens per serving request")
      ->capture_default_str();
  sub->add_option("--stagger-steps", o.serving_shape.stagger_steps,
                  "engine steps between serving arrivals")
      ->capture_default_str();
  sub->add_option("--step-tokens", o.serving_shape.step_tokens,
                  "token budget of a serving step (decode rows + prefill chunks)")
      ->capture_default_str();
}

// --explain-kernels and its CPU and token counts.
void add_explain_options(CLI::App* sub, BenchOptions& o) {
  sub->add_flag("--explain-kernels", o.explain,
                "print which kernel serves each kind of the checkpoint's matrices at each token "
                "count (the plan "
                "of kernels/kernel_plan.h for the global --fast / --batch-variant and this CPU, or "
                "--explain-cpu's) "
                "and run nothing");
  sub->add_option("--explain-cpu", o.explain_cpu,
                  "with --explain-kernels: a typical CPU of this family instead of this one "
                  "(intel: AVX-512 + AMX; "
                  "zen4, zen5: AVX-512 + BF16; zen3: AVX2)")
      ->check(CLI::IsMember({"intel", "zen3", "zen4", "zen5"}));
  sub->add_option("--explain-tokens", o.explain_tokens, "with --explain-kernels: the token counts")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

}  // namespace

Command register_bench(CLI::App& app, const KernelConfig& kernels) {
  CLI::App* sub = app.add_subcommand(
      "bench",
      "decode and prefill speed against this machine's ceilings (memory bandwidth, FMA peak), "
      "which are\n"
      "measured before and after the model's runs (the higher counts). Uses the global --threads.\n"
      "Under mpirun or `dsinfer run -n N` every rank runs everything and rank 0 prints; the "
      "ceilings\n"
      "are measured by all ranks at the same time and summed (ranks sharing a machine share its\n"
      "bandwidth), and the fractions compare all ranks' bytes/flops with these sums.\n"
      "Decode bytes: weights read per step (dense, attention, router, shared, each routed expert "
      "used\n"
      "by some row of the step, head, one embedding row per token) / batch. Prefill flops: 2 x "
      "the\n"
      "multiply-adds of every matrix product and of attention. Then a table of where the time "
      "goes\n"
      "(time, bytes and rate per part of the model). The last line is\n"
      "`decode_bw_fraction=X prefill_flop_fraction=Y` (batch-1 decode, 512-token prefill); with "
      "--json\n"
      "only one JSON object is printed (it holds both). Progress goes to stderr.");
  auto o = std::make_shared<BenchOptions>();
  o->model.add_to(sub, kernels);
  o->model.add_mtp_to(sub);
  o->model.add_kv_cache_dtype_to(sub);
  sub->add_option("--batch", o->batches, "decode batch sizes")
      ->delimiter(',')
      ->capture_default_str();
  sub->add_option("--prefill", o->prefill_lens, "prefill lengths (batch 1, from position 0)")
      ->delimiter(',')
      ->capture_default_str();
  sub->add_option("--decode-steps", o->decode_steps, "timed decode steps per batch size")
      ->capture_default_str();
  sub->add_option("--warmup-steps", o->warmup_steps, "untimed decode steps first")
      ->capture_default_str();
  sub->add_option("--prompt-len", o->prompt_len, "random prompt tokens before decoding")
      ->capture_default_str();
  sub->add_option("--bw-mb", o->bw_mb,
                  "bandwidth buffer per rank, MiB (far larger than the caches)")
      ->capture_default_str();
  sub->add_option("--fma-iterations", o->fma_iterations, "FMA loop rounds per thread and pass")
      ->capture_default_str();
  sub->add_option("--passes", o->passes, "ceiling passes (the best counts)")->capture_default_str();
  sub->add_option(
         "--runs", o->runs,
         "runs of each decode and prefill measurement (the fastest counts, as for the ceilings: a "
         "shared machine's neighbours only ever slow a run down)")
      ->capture_default_str();
  sub->add_option("--seed", o->seed, "seed of the random token ids")->capture_default_str();
  sub->add_option("--depth", o->depths,
                  "also decode at these depths (each --batch; cache entries synthetic, written "
                  "straight into the "
                  "cache), beside depth 16: tok/s, attention's GFLOP/s, and the extra time over "
                  "depth 16 against the "
                  "extra flops as a fraction of the mode's flop ceiling")
      ->delimiter(',');
  add_workload_options(sub, *o);
  sub->add_flag("--json", o->as_json,
                "print everything as one JSON object (and nothing else on stdout)");
  sub->add_option(
      "--golden", o->golden,
      "also compare exact and fast mode with the reference demo's own bf16 run on a golden model "
      "dir (hf/, ref-mp1-fp32.json/.safetensors, ref-mp1-bf16.safetensors), e.g. "
      "tests/data/golden/tiny-v3");
  add_explain_options(sub, *o);
  return {sub, [o] { run_bench(*o); }};
}

}  // namespace dsinfer::cli
