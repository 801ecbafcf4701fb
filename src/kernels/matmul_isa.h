// The matrix-product kernels of one instruction set, behind one table so that linear() can pick
// a variant at run time (docs/DESIGN.md: a scalar oracle plus one translation unit per ISA).
#pragma once

#include <cstdint>

#include "core/cpu.h"
#include "kernels/kernel_plan.h"
#include "kernels/linear.h"
#include "kernels/weight_matrix.h"

namespace dsinfer {

// One product y[t, r] = sum_c x[t, c] * W[r, c]: x is [n_tokens, w.cols] with rows x_stride
// apart, y is [n_tokens, w.rows] with rows y_stride apart (the full width; kernels write only
// the rows they are given).
struct MatmulTask {
  const float* x = nullptr;
  int64_t n_tokens = 0;
  int64_t x_stride = 0;
  const WeightMatrix* w = nullptr;
  float* y = nullptr;
  int64_t y_stride = 0;
  // x transposed into tiles by pack_x: the GEMM (else the GEMV runs)
  const float* x_packed = nullptr;
  // The GEMM in the faster batch-variant order (KernelKind::kGemmBatchVariant) instead of the
  // canonical one.
  bool batch_variant = false;
  GemvPlan gemv;  // the GEMV's groups, prefetch and chunks (kernel_plan.h)
};

// One combine_rows call: out[t, c] = sum_d coef[t, d] * W[rows.first + d, c], coef
// [n_sets, rows.count] -> out [n_sets, w.cols]; `accumulate` adds to out, continuing each output's
// chain (accumulate_rows).
struct CombineTask {
  const WeightMatrix& w;
  RowSpan rows;
  ConstMatView coef;
  MatView out;
  bool accumulate = false;
};

struct MatmulKernels {
  Isa isa;
  // Floats that pack_x writes for n tokens of `cols` features.
  int64_t (*packed_x_size)(int64_t n_tokens, int64_t cols);
  void (*pack_x)(const float* x, int64_t n_tokens, int64_t cols, int64_t x_stride, float* out);
  // Floats of per-thread scratch that matmul_rows needs for `task`.
  int64_t (*scratch_size)(const MatmulTask& task);
  // Rows [row_begin, row_end) of the product, single-threaded. Row ranges that start on a
  // multiple of `row_grain` keep the kernel on its fast path.
  void (*matmul_rows)(const MatmulTask& task, int64_t row_begin, int64_t row_end, float* scratch);
  int64_t row_grain;
  // combine_rows and accumulate_rows of linear.h, single-threaded.
  void (*combine_rows)(const CombineTask& task);
  // y[t, r] = x[t] . W[r] in the canonical order for f32 or bf16 rows, register-blocked for few
  // tokens against many rows, single-threaded (dot_rows in linear.h).
  void (*dot_rows)(ConstMatView x, const WeightMatrix& w, MatView y);
};

const MatmulKernels& matmul_kernels_scalar();
const MatmulKernels& matmul_kernels_avx2();
const MatmulKernels& matmul_kernels_avx512();

// The variant for `isa` (which the CPU must support).
const MatmulKernels& matmul_kernels(Isa isa);

}  // namespace dsinfer
