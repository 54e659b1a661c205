// Memory an op allocates and frees before it returns (op scratch).
//
// Invisible in the trace, it still raises the peak inside the op. What is
// modelled, each rule backed by CPU measurements (tests/data/corpus):
//   - wrapped Python scalars: a Python number passed where an op takes a
//     tensor (`torch.mul(t, 2.0)`) is wrapped into a 0-d tensor (8 bytes for
//     float/int, 16 for complex, 1 for bool) before the op runs, and
//     TensorIterator casts it to the op's dtype (another itemsize bytes) when
//     the dtypes differ; both live until the op returns, alongside its output;
//   - `where(cond, x, 0.0)`: the scalar becomes a 0-d tensor of the result's
//     dtype (no wrapped double), alive alongside the output;
//   - Thunder's fallback gradients `{op}_vjp(...)` recompute the forward
//     result (shaped like the cotangent) under autograd; it lives alongside
//     the gradient until the op returns;
//   - elementwise ops compute in PyTorch's result dtype (type_promotion.h):
//     every tensor operand of another dtype is copied to it first;
//   - reductions into another dtype, take_along_dim's indices, sort's and
//     argsort's buffers, Thunder's interior padding, nll_loss backward's
//     total_weight and global average pooling's mean (scratch.cc,
//     TypedScratch), measured by the op audit (docs/op-audit.md).
// Rules are per op and device; an op without a rule has no scratch. Rules
// that need strides live in the runtime model: CPU mm/matmul clones
// operands BLAS cannot take and copies batched operands it cannot view
// (RuntimeModel::MatmulOperandClones), kernels copy non-contiguous operands
// (OpInfo::contiguous_copy_arguments), CPU convolutions' operand copies,
// oneDNN reorders and per-thread scratchpads (convolution_scratch.h,
// RuntimeModel::ConvolutionScratch); another needs DTensor placements: a replicated operand's
// chunk copied to the result's placement (RuntimeModel::DTensorRedistribution).
#pragma once

#include <cstdint>
#include <span>

#include "peakmem/semantics/op_registry.h"
#include "peakmem/ir/trace.h"

namespace peakmem {

struct ScratchEstimate {
  std::int64_t before_outputs = 0;  // live while the op runs, before its outputs exist
  std::int64_t with_outputs = 0;    // live together with the op's outputs
};

ScratchEstimate EstimateScratch(const Trace& trace, const Statement& statement);
// The same, given the op's registry entry (FindOp(statement.symbol)), which
// the caller has already looked up.
ScratchEstimate EstimateScratch(const Trace& trace, const Statement& statement, const OpInfo* op);

// The wrapped-scalar rule (ScratchRule::kWrappedScalars, kWrappedBase) on an
// elementwise op's operands, whichever front end found them: `tensors` its
// tensor operands, `numbers` the Python numbers it wraps into 0-d tensors
// (only those in the places the op wraps), `integers_to_float` when it
// computes integer operands in the default float dtype (true division).
ScratchEstimate ElementwiseOperandScratch(std::span<const ValueType* const> tensors,
                                          std::span<const NumberKind> numbers, bool integers_to_float);

}  // namespace peakmem
