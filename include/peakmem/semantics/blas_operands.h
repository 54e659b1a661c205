// Which 2-D operands a CPU BLAS call takes as they are. ATen's
// addmm_impl_cpu_ hands BLAS an operand only laid out as a row- or
// column-major matrix; any other is first cloned (contiguous), a copy alive
// until the product returns. Pure functions of a matrix's sizes and strides.
#pragma once

#include <algorithm>
#include <cstdint>

namespace peakmem {

// Whether BLAS takes a 2-D operand as it is: row- or column-major, with a
// leading stride at least the inner size.
inline bool BlasTakes(std::int64_t rows, std::int64_t cols, std::int64_t s0, std::int64_t s1) {
  const bool row_major = (s1 == 1 || cols == 1) && s0 >= std::max<std::int64_t>(1, cols);
  const bool col_major = (s0 == 1 || rows == 1) && s1 >= std::max<std::int64_t>(1, rows);
  return row_major || col_major;
}

// The same as gemv and the mm of a row take a matrix (ATen's addmv_impl_cpu
// and addmm_impl_cpu_ on a [1, k] operand): unit stride in one dimension,
// required even where the dimension has size 1 (measured: a [2, 1] view with
// strides (2, 2) is cloned), and a leading stride at least the other size
// unless that is 1.
inline bool BlasTakesWithUnitStride(std::int64_t rows, std::int64_t cols, std::int64_t s0, std::int64_t s1) {
  const bool col_major = s0 == 1 && (cols == 1 || s1 >= std::max<std::int64_t>(1, rows));
  const bool row_major = s1 == 1 && (rows == 1 || s0 >= std::max<std::int64_t>(1, cols));
  return col_major || row_major;
}

}  // namespace peakmem
