// PyTorch's type promotion (c10/core/ScalarType.h promoteTypes and
// ATen's native/TypeProperties.cpp result_type): the dtype an elementwise op
// computes in, from its tensor operands and Python numbers.
//
// Dimensioned tensors decide first; a zero-dim tensor, then a Python
// number, changes the result only when it is of a higher category (bool <
// integer < floating < complex). A Python float counts as the default
// dtype (float32), an int as int64. On the CPU, TensorIterator copies every
// tensor operand of another dtype to the computation dtype before the
// kernel runs (TensorIteratorBase::compute_types), which is why the
// runtime model needs this.
#pragma once

#include <span>

#include "peakmem/ir/trace.h"
#include "peakmem/ir/value_type.h"

namespace peakmem {

// promoteTypes(a, b); nullptr when PyTorch has no promotion for the pair
// (the float8 types with anything else) or either is nullptr.
const DType* PromoteTypes(const DType* a, const DType* b);

struct PromotionOperands {
  std::span<const ValueType* const> tensors;  // the op's tensor operands
  std::span<const NumberKind> numbers;        // its Python-number operands
};

// result_type over the operands; nullptr when some pair has no promotion.
const DType* ResultType(const PromotionOperands& operands);

}  // namespace peakmem
