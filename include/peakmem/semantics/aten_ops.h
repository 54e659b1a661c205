// The registry seen from ATen: the eager front end records a step as the
// ATen operator calls a TorchDispatchMode sees ("aten.div_.Scalar"), and
// their rules are the registry's ops of the same base name ("div_").
//
// What ATen adds is where Python numbers are wrapped. A dispatch mode sees
// a number passed in a tensor's place as the number itself: in the Tensor
// overloads (`div.Tensor(t, 0.5)`: Python's argument parser wrapped it) and
// in the Scalar overloads (`div_.Scalar(t, 0.9)`, `lt.Scalar(t, 3)`: the
// kernel redispatches to the Tensor overload with wrapped_scalar_tensor).
// Either way the number becomes a 0-d tensor alive while the op runs,
// which is the registry's wrapped-scalar rule; a number in any other
// argument (`alpha`, `p`, a dimension) is not wrapped.
#pragma once

#include <span>
#include <string_view>

#include "peakmem/ir/trace.h"
#include "peakmem/ir/value_type.h"
#include "peakmem/semantics/op_registry.h"
#include "peakmem/semantics/scratch.h"

namespace peakmem {

// The registry's op an ATen operator name stands for: "aten.div_.Scalar",
// "aten::div_.Scalar" and "div_" all find "div_"; null when there is none.
const OpInfo* FindAtenOp(std::string_view aten_name);

// One ATen call's operands, as the dispatch mode saw them.
struct AtenOperands {
  // The tensor operands.
  std::span<const ValueType* const> tensors;
  // The Python numbers passed in the arguments named `self` and `other`
  // (the places ATen wraps a number), in order.
  std::span<const NumberKind> wrapped;
};

// The scratch the call allocates and frees before it returns, by the
// registry's rule for the op (none for an op without one or not in the
// registry). `aten_name` is the full name: the overload decides true
// division ("div.Tensor" divides integers into floats, "div.Tensor_mode" does not).
ScratchEstimate EstimateAtenScratch(std::string_view aten_name, const AtenOperands& operands);

}  // namespace peakmem
