#include "peakmem/op_registry.h"

#include <algorithm>
#include <unordered_map>

namespace peakmem {
namespace {

using E = OpEffect;

// Symbol names as Thunder's torch executor and python executor print them.
const std::vector<OpInfo> kOps = {
    // Views: share the input's storage.
    {"unsqueeze", E::kViewOfInput}, {"squeeze", E::kViewOfInput},
    {"transpose", E::kViewOfInput}, {"permute", E::kViewOfInput},
    {"expand", E::kViewOfInput}, {"expand_as", E::kViewOfInput},
    {"view", E::kViewOfInput}, {"view_as", E::kViewOfInput},
    {"split", E::kViewOfInput}, {"chunk", E::kViewOfInput},
    {"unbind", E::kViewOfInput}, {"tensor_split", E::kViewOfInput},
    {"narrow", E::kViewOfInput}, {"select", E::kViewOfInput},
    {"diagonal", E::kViewOfInput}, {"movedim", E::kViewOfInput},
    {"t", E::kViewOfInput}, {"unfold", E::kViewOfInput},
    {"getitem", E::kViewOfInput}, {"slice_prim", E::kViewOfInput},
    {"torch_slice_prim_impl", E::kViewOfInput}, {"broadcast_in_dim", E::kViewOfInput},
    {"unflatten", E::kViewOfInput}, {"real", E::kViewOfInput},
    {"imag", E::kViewOfInput}, {"view_as_real", E::kViewOfInput},
    {"view_as_complex", E::kViewOfInput}, {"detach", E::kViewOfInput},
    {"alias", E::kViewOfInput}, {"as_strided", E::kViewOfInput},
    // A view when the layout allows, a copy otherwise.
    {"reshape", E::kMaybeView}, {"torch_prims_reshape_impl", E::kMaybeView},
    {"flatten", E::kMaybeView}, {"contiguous", E::kMaybeView},
    {"to", E::kMaybeView}, {"reshape_as", E::kMaybeView},
    // Return an input object.
    {"copy_", E::kReturnsInput}, {"shallow_copy", E::kReturnsInput},
    {"update_aliases", E::kReturnsInput}, {"torch_wait_prim_impl", E::kReturnsInput},
    {"copy_with_setitem_impl", E::kAllocates},
    // In place.
    {"add_", E::kInPlace}, {"sub_", E::kInPlace}, {"mul_", E::kInPlace},
    {"div_", E::kInPlace}, {"zero_", E::kInPlace}, {"fill_", E::kInPlace},
    {"clamp_", E::kInPlace}, {"relu_", E::kInPlace}, {"addcmul_", E::kInPlace},
    {"addcdiv_", E::kInPlace}, {"lerp_", E::kInPlace}, {"index_copy_", E::kInPlace},
    {"index_add_", E::kInPlace}, {"masked_fill_", E::kInPlace}, {"uniform_", E::kInPlace},
    {"normal_", E::kInPlace}, {"exp_", E::kInPlace}, {"sqrt_", E::kInPlace},
    // Bookkeeping.
    {"clear_mutable_collection", E::kNoOutput}, {"python_del", E::kNoOutput},
    {"python_return", E::kNoOutput}, {"unpack_sequence", E::kNoOutput},
    {"unpack_trivial", E::kNoOutput}, {"check_tensor_shape_and_metadata", E::kNoOutput},
    {"check_none", E::kNoOutput}, {"check_len", E::kNoOutput}, {"assign", E::kNoOutput},
    // Ops that allocate their outputs.
    {"abs", E::kAllocates}, {"acos", E::kAllocates}, {"add", E::kAllocates},
    {"addmm", E::kAllocates}, {"all", E::kAllocates}, {"amax", E::kAllocates},
    {"amin", E::kAllocates}, {"any", E::kAllocates}, {"arange", E::kAllocates},
    {"argmax", E::kAllocates}, {"argmin", E::kAllocates}, {"asin", E::kAllocates},
    {"atan", E::kAllocates}, {"atan2", E::kAllocates}, {"baddbmm", E::kAllocates},
    {"bitwise_and", E::kAllocates}, {"bitwise_not", E::kAllocates},
    {"bitwise_or", E::kAllocates}, {"bmm", E::kAllocates}, {"cat", E::kAllocates},
    {"ceil", E::kAllocates}, {"clamp", E::kAllocates}, {"clone", E::kAllocates},
    {"convert_element_type", E::kAllocates}, {"cos", E::kAllocates},
    {"cosh", E::kAllocates}, {"cross_entropy", E::kAllocates},
    {"cumsum", E::kAllocates}, {"div", E::kAllocates}, {"dropout", E::kAllocates},
    {"embedding", E::kAllocates}, {"embedding_backward", E::kAllocates},
    {"empty", E::kAllocates}, {"eq", E::kAllocates}, {"erf", E::kAllocates},
    {"exp", E::kAllocates}, {"exp2", E::kAllocates}, {"expm1", E::kAllocates},
    {"full", E::kAllocates}, {"full_like", E::kAllocates}, {"gather", E::kAllocates},
    {"ge", E::kAllocates}, {"gelu", E::kAllocates}, {"gt", E::kAllocates},
    {"index_add", E::kAllocates}, {"index_put", E::kAllocates},
    {"index_select", E::kAllocates}, {"isfinite", E::kAllocates},
    {"layer_norm", E::kAllocates}, {"le", E::kAllocates}, {"linear", E::kAllocates},
    {"log", E::kAllocates}, {"log1p", E::kAllocates}, {"log_softmax", E::kAllocates},
    {"log_softmax_backward", E::kAllocates}, {"logical_not", E::kAllocates},
    {"lt", E::kAllocates}, {"masked_fill", E::kAllocates}, {"matmul", E::kAllocates},
    {"max", E::kAllocates}, {"maximum", E::kAllocates}, {"mean", E::kAllocates},
    {"minimum", E::kAllocates}, {"mm", E::kAllocates}, {"mul", E::kAllocates},
    {"ne", E::kAllocates}, {"neg", E::kAllocates}, {"new_empty", E::kAllocates},
    {"nll_loss", E::kAllocates}, {"nll_loss_backward", E::kAllocates},
    {"ones", E::kAllocates}, {"ones_like", E::kAllocates}, {"pad", E::kAllocates},
    {"pow", E::kAllocates}, {"prod", E::kAllocates}, {"rand", E::kAllocates},
    {"rand_like", E::kAllocates}, {"randn", E::kAllocates}, {"reciprocal", E::kAllocates},
    {"relu", E::kAllocates}, {"remainder", E::kAllocates}, {"rsqrt", E::kAllocates},
    {"scaled_dot_product_attention", E::kAllocates}, {"scatter", E::kAllocates},
    {"scatter_add", E::kAllocates}, {"sigmoid", E::kAllocates}, {"sign", E::kAllocates},
    {"silu", E::kAllocates}, {"sin", E::kAllocates}, {"sinh", E::kAllocates},
    {"softmax", E::kAllocates}, {"sqrt", E::kAllocates}, {"stack", E::kAllocates},
    {"sub", E::kAllocates}, {"sum", E::kAllocates}, {"tanh", E::kAllocates},
    {"tensor_from_sequence", E::kAllocates}, {"topk", E::kAllocates},
    {"tril", E::kAllocates}, {"triu", E::kAllocates}, {"true_divide", E::kAllocates},
    {"var", E::kAllocates}, {"var_mean", E::kAllocates}, {"where", E::kAllocates},
    {"zeros", E::kAllocates}, {"zeros_like", E::kAllocates}, {"floor", E::kAllocates},
    {"trunc", E::kAllocates}, {"round", E::kAllocates}, {"logsumexp", E::kAllocates},
    {"sort", E::kAllocates}, {"flip", E::kAllocates}, {"roll", E::kAllocates},
    {"repeat", E::kAllocates}, {"type_as", E::kAllocates}, {"lerp", E::kAllocates},
    {"native_layer_norm", E::kAllocates}, {"native_layer_norm_backward", E::kAllocates},
    {"rms_norm", E::kAllocates}, {"group_norm", E::kAllocates},
    {"batch_norm", E::kAllocates}, {"conv2d", E::kAllocates},
    {"convolution", E::kAllocates}, {"einsum", E::kAllocates},
    {"outer", E::kAllocates}, {"polygamma", E::kAllocates}, {"digamma", E::kAllocates},
    {"lgamma", E::kAllocates}, {"sgn", E::kAllocates}, {"signbit", E::kAllocates},
    {"hardswish", E::kAllocates}, {"leaky_relu", E::kAllocates}, {"elu", E::kAllocates},
    {"selu", E::kAllocates}, {"softplus", E::kAllocates}, {"mish", E::kAllocates},
    {"tanh_backward", E::kAllocates}, {"sigmoid_backward", E::kAllocates},
    {"threshold_backward", E::kAllocates}, {"gelu_backward", E::kAllocates},
    {"silu_backward", E::kAllocates}, {"softmax_backward_data", E::kAllocates},
    {"scaled_dot_product_efficient_attention", E::kAllocates},
    {"scaled_dot_product_efficient_attention_backward", E::kAllocates},
    {"scaled_dot_product_flash_attention", E::kAllocates},
    {"scaled_dot_product_flash_attention_backward", E::kAllocates},
    {"bitwise_xor", E::kAllocates}, {"logical_and", E::kAllocates},
    {"logical_or", E::kAllocates}, {"isnan", E::kAllocates}, {"nan_to_num", E::kAllocates},
    {"fmod", E::kAllocates}, {"floor_divide", E::kAllocates}, {"square", E::kAllocates},
    {"baddbmm", E::kAllocates}, {"uniform", E::kAllocates}, {"uniform_philox", E::kAllocates},
    {"randn_like", E::kAllocates}, {"multinomial", E::kAllocates},
    {"item", E::kNoOutput}, {"size", E::kNoOutput}, {"shape", E::kNoOutput},
};

bool IsFusionName(std::string_view name) {
  for (std::string_view prefix : {"nvFusion", "TorchCompile", "torchCompile", "fusion"}) {
    if (name.size() > prefix.size() && name.substr(0, prefix.size()) == prefix &&
        std::all_of(name.begin() + prefix.size(), name.end(),
                    [](char c) { return (c >= '0' && c <= '9') || c == '_'; })) {
      return true;
    }
  }
  return false;
}

const std::unordered_map<std::string_view, const OpInfo*>& Index() {
  static const auto* index = [] {
    auto* m = new std::unordered_map<std::string_view, const OpInfo*>();
    for (const OpInfo& op : kOps) m->emplace(op.name, &op);
    return m;
  }();
  return *index;
}

const OpInfo kFusion = {"<fusion>", E::kFusion};

}  // namespace

const OpInfo* FindOp(std::string_view symbol_name) {
  const auto& index = Index();
  auto it = index.find(symbol_name);
  if (it != index.end()) return it->second;
  if (IsFusionName(symbol_name)) return &kFusion;
  return nullptr;
}

const std::vector<OpInfo>& AllOps() { return kOps; }

}  // namespace peakmem
