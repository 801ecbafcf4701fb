// int8 mode (kernels/int8_matrix.h, kernels/matmul_int8.h): the repacked weights equal convert
// --int8's quantization, activations follow the stated rule, every kernel gives the scalar
// oracle's bits, the result is within the quantization's error bound of the exact product, and
// a token's outputs are the same bits alone, in any batch and at any thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "core/cpu.h"
#include "kernels/int8_matrix.h"
#include "kernels/kernel_plan.h"
#include "kernels/linear.h"
#include "kernels/matmul_int8.h"

namespace dsinfer::int8_matmul_test {
namespace {

// A matrix with its own storage: bf16, fp8 (block scales), int8 or int4 (group scales).
struct Stored {
  WeightMatrix w;
  std::vector<uint8_t> bytes;
  std::vector<float> block_scales;
  std::vector<uint16_t> group_scales;

  Stored(DType dtype, int64_t rows, int64_t cols, std::mt19937& rng) {
    w = WeightMatrix{dtype, rows, cols, nullptr, nullptr};
    std::normal_distribution<float> normal(0.0f, 0.5f);
    std::vector<float> row(static_cast<size_t>(cols));
    if (dtype == DType::kBF16) {
      bytes.resize(static_cast<size_t>(rows * cols * 2));
      for (int64_t i = 0; i < rows * cols; ++i) {
        const uint16_t b = f32_to_bf16(normal(rng) * (i % 7 == 0 ? 4.0f : 1.0f));
        std::memcpy(&bytes[static_cast<size_t>(i * 2)], &b, 2);
      }
    } else if (dtype == DType::kF8E4M3) {
      bytes.resize(static_cast<size_t>(rows * cols));
      std::uniform_int_distribution<int> code(0, 255);
      for (uint8_t& b : bytes) {
        do b = static_cast<uint8_t>(code(rng));
        while ((b & 0x7f) == 0x7f);  // no NaN codes
      }
      block_scales.resize(static_cast<size_t>(ceil_div(rows, 128) * ceil_div(cols, 128)));
      for (size_t i = 0; i < block_scales.size(); ++i)
        block_scales[i] = std::ldexp(1.0f + 0.1f * static_cast<float>(i), -static_cast<int>(i % 4));
      w.scale = block_scales.data();
    } else {  // int8 or int4, as convert --int8 / --experts-int4 write them
      const QuantFormat format = dtype == kInt4Storage ? QuantFormat::kInt4 : QuantFormat::kInt8;
      const int64_t stride = quant_row_bytes(format, cols);
      bytes.resize(static_cast<size_t>(rows * stride));
      group_scales.resize(static_cast<size_t>(rows * quant_groups(cols)));
      for (int64_t r = 0; r < rows; ++r) {
        for (float& v : row) v = normal(rng) * (r % 5 == 0 ? 8.0f : 1.0f);
        quantize_row(format, row.data(), cols, &bytes[static_cast<size_t>(r * stride)],
                     &group_scales[static_cast<size_t>(r * quant_groups(cols))]);
      }
      w.group_scale = group_scales.data();
    }
    w.data = bytes.data();
  }
};

std::vector<float> activations(int64_t n, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (int64_t i = 0; i < n * cols; ++i)
    x[static_cast<size_t>(i)] = normal(rng) * (i % 97 == 0 ? 30.0f : 1.0f);  // outliers
  return x;
}

TEST(Int8Matrix, RepackHoldsConvertInt8sQuantizationOfTheExactWeights) {
  std::mt19937 rng(1);
  ThreadPool pool(2);
  for (DType dtype : {DType::kBF16, DType::kF8E4M3, kInt8Storage, kInt4Storage})
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {17, 300}, {130, 129}}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + std::to_string(rows) + "x" +
                   std::to_string(cols));
      const Stored s(dtype, rows, cols, rng);
      ASSERT_TRUE(int8_repackable(s.w));
      const Int8Matrix m = repack_int8(s.w, pool);
      std::vector<float> exact(static_cast<size_t>(cols));
      std::vector<uint8_t> q(static_cast<size_t>(cols));
      std::vector<uint16_t> scales(static_cast<size_t>(quant_groups(cols)));
      ASSERT_EQ(m.int4, dtype == kInt4Storage);
      for (int64_t r = 0; r < m.row_blocks() * kInt8RowBlock; ++r) {
        if (r < rows && dtype == kInt4Storage) {  // int4 keeps its integers and scales
          const uint8_t* row = s.w.data + r * s.w.row_stride();
          for (int64_t c = 0; c < cols; ++c) q[c] = static_cast<uint8_t>(int4_q(row, c));
          for (int64_t g = 0; g < quant_groups(cols); ++g)
            scales[g] = s.group_scales[static_cast<size_t>(r * quant_groups(cols) + g)];
        } else if (r < rows) {
          dequantize_row(s.w, r, exact.data());
          quantize_row(QuantFormat::kInt8, exact.data(), cols, q.data(), scales.data());
        }
        for (int64_t g = 0; g < m.groups(); ++g) {
          int32_t sum = 0;
          for (int64_t c = g * 128; c < (g + 1) * 128; ++c) {
            const int want = r < rows && c < cols ? static_cast<int8_t>(q[c]) : 0;
            ASSERT_EQ(m.at(r, c), want) << r << "," << c;
            sum += want;
          }
          ASSERT_EQ(m.row_scale(r, g), r < rows ? f16_to_f32(scales[g]) : 0.0f);
          const int64_t at = (r / 16 * m.groups() + g) * 16 + r % 16;
          ASSERT_EQ(m.q_sum.data()[at], sum);
        }
      }
    }
  const Stored f32_like(DType::kBF16, 4, 4, rng);
  WeightMatrix f32 = f32_like.w;
  f32.dtype = DType::kF32;
  EXPECT_FALSE(int8_repackable(f32));  // the router's f32 weights stay exact
}

TEST(Int8Matrix, ActivationsQuantizePerTokenPer128ColumnsToNearestEven) {
  ThreadPool pool(1);
  const int64_t cols = 130;
  std::vector<float> x(static_cast<size_t>(2 * cols), 0.0f);
  x[0] = 127.0f;  // group 0 of token 0: scale 1, so q is x rounded to nearest even
  x[1] = 2.5f;
  x[2] = -3.5f;
  x[3] = 0.49f;
  x[128] = -0.25f;  // group 1: amax 0.25, q = -127; x[129] stays 0
  // token 1: group 0 all zeros (scale 0), group 1 holds a NaN
  x[static_cast<size_t>(cols + 129)] = std::nanf("");
  std::vector<uint8_t> q(static_cast<size_t>(int8_activation_bytes(2, cols)));
  std::vector<float> s(static_cast<size_t>(int8_activation_scales(2, cols)));
  const Int8Activations a = quantize_activations(ConstMatView(x.data(), 2, cols),
                                                 Int8Bytes::kBiased, q.data(), s.data(), pool);
  EXPECT_EQ(a.padded_cols(), 256);
  EXPECT_EQ(s[0], 1.0f);
  EXPECT_EQ(q[0], 128 + 127);
  EXPECT_EQ(q[1], 128 + 2);
  EXPECT_EQ(q[2], 128 - 4);
  EXPECT_EQ(q[3], 128);
  EXPECT_EQ(s[1], 0.25f / 127.0f);
  EXPECT_EQ(q[128], 128 - 127);
  for (int64_t c = 129; c < 256; ++c) ASSERT_EQ(q[c], 128) << c;  // zero and padding
  EXPECT_EQ(s[2], 0.0f);
  EXPECT_TRUE(std::isnan(s[3]));
  // the signed form: the same q as int8 bits, 0 in the padding, the same scales
  std::vector<uint8_t> qs(q.size());
  std::vector<float> ss(s.size());
  quantize_activations(ConstMatView(x.data(), 2, cols), Int8Bytes::kSigned, qs.data(), ss.data(),
                       pool);
  for (size_t i = 0; i < q.size(); ++i) ASSERT_EQ(qs[i], q[i] ^ 0x80) << i;
  EXPECT_EQ(0, std::memcmp(ss.data(), s.data(), s.size() * sizeof(float)));
}

// The vector int8 kernels this CPU runs.
std::vector<Int8Kernel> vector_int8_kernels() {
  std::vector<Int8Kernel> kernels;
  if (cpu_supports(Isa::kAvx2)) kernels.push_back(Int8Kernel::kAvx2);
  if (cpu_supports(Isa::kAvx512) && cpu_has_avx512_vnni())
    kernels.push_back(Int8Kernel::kAvx512Vnni);
  return kernels;
}

// Each supported kernel against the scalar oracle, bit for bit, over tile and padding edges;
// and the oracle within the quantization's error of the exact product.
TEST(Int8Matmul, EveryKernelGivesTheOraclesBitsWithinTheQuantizationError) {
  const std::vector<Int8Kernel> kernels = vector_int8_kernels();
  if (kernels.empty()) GTEST_SKIP() << "no vector int8 kernel runs on this CPU";
  std::mt19937 rng(2);
  ThreadPool pool(2);
  for (auto [rows, cols, dtype] : {std::tuple<int64_t, int64_t, DType>{1, 1, DType::kBF16},
                                   {16, 128, DType::kBF16},
                                   {17, 129, DType::kBF16},
                                   {70, 300, DType::kBF16},
                                   {29, 256, DType::kBF16},  // 13 rows in the last block
                                   {130, 512, DType::kBF16},
                                   {1, 1, kInt4Storage},
                                   {17, 129, kInt4Storage},
                                   {70, 300, kInt4Storage}}) {
    const Stored s(dtype, rows, cols, rng);
    const Int8Matrix m = repack_int8(s.w, pool);
    for (int64_t n : {1, 2, 3, 6, 7, 13}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + std::to_string(rows) + "x" +
                   std::to_string(cols) + ", " + std::to_string(n) + " tokens");
      const std::vector<float> x = activations(n, cols, rng);
      std::vector<uint8_t> q(static_cast<size_t>(int8_activation_bytes(n, cols)));
      std::vector<float> sx(static_cast<size_t>(int8_activation_scales(n, cols)));
      const Int8Activations a = quantize_activations(ConstMatView(x.data(), n, cols),
                                                     Int8Bytes::kBiased, q.data(), sx.data(), pool);
      std::vector<float> want(static_cast<size_t>(n * rows), -1.0f);
      int8_blocks_scalar(a, m, 0, m.row_blocks(), want.data(), rows);
      // the exact product, and the bound on what quantizing both sides can change
      std::vector<float> w_row(static_cast<size_t>(cols));
      for (int64_t r = 0; r < rows; ++r) {
        dequantize_row(s.w, r, w_row.data());
        for (int64_t t = 0; t < n; ++t) {
          double exact = 0, bound = 0;
          for (int64_t c = 0; c < cols; ++c) {
            const double xv = x[static_cast<size_t>(t * cols + c)], wv = w_row[c];
            const double ds = sx[static_cast<size_t>(t * a.groups() + c / 128)] / 2;
            const double dw = m.row_scale(r, c / 128) / 2 + std::fabs(wv) * 1e-3;  // fp16 scale
            exact += xv * wv;
            bound += std::fabs(xv) * dw + std::fabs(wv) * ds + ds * dw;
          }
          ASSERT_NEAR(want[static_cast<size_t>(t * rows + r)], exact, bound * 1.01 + 1e-6)
              << "row " << r << " token " << t;
        }
      }
      // (the scalar oracle takes either form of the activations: the signed one too)
      std::vector<uint8_t> qs(q.size());
      std::vector<float> ss(sx.size());
      const Int8Activations signed_a = quantize_activations(
          ConstMatView(x.data(), n, cols), Int8Bytes::kSigned, qs.data(), ss.data(), pool);
      std::vector<float> from_signed(want.size(), -3.0f);
      int8_blocks_scalar(signed_a, m, 0, m.row_blocks(), from_signed.data(), rows);
      ASSERT_EQ(0, std::memcmp(from_signed.data(), want.data(), want.size() * sizeof(float)));
      for (Int8Kernel k : kernels) {
        std::vector<float> got(static_cast<size_t>(n * rows), -2.0f);
        int8_blocks_fn(k)(int8_bytes_of(k) == Int8Bytes::kSigned ? signed_a : a, m, 0,
                          m.row_blocks(), got.data(), rows);
        ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
            << int8_kernel_name(k);
      }
    }
  }
}

// int4 weights at their extremes (q = 7 and -7 everywhere, and alternating) against activations
// at theirs (q = 127 and -127 everywhere, and alternating): the AVX2 kernel takes the nibbles as
// VPMADDUBSW's unsigned operand, whose int16 pair sums must never saturate; every kernel keeps
// the oracle's bits, and the all-equal cases are the integers one can work out by hand.
TEST(Int8Matmul, Int4ProductsAtTheIntegerExtremesKeepTheOraclesBits) {
  const std::vector<Int8Kernel> kernels = vector_int8_kernels();
  if (kernels.empty()) GTEST_SKIP() << "no vector int8 kernel runs on this CPU";
  std::mt19937 rng(4);
  ThreadPool pool(2);
  constexpr int64_t rows = 3, cols = 256, n = 3;
  Stored s(kInt4Storage, rows, cols, rng);
  const int64_t stride = quant_row_bytes(QuantFormat::kInt4, cols);
  for (int64_t i = 0; i < stride; ++i) {
    s.bytes[static_cast<size_t>(i)] = 0xFF;               // row 0: q = 7
    s.bytes[static_cast<size_t>(stride + i)] = 0x11;      // row 1: q = -7
    s.bytes[static_cast<size_t>(2 * stride + i)] = 0x1F;  // row 2: 7, -7 by 16 columns
  }
  for (int64_t i = 0; i < rows * quant_groups(cols); ++i)
    s.group_scales[static_cast<size_t>(i)] = f32_to_f16(1.0f);
  const Int8Matrix m = repack_int8(s.w, pool);
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (int64_t c = 0; c < cols; ++c) {
    x[static_cast<size_t>(c)] = 127.0f;                               // q = 127, sx = 1
    x[static_cast<size_t>(cols + c)] = -127.0f;                       // q = -127
    x[static_cast<size_t>(2 * cols + c)] = c % 2 ? 127.0f : -127.0f;  // by turns
  }
  for (Int8Bytes bytes : {Int8Bytes::kBiased, Int8Bytes::kSigned}) {
    std::vector<uint8_t> q(static_cast<size_t>(int8_activation_bytes(n, cols)));
    std::vector<float> sx(static_cast<size_t>(int8_activation_scales(n, cols)));
    const Int8Activations a =
        quantize_activations(ConstMatView(x.data(), n, cols), bytes, q.data(), sx.data(), pool);
    std::vector<float> want(static_cast<size_t>(n * rows), -1.0f);
    int8_blocks_scalar(a, m, 0, m.row_blocks(), want.data(), rows);
    // 256 columns of 7 x 127, sx = sw = 1: 227584
    EXPECT_EQ(want[0], 227584.0f);
    EXPECT_EQ(want[1], -227584.0f);
    EXPECT_EQ(want[static_cast<size_t>(rows)], -227584.0f);
    EXPECT_EQ(want[static_cast<size_t>(rows + 1)], 227584.0f);
    for (Int8Kernel k : kernels) {
      if (int8_bytes_of(k) != bytes) continue;
      std::vector<float> got(want.size(), -2.0f);
      int8_blocks_fn(k)(a, m, 0, m.row_blocks(), got.data(), rows);
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
          << int8_kernel_name(k);
    }
  }
}

// linear() in int8 mode: the plan picks the int8 kernel for a matrix with an int8 form, and a
// token's outputs are the same bits whatever its batch and the pool's size.
TEST(Int8Matmul, LinearIsBatchAndThreadInvariant) {
  std::mt19937 rng(3);
  ThreadPool one(1), two(2);
  const Stored s(DType::kF8E4M3, 200, 384, rng);
  const Int8Matrix m = repack_int8(s.w, two);
  WeightMatrix w = s.w;
  w.int8 = &m;
  KernelConfig config = cpu_kernel_config();
  config.act = ActDType::kInt8;
  EXPECT_EQ(plan(w, 1, config).kernel, KernelKind::kInt8);
  EXPECT_EQ(plan(w, 512, config).kernel, KernelKind::kInt8);
  EXPECT_NE(plan(w, 512, config, ProductUse::kSerial).kernel, KernelKind::kInt8);
  EXPECT_NE(plan(s.w, 512, config).kernel, KernelKind::kInt8);  // no int8 form: fast mode's
  const int64_t n = 21;
  const std::vector<float> x = activations(n, w.cols, rng);
  std::vector<float> batch(static_cast<size_t>(n * w.rows));
  linear(config, x.data(), n, w, batch.data(), two);
  for (int64_t t = 0; t < n; ++t) {
    std::vector<float> alone(static_cast<size_t>(w.rows));
    linear(config, x.data() + t * w.cols, 1, w, alone.data(), t % 2 ? one : two);
    ASSERT_EQ(0, std::memcmp(alone.data(), batch.data() + t * w.rows, alone.size() * 4)) << t;
  }
  // and the same bits from every kernel this CPU runs (the ISA caps which one the plan picks)
  for (Isa isa : supported_isas()) {
    std::vector<float> other(batch.size());
    linear(with_isa(config, isa), x.data(), n, w, other.data(), one);
    ASSERT_EQ(0, std::memcmp(other.data(), batch.data(), batch.size() * 4)) << isa_name(isa);
  }
}

}  // namespace
}  // namespace dsinfer::int8_matmul_test
