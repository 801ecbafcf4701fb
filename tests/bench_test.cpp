// dsinfer bench: the ceiling loops per ISA, the forward pass's byte/multiply-add counts against
// hand computations, and the command's output on a tiny golden checkpoint.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "bench/ceilings.h"
#include "bench/model_bench.h"
#include "core/cpu.h"
#include "core/log.h"
#include "io/safetensors.h"
#include "model/transformer.h"
#include "model/weights.h"
#include "parallel/comm.h"
#include "test_support.h"

namespace dsinfer::bench_test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Speed is for `dsinfer bench`, not for tests (a loaded CI machine would make ratios flaky):
// here each loop only has to run on every ISA and give a plausible number for one core.
TEST(Ceilings, PlausibleOnEveryIsa) {
  ThreadPool pool(1);
  for (Isa isa : supported_isas()) {
    const double bw = measure_read_bandwidth(pool, isa, int64_t{32} << 20, 2);
    const double fma = measure_fma_gflops(pool, isa, 2'000'000, 3);
    std::printf("%s: read %.1f GB/s, fma %.1f GFLOP/s\n", isa_name(isa), bw, fma);
    EXPECT_GT(bw, 0.1) << isa_name(isa);
    EXPECT_LT(bw, 10'000) << isa_name(isa);
    EXPECT_GT(fma, 0.1) << isa_name(isa);
    EXPECT_LT(fma, 1'000) << isa_name(isa);
  }
  if (cpu_supports(Isa::kAvx512)) {
    const double bf16 = measure_bf16_gflops(pool, Isa::kAvx512, 2'000'000, 3);
    std::printf("avx512 bf16 dot %.1f GFLOP/s\n", bf16);
    EXPECT_GT(bf16, 0.1);
    EXPECT_LT(bf16, 2'000);
  }
  EXPECT_EQ(measure_bf16_gflops(pool, Isa::kAvx2, 1000, 1), 0);  // no bf16 dot below AVX-512
}

// The AVX2 int8 ceiling runs kAccumulators chains of products that differ (each chain multiplies
// its own accumulator's bytes), so no compiler can compute one chain's products and reuse them
// for the rest, as it did when every chain multiplied the same operands: its value is the scalar
// model's of independent chains. All of a chain's 32-bit lanes hold one value, so one int32 a
// chain models it: bytes b0..b3 (little-endian), x * (b0 + b1) + x * (b2 + b3) added (no int16
// saturation at x <= 3).
TEST(Ceilings, Int8LoopAvx2RunsIndependentChains) {
  if (!cpu_supports(Isa::kAvx2)) GTEST_SKIP() << "no AVX2";
  for (const float seed : {0.0f, 1.0f, 2.0f}) {
    const int64_t iterations = 5;
    const int32_t x = 1 + static_cast<int>(seed) % 3;
    uint32_t total = 0;
    for (int j = 0; j < bench_detail::kAccumulators; ++j) {
      uint32_t acc = static_cast<uint32_t>(j);
      for (int64_t i = 0; i < iterations; ++i) {
        int32_t products = 0;
        for (int b = 0; b < 4; ++b) products += x * static_cast<int8_t>(acc >> (8 * b));
        acc += static_cast<uint32_t>(products);
      }
      total += acc;
    }
    float expected = 0;
    for (int lane = 0; lane < 8; ++lane)
      expected += static_cast<float>(static_cast<int32_t>(total));
    EXPECT_EQ(bench_detail::int8_loop_avx2(iterations, seed), expected) << "seed " << seed;
  }
}

struct Loaded {
  std::unique_ptr<Comm> comm = make_local_comm();
  ThreadPool pool{1};
  ModelConfig config;
  std::unique_ptr<Transformer> model;
  int64_t embed_row_bytes = 0;

  explicit Loaded(const std::string& ckpt) {
    config = load_config(ckpt + "/config.json");
    model = Transformer::load(config, ckpt, *comm, pool);
    SafetensorsFile shard(shard_path(ckpt, 0, 1));
    const TensorView& embed = shard.get("embed.weight");
    EXPECT_NE(embed.dtype, DType::kF8E4M3);  // else the row also reads its block's scales
    embed_row_bytes = config.dim * static_cast<int64_t>(dtype_size(embed.dtype));
  }
};

// tiny-v3 with its MoE layers cut off: layer 0 (dense) only
std::string convert_dense_only() {
  const std::string hf = test::data_path("golden/tiny-v3/hf");
  const std::string dir = test::scratch_dir("dense-hf"), out = test::scratch_dir("dense-mp1");
  for (const auto& entry : fs::directory_iterator(hf))
    if (entry.path().filename() != "config.json")
      fs::create_symlink(entry.path(), dir + "/" + entry.path().filename().string());
  json config = json::parse(test::read_file(hf + "/config.json"));
  config["num_hidden_layers"] = 1;
  test::write_file(dir + "/config.json", config.dump());
  auto r = test::run_dsinfer("-q convert --hf-ckpt-path " + dir + " --save-path " + out +
                             " --n-experts 8 --model-parallel 1");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out;
}

TEST(ForwardStats, DecodeBytesAtBatch1AreWeightBytesPlusOneEmbeddingRow) {
  // dense-only: every matrix once; MoE (tiny-v3): one token uses exactly n_activated experts,
  // which is the share weight_bytes() assumes at world size 1
  for (const std::string& ckpt : {convert_dense_only(), test::convert_golden("tiny-v3")}) {
    Loaded m(ckpt);
    KVCache cache(m.config, 1, 8);
    std::vector<float> logits(m.config.vocab_size);
    const int32_t prompt[3] = {5, 17, 300};
    m.model->forward(prompt, 1, 3, 0, cache, logits.data());
    const int32_t next = 42;
    m.model->forward(&next, 1, 1, 3, cache, logits.data());
    EXPECT_EQ(m.model->stats().weight_bytes, m.model->weight_bytes() + m.embed_row_bytes) << ckpt;
  }
}

TEST(ForwardStats, PartsAddUpAndCountWhatEachPartReads) {
  Loaded m(test::convert_golden("tiny-v3"));
  KVCache cache(m.config, 1, 8);
  std::vector<float> logits(m.config.vocab_size);
  const int32_t prompt[3] = {5, 17, 300};
  const double t0 = now_seconds();
  m.model->forward(prompt, 1, 3, 0, cache, logits.data());
  const double wall = now_seconds() - t0;
  const ForwardStats& s = m.model->stats();
  int64_t bytes = 0, macs = 0;
  double seconds = 0;
  for (const PartStats& p : s.parts) {
    bytes += p.weight_bytes;
    macs += p.macs;
    seconds += p.seconds;
    EXPECT_GE(p.seconds, 0);
  }
  EXPECT_EQ(bytes, s.weight_bytes);
  EXPECT_EQ(macs, s.macs);
  EXPECT_LE(seconds, wall);
  EXPECT_GT(seconds, 0.5 * wall);  // the laps cover the call, clock reads aside
  // the head: [vocab, dim] bf16, the last position only
  SafetensorsFile shard(shard_path(test::convert_golden("tiny-v3"), 0, 1));
  const TensorView& head = shard.get("head.weight");
  EXPECT_EQ(s.part(ForwardPart::kHead).weight_bytes, static_cast<int64_t>(head.n_bytes));
  EXPECT_EQ(s.part(ForwardPart::kHead).macs, int64_t{m.config.vocab_size} * m.config.dim);
  EXPECT_EQ(s.part(ForwardPart::kOther).weight_bytes,
            3 * m.embed_row_bytes);  // one embedding row per token
  EXPECT_EQ(s.part(ForwardPart::kOther).macs, 0);
  // tiny-v3 has dense and MoE layers: each part read weights and did work
  for (ForwardPart p : {ForwardPart::kAttention, ForwardPart::kDenseMlp, ForwardPart::kMoe}) {
    EXPECT_GT(s.part(p).weight_bytes, 0) << forward_part_name(p);
    EXPECT_GT(s.part(p).macs, 0) << forward_part_name(p);
  }
}

// Multiply-adds of a forward call of `seqlen` tokens at batch `batch` from `start`, from the
// config alone (world size 1, every token runs n_activated routed experts).
int64_t hand_macs(const ModelConfig& c, int batch, int seqlen, int start) {
  const int64_t n = static_cast<int64_t>(batch) * seqlen, H = c.n_heads, lora = c.kv_lora_rank;
  const int64_t q = c.q_lora_rank == 0
                        ? c.dim * H * c.qk_head_dim()
                        : c.dim * c.q_lora_rank + c.q_lora_rank * H * c.qk_head_dim();
  const int64_t projections = q + c.dim * (lora + c.qk_rope_head_dim) + H * c.v_head_dim * c.dim;
  int64_t keys = 0;  // cache positions each query sees, summed
  for (int s = 0; s < seqlen; ++s) keys += start + s + 1;
  keys *= batch;
  const int64_t attention = n * H * (c.qk_nope_head_dim + c.v_head_dim) * lora +
                            keys * H * (lora + c.qk_rope_head_dim + lora);
  const int64_t dense = 3 * c.dim * c.inter_dim;
  const int64_t moe = c.dim * c.n_routed_experts +
                      3 * c.dim * c.moe_inter_dim * c.n_shared_experts +
                      c.n_activated_experts * 3 * c.dim * c.moe_inter_dim;
  int64_t macs = c.n_layers * (n * projections + attention) + batch * c.vocab_size * c.dim;
  for (int layer = 0; layer < c.n_layers; ++layer)
    macs += n * (c.is_moe_layer(layer) ? moe : dense);
  return macs;
}

TEST(ForwardStats, MacsMatchAHandComputation) {
  Loaded m(test::convert_golden("tiny-v3"));
  KVCache cache(m.config, 2, 16);
  std::vector<float> logits(2 * m.config.vocab_size);
  std::vector<int32_t> tokens(2 * 7);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<int32_t>(i * 37 % m.config.vocab_size);
  m.model->forward(tokens.data(), 2, 7, 0, cache, logits.data());
  EXPECT_EQ(m.model->stats().macs, hand_macs(m.config, 2, 7, 0));
  m.model->forward(tokens.data(), 2, 1, 7, cache, logits.data());
  EXPECT_EQ(m.model->stats().macs, hand_macs(m.config, 2, 1, 7));
  // the bench's own prefill reports the same count
  const PrefillResult p = bench_prefill(*m.model, 33, 1);
  EXPECT_EQ(p.macs, hand_macs(m.config, 1, 33, 0));
  EXPECT_GT(p.tokens_per_s(), 0);
}

// tiny-v3 (3 layers: 1 dense, 2 MoE) makes 7 all_reduces per forward call: the embedding's, one
// per attention, one per MLP or MoE layer (its routed and shared experts' partial sums together),
// and one all_gather: the bench's draws need no logits, so each rank sends its best candidate of
// its slice of the vocabulary (engine/vocab_draw.h: 12 bytes a row), not the slice (vocab / world
// x 4 bytes a row). Bytes are one rank's part.
void expect_tiny_v3_collectives(const json& c, const ModelConfig& config, int64_t rows,
                                int64_t logit_rows, int world) {
  ASSERT_EQ(config.n_layers, 3);
  ASSERT_EQ(config.n_dense_layers, 1);
  EXPECT_EQ(c["all_reduce"]["calls"].get<double>(), 7) << c.dump();
  EXPECT_EQ(c["all_reduce"]["bytes"].get<double>(), 7.0 * rows * config.dim * 4) << c.dump();
  EXPECT_EQ(c["all_gather"]["calls"].get<double>(), 1) << c.dump();
  EXPECT_EQ(c["all_gather"]["bytes"].get<double>(), 12.0 * logit_rows) << c.dump();
  EXPECT_LT(12.0, 1.0 * config.vocab_size / world * 4) << "the test must tell the two apart";
  EXPECT_GE(c["all_reduce"]["seconds"].get<double>(), 0);
}

const char* kSmall =
    " --decode-steps 3 --warmup-steps 1 --bw-mb 64 --fma-iterations 1000000 --passes 2";

TEST(BenchCommand, PrintsTheFractionsLine) {
  const std::string ckpt = test::convert_golden("tiny-v3");
  auto r = test::run_dsinfer("--threads 2 bench --ckpt-path " + ckpt + kSmall);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string last, line;
  std::istringstream lines(r.out);
  while (std::getline(lines, line)) last = line;
  std::smatch match;
  ASSERT_TRUE(std::regex_match(
      last, match,
      std::regex(R"(decode_bw_fraction=(\d+\.\d{3}) prefill_flop_fraction=(\d+\.\d{3}))")))
      << r.out;
  for (int i : {1, 2}) {
    const double fraction = std::stod(match[i]);
    EXPECT_GT(fraction, 0) << r.out;
    EXPECT_LT(fraction, 1.5) << r.out;
  }
  EXPECT_CONTAINS(r.out, "isa " + std::string(isa_name(best_isa())) + ", 2 threads x 1 rank(s)");
  EXPECT_CONTAINS(r.out, " 512 tokens");
  EXPECT_CONTAINS(r.out, "batch 4");
  // where the time goes, for the headline decode and prefill
  EXPECT_CONTAINS(r.out, "decode batch 1");
  EXPECT_CONTAINS(r.out, "prefill 512 tokens");
  EXPECT_CONTAINS(r.out, "collectives (rank 0");
  EXPECT_CONTAINS(r.out, "all_reduce");
  for (const char* part : {"attention", "dense mlp", "moe", "head", "other"})
    EXPECT_CONTAINS(r.out, part);
}

TEST(BenchCommand, JsonHasEveryKey) {
  const std::string ckpt = test::convert_golden("tiny-v3");
  auto r = test::run_dsinfer("--threads 1 bench --ckpt-path " + ckpt + kSmall +
                             " --batch 1,2 --prefill 8,32 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);  // nothing but the object on stdout
  for (const char* key :
       {"isa", "threads", "world_size", "act_dtype", "prefill_ceiling", "ceilings", "decode",
        "prefill", "decode_bw_fraction", "prefill_flop_fraction"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["threads"], 1);
  EXPECT_EQ(j["world_size"], 1);
  for (const char* key : {"read_gbps", "fma_f32_gflops", "bf16_dot_gflops", "per_rank"})
    EXPECT_TRUE(j["ceilings"].contains(key)) << key;
  EXPECT_GT(j["ceilings"]["read_gbps"].get<double>(), 0);
  ASSERT_EQ(j["decode"].size(), 2u);
  EXPECT_EQ(j["decode"][1]["batch"], 2);
  for (const char* key :
       {"tokens_per_s", "ms_per_step", "weight_bytes_per_token", "gbps", "bw_fraction"})
    EXPECT_GT(j["decode"][0][key].get<double>(), 0) << key;
  ASSERT_EQ(j["prefill"].size(), 2u);
  for (const char* key : {"tokens_per_s", "flops", "gflops", "flop_fraction"})
    EXPECT_GT(j["prefill"][1][key].get<double>(), 0) << key;
  // per part of the model, rank 0's share of one forward call, adding up to the totals
  for (const json& run : {j["decode"][0], j["prefill"][1]}) {
    ASSERT_EQ(run["parts_rank0"].size(), 5u);
    double flops = 0;
    for (const json& part : run["parts_rank0"]) {
      for (const char* key : {"part", "seconds", "weight_bytes", "flops"})
        EXPECT_TRUE(part.contains(key)) << key;
      flops += part["flops"].get<double>();
    }
    if (run.contains("flops")) {
      EXPECT_NEAR(flops, run["flops"].get<double>(), 1e-6 * flops);
    }
  }
  // the fractions are against the ceilings printed (the higher of the measurements before and
  // after the model's runs)
  for (const json& d : j["decode"])
    EXPECT_NEAR(d["bw_fraction"].get<double>(),
                d["gbps"].get<double>() / j["ceilings"]["read_gbps"].get<double>(), 1e-9);
  for (const json& p : j["prefill"])
    EXPECT_NEAR(p["flop_fraction"].get<double>(),
                p["gflops"].get<double>() / j["ceilings"]["fma_f32_gflops"].get<double>(), 1e-9);
  // the headline numbers: batch-1 decode and (no 512 here) the longest prefill
  EXPECT_EQ(j["decode_bw_fraction"], j["decode"][0]["bw_fraction"]);
  // a world of one makes no collectives (RunsUnderMpiAndSumsTheRanks counts two ranks')
  for (const json& run : {j["decode"][0], j["prefill"][1]})
    for (const char* kind : {"all_reduce", "all_gather"}) {
      EXPECT_EQ(run["collectives_rank0"][kind]["calls"], 0) << kind;
      EXPECT_EQ(run["collectives_rank0"][kind]["bytes"], 0) << kind;
    }
  EXPECT_EQ(j["prefill_flop_fraction"], j["prefill"][1]["flop_fraction"]);
}

// --depth: decode at each depth beside depth 16, attention's FLOPs growing with it; the extra
// time over depth 16 against the extra flops. --conversations: the multi-turn workload with the
// prefix cache on reuses exactly what an ideal cache would, and with it off nothing.
TEST(BenchCommand, DepthAndConversations) {
  const std::string ckpt = test::convert_golden("tiny-v3");
  auto r = test::run_dsinfer(
      "--threads 1 bench --ckpt-path " + ckpt + kSmall +
      " --batch 1 --prefill 8 --depth 300,900 --conversations 3 --turns 3 --system-prompt 70 "
      "--user-tokens 9 --answer-tokens 4 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["depth"].size(), 3u);  // the baseline first
  EXPECT_EQ(j["depth"][0]["depth"], 16);
  EXPECT_EQ(j["depth"][1]["depth"], 300);
  EXPECT_EQ(j["depth"][2]["depth"], 900);
  EXPECT_LT(j["depth"][1]["attention_ms_per_step"].get<double>(),
            j["depth"][2]["attention_ms_per_step"].get<double>());
  for (const json& d : j["depth"]) {
    for (const char* key :
         {"tokens_per_s", "ms_per_step", "attention_ms_per_step", "attention_gflops"})
      EXPECT_GT(d[key].get<double>(), 0) << key;
    EXPECT_TRUE(d.contains("extra_gflops_over_depth_16"));
    EXPECT_TRUE(d.contains("extra_flop_fraction"));
  }
  ASSERT_EQ(j["conversations"].size(), 2u);
  const json& on = j["conversations"][0];
  const json& off = j["conversations"][1];
  EXPECT_TRUE(on["prefix_cache"].get<bool>());
  // turns 2 and 3 take all of the previous prompt and answer but its last token; users 2 and 3
  // start after an answer, so their first turns take the system prompt (its full block shared,
  // its last 6 tokens copied from user 1's tail)
  const int64_t users = 3, system = 70, user = 9, answer = 4;
  int64_t ideal = 0;
  for (int64_t turn = 1; turn < 3; ++turn) ideal += users * (system + turn * (user + answer) - 1);
  ideal += (users - 1) * system;
  EXPECT_EQ(on["ideal_reused_tokens"].get<int64_t>(), ideal);
  EXPECT_EQ(on["reused_tokens"].get<int64_t>(), ideal);
  EXPECT_EQ(off["reused_tokens"].get<int64_t>(), 0);
  EXPECT_GT(on["peak_kv_positions"].get<int64_t>(), 0);
  ASSERT_EQ(on["by_turn"].size(), 3u);
}

// A prefill of max_seq_len tokens leaves no room for the token drawn after it: the engine refused
// it and bench printed "inf tokens/s" for a prefill that never ran; now it is an error up front.
TEST(BenchCommand, APrefillWithNoRoomForItsTokenIsAnError) {
  const std::string ckpt = test::convert_golden("tiny-v3");
  auto r = test::run_dsinfer("--threads 1 bench --ckpt-path " + ckpt + kSmall +
                             " --max-seq-len 64 --batch 1 --prefill 64");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.err, "error: bench: prefill length 64 is outside [1, max_seq_len - 1 = 63]");
  EXPECT_EQ(r.out.find("inf"), std::string::npos) << r.out;
}

// Fast mode where its kernels are the exact ones (no AMX, no AVX512_BF16: here forced with
// DSINFER_ISA=avx2, as on a Zen 3) measures its prefill against the fp32 FMA peak; it used to stop
// with "no bf16 flop ceiling on this CPU".
TEST(BenchCommand, FastModeOnExactKernelsMeasuresAgainstTheFmaPeak) {
  if (!cpu_supports(Isa::kAvx2)) {
    GTEST_SKIP() << "no AVX2 here";
  }
  const std::string ckpt = test::convert_golden("tiny-v3");
  setenv("DSINFER_ISA", "avx2", 1);
  auto r = test::run_dsinfer("--threads 1 --fast bench --ckpt-path " + ckpt + kSmall +
                             " --batch 1 --prefill 8 --json");
  auto text = test::run_dsinfer("--threads 1 --fast bench --ckpt-path " + ckpt + kSmall +
                                " --batch 1 --prefill 8");
  unsetenv("DSINFER_ISA");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["act_dtype"], "bf16");
  EXPECT_EQ(j["isa"], "avx2");
  EXPECT_EQ(j["prefill_ceiling"], "fma_f32_gflops");
  EXPECT_NEAR(
      j["prefill"][0]["flop_fraction"].get<double>(),
      j["prefill"][0]["gflops"].get<double>() / j["ceilings"]["fma_f32_gflops"].get<double>(),
      1e-9);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_CONTAINS(text.out, "fraction of fp32 FMA peak");
}

// --mtp on: per batch and number of drafts, the verify step reads at least the decode step's
// weights (the union of the experts its rows route to), the drafts cost more with each chained one,
// and the break-even acceptance and speedups are consistent with the times.
TEST(BenchCommand, MtpCostPerBatchAndDrafts) {
  const std::string ckpt = test::convert_golden("tiny-v3-story", 1, false, /*keep_mtp=*/true);
  auto r = test::run_dsinfer("--threads 1 bench --ckpt-path " + ckpt + kSmall +
                             " --batch 1,2 --prefill 8 --serving 0 --mtp on --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["mtp"].size(), 2u);
  for (const json& m : j["mtp"]) {
    ASSERT_EQ(m["by_drafts"].size(), 3u);
    const double decode_ms = m["decode_ms"], decode_bytes = m["decode_weight_bytes_rank0"];
    EXPECT_GT(decode_ms, 0);
    for (const json& k : m["by_drafts"]) {
      const int drafts = k["drafts"];
      EXPECT_GE(k["verify_weight_bytes_rank0"].get<double>(), decode_bytes) << drafts;
      EXPECT_GT(k["draft_ms"].get<double>(), 0);
      const double cycle = k["verify_ms"].get<double>() + k["draft_ms"].get<double>();
      double tokens = 1, p = 1;
      for (int i = 0; i < drafts; ++i) tokens += (p *= 0.85);
      EXPECT_NEAR(k["speedup_at_0.85"].get<double>(), tokens * decode_ms / cycle, 1e-9);
      const double even = k["break_even_acceptance"];
      if (even <= 1) {
        EXPECT_EQ(k["speedup_at_0.667"].get<double>() < 1, 2.0 / 3 < even) << drafts;
      }
    }
  }
}

TEST(BenchCommand, RunsUnderMpiAndSumsTheRanks) {
  if (!test::has_mpirun()) GTEST_SKIP() << "no mpirun";
  const std::string ckpt = test::convert_golden("tiny-v3", 2);
  auto r = test::run_mpi(2, "bench --ckpt-path " + ckpt + kSmall + " --batch 1 --prefill 16 --json",
                         "", 120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);  // rank 0 alone prints
  EXPECT_EQ(j["world_size"], 2);
  ASSERT_EQ(j["ceilings"]["per_rank"].size(), 2u);
  const double sum = j["ceilings"]["per_rank"][0]["read_gbps"].get<double>() +
                     j["ceilings"]["per_rank"][1]["read_gbps"].get<double>();
  EXPECT_NEAR(j["ceilings"]["read_gbps"].get<double>(), sum, 1e-3 * sum);
  EXPECT_GT(j["decode_bw_fraction"].get<double>(), 0);
  EXPECT_GT(j["prefill_flop_fraction"].get<double>(), 0);
  const ModelConfig c = load_config(ckpt + "/config.json");
  expect_tiny_v3_collectives(j["decode"][0]["collectives_rank0"], c, /*rows=*/1, /*logit_rows=*/1,
                             /*world=*/2);
  expect_tiny_v3_collectives(j["prefill"][0]["collectives_rank0"], c, 16, 1, 2);
  EXPECT_GT(j["decode"][0]["collectives_rank0"]["all_reduce"]["seconds"].get<double>(), 0);
}

// --golden: exact mode reproduces the reference's fp32 logits, fast mode lands at least as close
// as the reference demo's own bf16 run (median row, rows far off), printed before the last line.
TEST(BenchCommand, GoldenComparesFastModeWithTheDemosBf16Run) {
  const std::string ckpt = test::convert_golden("tiny-v3");
  const std::string golden = test::data_path("golden/tiny-v3");
  auto r = test::run_dsinfer("--threads 2 bench --ckpt-path " + ckpt + kSmall +
                             " --batch 1 --prefill 8 --json --golden " + golden);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json g = json::parse(r.out)["golden"];
  EXPECT_EQ(g["rows"], 12);  // 2 rows x (prefill + 5 decode steps)
  EXPECT_LT(g["exact"]["median_ratio"].get<double>(), 1e-4);
  EXPECT_EQ(g["exact"]["argmax_mismatches"], 0);
  EXPECT_GT(g["fast"]["median_ratio"].get<double>(), 0);
  EXPECT_LE(g["fast"]["median_ratio"].get<double>(), g["demo_bf16"]["median_ratio"].get<double>());
  EXPECT_LE(g["fast"]["far_rows"].get<int>(), g["demo_bf16"]["far_rows"].get<int>());

  auto text = test::run_dsinfer("--threads 2 bench --ckpt-path " + ckpt + kSmall +
                                " --batch 1 --prefill 8 --golden " + golden);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_CONTAINS(text.out, "demo's bf16 run");
  EXPECT_EQ(text.out.rfind("decode_bw_fraction=", text.out.size() - 2),
            text.out.rfind('\n', text.out.size() - 2) + 1)
      << "the fractions must stay the last line:\n"
      << text.out;

  auto bad = test::run_dsinfer("--threads 1 bench --ckpt-path " + ckpt + kSmall +
                               " --batch 1 --prefill 8 --golden " + ckpt);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_CONTAINS(bad.err, "bench --golden: " + ckpt + "/hf is not a directory");
}

}  // namespace
}  // namespace dsinfer::bench_test
