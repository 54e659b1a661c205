#include "peakmem/semantics/op_registry.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <unordered_map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "peakmem/ir/string_hash.h"

namespace peakmem {
namespace {

using E = OpEffect;
using L = LayoutRule;

// Symbol names as Thunder's torch executor and python executor print them.
// Grouped by what the op does to memory and how its output is laid out.

// Views of the first tensor argument.
const std::vector<OpInfo> kViews = {
    {"unsqueeze", E::kViewOfInput, L::kUnsqueeze},
    {"squeeze", E::kViewOfInput, L::kDropDims},
    {"transpose", E::kViewOfInput, L::kTranspose},
    {"t", E::kViewOfInput, L::kTranspose},
    {"permute", E::kViewOfInput, L::kPermute},
    {"expand", E::kViewOfInput, L::kExpand},
    {"expand_as", E::kViewOfInput, L::kExpand},
    {"broadcast_in_dim", E::kViewOfInput, L::kBroadcastInDim},
    {"view", E::kViewOfInput, L::kReshape},
    {"view_as", E::kViewOfInput, L::kReshape},
    {"unflatten", E::kViewOfInput, L::kReshape},
    {"split", E::kViewOfInput, L::kSameStrides},
    {"chunk", E::kViewOfInput, L::kSameStrides},
    {"tensor_split", E::kViewOfInput, L::kSameStrides},
    {"narrow", E::kViewOfInput, L::kSameStrides},
    {"slice_prim", E::kViewOfInput, L::kSlice},
    {"torch_slice_prim_impl", E::kViewOfInput, L::kSlice},
    {"getitem", E::kViewOfInput, L::kSameStrides},
    {"detach", E::kViewOfInput, L::kSameStrides},
    {"alias", E::kViewOfInput, L::kSameStrides},
    {"unbind", E::kViewOfInput, L::kDropDims},
    {"select", E::kViewOfInput, L::kDropDims},
    {"diagonal", E::kViewOfInput, L::kUnknown},
    {"movedim", E::kViewOfInput, L::kUnknown},
    {"unfold", E::kViewOfInput, L::kUnknown},
    {"as_strided", E::kViewOfInput, L::kUnknown},
    {"real", E::kViewOfInput, L::kUnknown},
    {"imag", E::kViewOfInput, L::kUnknown},
    {"view_as_real", E::kViewOfInput, L::kUnknown},
    {"view_as_complex", E::kViewOfInput, L::kUnknown},
};

// A view when the layout allows, otherwise a copy.
const std::vector<OpInfo> kMaybeViews = {
    {"reshape", E::kMaybeView, L::kReshape},
    {"torch_prims_reshape_impl", E::kMaybeView, L::kReshape},
    {"flatten", E::kMaybeView, L::kReshape},
    {"reshape_as", E::kMaybeView, L::kReshape},
    {"contiguous", E::kMaybeView, L::kContiguous},
    {"to", E::kMaybeView, L::kPreserve},
    {"type_as", E::kMaybeView, L::kPreserve},
};

// Return an input object itself.
const std::vector<OpInfo> kReturnsInput = {
    {"copy_", E::kReturnsInput, L::kSameStrides, 1},  // copy_(copy_from, copy_to) -> copy_to
    {"shallow_copy", E::kReturnsInput, L::kSameStrides, 0},  // the torch executor's `lambda x: x`
    {"update_aliases", E::kReturnsInput, L::kSameStrides, -1},
    {"torch_wait_prim_impl", E::kReturnsInput, L::kSameStrides, 0},
};

// Collectives as Thunder's torch executor implements them
// (thunder/executors/torchex.py, `_*_prim_impl`). Each returns its result
// tensor, wrapped in a future when asynchronous; `wait` (above) returns the
// future's tensor. all_gather and reduce_scatter `torch.empty` a contiguous
// result of the printed (gathered or scattered) shape; broadcast and
// all_reduce `a.clone()` their input (its memory format), all_reduce works on
// the input itself with skip_clone=True (its fifth argument). Measured by the
// distributed corpus (tests/data/distributed).
OpInfo Collective(std::string_view name, LayoutRule layout, std::string_view nccl) {
  OpInfo op{name, E::kAllocates, layout};
  op.collective = true;
  op.nccl_collective = nccl;
  return op;
}

// Thunder's DTensor prims (thunder/torch/experimental/dtensor_torch_and_prims.py),
// run by the torch executor on each rank's local shard: the pointwise ones
// and linear allocate a fresh local output, reshape/transpose/
// broadcast_in_dim and the to_local/from_local conversions are views of the
// input's shard (torch.reshape, torch.permute, broadcast_to, the local
// tensor itself). Where operands are placed differently DTensor
// redistributes one inside the op (RuntimeModel diagnoses it).
// dtensor_redistribute is not listed: its collectives' buffers depend on
// the placements on both sides.
const std::vector<OpInfo> kDTensorOps = {
    {"dtensor_mul_prim", E::kAllocates, L::kElementwise},
    {"dtensor_add_prim", E::kAllocates, L::kElementwise},
    {"dtensor_exp_prim", E::kAllocates, L::kElementwise},
    {"dtensor_neg_prim", E::kAllocates, L::kElementwise},
    {"dtensor_reciprocal_prim", E::kAllocates, L::kElementwise},
    {"dtensor_convert_element_type_prim", E::kAllocates, L::kElementwise},
    {"dtensor_linear_prim", E::kAllocates, L::kContiguous},
    {"dtensor_reshape_prim", E::kMaybeView, L::kReshape},
    {"dtensor_transpose_prim", E::kViewOfInput, L::kPermute},
    {"dtensor_broadcast_in_dim_prim", E::kViewOfInput, L::kBroadcastInDim},
    {"dtensor_to_local", E::kViewOfInput, L::kSameStrides},
    {"dtensor_from_local", E::kViewOfInput, L::kSameStrides},
    // Newer printers unwrap and rewrap around a fusion: the local shard's
    // tensor (a view of it), and a DTensor wrapping a local tensor
    // (allocates nothing).
    {"get_dtensor_inner_tensor", E::kViewOfInput, L::kSameStrides},
    {"construct_dtensor", E::kViewOfInput, L::kSameStrides},
    {"check_dtensor_cotangent_metadata", E::kNoOutput, L::kContiguous},
};

std::vector<OpInfo> Collectives() {
  OpInfo all_reduce = Collective("torch_all_reduce_prim_impl", L::kPreserve, "all_reduce");
  all_reduce.returns_input_if_true = 4;
  all_reduce.returns_input_keyword = "skip_clone";
  return {Collective("torch_all_gather_prim_impl", L::kContiguous, "all_gather"),
          Collective("torch_reduce_scatter_prim_impl", L::kContiguous, "reduce_scatter"),
          Collective("torch_broadcast_prim_impl", L::kPreserve, "broadcast"), all_reduce};
}

// Pooling as Thunder's torch executor calls ATen (thunder/executors/torchex.py):
// max_pool{1,2,3}d_with_indices returns (values, int64 indices), both fresh
// (the CPU kernels allocate nothing else: measured by the model zoo's
// ResNet, tests/data/zoo/resnet), and its backward takes the indices as its
// eighth argument and allocates the input's gradient. The backward of
// adaptive average pooling allocates its output only. (adaptive_avg_pool2d
// to size 1 is a mean that allocates 12 bytes more, not modelled: it is not
// listed.)
std::vector<OpInfo> Pooling() {
  std::vector<OpInfo> ops;
  const std::pair<std::string_view, CallForm> kMaxPools[] = {
      {"max_pool1d_with_indices", CallForm::kMaxPool1d},
      {"max_pool2d_with_indices", CallForm::kMaxPool2d},
      {"max_pool3d_with_indices", CallForm::kMaxPool3d}};
  for (const auto& [n, form] : kMaxPools) {
    OpInfo op{n, E::kAllocates, L::kContiguous};
    op.output_types = OutputTypes::kValuesAndIndices;
    op.form = form;
    op.int64_indices_output = 1;
    op.contiguous_copy_arguments = 1u;
    ops.push_back(op);
  }
  for (std::string_view n : {"max_pool1d_with_indices_backward", "max_pool2d_with_indices_backward",
                             "max_pool3d_with_indices_backward"}) {
    OpInfo op{n, E::kAllocates, L::kContiguous};
    op.int64_indices_argument = 7;
    ops.push_back(op);
  }
  ops.push_back({"_adaptive_avg_pool2d_backward", E::kAllocates, L::kContiguous});
  OpInfo adaptive{"adaptive_avg_pool2d", E::kAllocates, L::kContiguous};
  adaptive.scratch = ScratchRule::kGlobalMean;
  ops.push_back(adaptive);
  return ops;
}

// Pointwise ops: TensorIterator lays their outputs out.
const char* const kElementwiseNames[] = {
    "abs", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and",
    "bitwise_not", "bitwise_or", "bitwise_xor", "ceil", "clamp", "cos", "cosh", "digamma", "div",
    "elu", "eq", "erf", "erfc", "erfinv", "exp", "exp2", "expm1", "floor", "floor_divide", "fmod",
    "ge", "gelu", "gt", "hardswish", "isfinite", "isnan", "le", "leaky_relu", "lerp", "lgamma",
    "log", "log10", "log1p", "log2", "logical_and", "logical_not", "logical_or", "lt",
    "masked_fill", "maximum", "minimum", "mish", "mul", "nan_to_num", "ne", "neg", "polygamma",
    "pow", "reciprocal", "relu", "remainder", "round", "rsqrt", "selu", "sgn", "sigmoid", "sign",
    "signbit", "silu", "sin", "sinh", "softplus", "sqrt", "square", "sub", "tan", "tanh",
    "true_divide", "trunc", "where", "threshold_backward", "tanh_backward", "sigmoid_backward",
    "gelu_backward", "silu_backward", "convert_element_type", "relu6", "hardtanh", "logit",
    "copysign", "heaviside", "hypot", "nextafter", "bitwise_left_shift", "bitwise_right_shift",
    "torch_div_prim_impl",  // the torch executor's prims.div: torch.div / torch.true_divide
};

// Outputs laid out like the first input (empty_like / preserve_format).
const char* const kPreserveNames[] = {
    "clone", "full_like", "ones_like", "zeros_like", "rand_like", "randn_like", "empty_like",
    "dropout", "softmax", "log_softmax", "softmax_backward_data", "log_softmax_backward",
    "uniform_philox",
};

// Ops that allocate fresh contiguous outputs.
const char* const kContiguousNames[] = {
    "addmm",
    "all",
    "amax",
    "amin",
    "any",
    "arange",
    "argmax",
    "argmin",
    "baddbmm",
    "batch_norm",
    "bmm",
    "cat",
    "conv2d",
    "convolution",
    "convolution_backward",
    "cross_entropy",
    "cumsum",
    "einsum",
    "embedding",
    "embedding_backward",
    "empty",
    "full",
    "gather",
    "group_norm",
    "index_add",
    "index_put",
    "index_select",
    "layer_norm",
    "linear",
    "logsumexp",
    "matmul",
    "max",
    "mean",
    "mm",
    "multinomial",
    "native_layer_norm",
    "native_layer_norm_backward",
    "new_empty",
    "nll_loss",
    "nll_loss_backward",
    "ones",
    "outer",
    "pad",
    "prod",
    "rand",
    "randn",
    "repeat",
    "rms_norm",
    "roll",
    "scaled_dot_product_attention",
    "scaled_dot_product_efficient_attention",
    "scaled_dot_product_efficient_attention_backward",
    "scaled_dot_product_flash_attention",
    "scaled_dot_product_flash_attention_backward",
    "scatter",
    "scatter_add",
    "sort",
    "stack",
    "sum",
    "tensor_from_sequence",
    "topk",
    "tril",
    "triu",
    "uniform",
    "var",
    "var_mean",
    "zeros",
    "copy_with_setitem_impl",
    "index_copy",
    "masked_select",
    "nonzero",
    "bernoulli",
    "torch_pad_prim_impl",
    "_log_softmax_backward_data",
    "torch_nll_loss_backward_impl",
    "take_along_dim",
    "argsort",
};

// In place: mutate and return their first argument.
const char* const kInPlaceNames[] = {
    "add_", "sub_", "mul_", "div_", "zero_", "fill_", "clamp_", "relu_", "addcmul_", "addcdiv_",
    "lerp_", "index_copy_", "index_add_", "masked_fill_", "uniform_", "normal_", "exp_", "sqrt_",
    "copy_with_setitem_", "bernoulli_",
};

// Bookkeeping: no tensor outputs.
const char* const kNoOutputNames[] = {
    "clear_mutable_collection", "python_del", "python_return", "unpack_sequence",
    "unpack_trivial", "check_tensor_shape_and_metadata", "check_none", "check_len", "assign",
    "item", "size", "shape", "get_grad", "put_grad", "set_grad_enabled",
};

// The ops Thunder's get_alloc_memory treats as aliases (thunder 0.2.6,
// thunder/examine/memory_calculation.py), in its order.
const std::string_view kThunderAliasNames[] = {
    "unsqueeze", "squeeze",  "transpose", "expand",
    "reshape",   "torch_prims_reshape_impl", "permute", "contiguous",
    "split",     "torch_wait_prim_impl",     "shallow_copy",
};

OpInfo& Find(std::vector<OpInfo>& ops, std::string_view name) {
  return *std::find_if(ops.begin(), ops.end(), [&](const OpInfo& op) { return op.name == name; });
}

// One function, longer than most, on purpose: the registry reads top to
// bottom as one table, each adjustment beside the measurement behind it.
std::vector<OpInfo> BuildTable() {
  std::vector<OpInfo> ops;
  for (const auto* group : {&kViews, &kMaybeViews, &kReturnsInput, &kDTensorOps}) {
    ops.insert(ops.end(), group->begin(), group->end());
  }
  // The DTensor prims proper (`dtensor_*`; not the unwrap and rewrap
  // around a fusion) take DTensor operands.
  for (OpInfo& op : ops) op.redistributes_operands = op.name.starts_with("dtensor_");
  for (const OpInfo& op : Collectives()) ops.push_back(op);
  // prims.stride_order: always a fresh tensor with the requested stride order.
  ops.push_back({"torch_stride_order_prim_impl", E::kAllocates, L::kStrideOrder});
  // Entries keyed by the printed callee, for ops whose symbol name another op
  // shares (FindCallOp looks these up first): torch.nn.functional.unfold is
  // im2col, a fresh [N, C*kh*kw, L] tensor, where Tensor.unfold ("unfold"
  // above) is a view. (Measured: F.unfold of f32[4, 3, 64, 64] allocates its
  // 196,608-byte output.)
  ops.push_back({"torch.nn.functional.unfold", E::kAllocates, L::kContiguous});
  for (const char* n : kElementwiseNames) ops.push_back({n, E::kAllocates, L::kElementwise});
  for (const char* n : kPreserveNames) ops.push_back({n, E::kAllocates, L::kPreserve});
  for (const char* n : kContiguousNames) ops.push_back({n, E::kAllocates, L::kContiguous});
  for (const char* n : kInPlaceNames) ops.push_back({n, E::kInPlace, L::kSameStrides, 0});
  for (const char* n : kNoOutputNames) ops.push_back({n, E::kNoOutput, L::kContiguous});
  for (OpInfo& op : ops) {
    if (op.layout == L::kElementwise) op.scratch = ScratchRule::kWrappedScalars;
    if (op.effect == E::kReturnsInput) op.output_types = OutputTypes::kReturnedInputs;
    if (std::find(std::begin(kThunderAliasNames), std::end(kThunderAliasNames), op.name) !=
        std::end(kThunderAliasNames)) {
      op.thunder_alias = true;
    }
  }
  // In-place arithmetic with a Python number (`exp_avg_sq.mul_(0.999)`,
  // `step_t += 1`) wraps it as the out-of-place op does: the Scalar overload
  // calls the Tensor one with wrapped_scalar_tensor(other). Measured on a f32
  // tensor: 8 (the wrapped double or int64) then 4 (its cast), both freed
  // before the op returns. (lerp_, addcmul_, addcdiv_, clamp_ and fill_ take
  // their numbers as Scalars and allocate nothing.)
  for (const char* n : {"add_", "sub_", "mul_", "div_"}) Find(ops, n).scratch = ScratchRule::kWrappedScalars;
  // Elementwise ops whose Python signatures take their numbers as Scalars
  // (clamp(x, 0.0, 1.0), leaky_relu(x, 0.1), pow(x, 2.0)...): the binding
  // wraps nothing. Measured on f32[16]: each allocates its 64-byte output
  // only, where mul(x, 2.0) allocates 8, 4, then 64.
  // The activations' other arguments are flags (F.silu(x, inplace=False)),
  // not operands: measured, F.silu(x, False) allocates its output only.
  for (const char* n : {"clamp", "lerp", "leaky_relu", "elu", "softplus", "hardtanh", "masked_fill",
                        "nan_to_num", "logit", "threshold_backward", "round", "polygamma", "silu",
                        "relu6", "hardswish", "mish", "selu"}) {
    Find(ops, n).scratch = ScratchRule::kNone;
  }
  for (const char* n : {"topk", "sort"}) Find(ops, n).output_types = OutputTypes::kValuesAndIndices;
  Find(ops, "topk").form = CallForm::kTopK;
  Find(ops, "sort").form = CallForm::kSort;
  // embedding_dense_backward_cpu: `grad.contiguous().view({n, dim})` first
  // (measured: the T5 block's relative-bias gradient, permuted
  // f32[128, 128, 4], copies its 262,144 bytes; tests/data/zoo/t5).
  Find(ops, "embedding_backward").contiguous_copy_arguments = 1u;
  // embedding: `weight.index_select(0, indices.reshape(-1))`, a copy of
  // non-contiguous (expanded) indices (measured: int64 [3, 4] expanded from
  // [4] copies 96 bytes; tests/data/regressions/audit_embedding_backward_permuted).
  Find(ops, "embedding").contiguous_copy_arguments = 1u;
  // softmax/log_softmax (SoftMax.cpp, softmax_cpu_out): `input.contiguous()`
  // into a contiguous output; their backwards make grad and output
  // contiguous. max pooling: `input.contiguous(memory_format)` (a
  // channels-last input is taken as it is; peakmem counts a copy for it).
  // Measured by the op audit on transposed operands.
  for (const char* n : {"softmax", "log_softmax"}) {
    Find(ops, n).layout = L::kContiguous;
    Find(ops, n).contiguous_copy_arguments = 1u;
  }
  for (const char* n :
       {"softmax_backward_data", "log_softmax_backward", "_log_softmax_backward_data"}) {
    Find(ops, n).layout = L::kContiguous;
    Find(ops, n).contiguous_copy_arguments = 3u;
  }
  for (OpInfo& op : Pooling()) ops.push_back(op);
  // Tensor.__getitem__: basic indexing is a view (measured by the zoo's
  // BERT, attention_mask[:, None, None, :], and the op audit).
  OpInfo getitem{"__getitem__", E::kViewOfInput, L::kBasicIndex};
  getitem.allocates_with_tensor_argument = true;
  ops.push_back(getitem);
  Find(ops, "pow").scratch = ScratchRule::kWrappedBase;
  for (const char* n : {"sum", "prod"}) Find(ops, n).scratch = ScratchRule::kReductionCast;
  // A half-type sum over every dimension of an expanded or sliced input
  // reduces a float32 copy (measured: bf16 [64, 48] expanded from [1, 48];
  // prod allocates nothing: runtime_op_call.cc HalfFullReductionCopy).
  Find(ops, "sum").half_full_reduction_copy = true;
  Find(ops, "take_along_dim").scratch = ScratchRule::kGatherIndexCopy;
  Find(ops, "gather").scratch = ScratchRule::kHalfGather;
  Find(ops, "index_add").scratch = ScratchRule::kHalfIndexAdd;
  for (const char* n : {"sort", "argsort"}) Find(ops, n).scratch = ScratchRule::kSortDimBuffer;
  Find(ops, "torch_pad_prim_impl").scratch = ScratchRule::kInteriorPadding;
  Find(ops, "torch_nll_loss_backward_impl").scratch = ScratchRule::kNllTotalWeight;
  Find(ops, "where").scratch = ScratchRule::kWhereScalar;
  for (const auto& [n, form] : {std::pair{"mm", CallForm::kMm}, std::pair{"matmul", CallForm::kMatmul},
                                std::pair{"linear", CallForm::kLinear}}) {
    Find(ops, n).scratch = ScratchRule::kBlasOperandClones;
    Find(ops, n).form = form;
  }
  for (const auto& [n, form] : {std::pair{"convolution", CallForm::kConvolution},
                                std::pair{"conv2d", CallForm::kConv2d}}) {
    Find(ops, n).scratch = ScratchRule::kConvolution;
    Find(ops, n).form = form;
  }
  // ATen's products (the eager front end's calls; aten_ops.cc): addmm is
  // linear with a bias, bmm a batch of mm.
  for (const char* n : {"addmm", "bmm"}) Find(ops, n).scratch = ScratchRule::kBlasOperandClones;
  // ATen's convolution_backward (autograd's ConvolutionBackward0): oneDNN's
  // or slow_conv2d's buffers (convolution_scratch.h CpuConvolutionBackwardEvents).
  Find(ops, "convolution_backward").scratch = ScratchRule::kConvolutionBackward;
  Find(ops, "native_layer_norm_backward").scratch = ScratchRule::kLayerNormBackward;
  // The CPU's flash attention (the eager front end routes sdpa to it as the
  // CPU does): outputs by their meta functions, per-thread buffers by the rule.
  for (const char* n : {"_scaled_dot_product_flash_attention_for_cpu",
                        "_scaled_dot_product_flash_attention_for_cpu_backward"}) {
    OpInfo op{n, E::kAllocates, L::kContiguous};
    op.scratch = ScratchRule::kCpuFlashAttention;
    ops.push_back(op);
  }
  // CUDA's fused attention (the eager front end's CUDA target runs them on
  // meta): outputs by their meta functions, workspaces by the rule.
  for (const char* n : {"_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_backward",
                        "_scaled_dot_product_efficient_attention", "_scaled_dot_product_efficient_attention_backward",
                        "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_cudnn_attention_backward"}) {
    OpInfo op{n, E::kAllocates, L::kContiguous};
    op.scratch = ScratchRule::kFusedAttention;
    ops.push_back(op);
  }
  // flip runs through TensorIterator: its output takes the input's layout
  // (a flipped permuted weight stays permuted, measured by the zoo's ResNet
  // backward, where the convolution then copies it).
  ops.push_back({"flip", E::kAllocates, L::kElementwise});
  for (const char* n : {"rand_like", "randn_like", "dropout", "uniform_philox", "multinomial", "rand",
                        "randn", "uniform", "bernoulli", "uniform_", "normal_", "bernoulli_"}) {
    Find(ops, n).random = true;
  }
  return ops;
}

const std::vector<OpInfo>& Table() {
  static const auto* table = new std::vector<OpInfo>(BuildTable());
  return *table;
}

}  // namespace

bool IsFusionName(std::string_view name) {
  for (std::string_view prefix : {"nvFusion", "TorchCompile", "torchCompile"}) {
    if (name.size() > prefix.size() && name.substr(0, prefix.size()) == prefix &&
        std::all_of(name.begin() + prefix.size(), name.end(),
                    [](char c) { return (c >= '0' && c <= '9') || c == '_'; })) {
      return true;
    }
  }
  return false;
}

namespace {

// Abseil's flat map: FindOp runs once per statement per model.
const absl::flat_hash_map<std::string_view, const OpInfo*, StringHash>& Index() {
  static const auto* index = [] {
    auto* m = new absl::flat_hash_map<std::string_view, const OpInfo*, StringHash>();
    for (const OpInfo& op : Table()) m->emplace(op.name, &op);
    return m;
  }();
  return *index;
}

const OpInfo kFusion = {"<fusion>", E::kFusion, L::kContiguous};
// Thunder's fallback gradients (`half_vjp`): fresh outputs, plus scratch (scratch.h).
const OpInfo kVjp = {"<vjp>", E::kAllocates, L::kContiguous, 0, ScratchRule::kRecomputedForward,
                     false, OutputTypes::kForwardInputs};

}  // namespace

const OpInfo* FindOp(std::string_view symbol_name) {
  const auto& index = Index();
  auto it = index.find(symbol_name);
  if (it != index.end()) return it->second;
  // Thunder's fallback to an ATen operator names it in full
  // (`torch.ops.aten.embedding_backward`): the operator's own entry.
  constexpr std::string_view kAten = "torch.ops.aten.";
  if (symbol_name.size() > kAten.size() && symbol_name.substr(0, kAten.size()) == kAten) {
    it = index.find(symbol_name.substr(kAten.size()));
    if (it != index.end()) return it->second;
  }
  if (IsFusionName(symbol_name)) return &kFusion;
  if (symbol_name.size() > 4 && symbol_name.substr(symbol_name.size() - 4) == "_vjp") return &kVjp;
  return nullptr;
}

const OpInfo* FindCallOp(std::string_view callee, std::string_view symbol_name) {
  if (callee.find('.') != std::string_view::npos) {
    const auto& index = Index();
    if (auto it = index.find(callee); it != index.end()) return it->second;
  }
  return FindOp(symbol_name);
}

const std::vector<OpInfo>& AllOps() { return Table(); }

RecomputeCost RecomputeCostOf(const OpInfo& op) {
  if (op.random || op.collective) return RecomputeCost::kNotRecomputed;
  if (op.effect == OpEffect::kViewOfInput) return RecomputeCost::kView;
  if (op.effect == OpEffect::kMaybeView) return RecomputeCost::kPerElement;
  if (op.effect == OpEffect::kAllocates && op.layout == LayoutRule::kElementwise) return RecomputeCost::kPerElement;
  if (op.form == CallForm::kMm || op.form == CallForm::kMatmul || op.form == CallForm::kLinear) {
    return RecomputeCost::kContraction;
  }
  if (op.name == "shallow_copy") return RecomputeCost::kAlias;
  if (op.name == "softmax" || op.name == "log_softmax") return RecomputeCost::kRowwise;
  return RecomputeCost::kNotRecomputed;
}

std::int64_t RecomputeFlops(RecomputeCost cost, std::int64_t output_elements, std::int64_t first_operand_last_dim) {
  switch (cost) {
    case RecomputeCost::kPerElement:
    case RecomputeCost::kRowwise: return output_elements;
    case RecomputeCost::kContraction: return 2 * output_elements * first_operand_last_dim;
    default: return 0;
  }
}

std::string DescribeOp(const OpInfo& op) {
  static constexpr std::string_view kEffects[] = {
      "allocates", "view of its input", "view or copy by layout", "returns an input",
      "in place",  "no output",         "fusion region"};
  static constexpr std::string_view kLayouts[] = {
      "contiguous",     "elementwise layout", "preserves the input's layout",
      "stride order",   "same strides",       "slice (strides times steps)", "permute",
      "transpose",      "unsqueeze",          "drops dims",
      "expand",         "broadcast_in_dim",   "reshape",
      "basic indexing", "layout not followed"};
  static constexpr std::string_view kScratch[] = {"",
                                                  "wrapped scalars and dtype casts",
                                                  "wrapped base",
                                                  "where's scalar tensor",
                                                  "recomputed forward",
                                                  "BLAS and matmul operand copies",
                                                  "reduction cast",
                                                  "int64 indices copy",
                                                  "interior padding",
                                                  "nll total_weight",
                                                  "sorted dimension's int64 buffer",
                                                  "float32 buffer for half types",
                                                  "mean's wrapped count, half types in float32",
                                                  "half types' float32 accumulation buffer",
                                                  "oneDNN reorders or unfolded columns",
                                                  "the backward's oneDNN reorders or unfolded columns",
                                                  "dgamma's and dbeta's per-thread partial sums",
                                                  "the CPU flash attention's per-thread buffers",
                                                  "fused attention's workspaces"};
  static_assert(std::size(kEffects) == static_cast<std::size_t>(OpEffect::kFusion) + 1);
  static_assert(std::size(kLayouts) == static_cast<std::size_t>(LayoutRule::kUnknown) + 1);
  static_assert(std::size(kScratch) == static_cast<std::size_t>(ScratchRule::kFusedAttention) + 1);
  std::string out(kEffects[static_cast<int>(op.effect)]);
  if (op.effect == OpEffect::kAllocates || op.effect == OpEffect::kViewOfInput ||
      op.effect == OpEffect::kMaybeView) {
    out += ", ";
    out += kLayouts[static_cast<int>(op.layout)];
  }
  if (op.scratch != ScratchRule::kNone) {
    out += ", scratch: ";
    out += kScratch[static_cast<int>(op.scratch)];
  }
  if (op.contiguous_copy_arguments != 0) out += ", copies non-contiguous operands";
  if (op.int64_indices_output >= 0 || op.int64_indices_argument >= 0) out += ", int64 indices";
  if (op.allocates_with_tensor_argument) out += ", allocates with a tensor index";
  if (op.collective) out += ", collective";
  return out;
}

std::vector<std::string_view> ThunderAliasOps() {
  return {std::begin(kThunderAliasNames), std::end(kThunderAliasNames)};
}

}  // namespace peakmem
