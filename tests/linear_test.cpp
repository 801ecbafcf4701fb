#include "kernels/linear.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "core/cpu.h"
#include "core/dtype.h"
#include "core/error.h"
#include "kernels/matmul_bf16dot.h"

namespace dsinfer::linear_test {
namespace {

std::vector<float> random_floats(std::mt19937& rng, size_t n, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

TEST(Linear, DotMatchesDoublePrecision) {
  std::mt19937 rng(11);
  for (int64_t n : {0, 1, 2, 7, 15, 16, 17, 31, 32, 33, 100, 255, 256, 1000, 7168}) {
    for (int rep = 0; rep < 5; ++rep) {
      auto a = random_floats(rng, static_cast<size_t>(n));
      auto b = random_floats(rng, static_cast<size_t>(n), 3.0f);
      double want = 0, magnitude = 0;
      for (int64_t i = 0; i < n; ++i) {
        want += static_cast<double>(a[i]) * b[i];
        magnitude += std::fabs(static_cast<double>(a[i]) * b[i]);
      }
      const float got = dot(a.data(), b.data(), n);
      EXPECT_NEAR(got, want, 1e-6 * magnitude + 1e-30) << "n " << n;
    }
  }
  // Exact small-integer sums: every element counts (catches a dropped tail).
  for (int64_t n = 0; n <= 70; ++n) {
    std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      a[i] = static_cast<float>(i + 1);
      b[i] = (i % 2) ? -1.0f : 2.0f;
    }
    double want = 0;
    for (int64_t i = 0; i < n; ++i) want += a[i] * b[i];
    EXPECT_EQ(dot(a.data(), b.data(), n), want) << n;
  }
}

TEST(Linear, AxpyMatchesDoublePrecision) {
  std::mt19937 rng(12);
  for (int64_t n : {0, 1, 5, 16, 17, 63, 64, 65, 1000}) {
    auto x = random_floats(rng, static_cast<size_t>(n));
    auto y = random_floats(rng, static_cast<size_t>(n));
    const float alpha = -1.75f;
    std::vector<float> out = y;
    // Guard elements past the end must stay untouched.
    out.push_back(123.0f);
    axpy(alpha, x.data(), out.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double want = static_cast<double>(y[i]) + static_cast<double>(alpha) * x[i];
      EXPECT_NEAR(out[i], want, 1e-6 * (std::fabs(y[i]) + std::fabs(alpha * x[i])) + 1e-30) << i;
    }
    EXPECT_EQ(out[static_cast<size_t>(n)], 123.0f);
  }
}

// A test matrix in one dtype with its own storage, and the fp32 values it stands for.
struct TestMatrix {
  WeightMatrix w;
  std::vector<uint8_t> bytes;
  std::vector<float> scales;
  std::vector<uint16_t> group_scales;  // int4 / int8
  std::vector<float> dense;            // [rows, cols], dequantized by the naive rule

  TestMatrix(DType dtype, int64_t rows, int64_t cols, std::mt19937& rng) {
    w.dtype = dtype;
    w.rows = rows;
    w.cols = cols;
    dense.resize(static_cast<size_t>(rows * cols));
    if (dtype == kInt4Storage || dtype == kInt8Storage) {
      make_quantized(rng);
      return;
    }
    bytes.resize(static_cast<size_t>(rows * cols) * dtype_size(dtype));
    std::normal_distribution<float> normal(0.0f, 0.5f);
    std::uniform_int_distribution<int> code(0, 255);
    if (dtype == DType::kF8E4M3) {
      const int64_t srows = ceil_div(rows, kFp8Block), scols = ceil_div(cols, kFp8Block);
      scales.resize(static_cast<size_t>(srows * scols));
      // Distinct per block so a wrong block index shows.
      for (size_t i = 0; i < scales.size(); ++i)
        scales[i] = std::ldexp(1.0f + 0.1f * static_cast<float>(i), -static_cast<int>(i % 5) - 3);
    }
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const size_t i = static_cast<size_t>(r * cols + c);
        switch (dtype) {
          case DType::kF32: {
            const float v = normal(rng);
            std::memcpy(&bytes[i * 4], &v, 4);
            dense[i] = v;
            break;
          }
          case DType::kBF16: {
            const uint16_t b = f32_to_bf16(normal(rng));
            std::memcpy(&bytes[i * 2], &b, 2);
            dense[i] = bf16_to_f32(b);
            break;
          }
          case DType::kF8E4M3: {
            uint8_t b;
            do b = static_cast<uint8_t>(code(rng));
            while ((b & 0x7f) == 0x7f);  // no NaN codes
            bytes[i] = b;
            const float s = scales[static_cast<size_t>((r / kFp8Block) * ceil_div(cols, kFp8Block) +
                                                       c / kFp8Block)];
            dense[i] =
                fp8_e4m3_to_f32_slow(b) * s;  // the reference: code value x block scale, fp32
            break;
          }
          default:
            ADD_FAILURE() << "unsupported test dtype";
        }
      }
    w.data = bytes.data();
    w.scale = scales.empty() ? nullptr : scales.data();
  }

  // int4 / int8: normal values quantized by quantize_row (every 13th row ten times larger, so
  // groups' scales differ), then read back by the layout written out here: int4 column c of a row
  // is the low (c % 32 < 16) or high nibble of byte 16 (c / 32) + c % 16, minus 8.
  void make_quantized(std::mt19937& rng) {
    const QuantFormat format = w.dtype == kInt4Storage ? QuantFormat::kInt4 : QuantFormat::kInt8;
    const int64_t rows = w.rows, cols = w.cols, stride = quant_row_bytes(format, cols),
                  groups = quant_groups(cols);
    EXPECT_EQ(stride, format == QuantFormat::kInt4 ? (cols + 31) / 32 * 16 : cols);
    bytes.assign(static_cast<size_t>(rows * stride), 0);
    group_scales.assign(static_cast<size_t>(rows * groups), 0);
    std::normal_distribution<float> normal(0.0f, 0.5f);
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      for (float& v : row) v = normal(rng) * (r % 13 == 0 ? 10.0f : 1.0f);
      quantize_row(format, row.data(), cols, &bytes[static_cast<size_t>(r * stride)],
                   &group_scales[static_cast<size_t>(r * groups)]);
      for (int64_t c = 0; c < cols; ++c) {
        int q;
        if (format == QuantFormat::kInt4) {
          const uint8_t b = bytes[static_cast<size_t>(r * stride + 16 * (c / 32) + c % 16)];
          q = (c % 32 < 16 ? b & 15 : b >> 4) - 8;
        } else {
          q = static_cast<int8_t>(bytes[static_cast<size_t>(r * stride + c)]);
        }
        dense[static_cast<size_t>(r * cols + c)] =
            static_cast<float>(q) *
            f16_to_f32(group_scales[static_cast<size_t>(r * groups + c / 128)]);
      }
    }
    w.data = bytes.data();
    w.group_scale = group_scales.data();
  }
};

// Every weight format, the group-scaled integer ones included.
constexpr DType kAllFormats[] = {DType::kF32, DType::kBF16, DType::kF8E4M3, kInt4Storage,
                                 kInt8Storage};

const char* format_name(DType dtype) {
  return dtype == kInt4Storage ? "int4" : dtype == kInt8Storage ? "int8" : dtype_name(dtype).data();
}

TEST(Linear, DequantizeRowMatchesNaiveIncludingPartialEdgeBlocks) {
  std::mt19937 rng(13);
  const std::pair<int64_t, int64_t> shapes[] = {{300, 200}, {128, 128}, {129, 257},
                                                {1, 5},     {5, 1},     {256, 384}};
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF8E4M3}) {
    for (const auto& [rows, cols] : shapes) {
      SCOPED_TRACE(testing::Message() << format_name(dtype) << " " << rows << "x" << cols);
      TestMatrix m(dtype, rows, cols, rng);
      std::vector<float> out(static_cast<size_t>(cols) + 1);
      for (int64_t r = 0; r < rows; ++r) {
        out.back() = -7.0f;  // guard
        dequantize_row(m.w, r, out.data());
        for (int64_t c = 0; c < cols; ++c)
          ASSERT_EQ(out[static_cast<size_t>(c)], m.dense[static_cast<size_t>(r * cols + c)])
              << "row " << r << " col " << c;
        ASSERT_EQ(out.back(), -7.0f) << "wrote past cols";
      }
    }
  }
}

TEST(Linear, Fp8DequantizeIsCodeTimesScaleForEveryCodeAndScale) {
  // One row of all 256 codes (two blocks), for scales across the whole float range: each
  // output must be exactly fp32(code value x scale), NaN for the NaN codes.
  std::vector<uint8_t> codes(256);
  for (int i = 0; i < 256; ++i) codes[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
  std::mt19937 rng(16);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::vector<float> scale_values = {1.0f,      0.5f,      127.0f,   128.0f,   129.0f,
                                     256.0f,    300.0f,    0x1p100f, 0x1p127f, 0x1p-126f,
                                     0x1p-140f, 0x1p-149f, -3.0f,    0.0f};
  for (int e = -149; e <= 127; e += 3) scale_values.push_back(std::ldexp(mantissa(rng), e));
  std::vector<float> out(256);
  for (float s0 : scale_values) {
    for (float s1 : {s0, 1.0f}) {
      const float scales[2] = {s0, s1};
      WeightMatrix w{DType::kF8E4M3, 1, 256, codes.data(), scales};
      dequantize_row(w, 0, out.data());
      for (int i = 0; i < 256; ++i) {
        const float want = fp8_e4m3_to_f32_slow(static_cast<uint8_t>(i)) * scales[i / 128];
        const float got = out[static_cast<size_t>(i)];
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got)) << "code " << i << " scale " << scales[i / 128];
        } else {
          EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
              << "code " << i << " scale " << scales[i / 128] << " got " << got << " want " << want;
        }
      }
    }
  }
}

TEST(Linear, Fp8DequantizeUsesTheRightBlockScale) {
  // All codes 1.0 (0x38): the output is exactly the scale of each element's block.
  const int64_t rows = 300, cols = 200;
  std::vector<uint8_t> codes(static_cast<size_t>(rows * cols), 0x38);
  const float scales[3 * 2] = {1, 2, 3, 4, 5, 6};
  WeightMatrix w{DType::kF8E4M3, rows, cols, codes.data(), scales};
  std::vector<float> out(static_cast<size_t>(cols));
  for (int64_t r : {0, 127, 128, 255, 256, 299}) {
    dequantize_row(w, r, out.data());
    for (int64_t c : {0, 127, 128, 199})
      EXPECT_EQ(out[static_cast<size_t>(c)], scales[(r / 128) * 2 + c / 128]) << r << "," << c;
  }
}

void expect_linear_matches_reference(const TestMatrix& m, const std::vector<float>& x,
                                     int64_t n_tokens, const std::vector<float>& y) {
  const int64_t rows = m.w.rows, cols = m.w.cols;
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      double want = 0, magnitude = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double p = static_cast<double>(x[static_cast<size_t>(t * cols + c)]) *
                         m.dense[static_cast<size_t>(r * cols + c)];
        want += p;
        magnitude += std::fabs(p);
      }
      ASSERT_NEAR(y[static_cast<size_t>(t * rows + r)], want, 1e-5 * magnitude + 1e-30)
          << "token " << t << " row " << r;
    }
}

// combine_rows (W^T times coefficient sets, decode attention's query absorption) on every ISA:
// row ranges that start inside and across 128-row scale blocks, columns not a multiple of the
// vector width or of the 128-column blocks, several sets with strides wider than their rows.
TEST(Linear, CombineRowsMatchesDoubleReferenceOnEveryIsa) {
  std::mt19937 rng(31);
  const std::pair<int64_t, int64_t> shapes[] = {{300, 200}, {256, 512}, {17, 3}, {140, 129}};
  for (Isa isa : supported_isas()) {
    for (DType dtype : kAllFormats) {
      for (const auto& [rows, cols] : shapes) {
        TestMatrix m(dtype, rows, cols, rng);
        for (const auto& [first, n_rows] :
             {std::pair<int64_t, int64_t>{0, rows}, {rows / 3, rows - rows / 3}, {rows - 1, 1}}) {
          for (int64_t n_sets : {1, 3, 5}) {
            SCOPED_TRACE(testing::Message()
                         << isa_name(isa) << " " << format_name(dtype) << " " << rows << "x" << cols
                         << " rows [" << first << ", +" << n_rows << ") sets " << n_sets);
            const int64_t coef_stride = n_rows + 7, out_stride = cols + 5;
            const auto coef = random_floats(rng, static_cast<size_t>(n_sets * coef_stride));
            std::vector<float> out(static_cast<size_t>(n_sets * out_stride), NAN);
            combine_rows(isa, m.w, {first, n_rows},
                         ConstMatView(coef.data(), n_sets, n_rows, coef_stride),
                         MatView(out.data(), n_sets, cols, out_stride));
            for (int64_t t = 0; t < n_sets; ++t) {
              for (int64_t c = 0; c < cols; ++c) {
                double want = 0, magnitude = 0;
                for (int64_t d = 0; d < n_rows; ++d) {
                  const double p =
                      static_cast<double>(coef[static_cast<size_t>(t * coef_stride + d)]) *
                      m.dense[static_cast<size_t>((first + d) * cols + c)];
                  want += p;
                  magnitude += std::fabs(p);
                }
                ASSERT_NEAR(out[static_cast<size_t>(t * out_stride + c)], want,
                            1e-5 * magnitude + 1e-30)
                    << "set " << t << " column " << c;
              }
              for (int64_t c = cols; c < out_stride && t + 1 < n_sets; ++c)
                ASSERT_TRUE(std::isnan(out[static_cast<size_t>(t * out_stride + c)]))
                    << "wrote past the row";
            }
          }
        }
      }
    }
  }
}

// Every kernel variant this CPU runs (scalar oracle, AVX2, AVX-512), on both paths (GEMV below
// gemm_min_tokens, packed GEMM from it on), with edge shapes: rows not a multiple of the row
// groups (4, 6) or of the row chunks (192), columns not a multiple of the vector width or of the
// 128-column panels, tokens over several token chunks (512 tokens with AVX-512, 128 with AVX2).
TEST(Linear, EveryIsaMatchesDoubleReference) {
  std::mt19937 rng(14);
  const std::pair<int64_t, int64_t> shapes[] = {{300, 200}, {16, 128},  {17, 3},    {1, 129},
                                                {257, 130}, {700, 520}, {130, 600}, {13, 17}};
  for (Isa isa : supported_isas()) {
    for (DType dtype : kAllFormats) {
      for (const auto& [rows, cols] : shapes) {
        TestMatrix m(dtype, rows, cols, rng);
        for (int64_t n_tokens : {1, 2, 3, 4, 5, 7, 8, 9, 33, 70, 290, 600}) {
          // many tokens kept off the larger shapes for time
          if (n_tokens > 256 && rows * cols > 150'000) continue;
          if (n_tokens > 512 && rows * cols > 70'000) continue;
          const auto x = random_floats(rng, static_cast<size_t>(n_tokens * cols));
          std::vector<float> first;
          for (int threads : {1, 2, 3}) {
            SCOPED_TRACE(testing::Message()
                         << isa_name(isa) << " " << format_name(dtype) << " " << rows << "x" << cols
                         << " tokens " << n_tokens << " threads " << threads);
            ThreadPool pool(threads);
            std::vector<float> y(static_cast<size_t>(n_tokens * rows) + 1, NAN);
            y.back() = 42.0f;
            linear(with_isa(cpu_kernel_config(), isa), x.data(), n_tokens, m.w, y.data(), pool);
            EXPECT_EQ(y.back(), 42.0f) << "wrote past the output";
            y.pop_back();
            expect_linear_matches_reference(m, x, n_tokens, y);
            // Fixed summation order: the thread count does not change a single bit.
            if (first.empty()) {
              first = y;
            } else {
              EXPECT_EQ(std::memcmp(first.data(), y.data(), y.size() * sizeof(float)), 0);
            }
          }
        }
      }
    }
  }
}

// Fast mode: the activations rounded to bf16 once, the weights exact, fp32 accumulation, on the
// AMX tiles or VDPBF16PS from kFastGemmMinTokens tokens on where the CPU has them (tokens not a
// multiple of the tiles, rows not of the panels, columns not of the k steps or the 128-column
// scale blocks, odd) and through the exact kernels below that or elsewhere.
TEST(Linear, FastModeIsTheProductOfBf16RoundedActivations) {
  std::mt19937 rng(21);
  const std::pair<int64_t, int64_t> shapes[] = {{300, 200}, {17, 3},    {257, 130}, {64, 512},
                                                {45, 300},  {40, 2200}, {70, 129}};
  KernelConfig fast = cpu_kernel_config();
  fast.act = ActDType::kBF16;
  std::printf("fast mode on %s\n", fast_mode_kernels_name(fast.fast_kernels()));
  ThreadPool pool(2);
  for (DType dtype : kAllFormats) {
    for (const auto& [rows, cols] : shapes) {
      TestMatrix m(dtype, rows, cols, rng);
      for (int64_t n_tokens : {1, 4, 15, 16, 33, 70}) {
        SCOPED_TRACE(testing::Message()
                     << format_name(dtype) << " " << rows << "x" << cols << " tokens " << n_tokens);
        const auto x = random_floats(rng, static_cast<size_t>(n_tokens * cols));
        std::vector<float> rounded(x.size());
        for (size_t i = 0; i < x.size(); ++i) rounded[i] = bf16_to_f32(f32_to_bf16(x[i]));
        std::vector<float> y(static_cast<size_t>(n_tokens * rows), NAN);
        linear(fast, x.data(), n_tokens, m.w, y.data(), pool);
        expect_linear_matches_reference(m, rounded, n_tokens, y);
      }
    }
  }
  // matmul_serial (attention's products, both sides activations, strided): on AMX from
  // kFastGemmMinTokens on both operands rounded, else exact
  for (const auto& [rows, cols] : shapes) {
    TestMatrix m(DType::kF32, rows, cols, rng);
    TestMatrix rounded_w = m;
    for (size_t i = 0; i < m.dense.size(); ++i)
      rounded_w.dense[i] = bf16_to_f32(f32_to_bf16(m.dense[i]));
    for (int64_t n_tokens : {3, 16, 40}) {
      SCOPED_TRACE(testing::Message()
                   << "serial " << rows << "x" << cols << " tokens " << n_tokens);
      const int64_t x_stride = cols + 5, y_stride = rows + 3;
      const auto x = random_floats(rng, static_cast<size_t>(n_tokens * x_stride));
      std::vector<float> y(static_cast<size_t>(n_tokens * y_stride), NAN);
      matmul_serial(fast, ConstMatView(x.data(), n_tokens, cols, x_stride), m.w,
                    MatView(y.data(), n_tokens, rows, y_stride));
      const bool both_rounded =
          fast.fast_kernels() != FastModeKernels::kExact && n_tokens >= kFastGemmMinTokens;
      std::vector<float> dense_x(static_cast<size_t>(n_tokens * cols)),
          dense_y(static_cast<size_t>(n_tokens * rows));
      for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t c = 0; c < cols; ++c) {
          const float v = x[static_cast<size_t>(t * x_stride + c)];
          dense_x[static_cast<size_t>(t * cols + c)] =
              both_rounded ? bf16_to_f32(f32_to_bf16(v)) : v;
        }
        for (int64_t r = 0; r < rows; ++r)
          dense_y[static_cast<size_t>(t * rows + r)] = y[static_cast<size_t>(t * y_stride + r)];
      }
      expect_linear_matches_reference(both_rounded ? rounded_w : m, dense_x, n_tokens, dense_y);
    }
  }
  EXPECT_THROW(parse_act_dtype("fp8"), Error);
}

// The VDPBF16PS kernels themselves, called directly so that they are tested on every CPU that
// has AVX512_BF16 (on one with AMX, fast mode prefers the tiles): token counts across the tiles
// of up to 64 tokens (129: 48 + 48 + 33) and the 4-tile groups, rows across the 6-row panels,
// 48-row chunks and 128-row scale blocks, odd columns; strided x and y for the serial form, whose
// f32 weights are rounded too; the GEMV of few tokens for 1 to 15 tokens.
TEST(Linear, Bf16DotKernelsAreTheProductOfBf16RoundedOperands) {
  if (!cpu_supports(Isa::kAvx512)) GTEST_SKIP() << "no AVX512_BF16 here";
  std::mt19937 rng(23);
  const std::pair<int64_t, int64_t> shapes[] = {{300, 200}, {17, 3},    {257, 130},
                                                {49, 512},  {40, 2200}, {133, 129}};
  ThreadPool pool(2);
  for (DType dtype : {DType::kBF16, DType::kF8E4M3, DType::kF32, kInt4Storage, kInt8Storage}) {
    for (const auto& [rows, cols] : shapes) {
      TestMatrix m(dtype, rows, cols, rng);
      TestMatrix rounded_w =
          m;  // f32 weights rounded; fp8 (code x block scale) and bf16 stay exact
      if (dtype == DType::kF32)
        for (float& v : rounded_w.dense) v = bf16_to_f32(f32_to_bf16(v));
      for (int64_t n_tokens : {1, 16, 63, 64, 65, 129, 300}) {
        SCOPED_TRACE(testing::Message()
                     << format_name(dtype) << " " << rows << "x" << cols << " tokens " << n_tokens);
        const int64_t x_stride = cols + 3, y_stride = rows + 5;
        const auto x = random_floats(rng, static_cast<size_t>(n_tokens * x_stride));
        std::vector<float> rounded(static_cast<size_t>(n_tokens * cols));
        for (int64_t t = 0; t < n_tokens; ++t)
          for (int64_t c = 0; c < cols; ++c)
            rounded[static_cast<size_t>(t * cols + c)] =
                bf16_to_f32(f32_to_bf16(x[static_cast<size_t>(t * x_stride + c)]));
        std::vector<float> y(static_cast<size_t>(n_tokens * y_stride), NAN),
            dense_y(static_cast<size_t>(n_tokens * rows));
        bf16dot_matmul_serial(x.data(), n_tokens, x_stride, m.w, y.data(), y_stride);
        for (int64_t t = 0; t < n_tokens; ++t)
          for (int64_t r = 0; r < rows; ++r)
            dense_y[static_cast<size_t>(t * rows + r)] = y[static_cast<size_t>(t * y_stride + r)];
        expect_linear_matches_reference(rounded_w, rounded, n_tokens, dense_y);
        if (dtype == DType::kF32) continue;
        std::vector<float> packed_x(static_cast<size_t>(n_tokens * cols)),
            y_linear(static_cast<size_t>(n_tokens * rows), NAN);
        for (int64_t t = 0; t < n_tokens; ++t)
          for (int64_t c = 0; c < cols; ++c)
            packed_x[static_cast<size_t>(t * cols + c)] = x[static_cast<size_t>(t * x_stride + c)];
        bf16dot_linear(packed_x.data(), n_tokens, m.w, y_linear.data(), pool);
        expect_linear_matches_reference(m, rounded, n_tokens, y_linear);
        // the pool splits rows only: every row sums in one order, so threads change no bit
        EXPECT_EQ(0, std::memcmp(y_linear.data(), dense_y.data(), y_linear.size() * sizeof(float)));
      }
      // the GEMV of few tokens: every token count (each its own rows per group and column panels)
      for (int64_t n_tokens = 1; n_tokens <= kBf16DotGemvMaxTokens; ++n_tokens) {
        SCOPED_TRACE(testing::Message() << format_name(dtype) << " " << rows << "x" << cols
                                        << " gemv tokens " << n_tokens);
        const auto x = random_floats(rng, static_cast<size_t>(n_tokens * cols));
        std::vector<float> rounded(x.size());
        for (size_t i = 0; i < x.size(); ++i) rounded[i] = bf16_to_f32(f32_to_bf16(x[i]));
        std::vector<float> y(static_cast<size_t>(n_tokens * rows), NAN);
        bf16dot_gemv(x.data(), n_tokens, m.w, y.data(), pool);
        expect_linear_matches_reference(rounded_w, rounded, n_tokens, y);
      }
    }
  }
}

TEST(Linear, EveryIsaDequantizesEveryFp8CodeExactly) {
  // x one-hot: y[t, r] = W[r, t] with a single rounding, which must equal the reference's
  // fp32(code value x scale) bit for bit, on the GEMV and the GEMM path of each variant.
  // Rows hold all 254 finite codes (subnormals included) under two scales of one block row.
  const int64_t rows = 254, cols = 200;
  std::vector<uint8_t> codes(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      int code = static_cast<int>((r + c * 7) % 254);
      if (code >= 0x7f) code += 1;  // skip the NaN code 0x7f (and 0xff: 254 + 1 = 255 is never hit)
      codes[static_cast<size_t>(r * cols + c)] = static_cast<uint8_t>(code);
    }
  const float scales[2 * 2] = {0.0123f, 3.5e-5f, 7.0f, 1.0f / 448.0f};
  WeightMatrix w{DType::kF8E4M3, rows, cols, codes.data(), scales};
  // each ISA's exact kernels, then (kernel -1) fast mode's VDPBF16PS kernels, whose codes go
  // through bf16 (one-hot activations are exact in bf16)
  std::vector<int> kernels;
  for (Isa isa : supported_isas()) kernels.push_back(static_cast<int>(isa));
  if (cpu_supports(Isa::kAvx512)) kernels.push_back(-1);
  for (int kernel : kernels) {
    for (int64_t n_tokens : {3, 40}) {
      SCOPED_TRACE(testing::Message()
                   << (kernel < 0 ? "bf16dot" : isa_name(static_cast<Isa>(kernel))) << " tokens "
                   << n_tokens);
      std::vector<float> x(static_cast<size_t>(n_tokens * cols), 0.0f);
      for (int64_t t = 0; t < n_tokens; ++t)
        x[static_cast<size_t>(t * cols + (t * 5) % cols)] = 1.0f;
      std::vector<float> y(static_cast<size_t>(n_tokens * rows));
      ThreadPool pool(2);
      if (kernel < 0)
        bf16dot_linear(x.data(), n_tokens, w, y.data(), pool);
      else
        linear(with_isa(cpu_kernel_config(), static_cast<Isa>(kernel)), x.data(), n_tokens, w,
               y.data(), pool);
      for (int64_t t = 0; t < n_tokens; ++t)
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t c = (t * 5) % cols;
          const float want = fp8_e4m3_to_f32_slow(codes[static_cast<size_t>(r * cols + c)]) *
                             scales[(r / kFp8Block) * 2 + c / kFp8Block];
          // Float equality is bit equality here except for the sign of zero, which a sum (of
          // +0 and -0 products) does not keep: code 0x80 (-0) gives +0 like in the reference.
          ASSERT_EQ(y[static_cast<size_t>(t * rows + r)], want)
              << "row " << r << " col " << c << " got " << y[static_cast<size_t>(t * rows + r)]
              << " want " << want;
        }
    }
  }
}

TEST(Linear, UnknownIsaNameIsAClearError) {
  setenv("DSINFER_ISA", "sse9", 1);
  EXPECT_THROW(with_environment_overrides(cpu_kernel_config()), Error);
  setenv("DSINFER_ISA", "scalar", 1);
  EXPECT_EQ(with_environment_overrides(cpu_kernel_config()).isa, Isa::kScalar);
  unsetenv("DSINFER_ISA");
  EXPECT_EQ(with_environment_overrides(cpu_kernel_config()).isa, supported_isas().back());
  EXPECT_EQ(best_isa(), supported_isas().back());
}

TEST(Linear, WeightMatrixBytes) {
  WeightMatrix f32{DType::kF32, 300, 200, nullptr, nullptr};
  EXPECT_EQ(f32.bytes(), 300 * 200 * 4);
  WeightMatrix bf16{DType::kBF16, 300, 200, nullptr, nullptr};
  EXPECT_EQ(bf16.bytes(), 300 * 200 * 2);
  WeightMatrix fp8{DType::kF8E4M3, 300, 200, nullptr, nullptr};
  EXPECT_EQ(fp8.scale_cols(), 2);
  EXPECT_EQ(fp8.bytes(), 300 * 200 + 3 * 2 * 4);
  EXPECT_TRUE(fp8.empty());
  EXPECT_EQ(fp8.row_bytes_read(), 200 + 2 * 4);
  EXPECT_EQ(bf16.row_bytes_read(), 200 * 2);
}

// Row ranges share the matrix's memory; a block-scaled one must start on a scale block.
TEST(Linear, RowRangesShareTheMatrixAndItsScales) {
  std::vector<uint8_t> data(300 * 200 * 2);
  std::vector<float> scales(3 * 2);
  const WeightMatrix bf16{DType::kBF16, 300, 200, data.data(), nullptr};
  const WeightMatrix part = bf16.row_range(7, 50);
  EXPECT_EQ(part.data, data.data() + 7 * 200 * 2);
  EXPECT_EQ(part.rows, 50);
  EXPECT_EQ(part.cols, 200);
  const WeightMatrix fp8{DType::kF8E4M3, 300, 200, data.data(), scales.data()};
  EXPECT_TRUE(fp8.row_range(7, 50).empty());
  const WeightMatrix block = fp8.row_range(256, 44);
  EXPECT_EQ(block.data, data.data() + 256 * 200);
  EXPECT_EQ(block.scale, scales.data() + 2 * 2);
}

// A view of a matrix's leading columns (a cache block's latents without their rope keys) reads
// in place: combine_rows, accumulate_rows, dot_rows and dequantize_row give over it the bits they
// give over a packed copy of those columns, on every ISA; linear and matmul_serial refuse it, and
// formats with scales have no such view.
TEST(Linear, LeadingColumnViewsReadInPlaceWithTheSameBits) {
  std::mt19937 rng(57);
  const int64_t rows = 70, cols = 576, n = 512, sets = 9;
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    const std::vector<float> values = random_floats(rng, rows * cols);
    const size_t width = dtype == DType::kF32 ? 4 : 2;
    std::vector<uint8_t> full(rows * cols * width), packed(rows * n * width);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        uint8_t* dst = full.data() + (r * cols + c) * width;
        if (dtype == DType::kF32) {
          std::memcpy(dst, &values[r * cols + c], 4);
        } else {
          const uint16_t b = f32_to_bf16(values[r * cols + c]);
          std::memcpy(dst, &b, 2);
        }
        if (c < n) std::memcpy(packed.data() + (r * n + c) * width, dst, width);
      }
    const WeightMatrix wide{dtype, rows, cols, full.data()};
    const WeightMatrix view = wide.leading_columns(n);
    const WeightMatrix copy{dtype, rows, n, packed.data()};
    EXPECT_EQ(view.rows, rows);
    EXPECT_EQ(view.cols, n);
    EXPECT_EQ(view.row_stride(), cols * static_cast<int64_t>(width));
    const std::vector<float> coef = random_floats(rng, sets * rows),
                             x = random_floats(rng, sets * n);
    for (Isa isa : supported_isas()) {
      SCOPED_TRACE(testing::Message() << isa_name(isa) << " " << dtype_name(dtype));
      std::vector<float> a(sets * n), b(sets * n);
      const ConstMatView all_coef(coef.data(), sets, rows);  // [sets, rows]
      for (auto [w, out] : {std::pair{&view, &a}, {&copy, &b}}) {
        const MatView o(out->data(), sets, n);
        combine_rows(isa, *w, {0, 64}, all_coef.columns(0, 64), o);
        accumulate_rows(isa, *w, {64, rows - 64}, all_coef.columns(64, rows - 64), o);
      }
      for (size_t i = 0; i < a.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(a[i]), std::bit_cast<uint32_t>(b[i])) << i;
      std::vector<float> da(sets * rows), db(sets * rows);
      dot_rows(isa, ConstMatView(x.data(), sets, n), view, MatView(da.data(), sets, rows));
      dot_rows(isa, ConstMatView(x.data(), sets, n), copy, MatView(db.data(), sets, rows));
      for (size_t i = 0; i < da.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(da[i]), std::bit_cast<uint32_t>(db[i])) << i;
    }
    std::vector<float> ra(n), rb(n);
    dequantize_row(view, rows - 1, ra.data());
    dequantize_row(copy, rows - 1, rb.data());
    EXPECT_EQ(ra, rb);
    ThreadPool pool(1);
    std::vector<float> y(rows);
    EXPECT_THROW(linear(cpu_kernel_config(), x.data(), 1, view, y.data(), pool), Error);
    EXPECT_THROW(matmul_serial(cpu_kernel_config(), ConstMatView(x.data(), 1, n), view,
                               MatView(y.data(), 1, rows)),
                 Error);
    EXPECT_THROW(wide.leading_columns(cols + 1), Error);
  }
  std::vector<uint8_t> codes(128 * 128);
  std::vector<float> scale(1, 1.0f);
  EXPECT_THROW(
      (WeightMatrix{DType::kF8E4M3, 128, 128, codes.data(), scale.data()}.leading_columns(64)),
      Error);
}

}  // namespace
}  // namespace dsinfer::linear_test
