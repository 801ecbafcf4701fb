#include "kernels/linear.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/kernel_plan.h"
#include "kernels/matmul_amx.h"
#include "kernels/matmul_bf16dot.h"
#include "kernels/matmul_int8.h"
#include "kernels/matmul_isa.h"

namespace dsinfer {

// The hot loops are compiled for several ISAs and picked at load time (GCC target_clones),
// so the default build runs anywhere and still uses AVX-512/AVX2 where the CPU has them.
#define DS_TARGET_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

DS_TARGET_CLONES float dot(const float* a, const float* b, int64_t n) {
  constexpr int kLanes = 16;
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += a[i + l] * b[i + l];
  for (int l = 0; i < n; ++i, ++l) acc[l] += a[i] * b[i];
  float s = 0;
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  return s;
}

DS_TARGET_CLONES void axpy(float alpha, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

DS_TARGET_CLONES static void decode_bf16(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(in[i]);
}

// e4m3 -> fp32 with integer ops instead of a table gather (which does not vectorize): the 7
// exponent+mantissa bits placed at fp32 bit 20 give 2^(e-127) (1 + m/8), or the fp32 denormal
// (m/8) 2^-126 when e == 0; times 2^120 that is exactly the e4m3 value, normal or subnormal.
// The only non-finite codes, 0x7f and 0xff, become NaN. Folding 2^120 into the block scale
// multiplies the same exact real numbers, so each product rounds exactly as code x scale does
// (the reference's dequantization) as long as scale x 2^120 stays finite.
DS_TARGET_CLONES static void decode_fp8(const uint8_t* __restrict in, float scale,
                                        float* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t code = in[i];
    const uint32_t bits = ((code & 0x80u) << 24) | ((code & 0x7fu) << 20) |
                          ((code & 0x7fu) == 0x7fu ? 0x7fc00000u : 0u);
    std::memcpy(out + i, &bits, sizeof bits);
  }
  if (std::fabs(scale) < 0x1p7f) {
    const float folded = scale * 0x1p120f;
    for (int64_t i = 0; i < n; ++i) out[i] *= folded;
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = (out[i] * 0x1p120f) * scale;
  }
}

void dequantize_row(const WeightMatrix& w, int64_t row, float* out) {
  switch (w.dtype) {
    case DType::kF32:
      std::copy_n(reinterpret_cast<const float*>(w.data + row * w.row_stride()), w.cols, out);
      return;
    case DType::kBF16:
      decode_bf16(reinterpret_cast<const uint16_t*>(w.data + row * w.row_stride()), out, w.cols);
      return;
    case DType::kF8E4M3: {
      const uint8_t* codes = w.data + row * w.cols;
      const float* scales = w.scale + (row / kFp8Block) * w.scale_cols();
      for (int64_t c = 0; c < w.cols; c += kFp8Block) {
        int64_t n = std::min<int64_t>(kFp8Block, w.cols - c);
        decode_fp8(codes + c, scales[c / kFp8Block], out + c, n);
      }
      return;
    }
    case kInt4Storage:
    case kInt8Storage: {
      dequantize_quant_row(w.quant_format(), w.data + row * w.row_stride(),
                           w.group_scale + row * quant_groups(w.cols), w.cols, out);
      return;
    }
    default:
      // the loader admits only the five formats above; anything else is a programming error
      fail("dequantize_row: unsupported weight dtype ", dtype_name(w.dtype));
  }
}

namespace {

// n floats of `buffer` (grown as needed; per-thread buffers reused across calls), starting on a
// cache line: the kernels' vector loads from packed tiles and scratch then never straddle two
// lines (a straddling load costs two, and large allocations start 16 bytes past a page).
float* at_least(std::vector<float>& buffer, int64_t n) {
  constexpr size_t kLineFloats = 16;
  if (buffer.size() < static_cast<size_t>(n) + kLineFloats)
    buffer.resize(static_cast<size_t>(n) + kLineFloats);
  const uintptr_t address = reinterpret_cast<uintptr_t>(buffer.data());
  return buffer.data() + (kLineFloats - address / sizeof(float) % kLineFloats) % kLineFloats;
}

// x[n, cols] rounded to bf16 values (kept as fp32) in a per-thread buffer.
const float* rounded_to_bf16(const float* x, int64_t n, int64_t cols, ThreadPool& pool) {
  thread_local std::vector<float> rounded;
  float* out = at_least(rounded, n * cols);
  pool.parallel_for(
      n * cols,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) out[i] = bf16_to_f32(f32_to_bf16(x[i]));
      },
      4096);
  return out;
}

// The task of the exact kernels for x [n_tokens, w.cols] -> y [n_tokens, w.rows].
MatmulTask exact_task(const KernelPlan& p, ConstMatView x, const WeightMatrix& w, MatView y) {
  return MatmulTask{x.data, x.rows,   x.stride, &w,
                    y.data, y.stride, nullptr,  p.kernel == KernelKind::kGemmBatchVariant,
                    p.gemv};
}

}  // namespace

void linear(const KernelConfig& config, const float* x, int64_t n_tokens, const WeightMatrix& w,
            float* y, ThreadPool& pool) {
  check(w.padded_stride == 0, "linear: a column view (its kernels read packed rows)");
  const KernelPlan p = plan(w, n_tokens, config);
  switch (p.kernel) {
    case KernelKind::kAmxGemm:
      return amx_linear(x, n_tokens, w, y, pool);
    case KernelKind::kBf16DotGemm:
      return bf16dot_linear(x, n_tokens, w, y, pool);
    case KernelKind::kBf16DotGemv:
      return bf16dot_gemv(x, n_tokens, w, y, pool);
    case KernelKind::kInt8:
      return int8_linear(p.int8, x, n_tokens, *w.int8, y, pool);
    default:
      break;
  }
  if (p.round_activations) x = rounded_to_bf16(x, n_tokens, w.cols, pool);
  const MatmulKernels& kernels = matmul_kernels(p.isa);
  MatmulTask task =
      exact_task(p, ConstMatView(x, n_tokens, w.cols), w, MatView(y, n_tokens, w.rows));
  // Packed once here and shared by every thread (the activations are small next to the weights).
  thread_local std::vector<float> packed;
  if (p.kernel != KernelKind::kGemv) {
    float* out = at_least(packed, kernels.packed_x_size(n_tokens, w.cols));
    // in whole tiles per thread (a tile of `tile` tokens is tile * cols floats)
    const int64_t tile = kernels.packed_x_size(1, w.cols) / w.cols;
    pool.parallel_for(ceil_div(n_tokens, tile), [&](int64_t begin, int64_t end) {
      const int64_t t0 = begin * tile, t1 = std::min(end * tile, n_tokens);
      kernels.pack_x(x + t0 * w.cols, t1 - t0, w.cols, w.cols, out + t0 * w.cols);
    });
    task.x_packed = out;
  }
  // Below this many multiply-adds, waking other threads costs more than it saves.
  constexpr int64_t kMinParallelWork = 1 << 16;
  int64_t grain = std::max<int64_t>(1, kMinParallelWork / std::max<int64_t>(1, w.cols * n_tokens));
  grain = ceil_div(grain, kernels.row_grain) * kernels.row_grain;
  pool.parallel_for(
      w.rows,
      [&](int64_t begin, int64_t end) {
        thread_local std::vector<float> scratch;
        kernels.matmul_rows(task, begin, end, at_least(scratch, kernels.scratch_size(task)));
      },
      grain);
}

void matmul_serial(const KernelConfig& config, ConstMatView x, const WeightMatrix& w, MatView y) {
  check(w.padded_stride == 0, "matmul_serial: a column view (its kernels read packed rows)");
  check(x.cols == w.cols && y.rows == x.rows && y.cols == w.rows, "matmul_serial: x [", x.rows,
        ", ", x.cols, "] against a ", w.rows, "x", w.cols, " matrix into [", y.rows, ", ", y.cols,
        "]");
  const int64_t n_tokens = x.rows;
  const KernelPlan p = plan(w, n_tokens, config, ProductUse::kSerial);
  switch (p.kernel) {
    case KernelKind::kAmxGemm:
      return amx_matmul_serial(x.data, n_tokens, x.stride, w, y.data, y.stride);
    case KernelKind::kBf16DotGemm:
      return bf16dot_matmul_serial(x.data, n_tokens, x.stride, w, y.data, y.stride);
    default:
      break;
  }
  const MatmulKernels& kernels = matmul_kernels(p.isa);
  MatmulTask task = exact_task(p, x, w, y);
  thread_local std::vector<float> packed, scratch;
  if (p.kernel != KernelKind::kGemv) {
    float* out = at_least(packed, kernels.packed_x_size(n_tokens, w.cols));
    kernels.pack_x(x.data, n_tokens, w.cols, x.stride, out);
    task.x_packed = out;
  }
  kernels.matmul_rows(task, 0, w.rows, at_least(scratch, kernels.scratch_size(task)));
}

namespace {
void check_combine_shapes(const WeightMatrix& w, RowSpan rows, ConstMatView coef, MatView out) {
  check(rows.first >= 0 && rows.count >= 0 && rows.first + rows.count <= w.rows &&
            coef.cols == rows.count && coef.rows == out.rows && out.cols == w.cols,
        "combine_rows: rows [", rows.first, ", +", rows.count, ") of a ", w.rows, "x", w.cols,
        " matrix with coefficients [", coef.rows, ", ", coef.cols, "] into [", out.rows, ", ",
        out.cols, "]");
}
}  // namespace

void combine_rows(Isa isa, const WeightMatrix& w, RowSpan rows, ConstMatView coef, MatView out) {
  check_combine_shapes(w, rows, coef, out);
  matmul_kernels(isa).combine_rows({w, rows, coef, out, /*accumulate=*/false});
}

void accumulate_rows(Isa isa, const WeightMatrix& w, RowSpan rows, ConstMatView coef, MatView out) {
  check_combine_shapes(w, rows, coef, out);
  matmul_kernels(isa).combine_rows({w, rows, coef, out, /*accumulate=*/true});
}

void dot_rows(Isa isa, ConstMatView x, const WeightMatrix& w, MatView y) {
  // (its kernels read f32 and bf16 rows only: a cache's entries)
  check(w.dtype == DType::kF32 || w.dtype == DType::kBF16, "dot_rows: rows of ",
        dtype_name(w.dtype), " (f32 or bf16 only)");
  check(x.cols == w.cols && y.rows == x.rows && y.cols == w.rows, "dot_rows: x [", x.rows, ", ",
        x.cols, "] against a ", w.rows, "x", w.cols, " matrix into [", y.rows, ", ", y.cols, "]");
  matmul_kernels(isa).dot_rows(x, w, y);
}

}  // namespace dsinfer
