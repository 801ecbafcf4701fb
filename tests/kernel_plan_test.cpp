// plan() (kernels/kernel_plan.h): its rules one by one, and each CPU family's whole table for the
// full models' matrices, pinned in tests/data/kernel_plans/<family>.txt (what `dsinfer bench
// --explain-kernels --explain-cpu <family>` prints for such a checkpoint). A change of plan shows
// up there as a diff to review: rerun with DSINFER_WRITE_PLAN_TABLES=1 to rewrite the files.
#include "kernels/kernel_plan.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "bench/kernel_table.h"
#include "test_support.h"

namespace dsinfer::kernel_plan_test {
namespace {

WeightMatrix shape(DType dtype, int64_t rows, int64_t cols) {
  return {dtype, rows, cols, nullptr, nullptr};
}

KernelConfig family(CpuFamily f, ActDType act = ActDType::kF32) {
  KernelConfig k = typical_kernel_config(f);
  k.act = act;
  return k;
}

TEST(KernelPlan, ExactModeStreamsFewTokensAndPacksMany) {
  const KernelConfig intel = family(CpuFamily::kIntel);
  const WeightMatrix w1 = shape(DType::kF8E4M3, 2048, 7168);
  for (int64_t n : {1, 4, 7}) EXPECT_EQ(plan(w1, n, intel).kernel, KernelKind::kGemv) << n;
  for (int64_t n : {8, 512}) EXPECT_EQ(plan(w1, n, intel).kernel, KernelKind::kGemm) << n;
  EXPECT_FALSE(plan(w1, 512, intel).round_activations);
  // the opt-out packs the same token counts, summing in k order
  KernelConfig variant = intel;
  variant.batch_invariant = false;
  EXPECT_EQ(plan(w1, 8, variant).kernel, KernelKind::kGemmBatchVariant);
  EXPECT_EQ(plan(w1, 7, variant).kernel, KernelKind::kGemv);
  // Zen 3 keeps the GEMV up to 31 tokens, Zen 5 always; the opt-out takes the GEMM from 8 anyway
  EXPECT_EQ(plan(w1, 31, family(CpuFamily::kZen3)).kernel, KernelKind::kGemv);
  EXPECT_EQ(plan(w1, 32, family(CpuFamily::kZen3)).kernel, KernelKind::kGemm);
  EXPECT_EQ(plan(w1, 4096, family(CpuFamily::kZen5)).kernel, KernelKind::kGemv);
  KernelConfig zen5_variant = family(CpuFamily::kZen5);
  zen5_variant.batch_invariant = false;
  EXPECT_EQ(plan(w1, 8, zen5_variant).kernel, KernelKind::kGemmBatchVariant);
  // the scalar oracle has one kernel
  EXPECT_EQ(plan(w1, 512, with_isa(intel, Isa::kScalar)).kernel, KernelKind::kGemv);
}

TEST(KernelPlan, GemvGroupsFollowTheTuningWithinTheIsasRegisters) {
  const KernelConfig zen5 = family(CpuFamily::kZen5);
  const GemvPlan bf16 = plan(shape(DType::kBF16, 4096, 7168), 1, zen5).gemv;
  EXPECT_EQ(bf16.rows_per_group[0], 16);
  EXPECT_EQ(bf16.rows_per_group[1], 8);
  EXPECT_EQ(bf16.rows_per_group[2], 6);
  EXPECT_EQ(bf16.prefetch, GemvPrefetch::kWrapped);
  EXPECT_EQ(bf16.fp8_subnormal_tokens, 0) << "not an fp8 matrix";
  // rows 16 KB apart (wo) share L1 sets: 4 at a time under the wrapped prefetch
  const GemvPlan wo = plan(shape(DType::kF8E4M3, 7168, 16384), 1, zen5).gemv;
  EXPECT_EQ(wo.rows_per_group[0], 4);
  EXPECT_EQ(wo.rows_per_group[2], 4);
  EXPECT_EQ(wo.fp8_subnormal_tokens, 4);
  // AVX2 holds 8 rows for 1 token and 2 for 3-4; fp8 through fp16 (Intel: no subnormal form) and
  // int4 / int8 go 4 rows at a time (at most the ISA's count for 3-4 tokens)
  KernelConfig avx2 = with_isa(zen5, Isa::kAvx2);
  EXPECT_EQ(plan(shape(DType::kBF16, 4096, 7168), 1, avx2).gemv.rows_per_group[0], 8);
  EXPECT_EQ(plan(shape(DType::kBF16, 4096, 7168), 3, avx2).gemv.rows_per_group[2], 2);
  const GemvPlan intel_fp8 =
      plan(shape(DType::kF8E4M3, 2048, 7168), 1, family(CpuFamily::kIntel)).gemv;
  EXPECT_EQ(intel_fp8.rows_per_group[0], 4);
  EXPECT_EQ(intel_fp8.fp8_subnormal_tokens, 0);
  EXPECT_EQ(plan(shape(kInt4Storage, 2048, 7168), 1, zen5).gemv.rows_per_group[0], 4);
  EXPECT_EQ(plan(shape(kInt4Storage, 2048, 7168), 3, avx2).gemv.rows_per_group[2], 2);
  // decode batches of 5-16 tokens read bf16 / f32 rows in chunks that stay in L2
  EXPECT_EQ(plan(shape(DType::kBF16, 129280, 7168), 8, zen5).gemv.chunk_rows, 24);
  EXPECT_EQ(plan(shape(DType::kBF16, 129280, 2048), 8, zen5).gemv.chunk_rows, 48);
  EXPECT_EQ(plan(shape(DType::kBF16, 129280, 7168), 4, zen5).gemv.chunk_rows, 0);
  EXPECT_EQ(plan(shape(DType::kF8E4M3, 2048, 7168), 8, zen5).gemv.chunk_rows, 0);
}

// Zen 4: the subnormal fp8 form and the wrapped prefetch from 2 tokens on; one token plain.
TEST(KernelPlan, APlainSingleTokenDropsTheSubnormalFormAndThePrefetch) {
  KernelConfig zen4 = family(CpuFamily::kZen4);
  const WeightMatrix fp8 = shape(DType::kF8E4M3, 2048, 7168);
  const GemvPlan one = plan(fp8, 1, zen4).gemv, two = plan(fp8, 2, zen4).gemv;
  EXPECT_EQ(one.prefetch, GemvPrefetch::kNone);
  EXPECT_EQ(one.fp8_subnormal_tokens, 0);
  EXPECT_EQ(two.prefetch, GemvPrefetch::kWrapped);
  EXPECT_EQ(two.fp8_subnormal_tokens, 4);
  zen4.gemv.plain_single_token = false;
  EXPECT_EQ(plan(fp8, 1, zen4).gemv.prefetch, GemvPrefetch::kWrapped);
  EXPECT_EQ(plan(fp8, 1, zen4).gemv.fp8_subnormal_tokens, 4);
}

TEST(KernelPlan, FastModeTakesItsOwnKernelsWhereTheyPay) {
  const KernelConfig intel = family(CpuFamily::kIntel, ActDType::kBF16);
  const KernelConfig zen5 = family(CpuFamily::kZen5, ActDType::kBF16);
  const WeightMatrix fp8 = shape(DType::kF8E4M3, 2048, 7168),
                     head = shape(DType::kBF16, 129280, 7168);
  const WeightMatrix int4 = shape(kInt4Storage, 2048, 7168), f32 = shape(DType::kF32, 256, 7168);
  EXPECT_EQ(plan(fp8, 16, intel).kernel, KernelKind::kAmxGemm);
  EXPECT_EQ(plan(int4, 16, intel).kernel, KernelKind::kBf16DotGemm) << "AMX does not scale per row";
  EXPECT_EQ(plan(fp8, 16, zen5).kernel, KernelKind::kBf16DotGemm);
  // below 16 tokens: the exact GEMV on rounded activations, or VDPBF16PS's GEMV from 5 tokens
  // where that is fast mode's kernel (bf16 matrices from 13)
  EXPECT_EQ(plan(fp8, 4, zen5).kernel, KernelKind::kGemv);
  EXPECT_TRUE(plan(fp8, 4, zen5).round_activations);
  EXPECT_EQ(plan(fp8, 5, zen5).kernel, KernelKind::kBf16DotGemv);
  EXPECT_EQ(plan(head, 12, zen5).kernel, KernelKind::kGemv);
  EXPECT_EQ(plan(head, 13, zen5).kernel, KernelKind::kBf16DotGemv);
  EXPECT_EQ(plan(fp8, 8, intel).kernel, KernelKind::kGemm)
      << "AMX CPUs keep the exact kernels below 16 tokens";
  EXPECT_EQ(plan(fp8, 6, intel).kernel, KernelKind::kGemv);
  // f32 weights stay on the exact kernels (bf16 would lose their bits), activations rounded
  EXPECT_EQ(plan(f32, 64, intel).kernel, KernelKind::kGemm);
  EXPECT_TRUE(plan(f32, 64, intel).round_activations);
  // attention's products (both sides activations): the fast kernels from 16 rows, f32 too, else
  // exact
  EXPECT_EQ(plan(f32, 64, intel, ProductUse::kSerial).kernel, KernelKind::kAmxGemm);
  EXPECT_EQ(plan(f32, 8, intel, ProductUse::kSerial).kernel, KernelKind::kGemm);
  EXPECT_FALSE(plan(f32, 8, intel, ProductUse::kSerial).round_activations);
  EXPECT_EQ(plan(fp8, 8, zen5, ProductUse::kSerial).kernel, KernelKind::kGemv)
      << "not VDPBF16PS's GEMV";
  // the fast kernels only beside the AVX-512 exact ones; switched off, the exact kernels
  EXPECT_EQ(plan(fp8, 64, with_isa(intel, Isa::kAvx2)).kernel, KernelKind::kGemm);
  KernelConfig no_amx = intel;
  no_amx.amx = false;
  EXPECT_EQ(plan(fp8, 64, no_amx).kernel, KernelKind::kBf16DotGemm);
  no_amx.bf16dot = false;
  EXPECT_EQ(plan(fp8, 64, no_amx).kernel, KernelKind::kGemm);
  // exact mode never rounds
  EXPECT_FALSE(plan(fp8, 64, family(CpuFamily::kIntel)).round_activations);
}

// The matrices of the full models, one of each kind (rank 0 of 1): DeepSeek-V3 / R1 with fp8
// weights and with int4 experts, V2-Lite in bf16 and in int8.
std::vector<NamedMatrix> full_model_matrices() {
  const DType fp8 = DType::kF8E4M3, bf16 = DType::kBF16;
  return {
      {"v3.attn.wq_a", shape(fp8, 1536, 7168)},
      {"v3.attn.wq_b", shape(fp8, 24576, 1536)},
      {"v3.attn.wkv_a", shape(fp8, 576, 7168)},
      {"v3.attn.wo", shape(fp8, 7168, 16384)},
      {"v3.mlp.w1", shape(fp8, 18432, 7168)},
      {"v3.mlp.w2", shape(fp8, 7168, 18432)},
      {"v3.moe.gate", shape(bf16, 256, 7168)},
      {"v3.moe.expert.w1", shape(fp8, 2048, 7168)},
      {"v3.moe.expert.w2", shape(fp8, 7168, 2048)},
      {"v3int4.expert.w1", shape(kInt4Storage, 2048, 7168)},
      {"v3int4.expert.w2", shape(kInt4Storage, 7168, 2048)},
      {"v3.head", shape(bf16, 129280, 7168)},
      {"v2lite.attn.wq", shape(bf16, 3072, 2048)},
      {"v2lite.attn.wo", shape(bf16, 2048, 2048)},
      {"v2lite.expert.w1", shape(bf16, 1408, 2048)},
      {"v2lite.expert.w2", shape(bf16, 2048, 1408)},
      {"v2lite.head", shape(bf16, 102400, 2048)},
      {"v2int8.expert.w1", shape(kInt8Storage, 1408, 2048)},
  };
}

class KernelPlanTable : public ::testing::TestWithParam<CpuFamily> {};

TEST_P(KernelPlanTable, IsThePinnedOne) {
  const std::vector<int64_t> tokens = {1, 2, 3, 4, 6, 8, 12, 13, 16, 32, 64, 512};
  std::string table;
  for (ActDType act : {ActDType::kF32, ActDType::kBF16})
    table += kernel_plan_table(full_model_matrices(), tokens, family(GetParam(), act));
  const std::string path =
      test::data_path(std::string("kernel_plans/") + cpu_family_name(GetParam()) + ".txt");
  if (const char* write = std::getenv("DSINFER_WRITE_PLAN_TABLES");
      write && std::string(write) == "1") {
    std::ofstream(path) << table;
    GTEST_SKIP() << "wrote " << path;
  }
  const std::string pinned = test::read_file(path);
  // the first differing line, for a readable failure
  std::istringstream got(table), want(pinned);
  std::string g, w;
  for (int line = 1; std::getline(want, w); ++line) {
    ASSERT_TRUE(std::getline(got, g)) << path << ": the plan table ends before line " << line;
    ASSERT_EQ(g, w) << path << " line " << line;
  }
  EXPECT_FALSE(std::getline(got, g))
      << path << ": the plan table goes on past the pinned one: " << g;
}

INSTANTIATE_TEST_SUITE_P(Families, KernelPlanTable,
                         ::testing::Values(CpuFamily::kIntel, CpuFamily::kZen3, CpuFamily::kZen4,
                                           CpuFamily::kZen5),
                         [](const auto& info) { return std::string(cpu_family_name(info.param)); });

TEST(KernelConfig, EnvironmentOverridesAreParsedInOnePlace) {
  setenv("DSINFER_GEMV_ROWS", "8", 1);
  setenv("DSINFER_GEMV_PREFETCH", "wrapped", 1);
  setenv("DSINFER_AMX", "0", 1);
  const KernelConfig k = with_environment_overrides(typical_kernel_config(CpuFamily::kIntel));
  EXPECT_EQ(k.gemv.rows_one_token, 8);
  EXPECT_EQ(k.gemv.prefetch, GemvPrefetch::kWrapped);
  EXPECT_FALSE(k.amx);
  EXPECT_EQ(k.fast_kernels(), FastModeKernels::kBf16Dot);
  setenv("DSINFER_GEMV_ROWS", "3", 1);
  EXPECT_THROW(with_environment_overrides(KernelConfig{}), Error);
  for (const char* name : {"DSINFER_GEMV_ROWS", "DSINFER_GEMV_PREFETCH", "DSINFER_AMX"})
    unsetenv(name);
  EXPECT_EQ(with_environment_overrides(cpu_kernel_config()), cpu_kernel_config());
}

}  // namespace
}  // namespace dsinfer::kernel_plan_test
