// A view of a row-major matrix of floats that someone else owns: data, rows, cols and the stride
// between rows (>= cols). Replaces (pointer, rows, cols, stride) argument lists.
#pragma once

#include <cstdint>

namespace dsinfer {

template <class T>
struct BasicMatView {
  T* data = nullptr;
  int64_t rows = 0, cols = 0, stride = 0;
  BasicMatView() = default;
  BasicMatView(T* d, int64_t r, int64_t c, int64_t s) : data(d), rows(r), cols(c), stride(s) {}
  BasicMatView(T* d, int64_t r, int64_t c) : BasicMatView(d, r, c, c) {}
  // a view of a mutable matrix converts to a read-only one
  operator BasicMatView<const T>() const { return {data, rows, cols, stride}; }
  T* row(int64_t r) const { return data + r * stride; }
  // rows [first, first + n)
  BasicMatView top(int64_t n) const { return {data, n, cols, stride}; }
  BasicMatView rows_from(int64_t first, int64_t n) const { return {row(first), n, cols, stride}; }
  // columns [first, first + n) of every row
  BasicMatView columns(int64_t first, int64_t n) const { return {data + first, rows, n, stride}; }
};

using MatView = BasicMatView<float>;
using ConstMatView = BasicMatView<const float>;

}  // namespace dsinfer
