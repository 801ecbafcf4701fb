// The canonical order of the matrix kernels (src/kernels/matmul_impl.h), held bit for bit: every
// vector variant (AVX2, AVX-512), on both of its paths (GEMV below gemm_min_tokens, GEMM from it
// on), at any thread count, gives each (row, token) exactly the value of the reference order
// written out below in scalar code. This is what makes a sequence's logits independent of its
// batch mates (docs/ENGINE.md, batch invariance): a row computed alone equals the same row computed
// among 200 others. The scalar oracle has one path only; it is checked for the same property.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/cpu.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/linear.h"
#include "random_matrix.h"

namespace dsinfer::canonical_order_test {
namespace {

int lanes(Isa isa) { return isa == Isa::kAvx512 ? 16 : 8; }

using Matrix = test::RandomMatrix;

// The canonical order of one dot product with `L` lanes, written out.
float canonical_dot(const Matrix& m, int64_t r, const float* x, int L) {
  const int64_t K = m.w.cols, K_vec = K - K % L;
  auto xs = [&](int64_t k) { return m.w.dtype == DType::kF8E4M3 ? x[k] * m.x_factor(r, k) : x[k]; };
  std::vector<float> p(static_cast<size_t>(L), 0.0f);
  for (int64_t k = 0; k < K_vec; ++k) p[k % L] = std::fma(m.weight(r, k), xs(k), p[k % L]);
  for (int half = L / 2; half >= 1; half /= 2)
    for (int l = 0; l < half; ++l) p[l] = p[l] + p[l + half];
  float s = p[0];
  for (int64_t k = K_vec; k < K; ++k) s = std::fma(m.weight(r, k), xs(k), s);
  return s;
}

std::vector<float> random_x(std::mt19937& rng, int64_t n) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = normal(rng);
  return x;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Shapes with tails everywhere: rows not a multiple of the GEMV's 4 or 8 or the GEMM's 6-row
// panels, chunks or fp8 row blocks; columns not a multiple of the lanes or of the 256- or
// 512-column panels; rows more than 8 KB apart (f32 2100: the GEMV takes 5-16 tokens over 24 rows
// at a time).
struct Shape {
  int64_t rows, cols;
};
constexpr Shape kShapes[] = {{300, 200}, {1, 9},     {131, 520}, {70, 1030},
                             {260, 128}, {40, 1024}, {50, 2100}};

// GEMV tunings (kernels/kernel_config.h): Intel's and AMD's, and mixtures of their rows per group
// (16 to 1), prefetches (none, ahead, wrapped into the next group) and fp8 loads.
constexpr GemvTuning kGemvTunings[] = {
    {4, 4, GemvPrefetch::kAhead, 0},
    {16, 8, GemvPrefetch::kWrapped, 4},
    {8, 2, GemvPrefetch::kNone, 2},
    {16, 8, GemvPrefetch::kAhead, 0},
    {2, 1, GemvPrefetch::kWrapped, 1},
    {1, 8, GemvPrefetch::kAhead, 3},
    {16, 8, GemvPrefetch::kWrapped, 4, kGemvAlways, 0,
     6},                                                // Zen 5's: the GEMV at every token count
    {8, 8, GemvPrefetch::kWrapped, 4, 31, 4},           // Zen 3's: fp8 rows 4 at a time for 1 token
    {8, 8, GemvPrefetch::kWrapped, 4, 0, 0, 4, true},   // Zen 4's: one token plain
    {4, 2, GemvPrefetch::kWrapped, 2, 0, 16},           // fp8 rows more at a time than the others
    {2, 2, GemvPrefetch::kNone, 3, kGemvAlways, 0, 6},  // 6 rows for 3 tokens, the fp16 form at 4
};

// Every GEMV tuning on every CPU.
TEST(CanonicalOrder, EveryVectorKernelIsTheCanonicalOrderBitForBit) {
  std::mt19937 rng(3);
  ThreadPool one(1), three(3);
  for (Isa isa : supported_isas()) {
    if (isa == Isa::kScalar) continue;
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF8E4M3, kInt4Storage, kInt8Storage}) {
      for (const Shape& shape : kShapes) {
        const Matrix m(dtype, shape.rows, shape.cols, rng);
        // GEMV tokens (1-7), the switch, and GEMM token counts over partial tiles and chunks
        for (int64_t n : {1, 3, 5, 7, 8, 9, 33, 150}) {
          const std::vector<float> x = random_x(rng, n * shape.cols);
          // the written-out order, once for every tuning and thread count (it is the slow part)
          std::vector<float> want(static_cast<size_t>(n * shape.rows));
          for (int64_t t = 0; t < n; ++t)
            for (int64_t r = 0; r < shape.rows; ++r)
              want[static_cast<size_t>(t * shape.rows + r)] =
                  canonical_dot(m, r, x.data() + t * shape.cols, lanes(isa));
          for (const GemvTuning tuning : kGemvTunings) {
            KernelConfig k = with_isa(cpu_kernel_config(), isa);
            k.gemv = tuning;
            for (ThreadPool* pool : {&one, &three}) {
              std::vector<float> y(static_cast<size_t>(n * shape.rows));
              linear(k, x.data(), n, m.w, y.data(), *pool);
              for (size_t i = 0; i < y.size(); ++i) {
                if (same_bits(y[i], want[i])) continue;
                FAIL() << isa_name(isa) << " " << dtype_name(dtype) << " " << shape.rows << "x"
                       << shape.cols << " tokens " << n << " threads " << pool->size()
                       << " gemv rows " << tuning.rows_one_token << "/" << tuning.rows_two_tokens
                       << " fp8 " << tuning.fp8_rows_one_token << " prefetch "
                       << static_cast<int>(tuning.prefetch) << " fp8 subnormal up to "
                       << tuning.fp8_subnormal_tokens << " tokens: token "
                       << static_cast<int64_t>(i) / shape.rows << " row "
                       << static_cast<int64_t>(i) % shape.rows << ": " << y[i] << " vs " << want[i];
              }
            }
          }
        }
      }
    }
  }
}

// fp8 activations at the edges of the subnormal form (kernels/matmul_impl.h): a block whose scaled
// activations would round as subnormals (tiny x) or overflow x 2^120 (huge x) must fall back to
// the fp16 form, so the results stay the canonical ones bit for bit (the check covers a block's
// tokens together: token 0 alone at the edge sends the whole group of tokens back).
TEST(CanonicalOrder, Fp8ActivationsOutsideTheSubnormalFormFallBack) {
  std::mt19937 rng(5);
  const Matrix m(DType::kF8E4M3, 300, 260, rng);
  for (Isa isa : supported_isas()) {
    if (isa == Isa::kScalar) continue;
    for (const GemvTuning tuning : kGemvTunings) {
      KernelConfig k = with_isa(cpu_kernel_config(), isa);
      k.gemv = tuning;
      for (float edge : {1e-36f, 3e-41f, 2e30f, -1e-37f}) {
        for (int64_t n : {1, 2, 4}) {
          SCOPED_TRACE(testing::Message()
                       << isa_name(isa) << " edge " << edge << " tokens " << n
                       << " fp8 subnormal up to " << tuning.fp8_subnormal_tokens << " tokens");
          std::vector<float> x = random_x(rng, n * 260);
          for (int64_t c = 0; c < 260; ++c)
            x[static_cast<size_t>(c)] *= edge;  // token 0 all at that scale
          std::vector<float> y(static_cast<size_t>(n * 300));
          ThreadPool pool(2);
          linear(k, x.data(), n, m.w, y.data(), pool);
          for (int64_t t = 0; t < n; ++t)
            for (int64_t r = 0; r < 300; ++r) {
              const float want = canonical_dot(m, r, x.data() + t * 260, lanes(isa));
              const float got = y[static_cast<size_t>(t * 300 + r)];
              ASSERT_TRUE(same_bits(got, want))
                  << "token " << t << " row " << r << ": " << got << " vs " << want;
            }
        }
      }
    }
  }
}

// The property itself, for every variant including the scalar oracle: one token's row of the
// product is the same bits alone, among others (GEMV and GEMM) and with other thread counts.
TEST(CanonicalOrder, ARowDoesNotDependOnItsBatchMates) {
  std::mt19937 rng(4);
  for (Isa isa : supported_isas()) {
    const KernelConfig k = with_isa(cpu_kernel_config(), isa);
    for (DType dtype : {DType::kBF16, DType::kF8E4M3, kInt4Storage}) {
      const Matrix m(dtype, 140, 300, rng);
      const int64_t n = 40;
      const std::vector<float> x = random_x(rng, n * 300);
      ThreadPool one(1), three(3);
      std::vector<float> batch(static_cast<size_t>(n * 140));
      linear(k, x.data(), n, m.w, batch.data(), three);
      for (int64_t t : {int64_t{0}, int64_t{17}, n - 1}) {
        std::vector<float> alone(140), pair(2 * 140);
        linear(k, x.data() + t * 300, 1, m.w, alone.data(), one);
        std::vector<float> two(x.begin() + t * 300, x.begin() + (t + 1) * 300);
        two.insert(two.end(), x.begin(), x.begin() + 300);  // and some other token
        linear(k, two.data(), 2, m.w, pair.data(), three);
        for (int64_t r = 0; r < 140; ++r) {
          ASSERT_TRUE(same_bits(alone[r], batch[static_cast<size_t>(t * 140 + r)]))
              << isa_name(isa) << " " << dtype_name(dtype) << " token " << t << " row " << r;
          ASSERT_TRUE(same_bits(alone[r], pair[r]))
              << isa_name(isa) << " token " << t << " row " << r;
        }
      }
    }
  }
}

// The opt-out (KernelConfig::batch_invariant false, --batch-variant): the GEMM sums in k order
// instead, so it no longer matches the canonical order (that is the point: the flag does switch it)
// but stays within rounding of it; the GEMV (decode) is the same either way; the default comes
// back.
TEST(CanonicalOrder, TheBatchVariantOptOutLeavesTheOrderButNotTheValues) {
  std::mt19937 rng(6);
  ThreadPool pool(2);
  for (Isa isa : supported_isas()) {
    if (isa == Isa::kScalar) continue;
    const KernelConfig invariant = with_isa(cpu_kernel_config(), isa);
    KernelConfig opt_out = invariant;
    opt_out.batch_invariant = false;
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF8E4M3, kInt4Storage, kInt8Storage}) {
      const Matrix m(dtype, 131, 520, rng);
      for (int64_t n : {int64_t{3}, int64_t{40}}) {
        SCOPED_TRACE(testing::Message()
                     << isa_name(isa) << " " << dtype_name(dtype) << " tokens " << n);
        const std::vector<float> x = random_x(rng, n * 520);
        std::vector<float> canonical(static_cast<size_t>(n * 131)), variant(canonical.size());
        linear(invariant, x.data(), n, m.w, canonical.data(), pool);
        linear(opt_out, x.data(), n, m.w, variant.data(), pool);
        int64_t differ = 0;
        for (size_t i = 0; i < canonical.size(); ++i) {
          differ += !same_bits(canonical[i], variant[i]);
          ASSERT_NEAR(variant[i], canonical[i], 1e-4f * (1 + std::fabs(canonical[i]))) << i;
        }
        if (n < 8)
          EXPECT_EQ(differ, 0) << "the GEMV has one order";
        else
          EXPECT_GT(differ, 0) << "the opt-out should change the GEMM's order";
      }
    }
  }
}

// combine_rows: each output is one fma chain from 0 over the rows, in increasing order, of the
// weight (fp8: value / 256) times the coefficient (fp8: times the block scale * 256), whatever
// the number of sets, on every vector variant.
TEST(CanonicalOrder, CombineRowsIsOneChainPerOutputBitForBit) {
  std::mt19937 rng(5);
  for (Isa isa : supported_isas()) {
    if (isa == Isa::kScalar) continue;
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF8E4M3, kInt4Storage, kInt8Storage}) {
      for (const Shape& shape : {Shape{300, 200}, Shape{130, 576}, Shape{17, 3}}) {
        const Matrix m(dtype, shape.rows, shape.cols, rng);
        const int64_t first = shape.rows / 5, n_rows = shape.rows - first;
        for (int64_t n_sets : {1, 4, 9}) {
          SCOPED_TRACE(testing::Message() << isa_name(isa) << " " << dtype_name(dtype) << " "
                                          << shape.rows << "x" << shape.cols << " sets " << n_sets);
          const std::vector<float> coef = random_x(rng, n_sets * n_rows);
          std::vector<float> out(static_cast<size_t>(n_sets * shape.cols));
          combine_rows(isa, m.w, {first, n_rows}, ConstMatView(coef.data(), n_sets, n_rows),
                       MatView(out.data(), n_sets, shape.cols));
          for (int64_t t = 0; t < n_sets; ++t)
            for (int64_t c = 0; c < shape.cols; ++c) {
              float want = 0.0f;
              for (int64_t d = 0; d < n_rows; ++d)
                want = std::fma(
                    m.weight(first + d, c),
                    coef[static_cast<size_t>(t * n_rows + d)] * m.x_factor(first + d, c), want);
              const float got = out[static_cast<size_t>(t * shape.cols + c)];
              ASSERT_TRUE(same_bits(got, want))
                  << "set " << t << " column " << c << ": " << got << " vs " << want;
            }
        }
      }
    }
  }
}

// accumulate_rows continues each output's chain: rows [first, first + n) combined in pieces (a KV
// cache's blocks, 64 and fewer rows each) give the bits of one combine_rows over them all. A chain
// restarted from 0 in any piece fails it.
TEST(CanonicalOrder, AccumulateRowsContinuesTheChainBitForBit) {
  std::mt19937 rng(6);
  for (Isa isa : supported_isas()) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      for (const Shape& shape : {Shape{300, 576}, Shape{70, 200}, Shape{9, 3}}) {
        const Matrix m(dtype, shape.rows, shape.cols, rng);
        for (int64_t n_sets : {1, 4, 9}) {
          SCOPED_TRACE(testing::Message() << isa_name(isa) << " " << dtype_name(dtype) << " "
                                          << shape.rows << "x" << shape.cols << " sets " << n_sets);
          const int64_t n_rows = shape.rows;
          const std::vector<float> coef = random_x(rng, n_sets * n_rows);
          std::vector<float> whole(static_cast<size_t>(n_sets * shape.cols)),
              pieces(whole.size(), 1e30f);
          const ConstMatView all_coef(coef.data(), n_sets, n_rows);  // [n_sets, n_rows]
          combine_rows(isa, m.w, {0, n_rows}, all_coef, MatView(whole.data(), n_sets, shape.cols));
          const MatView out(pieces.data(), n_sets, shape.cols);
          for (int64_t d0 = 0; d0 < n_rows; d0 += 64) {
            const int64_t n = std::min<int64_t>(64, n_rows - d0);
            if (d0 == 0)
              combine_rows(isa, m.w, {d0, n}, all_coef.columns(d0, n), out);
            else
              accumulate_rows(isa, m.w, {d0, n}, all_coef.columns(d0, n), out);
          }
          for (size_t i = 0; i < whole.size(); ++i)
            ASSERT_TRUE(same_bits(whole[i], pieces[i])) << i;
        }
      }
    }
  }
}

// dot_rows is the canonical order of linear() bit for bit, for f32 and bf16 rows, token and row
// counts around its tiles (4 x 5 on AVX-512, 2 x 6 on AVX2), widths with and without tails.
TEST(CanonicalOrder, DotRowsIsTheCanonicalProductBitForBit) {
  std::mt19937 rng(7);
  ThreadPool pool(1);
  for (Isa isa : supported_isas()) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      for (const Shape& shape : {Shape{64, 576}, Shape{13, 200}, Shape{7, 3}, Shape{1, 17}}) {
        const Matrix m(dtype, shape.rows, shape.cols, rng);
        for (int64_t n : {1, 3, 4, 6, 9, 64}) {
          SCOPED_TRACE(testing::Message() << isa_name(isa) << " " << dtype_name(dtype) << " "
                                          << shape.rows << "x" << shape.cols << " tokens " << n);
          const std::vector<float> x = random_x(rng, n * shape.cols);
          std::vector<float> want(static_cast<size_t>(n * shape.rows)), got(want.size());
          linear(with_isa(cpu_kernel_config(), isa), x.data(), n, m.w, want.data(), pool);
          dot_rows(isa, ConstMatView(x.data(), n, shape.cols), m.w,
                   MatView(got.data(), n, shape.rows));
          for (size_t i = 0; i < want.size(); ++i) ASSERT_TRUE(same_bits(got[i], want[i])) << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace dsinfer::canonical_order_test
