// The op harness (in the spirit of ggml's test-backend-ops): every product op under every kernel
// configuration this CPU can run (each ISA up to the CPU's x exact / fast / int8 x batch invariant
// on / off: the "plans"), against a reference in double precision of what the plan says it
// computes (plan() decides which operands are rounded to bf16 or quantized to int8), within the
// error bound of fp32 summation, and bit for bit where the plan promises it (a token's outputs
// alone and in a batch under batch invariance and in int8 mode; dot_rows as linear's canonical
// order; accumulate_rows' chains as one combine). A new backend (a GPU's) plugs in as more
// configurations. Ops with one implementation and no plan (rms_norm, silu_mul, rope, argmax) are
// held to their double formulas in ops_test and rope_test; the per-ISA canonical order of every
// GEMV tuning in canonical_order_test; fast decode attention in fast_decode_attention_test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "core/cpu.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/int8_matrix.h"
#include "kernels/kernel_config.h"
#include "kernels/kernel_plan.h"
#include "kernels/linear.h"
#include "kernels/ops.h"
#include "random_matrix.h"

namespace dsinfer::op_harness_test {
namespace {

using test::RandomMatrix;

// One configuration under test, named for ctest ("avx2_int8_invariant").
struct Configuration {
  KernelConfig config;
  std::string name;
};
void PrintTo(const Configuration& c, std::ostream* os) { *os << describe(c.config); }

// Every configuration this CPU runs: each supported ISA (with the CPU's own fast kernels beside
// AVX-512) x numerics x batch invariance.
std::vector<Configuration> runnable_configs() {
  std::vector<Configuration> out;
  for (Isa isa : supported_isas())
    for (ActDType act : {ActDType::kF32, ActDType::kBF16, ActDType::kInt8})
      for (bool invariant : {true, false}) {
        KernelConfig c = with_isa(cpu_kernel_config(), isa);
        c.act = act;
        c.batch_invariant = invariant;
        std::string name = std::string(isa_name(isa)) + "_" + act_dtype_name(act) +
                           (invariant ? "_invariant" : "_variant");
        for (char& ch : name)
          if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
        out.push_back({c, name});
      }
  return out;
}

float round_bf16(float v) { return bf16_to_f32(f32_to_bf16(v)); }

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<float> random_values(std::mt19937& rng, int64_t n, float sigma = 1.0f) {
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

// A reference value and the bound on what fp32 arithmetic in any order may differ from it by:
// n terms summed (each product rounded once, each addition once) stay within (n + slack) u sum|t|.
struct Expected {
  double value = 0, bound = 0;
};
constexpr double kUnit = 1.0 / (1 << 24);  // fp32's unit roundoff

void expect_within(const std::vector<float>& got, const std::vector<Expected>& want,
                   const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_LE(std::fabs(got[i] - want[i].value), want[i].bound)
        << what << ": output " << i << " is " << got[i] << ", the reference " << want[i].value;
}

// What the kernels multiply: weight r, k of m in double (fp8: the code's value times its scale).
double weight_value(const RandomMatrix& m, int64_t r, int64_t k) {
  return static_cast<double>(m.weight(r, k)) * m.x_factor(r, k);
}

// int8 mode's numbers by their definition (kernels/int8_matrix.h): x quantized per token per 128
// columns, the repacked weights' q and scales, the group sums exact and then scaled in fp32.
std::vector<Expected> int8_reference(const std::vector<float>& x, int64_t n, const Int8Matrix& w) {
  const int64_t groups = w.groups();
  std::vector<Expected> out(static_cast<size_t>(n * w.rows));
  std::vector<int32_t> qx(static_cast<size_t>(w.cols));
  std::vector<float> sx(static_cast<size_t>(groups));
  for (int64_t t = 0; t < n; ++t) {
    const float* row = x.data() + t * w.cols;
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t c0 = g * kQuantGroup, c1 = std::min(w.cols, c0 + kQuantGroup);
      float amax = 0;
      for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(row[c]));
      sx[g] = amax / 127.0f;
      const float inv = amax > 0 ? 127.0f / amax : 0.0f;
      for (int64_t c = c0; c < c1; ++c)
        qx[c] = static_cast<int32_t>(std::clamp(std::nearbyint(row[c] * inv), -127.0f, 127.0f));
    }
    for (int64_t r = 0; r < w.rows; ++r) {
      Expected& e = out[static_cast<size_t>(t * w.rows + r)];
      double magnitude = 0;
      for (int64_t g = 0; g < groups; ++g) {
        int64_t sum = 0;
        for (int64_t c = g * kQuantGroup; c < std::min(w.cols, (g + 1) * kQuantGroup); ++c)
          sum += qx[c] * w.at(r, c);
        const double term = static_cast<double>(sum) * sx[g] * w.row_scale(r, g);
        e.value += term;
        magnitude += std::fabs(term);
      }
      e.bound = (groups + 4) * kUnit * magnitude + 1e-30;
    }
  }
  return out;
}

// x [n, cols] times m^T in double, x (and the weights) rounded to bf16 first where asked.
std::vector<Expected> product_reference(const std::vector<float>& x, int64_t n,
                                        const RandomMatrix& m, bool round_x, bool round_w) {
  const int64_t rows = m.w.rows, cols = m.w.cols;
  std::vector<Expected> out(static_cast<size_t>(n * rows));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      double value = 0, magnitude = 0;
      for (int64_t k = 0; k < cols; ++k) {
        const float xv = x[static_cast<size_t>(t * cols + k)];
        double w = weight_value(m, r, k);
        if (round_w) w = round_bf16(static_cast<float>(w));
        const double term = (round_x ? round_bf16(xv) : xv) * w;
        value += term;
        magnitude += std::fabs(term);
      }
      // (fp8: x times its block's scale is one more rounding per term)
      out[static_cast<size_t>(t * rows + r)] = {value, (cols + 8) * kUnit * magnitude + 1e-30};
    }
  return out;
}

bool fast_kernel(KernelKind k) {
  return k == KernelKind::kAmxGemm || k == KernelKind::kBf16DotGemm ||
         k == KernelKind::kBf16DotGemv;
}

class OpHarness : public testing::TestWithParam<Configuration> {};

// Shapes with tails: rows past the GEMV's groups and the int8 kernels' 16-row blocks, columns
// past the 128-column groups and blocks (fp8 takes two row blocks of scales).
constexpr int64_t kRows = 37, kCols = 300, kFp8Rows = 150;
constexpr int64_t kTokenCounts[] = {1, 2, 3, 4, 5, 8, 13, 16, 17, 33};

// A matrix of each format, with its int8 form where int8 mode repacks it.
struct Operand {
  std::unique_ptr<RandomMatrix> m;
  std::unique_ptr<Int8Matrix> int8;
};
std::vector<Operand> operands(std::mt19937& rng, ThreadPool& pool, bool with_int8_forms) {
  std::vector<Operand> out;
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF8E4M3, kInt8Storage, kInt4Storage}) {
    Operand o;
    o.m = std::make_unique<RandomMatrix>(dtype, dtype == DType::kF8E4M3 ? kFp8Rows : kRows, kCols,
                                         rng);
    if (with_int8_forms && int8_repackable(o.m->w)) {
      o.int8 = std::make_unique<Int8Matrix>(repack_int8(o.m->w, pool));
      o.m->w.int8 = o.int8.get();
    }
    out.push_back(std::move(o));
  }
  return out;
}

// linear() of every format and token count against the reference of its plan.
TEST_P(OpHarness, LinearMatchesTheDoubleReferenceOfItsPlan) {
  const KernelConfig& config = GetParam().config;
  std::mt19937 rng(11);
  ThreadPool pool(2);
  for (const Operand& o : operands(rng, pool, config.int8())) {
    const WeightMatrix& w = o.m->w;
    for (int64_t n : kTokenCounts) {
      const KernelPlan p = plan(w, n, config);
      const std::string what =
          std::string(dtype_name(w.dtype)) + ", " + std::to_string(n) + " tokens, " + describe(p);
      const std::vector<float> x = random_values(rng, n * w.cols);
      std::vector<float> y(static_cast<size_t>(n * w.rows), NAN);
      linear(config, x.data(), n, w, y.data(), pool);
      if (p.kernel == KernelKind::kInt8) {
        expect_within(y, int8_reference(x, n, *o.int8), what);
      } else {
        // linear() rounds the activations in fast mode, on every kernel; the weights are exact
        expect_within(y, product_reference(x, n, *o.m, config.fast(), false), what);
      }
    }
  }
}

// Where the plan promises batch invariance (exact mode with it on, int8 mode), each token's
// outputs computed in a batch of 33 are the bits of that token alone, on 1 thread or 2.
TEST_P(OpHarness, LinearKeepsATokensBitsInAnyBatchWherePromised) {
  const KernelConfig& config = GetParam().config;
  const bool promised = config.int8() || (config.act == ActDType::kF32 && config.batch_invariant);
  if (!promised) GTEST_SKIP() << "no batch invariance promised by " << describe(config);
  std::mt19937 rng(12);
  ThreadPool one(1), two(2);
  for (const Operand& o : operands(rng, two, config.int8())) {
    const WeightMatrix& w = o.m->w;
    if (config.int8() && !w.int8) continue;  // (f32: int8 mode's fast-mode rest)
    const int64_t n = 33;
    const std::vector<float> x = random_values(rng, n * w.cols);
    std::vector<float> batch(static_cast<size_t>(n * w.rows));
    linear(config, x.data(), n, w, batch.data(), two);
    for (int64_t t : {int64_t{0}, int64_t{7}, n - 1}) {
      std::vector<float> alone(static_cast<size_t>(w.rows));
      linear(config, x.data() + t * w.cols, 1, w, alone.data(), one);
      const std::vector<float> in_batch(batch.begin() + t * w.rows,
                                        batch.begin() + (t + 1) * w.rows);
      EXPECT_TRUE(same_bits(alone, in_batch))
          << dtype_name(w.dtype) << ": token " << t << " alone against in a batch of " << n;
    }
  }
}

// matmul_serial (attention's products, both sides activations) against its plan's reference:
// both operands rounded to bf16 on fast mode's kernels, exact elsewhere.
TEST_P(OpHarness, MatmulSerialMatchesTheDoubleReferenceOfItsPlan) {
  const KernelConfig& config = GetParam().config;
  std::mt19937 rng(13);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const RandomMatrix m(dtype, kRows, kCols, rng);
    for (int64_t n : kTokenCounts) {
      const KernelPlan p = plan(m.w, n, config, ProductUse::kSerial);
      const bool rounds = fast_kernel(p.kernel);
      const std::vector<float> x = random_values(rng, n * kCols);
      std::vector<float> y(static_cast<size_t>(n * kRows), NAN);
      matmul_serial(config, ConstMatView(x.data(), n, kCols), m.w, MatView(y.data(), n, kRows));
      expect_within(
          y, product_reference(x, n, m, rounds, rounds),
          std::string(dtype_name(dtype)) + ", " + std::to_string(n) + " tokens, " + describe(p));
      // exact mode's serial products are linear()'s bits
      if (config.act != ActDType::kF32) continue;
      std::vector<float> by_linear(y.size());
      ThreadPool pool(2);
      linear(config, x.data(), n, m.w, by_linear.data(), pool);
      EXPECT_TRUE(same_bits(y, by_linear)) << dtype_name(dtype) << ", " << n << " tokens";
    }
  }
}

// The row kernels of the plan's ISA: combine_rows (any format) and accumulate_rows against the
// double reference; a chain of accumulate_rows over two matrices gives one combine_rows' bits
// over the rows stacked; dot_rows gives exact linear()'s bits (the ISA's canonical order).
TEST_P(OpHarness, RowKernelsMatchTheReferenceAndTheirPromisedBits) {
  const KernelConfig& config = GetParam().config;
  const Isa isa = config.isa;
  std::mt19937 rng(14);
  const int64_t sets = 5;
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF8E4M3}) {
    const RandomMatrix m(dtype, kFp8Rows, kCols, rng);
    const RowSpan span{3, 130};  // (starts inside fp8's first scale block, ends in the second)
    const std::vector<float> coef = random_values(rng, sets * span.count);
    std::vector<float> out(static_cast<size_t>(sets * kCols), NAN);
    combine_rows(isa, m.w, span, ConstMatView(coef.data(), sets, span.count),
                 MatView(out.data(), sets, kCols));
    std::vector<Expected> want(out.size());
    for (int64_t t = 0; t < sets; ++t)
      for (int64_t c = 0; c < kCols; ++c) {
        double value = 0, magnitude = 0;
        for (int64_t d = 0; d < span.count; ++d) {
          const double term = static_cast<double>(coef[static_cast<size_t>(t * span.count + d)]) *
                              weight_value(m, span.first + d, c);
          value += term;
          magnitude += std::fabs(term);
        }
        want[static_cast<size_t>(t * kCols + c)] = {value, (span.count + 8) * kUnit * magnitude};
      }
    expect_within(out, want, "combine_rows " + std::string(dtype_name(dtype)));
  }
  // accumulate_rows continues combine_rows' chains: two blocks of one cache = one stacked block
  const RandomMatrix stacked(DType::kBF16, 100, kCols, rng);
  WeightMatrix first = stacked.w, second = stacked.w;
  first.rows = 64;
  second.rows = 36;
  second.data = stacked.w.data + 64 * stacked.w.row_stride();
  const std::vector<float> coef = random_values(rng, sets * 100);
  std::vector<float> whole(static_cast<size_t>(sets * kCols)), chained(whole.size());
  combine_rows(isa, stacked.w, {0, 100}, ConstMatView(coef.data(), sets, 100),
               MatView(whole.data(), sets, kCols));
  combine_rows(isa, first, {0, 64}, ConstMatView(coef.data(), sets, 64, 100),
               MatView(chained.data(), sets, kCols));
  accumulate_rows(isa, second, {0, 36}, ConstMatView(coef.data() + 64, sets, 36, 100),
                  MatView(chained.data(), sets, kCols));
  EXPECT_TRUE(same_bits(whole, chained)) << "combine then accumulate against one combine";
  // dot_rows: the canonical order of linear() in exact mode with batch invariance
  KernelConfig exact = config;
  exact.act = ActDType::kF32;
  exact.batch_invariant = true;
  ThreadPool pool(2);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const RandomMatrix m(dtype, 70, kCols, rng);
    for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{16}}) {
      const std::vector<float> x = random_values(rng, n * kCols);
      std::vector<float> scores(static_cast<size_t>(n * 70)), by_linear(scores.size());
      dot_rows(isa, ConstMatView(x.data(), n, kCols), m.w, MatView(scores.data(), n, 70));
      linear(exact, x.data(), n, m.w, by_linear.data(), pool);
      EXPECT_TRUE(same_bits(scores, by_linear)) << "dot_rows " << dtype_name(dtype) << ", " << n;
    }
  }
}

// The softmaxes: softmax() (one definition, libm's exp, the sum in double) and fast mode's
// softmax_fast of the plan's ISA (a polynomial exp on AVX-512, ops_test's bound) against the double
// formula.
TEST_P(OpHarness, SoftmaxesMatchTheDoubleFormula) {
  const KernelConfig& config = GetParam().config;
  std::mt19937 rng(15);
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{64}, int64_t{1000}}) {
    const std::vector<float> x = random_values(rng, n, 4.0f);
    // (the definition subtracts the max in fp32)
    const float max = *std::max_element(x.begin(), x.end());
    double sum = 0;
    for (float v : x) sum += std::exp(static_cast<double>(v - max));
    for (bool fast : {false, true}) {
      std::vector<float> p = x;
      if (fast) {
        softmax_fast(config.isa, p.data(), n);
      } else {
        softmax(p.data(), n);
      }
      for (int64_t i = 0; i < n; ++i) {
        const double want = std::exp(static_cast<double>(x[static_cast<size_t>(i)] - max)) / sum;
        ASSERT_NEAR(p[static_cast<size_t>(i)], want, want * (fast ? 1e-5 : 8 * kUnit) + 1e-12)
            << (fast ? "softmax_fast " : "softmax ") << n << " values, value " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Plans, OpHarness, testing::ValuesIn(runnable_configs()),
                         [](const testing::TestParamInfo<Configuration>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace dsinfer::op_harness_test
