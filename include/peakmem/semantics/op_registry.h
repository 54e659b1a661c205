// What each op does to memory, as data.
//
// One table, keyed by the symbol name Thunder reports (the callee's last
// dotted component: `torch.nn.functional.linear` -> `linear`), says whether an
// op allocates new outputs, returns views of its first tensor input, returns
// an input itself, or works in place. Models consult this table instead of
// spreading op names through their code. An op not in the table is reported
// in the diagnostics of every model and treated as allocating its outputs.
#pragma once

#include <cstdint>
#include <string>
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
  kContiguous,      // a fresh contiguous tensor (matmul, reductions, cat, factories, ...)
  kElementwise,     // TensorIterator's output layout over the tensor inputs
  kPreserve,        // like the first tensor input (empty_like with preserve_format)
  kStrideOrder,     // prims.stride_order(x, order): order[d] ranks dim d's stride (0 = innermost)
  kSameStrides,     // a view with the input's strides (split, chunk, narrow, detach)
  kSlice,           // prims.slice_prim(x, starts, ends, steps): each stride times its step
  kPermute,         // permute(x, dims)
  kTranspose,       // transpose(x, d0, d1) / t(x)
  kUnsqueeze,       // unsqueeze(x, dim)
  kDropDims,        // squeeze/select/unbind: the input's strides minus removed dims
  kExpand,          // expand(x, sizes): stride 0 on broadcast dims, sizes aligned at the right
  kBroadcastInDim,  // prims.broadcast_in_dim(x, shape, dims): input dim i lands on dims[i]
  kReshape,         // view/reshape/flatten/unflatten: ATen's computeStride
  kBasicIndex,      // x[key] with ints, slices, None and ...: view_strides.cc BasicIndexStrides
  kUnknown,         // a view peakmem does not follow; later layout decisions get a diagnostic
};

// Memory an op allocates and frees before it returns (semantics/scratch.h
// sizes each rule).
enum class ScratchRule : unsigned char {
  kNone,
  kWrappedScalars,     // elementwise: Python numbers wrapped in 0-d tensors (and cast)
  kWrappedBase,        // pow: a number base is wrapped (pow(2.0, x)); the exponent is a Scalar
  kWhereScalar,        // where(cond, x, 2.0): a 0-d scalar_tensor of the result's dtype
  kRecomputedForward,  // Thunder's `*_vjp` fallback gradients re-run the forward under autograd
  kBlasOperandClones,  // CPU mm/matmul clone operands BLAS cannot take (needs strides: the runtime
                       // model)
  kReductionCast,      // sum/prod into another dtype: the input is cast first
  kGatherIndexCopy,    // take_along_dim: int64 indices of the output's shape
  kInteriorPadding,    // Thunder's pad with interior padding: a dilated intermediate
  kNllTotalWeight,     // Thunder's nll_loss backward: total_weight cast (or made, f64)
  kSortDimBuffer,      // sort: int64 of the sorted dimension's length
  kHalfGather,         // gather in float16/bfloat16: a float32 buffer of the output's size
  kGlobalMean,         // adaptive_avg_pool2d to 1x1: a mean (its count wrapped; half types in f32)
  kHalfIndexAdd,       // index_add in float16/bfloat16: a float32 buffer (per-thread rows or a copy of
                       // the result) and a strided index's copy (needs strides and threads: the runtime
                       // model)
  kConvolution,        // CPU convolution: operand copies, oneDNN's reorders and scratchpad or the
                       // native kernel's columns (convolution_scratch.h; needs strides and threads)
  kConvolutionBackward,  // CPU convolution_backward (ATen's; the eager front end): the same backends'
                         // buffers for the gradients asked for (convolution_scratch.h)
  kLayerNormBackward,    // CPU native_layer_norm_backward (ATen's; the eager front end): dgamma's and
                         // dbeta's per-thread partial sums, and grad_out made contiguous (aten_ops.cc)
  kCpuFlashAttention,    // the CPU's flash attention and its backward (ATen's; the eager front end):
                         // per-thread buffers, and the backward's grad_out made contiguous (aten_ops.cc)
  kFusedAttention,       // CUDA's fused attention kernels (ATen's _scaled_dot_product_{flash,efficient,
                         // cudnn}_attention and their backwards; the eager front end on a CUDA target):
                         // their workspaces (fused_attention_scratch.h); they never run on the CPU
};

// Where an op's outputs get their types when the printed trace omits them.
enum class OutputTypes : unsigned char {
  kPrinted,         // a type comment or a subsymbol gives them
  kReturnedInputs,  // kReturnsInput ops: the returned input's type
  kForwardInputs,   // `*_vjp(((inputs...), {kwargs}), cotangents...)`: one per tensor input
  // (values, indices) of topk, sort and max_pool*_with_indices, which Thunder
  // prints untyped: their shapes from the input's and the op's arguments
  // (frontend/type_inference.cc); values have the input's dtype, indices
  // int64, except max pooling's, typed like the input as Thunder's meta
  // types them (see OpInfo::int64_indices_output).
  kValuesAndIndices,
};

// Which of the ATen entry points sharing a rule an op is, where the rule
// reads the call's arguments by position or by rank.
enum class CallForm : unsigned char {
  kDefault,
  // ScratchRule::kBlasOperandClones: the product of the first two tensors.
  kMm,      // mm(a, b): two matrices
  kMatmul,  // matmul(a, b): vectors, matrices and batches, as ATen's matmul dispatches
  kLinear,  // linear(input, weight, bias): matmul(input, weight.t()); the bias is added
  // ScratchRule::kConvolution (convolution_scratch.h ReadConvolutionArguments).
  kConv2d,       // conv2d(input, weight, bias, stride, padding, dilation, groups)
  kConvolution,  // convolution(..., dilation, transposed, output_padding, groups)
  // OutputTypes::kValuesAndIndices: how the outputs' shape follows from the
  // input's and the arguments (frontend/type_inference.cc).
  kSort,       // sort(a, dim): the input's shape
  kTopK,       // topk(a, k, dim): k along dim
  kMaxPool1d,  // max_pool{N}d_with_indices(a, kernel_size, stride, padding, dilation,
  kMaxPool2d,  // ceil_mode): ATen's pooling output shape over the last N dimensions
  kMaxPool3d,
};

struct OpInfo {
  std::string_view name;
  OpEffect effect;
  LayoutRule layout = LayoutRule::kContiguous;
  // kReturnsInput/kInPlace: which positional argument is returned; -1 means
  // output i is flat tensor argument i (update_aliases((a, b)) -> (a, b)).
  int returned_arg = 0;
  ScratchRule scratch = ScratchRule::kNone;
  // Thunder's get_alloc_memory treats it as an alias of its first argument
  // (thunder/examine/memory_calculation.py's list): its outputs share the
  // input's count and it allocates nothing there.
  bool thunder_alias = false;
  OutputTypes output_types = OutputTypes::kPrinted;
  // A collective (all-gather, reduce-scatter, all-reduce, broadcast): the
  // buffers it allocates are reported as their own category.
  bool collective = false;
  // The NCCL collective it runs ("all_reduce", "all_gather",
  // "reduce_scatter", "broadcast"; allocators/nccl_buffers.h connects that
  // algorithm's buffers); empty for `wait` and every other op.
  std::string_view nccl_collective = {};
  // A kAllocates op that returns input `returned_arg` itself, allocating
  // nothing, when this positional argument (or the keyword
  // `returns_input_keyword`) is the constant True: all-reduce's skip_clone.
  // -1: never.
  int returns_input_if_true = -1;
  std::string_view returns_input_keyword = {};
  // The output, or positional argument, that is the int64 indices tensor
  // ATen makes where Thunder's meta types it like the pooled input
  // (thunder/executors/torchex.py, _max_pool_with_indices_helper returns
  // `TensorProxy(like=a)` twice): the runtime model sizes it at 8 bytes an
  // element whatever the trace prints; the Thunder model counts what it
  // prints, as get_alloc_memory does. -1: none.
  int int64_indices_output = -1;
  int int64_indices_argument = -1;
  // Positional arguments the CPU kernel makes contiguous before it works
  // (`grad.contiguous()`), bit i for argument i: a non-contiguous one is
  // copied, and the copy lives beside the outputs until the op returns (the
  // runtime model, which knows strides). 0: none.
  unsigned contiguous_copy_arguments = 0;
  // A view only when no tensor is among its other arguments: x[key] with a
  // tensor in the key is advanced indexing, a fresh contiguous result.
  bool allocates_with_tensor_argument = false;
  CallForm form = CallForm::kDefault;
  // A float16/bfloat16 reduction over every dimension of an input that is
  // not non-overlapping and dense reduces a float32 copy of it (sum; the
  // runtime model, which knows strides, sizes it).
  bool half_full_reduction_copy = false;
  // A DTensor prim run on each rank's local shard: operands placed
  // differently are redistributed inside the op (the runtime model sizes or
  // diagnoses it).
  bool redistributes_operands = false;
  // Draws from the random-number generator: calls of such ops keep their
  // order when a planner reorders a trace (each draw depends on the ones
  // before it), so their outputs stay bit-identical.
  bool random = false;
};

// The op's entry, or nullptr when peakmem does not know the op. Fusion
// regions are recognised by name pattern (`nvFusion3`, `TorchCompile0`).
const OpInfo* FindOp(std::string_view symbol_name);
// The entry for a call printed as `callee` with Thunder symbol name
// `symbol_name`: an entry keyed by the dotted callee when there is one (an
// op whose name another op shares: torch.nn.functional.unfold is not the
// view Tensor.unfold), else FindOp(symbol_name).
const OpInfo* FindCallOp(std::string_view callee, std::string_view symbol_name);

const std::vector<OpInfo>& AllOps();

// The ops Thunder's get_alloc_memory treats as aliases, in its order (each
// has OpInfo::thunder_alias).
std::vector<std::string_view> ThunderAliasOps();

// The entry in words, for tables people read (the op audit,
// docs/op-audit.md): its effect, output layout and scratch rule, then any
// flag ("allocates, elementwise layout, scratch: wrapped scalars").
std::string DescribeOp(const OpInfo& op);

// What recomputing an op's output costs, for a planner that recomputes
// values in the backward instead of saving them. Never random ops (a
// recomputation would draw again: different values) or collectives.
// kView and kPerElement are the cheap kinds, recomputed whenever that lowers
// the peak; kAlias, kRowwise and kContraction are recomputed only when a
// budget demands it (planning/step_recompute.h). Recomputing any of them
// from the same inputs gives the same bits: the same kernel on the same
// shapes and strides. Reductions and everything else are not recomputed.
enum class RecomputeCost : unsigned char {
  kNotRecomputed,
  kView,         // free: a view of its input (its storage is the input's)
  kPerElement,   // one pass over its output: pointwise, or a view-or-copy (reshape)
  kAlias,        // free: returns its input object (the torch executor's shallow_copy)
  kRowwise,      // softmax, log_softmax: one pass over its output (counted once an element)
  kContraction,  // mm, matmul, linear: 2 * (output elements) * k, k the first operand's last dimension
};
RecomputeCost RecomputeCostOf(const OpInfo& op);
// The FLOPs one recomputation of an output of that cost adds (0 for the
// free kinds).
std::int64_t RecomputeFlops(RecomputeCost cost, std::int64_t output_elements, std::int64_t first_operand_last_dim);

// Whether a symbol names a fusion region (nvFusion3, TorchCompile0).
bool IsFusionName(std::string_view symbol_name);

}  // namespace peakmem
