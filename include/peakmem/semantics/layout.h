// Tensor layouts (strides) and PyTorch's rules over them.
//
// The printed trace carries shapes but not strides, yet whether `reshape`
// copies, whether `contiguous` returns its input, and how much an output
// really occupies all depend on strides. peakmem propagates strides itself
// with the rules PyTorch uses:
//   - ComputeViewStrides: ATen's `computeStride` (TensorUtils.cpp), the test
//     `view`/`reshape` use to decide whether a reshape can be a view;
//   - IsContiguous / IsNonOverlappingAndDense: TensorImpl's definitions;
//   - ElementwiseOutputStrides: TensorIterator's output layout (fast setup
//     when all inputs share a shape and layout, else `reorder_dimensions`);
//   - StorageSpan: how many elements a strided view touches.
// Strides are in elements.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "peakmem/ir/value_type.h"  // Dims

namespace peakmem {

Dims ContiguousStrides(const Dims& shape);
bool IsContiguous(const Dims& shape, const Dims& strides);
bool IsNonOverlappingAndDense(const Dims& shape, const Dims& strides);

// Strides of `new_shape` viewing a tensor of `old_shape`/`old_strides`, or
// nullopt when no view exists (reshape then copies).
std::optional<Dims> ComputeViewStrides(const Dims& old_shape, const Dims& old_strides,
                                       const Dims& new_shape);

struct Operand {
  const Dims* shape;
  const Dims* strides;
  bool contiguous = false;  // a hint: true when the caller knows IsContiguous(shape, strides)
};
// The strides TensorIterator gives a freshly allocated output of `out_shape`
// computed elementwise from `inputs` (broadcast against out_shape).
Dims ElementwiseOutputStrides(const Dims& out_shape, const std::vector<Operand>& inputs);

// Strides of a dense tensor whose dimensions are ordered like `like`'s
// (empty_like with preserve_format): `like`'s strides if it is
// non-overlapping and dense, else contiguous.
Dims PreserveFormatStrides(const Dims& shape, const Dims& like_strides);

// Number of elements between the first and one past the last element a
// strided tensor touches (1 + sum((size-1)*stride)); 0 for an empty tensor.
std::uint64_t StorageSpan(const Dims& shape, const Dims& strides);

}  // namespace peakmem
