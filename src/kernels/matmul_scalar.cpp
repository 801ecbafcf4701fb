// The scalar oracle of the matrix kernels: each row dequantized exactly as the reference does
// (code x block scale, in fp32), then one fp32 dot product per token. It is also the fallback on
// CPUs without AVX2, and the variant every other one is tested against.
#include <algorithm>
#include <vector>

#include "core/error.h"
#include "kernels/linear.h"
#include "kernels/matmul_isa.h"

namespace dsinfer {
namespace {

int64_t packed_x_size_none(int64_t, int64_t) { return 0; }
void pack_x_none(const float*, int64_t, int64_t, int64_t, float*) {}
int64_t scratch_size_scalar(const MatmulTask& task) { return task.w->cols; }

void matmul_rows_scalar(const MatmulTask& task, int64_t r0, int64_t r1, float* row_buffer) {
  const WeightMatrix& w = *task.w;
  for (int64_t r = r0; r < r1; ++r) {
    const float* wrow = row_buffer;
    if (w.dtype == DType::kF32)
      wrow = reinterpret_cast<const float*>(w.data + r * w.row_stride());
    else
      dequantize_row(w, r, row_buffer);
    for (int64_t t = 0; t < task.n_tokens; ++t)
      task.y[t * task.y_stride + r] = dot(task.x + t * task.x_stride, wrow, w.cols);
  }
}

// Each row dequantized as the reference does (code x scale), then added in times each coefficient.
void combine_rows_scalar(const CombineTask& task) {
  const WeightMatrix& w = task.w;
  const MatView out = task.out;
  thread_local std::vector<float>
      row;  // decode attention calls this per head: no allocation each time
  row.resize(static_cast<size_t>(w.cols));
  if (!task.accumulate)
    for (int64_t t = 0; t < out.rows; ++t) std::fill_n(out.row(t), w.cols, 0.0f);
  for (int64_t d = 0; d < task.rows.count; ++d) {
    dequantize_row(w, task.rows.first + d, row.data());
    for (int64_t t = 0; t < out.rows; ++t)
      axpy(task.coef.row(t)[d], row.data(), out.row(t), w.cols);
  }
}

void dot_rows_scalar(ConstMatView x, const WeightMatrix& w, MatView y) {
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w, r, row.data());
    for (int64_t t = 0; t < x.rows; ++t) y.row(t)[r] = dot(x.row(t), row.data(), w.cols);
  }
}

}  // namespace

const MatmulKernels& matmul_kernels_scalar() {
  static const MatmulKernels kernels{
      Isa::kScalar,        packed_x_size_none,  pack_x_none,
      scratch_size_scalar, matmul_rows_scalar,
      /*row_grain=*/16,    combine_rows_scalar, dot_rows_scalar,
  };
  return kernels;
}

const MatmulKernels& matmul_kernels(Isa isa) {
  check(cpu_supports(isa), "this CPU cannot run the ", isa_name(isa), " kernels");
  switch (isa) {
    case Isa::kAvx512:
      return matmul_kernels_avx512();
    case Isa::kAvx2:
      return matmul_kernels_avx2();
    default:
      return matmul_kernels_scalar();
  }
}

}  // namespace dsinfer
