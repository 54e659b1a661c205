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
// argument (`alpha`, `p`, a dimension) is not wrapped. A number ATen's own
// C++ wrapped before the call (a backward formula's `grad * 2`) reaches
// the mode as a 0-d CPU tensor it never saw made: it is a wrapped number too.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "peakmem/ir/trace.h"
#include "peakmem/ir/value_type.h"
#include "peakmem/semantics/execution_context.h"
#include "peakmem/semantics/op_registry.h"
#include "peakmem/semantics/scratch.h"

namespace peakmem {

// The registry's op an ATen operator name stands for: "aten.div_.Scalar",
// "aten::div_.Scalar" and "div_" all find "div_"; null when there is none.
const OpInfo* FindAtenOp(std::string_view aten_name);

// One argument of an ATen call, by its schema name, as the mode saw it.
struct AtenArgument {
  enum class Kind { kOther, kNumber, kInts, kTensor };
  std::string name;
  Kind kind = Kind::kOther;
  NumberKind number = NumberKind::kNone;  // kNumber; a kTensor that is a wrapped number
  std::int64_t integer = 0;               // kNumber of an integral or boolean kind
  double real = 0;                        // kNumber of a floating kind
  std::vector<std::int64_t> ints;         // kInts
  ValueType type;                         // kTensor: dtype, shape (device "cpu")
  Dims strides;                           // kTensor
  bool wrapped = false;                   // kTensor: a 0-d tensor ATen wrapped a number in
  const DType* dtype = nullptr;           // kOther: a dtype argument's value (null for anything else)
};

// The scratch the call allocates and frees before it returns, by the
// registry's rule for the op (none for an op without one or not in the
// registry), as it runs on `context`'s kernels (execution_context.h: the
// CPU's unless its target is CUDA), on the CPU with `threads` intra-op
// threads.
// `aten_name` is the full name: the overload decides true division
// ("div.Tensor" divides integers into floats, "div.Tensor_mode" does not).
// `why_not` is set when the op has a rule that does not cover this call
// (then nothing is counted for it: the caller says so).
ScratchEstimate EstimateAtenScratch(std::string_view aten_name, std::span<const AtenArgument> arguments,
                                    int threads, std::string* why_not, const ExecutionContext& context = {});

}  // namespace peakmem
