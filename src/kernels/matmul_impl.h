// The vector matrix kernels, written once over a small traits type S (one per ISA) and included
// only by the per-ISA translation units (matmul_avx512.cpp, matmul_avx2.cpp). Everything here
// has internal linkage and uses no library templates, so code built for one ISA can never be
// picked by the linker for another. The parts: matmul_formats.h (the traits S provides, the
// canonical order, the weight formats), matmul_gemv.h, matmul_gemm.h, matmul_gemm_variant.h,
// matmul_combine.h (combine_rows, dot_rows); here the entry points of the MatmulKernels table.
#pragma once

#include "kernels/matmul_combine.h"
#include "kernels/matmul_gemm.h"
#include "kernels/matmul_gemv.h"

namespace dsinfer {
namespace {

#include "kernels/matmul_gemm_variant.h"

template <class S>
void matmul_rows_impl(const MatmulTask& task, int64_t r0, int64_t r1, float* scratch) {
  for_format(task.w->dtype, [&](auto format) {
    constexpr WKind kind = decltype(format)::value;
    if (task.x_packed == nullptr)
      gemv_rows<S, kind>(task, r0, r1, scratch);
    else if (task.batch_variant)
      GemmBatchVariant<S>::template rows<kind>(task, r0, r1, scratch);
    else
      Gemm<S>::template rows<kind>(task, r0, r1, scratch);
  });
}

template <class S>
int64_t scratch_size_impl(const MatmulTask& task) {
  if (task.x_packed && task.batch_variant) return GemmBatchVariant<S>::scratch_size(task.n_tokens);
  if (task.x_packed) return Gemm<S>::scratch_size(task.n_tokens);
  return 4 * task.w->cols;  // scaled activations of up to 4 tokens (fp8 GEMV)
}

}  // namespace
}  // namespace dsinfer
