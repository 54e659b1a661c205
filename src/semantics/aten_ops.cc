#include "peakmem/semantics/aten_ops.h"

#include <algorithm>
#include <optional>

#include "peakmem/semantics/blas_operands.h"
#include "peakmem/semantics/convolution_scratch.h"
#include "peakmem/semantics/cuda_scratch_rules.h"
#include "peakmem/semantics/fused_attention_scratch.h"
#include "peakmem/semantics/layout.h"

namespace peakmem {
namespace {

// "aten.div_.Scalar" -> ("div_", "Scalar"); "aten::lt" -> ("lt", "").
std::pair<std::string_view, std::string_view> SplitAtenName(std::string_view name) {
  for (std::string_view prefix : {std::string_view("aten::"), std::string_view("aten.")}) {
    if (name.substr(0, prefix.size()) == prefix) {
      name.remove_prefix(prefix.size());
      break;
    }
  }
  const std::size_t dot = name.find('.');
  if (dot == std::string_view::npos) return {name, {}};
  return {name.substr(0, dot), name.substr(dot + 1)};
}

const AtenArgument* Named(std::span<const AtenArgument> arguments, std::string_view name) {
  for (const AtenArgument& a : arguments) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

// The wrapped-scalar rule: the tensor operands, and the numbers in self and
// other (or wrapped before the call), each wrapped.
ScratchEstimate WrappedScratch(const OpInfo& op, std::string_view overload, std::span<const AtenArgument> arguments) {
  std::vector<const ValueType*> tensors;
  std::vector<NumberKind> numbers;
  for (const AtenArgument& a : arguments) {
    if (a.kind == AtenArgument::Kind::kTensor && !a.wrapped) {
      tensors.push_back(&a.type);
    } else if ((a.kind == AtenArgument::Kind::kTensor && a.wrapped) ||
               (a.kind == AtenArgument::Kind::kNumber && (a.name == "self" || a.name == "other"))) {
      numbers.push_back(a.number);
    }
  }
  if (tensors.empty()) return {};
  // pow's exponent is not named self or other: only a number base
  // (pow.Scalar) is among the numbers, as kWrappedBase asks.
  const bool true_division =
      op.name == "true_divide" || (op.name == "div" && overload.find("mode") == std::string_view::npos);
  return ElementwiseOperandScratch(tensors, numbers, true_division);
}

// A list argument of `spatial` entries (one given for all, or none: `fallback`).
std::optional<Dims> Spatial(const AtenArgument* a, std::int64_t fallback, std::size_t spatial) {
  if (a == nullptr || (a->kind == AtenArgument::Kind::kInts && a->ints.empty())) return Dims(spatial, fallback);
  if (a->kind == AtenArgument::Kind::kNumber) return Dims(spatial, a->integer);
  if (a->kind != AtenArgument::Kind::kInts) return std::nullopt;
  if (a->ints.size() == 1) return Dims(spatial, a->ints[0]);
  if (a->ints.size() != spatial) return std::nullopt;
  return Dims(a->ints.begin(), a->ints.end());
}

// The ConvolutionCall of an aten.convolution(input, weight, bias, stride,
// padding, dilation, transposed, output_padding, groups) or of its
// backward (grad_output, input, weight, bias_sizes, stride, ...), on
// `threads` threads; nullopt (with `why_not` when it says something) when
// the arguments are not what the rules read.
std::optional<ConvolutionCall> ReadConvolution(std::span<const AtenArgument> arguments, int threads,
                                               std::string* why_not) {
  const AtenArgument* input = Named(arguments, "input");
  const AtenArgument* weight = Named(arguments, "weight");
  if (input == nullptr || weight == nullptr || input->kind != AtenArgument::Kind::kTensor ||
      weight->kind != AtenArgument::Kind::kTensor) {
    return std::nullopt;
  }
  ConvolutionCall call;
  call.input = {input->type.shape, input->strides, input->type.dtype};
  call.weight = {weight->type.shape, weight->strides, weight->type.dtype};
  const std::size_t spatial = weight->type.shape.size() >= 2 ? weight->type.shape.size() - 2 : 0;
  const auto stride = Spatial(Named(arguments, "stride"), 1, spatial);
  const auto padding = Spatial(Named(arguments, "padding"), 0, spatial);
  const auto dilation = Spatial(Named(arguments, "dilation"), 1, spatial);
  const AtenArgument* groups = Named(arguments, "groups");
  const AtenArgument* transposed = Named(arguments, "transposed");
  if (!stride || !padding || !dilation || input->type.shape.size() != spatial + 2) {
    *why_not = "its stride, padding or dilation do not match its spatial dimensions";
    return std::nullopt;
  }
  call.stride = *stride;
  call.padding = *padding;
  call.dilation = *dilation;
  call.groups = groups != nullptr && groups->kind == AtenArgument::Kind::kNumber ? groups->integer : 1;
  call.transposed = transposed != nullptr && transposed->kind == AtenArgument::Kind::kNumber && transposed->integer;
  call.threads = threads;
  // The output's spatial sizes (a convolution's, not a transposed one's:
  // the rules decline those).
  call.output_shape = {input->type.shape[0], weight->type.shape[0]};
  for (std::size_t d = 0; d < spatial; ++d) {
    const std::int64_t extent = (*dilation)[d] * (weight->type.shape[d + 2] - 1) + 1;
    call.output_shape.push_back((input->type.shape[d + 2] + 2 * (*padding)[d] - extent) / (*stride)[d] + 1);
  }
  return call;
}

ScratchEstimate ConvolutionScratch(std::span<const AtenArgument> arguments, int threads, std::string* why_not) {
  const std::optional<ConvolutionCall> call = ReadConvolution(arguments, threads, why_not);
  if (!call) return {};
  if (std::optional<ScratchEstimate> scratch = CpuConvolutionScratch(*call, why_not)) return *scratch;
  return {};
}

// convolution_backward's output_mask says which gradients it computes.
ScratchEstimate ConvolutionBackwardScratch(std::span<const AtenArgument> arguments, int threads,
                                           std::string* why_not) {
  std::optional<ConvolutionCall> call = ReadConvolution(arguments, threads, why_not);
  const AtenArgument* mask = Named(arguments, "output_mask");
  if (!call) return {};
  const AtenArgument* grad_output = Named(arguments, "grad_output");
  if (grad_output != nullptr && grad_output->kind == AtenArgument::Kind::kTensor) {
    call->grad_output = {grad_output->type.shape, grad_output->strides, grad_output->type.dtype};
  }
  if (mask == nullptr || mask->kind != AtenArgument::Kind::kInts || mask->ints.size() != 3) {
    *why_not = "its output_mask is not three booleans";
    return {};
  }
  if (std::optional<ScratchEstimate> scratch =
          CpuConvolutionBackwardScratch(*call, mask->ints[0] != 0, mask->ints[1] != 0, mask->ints[2] != 0, why_not)) {
    return *scratch;
  }
  return {};
}

// A CPU matrix product's operand clones (blas_operands.h): mm(self, mat2)
// and addmm(self, mat1, mat2), whose `self` is added, not multiplied; a
// float bmm hands each batch's matrices to BLAS in turn (ATen's
// bmm_out_or_baddbmm_), which clones one it cannot take, except in the
// naive kernel of small products (contraction * rows * cols < 400).
ScratchEstimate ProductScratch(std::string_view base, std::span<const AtenArgument> arguments, std::string* why_not) {
  const bool added_self = base == "addmm" || base == "addmm_";
  std::vector<const AtenArgument*> operands;
  for (const AtenArgument& a : arguments) {
    if (a.kind != AtenArgument::Kind::kTensor || a.wrapped || (added_self && a.name == "self")) continue;
    if (a.type.shape.size() < 2 || a.strides.size() != a.type.shape.size()) return {};
    operands.push_back(&a);
  }
  ScratchEstimate out;
  for (const AtenArgument* a : operands) {
    const Dims& shape = a->type.shape;
    const std::size_t r = shape.size() - 2;
    if (BlasTakes(shape[r], shape[r + 1], a->strides[r], a->strides[r + 1])) continue;
    if (shape.size() == 3 && operands.size() == 2 && (a->type.dtype->short_name == "f32" ||
                                                       a->type.dtype->short_name == "f64")) {
      const Dims& x = operands[0]->type.shape;
      const Dims& y = operands[1]->type.shape;
      if (x.size() == 3 && y.size() == 3 && x[1] * x[2] * y[2] < 400) continue;  // the naive kernel
      // One batch at a time (addmm_impl_cpu_ on each batch's matrices): one
      // matrix's clone, freed before the next batch's (measured: f32
      // [8, 32, 16] with strides (1024, 32, 2) clones 2,048 bytes 8 times).
      out.with_outputs += shape[1] * shape[2] * (a->type.dtype->bits / 8);
      continue;
    }
    if (shape.size() > 2) {
      *why_not = "the copies of a batched product's strided operand are not modelled";
      return {};
    }
    out.with_outputs += static_cast<std::int64_t>(a->type.bytes);
  }
  return out;
}

// native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd,
// weight, bias, output_mask) on the CPU (cpu/layer_norm_kernel.cpp
// LayerNormBackwardKernelImplInternal): after its outputs, grad_out made
// contiguous, and where dgamma or dbeta is asked, a zeroed buffer
// {2, threads, N} of the input's dtype for the per-thread partial sums
// (measured: f32 [1, 8] on 2 threads, 128 bytes). Half types' buffer is not
// read yet: named.
ScratchEstimate LayerNormBackwardScratch(std::span<const AtenArgument> arguments, int threads,
                                         std::string* why_not) {
  const AtenArgument* grad = Named(arguments, "grad_out");
  const AtenArgument* input = Named(arguments, "input");
  const AtenArgument* shape = Named(arguments, "normalized_shape");
  const AtenArgument* mask = Named(arguments, "output_mask");
  if (grad == nullptr || input == nullptr || shape == nullptr || mask == nullptr ||
      grad->kind != AtenArgument::Kind::kTensor || input->kind != AtenArgument::Kind::kTensor ||
      shape->kind != AtenArgument::Kind::kInts || mask->kind != AtenArgument::Kind::kInts || mask->ints.size() != 3) {
    return {};
  }
  ScratchEstimate out;
  if (!IsContiguous(grad->type.shape, grad->strides)) out.with_outputs += static_cast<std::int64_t>(grad->type.bytes);
  if (mask->ints[1] == 0 && mask->ints[2] == 0) return out;
  const std::string_view dtype = input->type.dtype->short_name;
  if (dtype != "f32" && dtype != "f64") {
    *why_not = "the CPU layer-norm backward's partial sums in " + std::string(dtype) + " are not modelled";
    return out;
  }
  std::int64_t n = 1;
  for (std::int64_t d : shape->ints) n *= d;
  out.with_outputs += 2 * static_cast<std::int64_t>(std::max(threads, 1)) * n * (input->type.dtype->bits / 8);
  return out;
}

// The CPU's flash attention (aten/src/ATen/native/cpu/FlashAttentionKernel.cpp,
// torch 2.13): the forward's query, key and value are [B, H, T, D]; the
// kernel splits the queries into blocks of qSplit (256 from 768 queries up,
// 64 from 192, else 32) and the keys into blocks of kvSplit (512), each at
// most the length (flash_attention_kernel_impl). After the outputs:
//   - forward (cpu_flash_attention): buf, threads x (qSplit * kvSplit +
//     2 * qSplit + qSplit * D) elements of the accumulate type (float32 for
//     float32 and half types, float64 for float64);
//   - backward (flash_attention_backward_kernel_impl, then
//     cpu_flash_attention_backward): grad_out made contiguous in [B, T, H, D]
//     order (a copy when it is not), buf of threads x 2 * qSplit * kvSplit
//     accumulate elements, and dsum, qSplit accumulate elements a thread
//     makes inside its parallel_for. The profiler sees the calling thread's
//     dsum only (measured: one 256-byte dsum on 2 threads); the other
//     threads' (qSplit * 4 bytes each) are not counted, as it does not.
// Half types (bf16, f16) keep their scores in the accumulate type (float32)
// as above and, besides, a reduced copy of the query's dtype: the forward's
// buf_reduced of threads x qSplit * kvSplit elements, the backward's of
// threads x 2 * qSplit * kvSplit. The f16 forward packs its keys and values
// for oneDNN's brgemm where cpublas::need_pack(kHalf) holds (a CPU with
// AMX-FP16) and the shape allows it (num_head >= 4, headSize % 64 == 0,
// kvSize >= 64, then a size heuristic), padding buf's rows to 64: that
// case is named as not modelled; the shapes that cannot pack are counted.
// Measured (2 threads, f32, B 2, H 4, D 64, causal): at 256 queries the
// forward's buf is 164,864 bytes and the backward's 262,144 with a dsum of
// 256; in bf16 the backward's buf_reduced adds 131,072.
ScratchEstimate CpuFlashAttentionScratch(std::string_view base, std::span<const AtenArgument> arguments, int threads,
                                         std::string* why_not) {
  const bool backward = base.ends_with("_backward");
  const AtenArgument* query = Named(arguments, "query");
  const AtenArgument* key = Named(arguments, "key");
  const AtenArgument* grad = backward ? Named(arguments, "grad_out") : nullptr;
  if (query == nullptr || key == nullptr || query->kind != AtenArgument::Kind::kTensor ||
      key->kind != AtenArgument::Kind::kTensor || query->type.shape.size() != 4 || key->type.shape.size() != 4 ||
      (backward && (grad == nullptr || grad->kind != AtenArgument::Kind::kTensor || grad->type.shape.size() != 4))) {
    return {};
  }
  const std::string_view dtype = query->type.dtype->short_name;
  const bool reduced = dtype == "bf16" || dtype == "f16";
  if (!reduced && dtype != "f32" && dtype != "f64") {
    *why_not = "the CPU flash attention's buffers in " + std::string(dtype) + " are not modelled";
    return {};
  }
  const std::int64_t itemsize = query->type.dtype->bits / 8;
  const std::int64_t accumulate = reduced ? 4 : itemsize;
  const std::int64_t q_size = query->type.shape[2];
  const std::int64_t kv_size = key->type.shape[2];
  const std::int64_t head = query->type.shape[3];
  if (!backward && dtype == "f16" && query->type.shape[1] >= 4 && head % 64 == 0 && kv_size >= 64) {
    *why_not = "the CPU flash attention's f16 forward may pack its keys and values (oneDNN brgemm): not modelled";
    return {};
  }
  const std::int64_t q_split = std::min<std::int64_t>(q_size >= 768 ? 256 : q_size >= 192 ? 64 : 32, q_size);
  const std::int64_t kv_split = std::min<std::int64_t>(512, kv_size);
  const std::int64_t n_threads = std::max(threads, 1);
  ScratchEstimate out;
  if (!backward) {
    out.with_outputs = n_threads * (q_split * kv_split + 2 * q_split + q_split * head) * accumulate;
    if (reduced) out.with_outputs += n_threads * q_split * kv_split * itemsize;
    return out;
  }
  // grad_out.transpose(1, 2) is contiguous when grad_out's strides, taken in
  // [B, T, H, D] order, are.
  const Dims& s = grad->strides;
  const Dims& d = grad->type.shape;
  if (s.size() == 4 && !IsContiguous(Dims{d[0], d[2], d[1], d[3]}, Dims{s[0], s[2], s[1], s[3]})) {
    out.with_outputs += static_cast<std::int64_t>(grad->type.bytes);
  }
  out.with_outputs += (n_threads * 2 * q_split * kv_split + q_split) * accumulate;
  if (reduced) out.with_outputs += n_threads * 2 * q_split * kv_split * itemsize;
  return out;
}

// The first tensor operand that is not a wrapped number (null: none).
const AtenArgument* FirstTensor(std::span<const AtenArgument> arguments) {
  for (const AtenArgument& a : arguments) {
    if (a.kind == AtenArgument::Kind::kTensor && !a.wrapped) return &a;
  }
  return nullptr;
}

// where(condition, self, other) with a number in self or other (the
// ScalarSelf/ScalarOther overloads): a 0-d scalar_tensor of the result's
// dtype for each (scratch.cc's kWhereScalar, measured: 4 bytes for f32).
ScratchEstimate WhereScratch(std::span<const AtenArgument> arguments) {
  const AtenArgument* value = nullptr;
  int numbers = 0;
  for (const AtenArgument& a : arguments) {
    if (a.name != "self" && a.name != "other") continue;
    if (a.kind == AtenArgument::Kind::kNumber || (a.kind == AtenArgument::Kind::kTensor && a.wrapped)) ++numbers;
    if (a.kind == AtenArgument::Kind::kTensor && !a.wrapped) value = &a;
  }
  ScratchEstimate out;
  if (numbers > 0 && value != nullptr) out.with_outputs = numbers * value->type.dtype->bits / 8;
  return out;
}

// Whether a rule that depends on the operands' dtypes can apply: a
// reduction into another dtype (a `dtype` argument other than the input's),
// a half-precision gather or index_add. The rules themselves are not yet
// written for ATen calls; a call they cannot apply to needs none.
bool DTypeRuleApplies(ScratchRule rule, std::span<const AtenArgument> arguments) {
  const AtenArgument* first = FirstTensor(arguments);
  if (first == nullptr) return false;
  const std::string_view d = first->type.dtype->short_name;
  if (rule == ScratchRule::kReductionCast) {
    for (const AtenArgument& a : arguments) {
      if (a.name == "dtype" && a.dtype != nullptr && a.dtype != first->type.dtype) return true;
    }
    return false;
  }
  return d == "f16" || d == "bf16";  // kHalfGather, kHalfIndexAdd
}

// A fused attention call's workspaces (fused_attention_scratch.h), its
// operands read by their schema names: query, key, value (and grad_out,
// out for a backward), dropout_p.
ScratchEstimate FusedAttentionScratch(std::string_view base, std::span<const AtenArgument> arguments,
                                      const ExecutionContext& context, std::string* why_not) {
  if (base.find("cudnn") != std::string_view::npos) {
    *why_not = "cuDNN's attention workspace (sized by cuDNN's heuristics) is not modelled";
    return {};
  }
  const AtenArgument* q = Named(arguments, "query");
  const AtenArgument* k = Named(arguments, "key");
  const AtenArgument* v = Named(arguments, "value");
  if (q == nullptr || k == nullptr || v == nullptr || q->kind != AtenArgument::Kind::kTensor ||
      q->type.shape.size() != 4 || k->type.shape.size() != 4 || v->type.shape.size() != 4) {
    *why_not = "its query, key and value are not 4-d tensors";
    return {};
  }
  AttentionCall call;
  call.batch = q->type.shape[0], call.heads = q->type.shape[1], call.q_len = q->type.shape[2];
  call.qk_dim = q->type.shape[3], call.kv_heads = k->type.shape[1], call.kv_len = k->type.shape[2];
  call.v_dim = v->type.shape[3];
  call.itemsize = q->type.dtype->bits / 8;
  call.half = q->type.dtype->short_name == "f16" || q->type.dtype->short_name == "bf16";
  call.sm_count = context.sm_count > 0 ? context.sm_count : 132;
  if (const AtenArgument* p = Named(arguments, "dropout_p"); p != nullptr && p->kind == AtenArgument::Kind::kNumber) {
    call.dropout = p->real;
  }
  const bool backward = base.size() > 9 && base.substr(base.size() - 9) == "_backward";
  if (backward) {
    const AtenArgument* grad = Named(arguments, "grad_out");
    if (grad == nullptr) grad = Named(arguments, "grad_out_");
    const AtenArgument* out = Named(arguments, "out");
    if (grad != nullptr && grad->kind == AtenArgument::Kind::kTensor) {
      call.grad_out_bshd = IsTransposedBshd(grad->type.shape, grad->strides);
    }
    if (out != nullptr && out->kind == AtenArgument::Kind::kTensor) {
      call.out_bshd = IsTransposedBshd(out->type.shape, out->strides);
    }
  }
  const bool flash = base.find("flash") != std::string_view::npos;
  if (flash) return backward ? FlashAttentionBackwardScratch(call) : FlashAttentionForwardScratch(call);
  return backward ? EfficientAttentionBackwardScratch(call) : EfficientAttentionForwardScratch(call);
}

// The registry's rules as CUDA's kernels run them (cuda_scratch_rules.h).
ScratchEstimate CudaAtenScratch(const OpInfo& op, std::string_view base, std::span<const AtenArgument> arguments,
                                const ExecutionContext& context, std::string* why_not) {
  switch (CudaScratchOf(op.scratch)) {
    case CudaScratch::kNone:
      return {};
    case CudaScratch::kAsOnTheCpu:
      return op.scratch == ScratchRule::kWhereScalar ? WhereScratch(arguments)
                                                     : ProductScratch(base, arguments, why_not);
    case CudaScratch::kCudnnWorkspace:
      *why_not = "cuDNN's workspace is not modelled";
      return {};
    case CudaScratch::kFusedAttention:
      return FusedAttentionScratch(base, arguments, context, why_not);
    case CudaScratch::kLayerNormBackward: {
      const AtenArgument* input = Named(arguments, "input");
      const AtenArgument* shape = Named(arguments, "normalized_shape");
      if (input != nullptr && shape != nullptr && input->kind == AtenArgument::Kind::kTensor &&
          shape->kind == AtenArgument::Kind::kInts) {
        std::int64_t n = 1;
        for (std::int64_t d : shape->ints) n *= d;
        if (n > 0 && static_cast<std::int64_t>(input->type.numel) / n > 65536) {
          *why_not = "CUDA's layer-norm backward partial sums over more than 65,536 rows are not modelled";
        }
      }
      return {};
    }
    case CudaScratch::kNotModelled:
      if ((op.scratch == ScratchRule::kReductionCast || op.scratch == ScratchRule::kHalfGather ||
           op.scratch == ScratchRule::kHalfIndexAdd) &&
          !DTypeRuleApplies(op.scratch, arguments)) {
        return {};
      }
      *why_not = "what CUDA's kernel for " + std::string(base) + " allocates inside (" + DescribeOp(op) +
                 " on the CPU) is not modelled";
      return {};
  }
  return {};
}

}  // namespace

const OpInfo* FindAtenOp(std::string_view aten_name) { return FindOp(SplitAtenName(aten_name).first); }

ScratchEstimate EstimateAtenScratch(std::string_view aten_name, std::span<const AtenArgument> arguments,
                                    int threads, std::string* why_not, const ExecutionContext& context) {
  const auto [base, overload] = SplitAtenName(aten_name);
  const OpInfo* op = FindOp(base);
  if (op == nullptr) return {};
  if (context.target == KernelDevice::kCuda) return CudaAtenScratch(*op, base, arguments, context, why_not);
  switch (op->scratch) {
    case ScratchRule::kWrappedScalars:
    case ScratchRule::kWrappedBase:
      return WrappedScratch(*op, overload, arguments);
    case ScratchRule::kConvolution:
      return ConvolutionScratch(arguments, threads, why_not);
    case ScratchRule::kConvolutionBackward:
      return ConvolutionBackwardScratch(arguments, threads, why_not);
    case ScratchRule::kLayerNormBackward:
      return LayerNormBackwardScratch(arguments, threads, why_not);
    case ScratchRule::kCpuFlashAttention:
      return CpuFlashAttentionScratch(base, arguments, threads, why_not);
    case ScratchRule::kBlasOperandClones:
      return ProductScratch(base, arguments, why_not);
    case ScratchRule::kWhereScalar:
      return WhereScratch(arguments);
    case ScratchRule::kNone:
      return {};
    case ScratchRule::kReductionCast:
    case ScratchRule::kHalfGather:
    case ScratchRule::kHalfIndexAdd:
      if (!DTypeRuleApplies(op->scratch, arguments)) return {};
      [[fallthrough]];
    default:
      *why_not = "the registry's scratch rule for " + std::string(base) + " (" + DescribeOp(*op) +
                 ") is not applied to ATen calls yet";
      return {};
  }
}

}  // namespace peakmem
