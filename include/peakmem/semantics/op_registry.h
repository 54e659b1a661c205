// What each op does to memory, as data.
//
// One table, keyed by the symbol name Thunder reports (the callee's last
// dotted component: `torch.nn.functional.linear` -> `linear`), says whether an
// op allocates new outputs, returns views of its first tensor input, returns
// an input itself, or works in place. Models consult this table instead of
// spreading op names through their code. An op not in the table is reported
// in the diagnostics of every model and treated as allocating its outputs.
#pragma once

#include <string_view>
#include <vector>

namespace peakmem {

enum class OpEffect : unsigned char {
  kAllocates,     // every tensor output is a fresh storage
  kViewOfInput,   // outputs share the first tensor argument's storage
  kMaybeView,     // reshape/contiguous/to: a view or a copy, by layout
  kReturnsInput,  // the output is an input object (copy_ returns its destination)
  kInPlace,       // mutates an input, allocates nothing (add_, ...)
  kNoOutput,      // no tensor outputs (bookkeeping ops)
  kFusion,        // a fusion region (nvFusionN, TorchCompileN): allocates its outputs
};

// How an op's output strides follow from its inputs (see layout.h).
enum class LayoutRule : unsigned char {
  kContiguous,   // a fresh contiguous tensor (matmul, reductions, cat, factories, ...)
  kElementwise,  // TensorIterator's output layout over the tensor inputs
  kPreserve,     // like the first tensor input (empty_like with preserve_format)
  kStrideOrder,  // prims.stride_order(x, order): order[d] ranks dim d's stride (0 = innermost)
  kSameStrides,  // a view with the input's strides (slices, split, chunk, narrow, detach)
  kPermute,      // permute(x, dims)
  kTranspose,    // transpose(x, d0, d1) / t(x)
  kUnsqueeze,    // unsqueeze(x, dim)
  kDropDims,     // squeeze/select/unbind: the input's strides minus removed dims
  kExpand,       // expand / broadcast_in_dim: stride 0 on broadcast dims
  kReshape,      // view/reshape/flatten/unflatten: ATen's computeStride
  kUnknown,      // a view peakmem does not follow; later layout decisions get a diagnostic
};

struct OpInfo {
  std::string_view name;
  OpEffect effect;
  LayoutRule layout = LayoutRule::kContiguous;
  // kReturnsInput/kInPlace: which positional argument is returned; -1 means
  // output i is flat tensor argument i (update_aliases((a, b)) -> (a, b)).
  int returned_arg = 0;
};

// The op's entry, or nullptr when peakmem does not know the op. Fusion
// regions are recognised by name pattern (`nvFusion3`, `TorchCompile0`).
const OpInfo* FindOp(std::string_view symbol_name);

const std::vector<OpInfo>& AllOps();

}  // namespace peakmem
