// Elementwise and row-wise operations of the forward pass, fp32 in and out.
#pragma once

#include <cstdint>

#include "core/cpu.h"

namespace dsinfer {

// y = w * x * rsqrt(mean(x^2) + eps) over each of n_rows rows of `dim` values (in place allowed).
void rms_norm(const float* x, const float* weight, int64_t n_rows, int64_t dim, float eps,
              float* y);

// a[i] = silu(a[i]) * b[i]
void silu_mul(float* a, const float* b, int64_t n);

// In-place softmax of x[n] (max-subtracted, fp32; libm's exp, the sum in double in index order).
// softmax_avx2 where the CPU runs it: the same bits, so the choice is no configuration.
void softmax(float* x, int64_t n);
// softmax's definition, one value at a time (the AVX2 form's test holds it to this).
void softmax_scalar(float* x, int64_t n);
// softmax's AVX2 form (softmax_avx2.cpp): only where the CPU runs AVX2 and FMA.
void softmax_avx2(float* x, int64_t n);
// y[i] = std::exp(x[i]) for x[i] <= 0 or NaN, bit for bit: softmax_avx2's exp, 8 lanes at a time.
void exp_nonpositive_avx2(const float* x, float* y, int64_t n);

// The same with a polynomial exp (relative error ~1e-7, 16 lanes) where `isa` is AVX-512 (which
// the CPU must run), else softmax(): for fast mode's prefill attention, whose probabilities are
// rounded to bf16 next. Exact mode keeps softmax(), whose libm exp its decode and prefill share
// bit for bit.
void softmax_fast(Isa isa, float* x, int64_t n);
// softmax_fast's AVX-512 form (softmax_avx512.cpp): only where the CPU runs AVX-512.
void softmax_fast_avx512(float* x, int64_t n);

// Index of the first maximum (torch.argmax picks the first of equal maxima).
int64_t argmax(const float* x, int64_t n);

}  // namespace dsinfer
