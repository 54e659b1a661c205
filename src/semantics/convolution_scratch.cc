#include "peakmem/semantics/convolution_scratch.h"

#include <algorithm>
#include <span>
#include <vector>

#include "peakmem/semantics/layout.h"
#include "peakmem/semantics/view_strides.h"

namespace peakmem {
namespace {

constexpr std::int64_t kChannelBlock = 8;         // AVX2: 8 floats a vector register
constexpr std::int64_t kScratchpadAlignment = 128;  // added once to a booked scratchpad

std::int64_t PadToBlock(std::int64_t channels) {
  return (channels + kChannelBlock - 1) / kChannelBlock * kChannelBlock;
}

std::int64_t Product(const Dims& d) {
  std::int64_t n = 1;
  for (std::int64_t x : d) n *= x;
  return n;
}

bool AllEqual(const Dims& d, std::int64_t value) {
  return std::all_of(d.begin(), d.end(), [&](std::int64_t x) { return x == value; });
}

// ATen's expand_param_if_needed: one value stands for every spatial dimension.
std::optional<Dims> SpatialParameter(const Expr* e, std::int64_t fallback, std::size_t spatial) {
  if (e == nullptr) return Dims(spatial, fallback);
  std::optional<Dims> list = IntList(*e);
  if (!list || (list->size() != 1 && list->size() != spatial)) return std::nullopt;
  Dims out(spatial, (*list)[0]);
  if (list->size() == spatial) std::copy(list->begin(), list->end(), out.begin());
  return out;
}

bool IsTrueConstant(const Expr* e) { return e != nullptr && e->kind == Expr::Kind::kConstant && e->text == "True"; }

// A tensor in channels-last layout (and not also contiguous): ATen then
// runs the convolution in NHWC, which the rules do not cover. Channels
// last is contiguity of the dimensions taken in the order N, H, W, C.
bool IsChannelsLast(const ConvolutionOperand& t) {
  if (t.shape.size() != 4 || t.strides.size() != 4) return false;
  const Dims nhwc_shape = {t.shape[0], t.shape[2], t.shape[3], t.shape[1]};
  const Dims nhwc_strides = {t.strides[0], t.strides[2], t.strides[3], t.strides[1]};
  return peakmem::IsContiguous(nhwc_shape, nhwc_strides);
}


std::int64_t Bytes(const Dims& shape, const DType* dtype) { return Product(shape) * dtype->bits / 8; }

// ConvParams::use_mkldnn for a 2-d float32 convolution (see the header):
// oneDNN, or else the native slow_conv2d. The backward follows the
// forward's choice (select_conv_backend runs on the same parameters).
bool UsesOneDnn(const ConvolutionCall& c) {
  const std::int64_t n = c.input.shape[0], kh = c.weight.shape[2], kw = c.weight.shape[3];
  const bool one_by_one = kh == 1 && kw == 1;
  const bool strided = !AllEqual(c.stride, 1), dilated = !AllEqual(c.dilation, 1);
  return (strided || dilated || n >= 16 || !one_by_one || c.threads > 1) &&
         ((kh > 3 && kw > 3) || n > 1 || Product(c.input.shape) > 20480);
}

// What both directions require of the call: float32, 2-d, neither
// transposed nor grouped, no channels-last operand.
bool CheckModelledCall(const ConvolutionCall& c, std::string* why_not) {
  const ConvolutionOperand& in = c.input;
  const ConvolutionOperand& w = c.weight;
  if (in.dtype == nullptr || in.dtype->short_name != "f32" || w.dtype != in.dtype) {
    *why_not = "only float32 convolutions are modelled";
    return false;
  }
  if (in.shape.size() != 4 || w.shape.size() != 4 || c.output_shape.size() != 4 || c.stride.size() != 2) {
    *why_not = "only 2-d convolutions are modelled";
    return false;
  }
  if (c.transposed || c.groups != 1) {
    *why_not = "transposed and grouped convolutions are not modelled";
    return false;
  }
  if ((!IsContiguous(in.shape, in.strides) && IsChannelsLast(in)) ||
      (!IsContiguous(w.shape, w.strides) && IsChannelsLast(w))) {
    *why_not = "channels-last convolutions are not modelled";
    return false;
  }
  return true;
}

}  // namespace

bool ReadConvolutionArguments(const Statement& s, const OpInfo& op, ConvolutionCall* call,
                              std::string* why_not) {
  const std::size_t spatial = call->weight.shape.size() >= 2 ? call->weight.shape.size() - 2 : 0;
  const auto stride = SpatialParameter(ArgOrKeyword(s, 3, "stride"), 1, spatial);
  const auto padding = SpatialParameter(ArgOrKeyword(s, 4, "padding"), 0, spatial);
  const auto dilation = SpatialParameter(ArgOrKeyword(s, 5, "dilation"), 1, spatial);
  const bool is_conv2d = op.form == CallForm::kConv2d;
  const Expr* groups = ArgOrKeyword(s, is_conv2d ? 6 : 8, "groups");
  std::optional<std::int64_t> g = groups == nullptr ? std::optional<std::int64_t>(1) : IntConstant(*groups);
  if (!stride || !padding || !dilation || !g) {
    *why_not = "its stride, padding, dilation or groups are not integer constants";
    return false;
  }
  call->stride = *stride;
  call->padding = *padding;
  call->dilation = *dilation;
  call->groups = *g;
  call->transposed = !is_conv2d && IsTrueConstant(ArgOrKeyword(s, 6, "transposed"));
  return true;
}

std::optional<ScratchEstimate> CpuConvolutionScratch(const ConvolutionCall& c, std::string* why_not) {
  if (!CheckModelledCall(c, why_not)) return std::nullopt;
  const ConvolutionOperand& in = c.input;
  const ConvolutionOperand& w = c.weight;
  const bool in_contiguous = IsContiguous(in.shape, in.strides);
  const bool w_contiguous = IsContiguous(w.shape, w.strides);
  const std::int64_t n = in.shape[0], c_in = in.shape[1];
  const std::int64_t c_out = w.shape[0], kh = w.shape[2], kw = w.shape[3];
  const std::int64_t out_hw = c.output_shape[2] * c.output_shape[3];
  const int item = in.dtype->bits / 8;
  const bool one_by_one = kh == 1 && kw == 1;
  const bool strided = !AllEqual(c.stride, 1);
  const bool padded = !AllEqual(c.padding, 0);

  // `contiguous()` copies of the operands, alive until the op returns.
  std::int64_t copies = 0;
  if (!in_contiguous) copies += Bytes(in.shape, in.dtype);
  if (!w_contiguous) copies += Bytes(w.shape, w.dtype);

  const bool onednn = UsesOneDnn(c);
  ScratchEstimate out;
  if (!onednn) {  // slow_conv2d: the unfolded input beside the result
    const bool needs_columns = !one_by_one || strided || padded;
    const std::int64_t columns = needs_columns ? n * c_in * kh * kw * out_hw * item : 0;
    out.with_outputs = copies + columns;
    out.before_outputs = out.with_outputs;
    return out;
  }
  if (one_by_one && padded) {
    *why_not = "a 1x1 convolution with padding runs as oneDNN's GEMM convolution, whose buffers are not modelled";
    return std::nullopt;
  }
  // The direct kernel computes padding on the fly, a few output columns at
  // a time: past that oneDNN falls back to its GEMM convolution (per-thread
  // im2col buffers blocked by the cache size). Measured on 3x3 and 5x5
  // kernels, dilation 1 to 3, 3 and 8 input channels: padding up to
  // min(3, (k - 1) * d) runs the direct kernel, (k - 1) * d + 1 (k = 3,
  // d = 1) and 4 (k = 3, d = 2; k = 5) the GEMM one.
  for (std::size_t d = 0; d < 2; ++d) {
    const std::int64_t k = w.shape[2 + d], extent = (k - 1) * c.dilation[d];
    if (!one_by_one && c.padding[d] > std::min<std::int64_t>(3, extent)) {
      *why_not = "padding " + std::to_string(c.padding[d]) + " may run oneDNN's GEMM convolution, whose buffers are not modelled";
      return std::nullopt;
    }
  }
  const bool blocked_input = one_by_one || c_in >= kChannelBlock;
  const std::int64_t spatial_in = in.shape[2] * in.shape[3];
  const std::int64_t input_b = blocked_input ? n * PadToBlock(c_in) * spatial_in * item : 0;
  const std::int64_t weight_b = PadToBlock(c_out) * (blocked_input ? PadToBlock(c_in) : c_in) * kh * kw * item;
  const std::int64_t output_b = n * PadToBlock(c_out) * out_hw * item;
  const std::int64_t scratchpad =
      one_by_one && strided ? std::int64_t{c.threads} * PadToBlock(c_in) * out_hw * item + kScratchpadAlignment : 0;
  out.before_outputs = copies + scratchpad + input_b + weight_b + output_b;
  out.with_outputs = copies + output_b;
  return out;
}


namespace {

// A convolution backward's sizes, in elements and bytes, and the events
// its kernels append.
struct ConvolutionBackward {
  explicit ConvolutionBackward(const ConvolutionCall& call)
      : c(call),
        n(call.input.shape[0]),
        c_in(call.input.shape[1]),
        c_out(call.weight.shape[0]),
        kh(call.weight.shape[2]),
        kw(call.weight.shape[3]),
        in_hw(call.input.shape[2] * call.input.shape[3]),
        out_hw(call.output_shape[2] * call.output_shape[3]),
        item(call.input.dtype->bits / 8),
        one_by_one(kh == 1 && kw == 1),
        strided(!AllEqual(call.stride, 1)),
        padded(!AllEqual(call.padding, 0)),
        grad_input(n * c_in * in_hw * item),
        grad_weight(c_out * c_in * kh * kw * item),
        grad_bias(c_out * item),
        grad_output_b(n * PadToBlock(c_out) * out_hw * item) {}

  void alloc(std::int64_t bytes, bool output = false) { events.push_back({bytes, output}); }
  void release(std::int64_t bytes) { events.push_back({-bytes, false}); }

  const ConvolutionCall& c;
  const std::int64_t n, c_in, c_out, kh, kw, in_hw, out_hw, item;
  const bool one_by_one, strided, padded;
  const std::int64_t grad_input, grad_weight, grad_bias;
  const std::int64_t grad_output_b;  // grad_output reordered into blocks of 8 channels
  std::vector<ScratchEvent> events;
};

// slow_conv2d_backward: the gradients first (input, bias, weight), then for
// the weight gradient the input unfolded into columns, as the forward does.
// The input gradient's own columns are a `new[]` buffer per thread, outside
// PyTorch's allocator (the profiler does not see them; neither does the
// caching allocator's accounting).
void NativeBackward(ConvolutionBackward& b, bool input_grad, bool weight_grad, bool bias_grad) {
  if (input_grad) b.alloc(b.grad_input, true);
  if (bias_grad) b.alloc(b.grad_bias, true);
  if (weight_grad) {
    b.alloc(b.grad_weight, true);
    if (!b.one_by_one || b.strided || b.padded) {
      const std::int64_t columns = b.n * b.c_in * b.kh * b.kw * b.out_hw * b.item;
      b.alloc(columns);
      b.release(columns);
    }
  }
}

// oneDNN's backward data: grad_output and the weight reordered into blocks
// of 8 (both channel counts padded, even 3 input channels), the input
// gradient computed blocked; the reorders freed, then the dense input
// gradient allocated and the blocked one copied into it and freed.
bool OneDnnBackwardData(ConvolutionBackward& b, std::string* why_not) {
  if (b.strided) {
    // A strided backward-data primitive: plain gradient buffers and a
    // scratchpad that grows with output channels, spatial size, kernel,
    // stride and padding by its own blocking (not a simple rule).
    *why_not = "a strided convolution's input gradient runs a oneDNN kernel whose scratchpad is not modelled";
    return false;
  }
  if (std::max(b.kh, b.kw) > 8) {  // measured: 8 direct, 9 to 16 GEMM
    *why_not = "a kernel larger than 8 runs oneDNN's GEMM backward-data, whose buffers are not modelled";
    return false;
  }
  const std::int64_t weight_b = PadToBlock(b.c_out) * PadToBlock(b.c_in) * b.kh * b.kw * b.item;
  const std::int64_t grad_input_b = b.n * PadToBlock(b.c_in) * b.in_hw * b.item;
  b.alloc(b.grad_output_b);
  b.alloc(weight_b);
  b.alloc(grad_input_b);
  b.release(weight_b);
  b.release(b.grad_output_b);
  b.alloc(b.grad_input, true);
  b.release(grad_input_b);
  return true;
}

// oneDNN's backward weights (and bias).
bool OneDnnBackwardWeights(ConvolutionBackward& b, bool weight_grad, bool bias_grad, std::string* why_not) {
  const int threads = b.c.threads;
  if (std::max(b.kh, b.kw) > 13) {  // measured: 13 direct, 14 to 16 GEMM
    *why_not = "a kernel larger than 13 runs oneDNN's GEMM backward-weights, whose buffers are not modelled";
    return false;
  }
  // With more than one thread oneDNN splits the weight gradient between
  // threads by a cost model; when it splits the batch, each thread
  // accumulates into its own copy of the gradient, reduced at the end (a
  // scratchpad of those copies and reduction state). Measured at 2, 3 and
  // 4 threads: the 1x1 kernel always books one; the direct kernel none
  // when there are at least two output-channel blocks of 8 a thread
  // (fewer: sometimes, by batch, image size and input channels).
  if (threads > 1 && b.one_by_one) {
    *why_not =
        "a 1x1 kernel's weight gradient on several threads books oneDNN reduction buffers that are not modelled";
    return false;
  }
  if (threads > 1 && PadToBlock(b.c_out) / kChannelBlock < 2 * std::int64_t{threads}) {
    *why_not = "with " + std::to_string(b.c_out) + " output channels on " + std::to_string(threads) +
               " threads oneDNN may split the weight gradient by batch, whose reduction buffers are not "
               "modelled";
    return false;
  }
  // grad_output reordered, the input reordered unless it has exactly 3
  // channels and the kernel is not 1x1 (the first-layer kernel reads NCHW;
  // 1, 2, 4 to 7 channels are padded to 8), the weight gradient computed
  // blocked, oneDNN's bias gradient (unpadded) beside it. Scratchpad
  // entries (each its size plus 128, oneDNN's alignment, in one
  // allocation): a strided 1x1 kernel's gathered input as in the forward,
  // and a bias padded to 8 when the output channels are not a multiple of
  // 8. The operands' reorders are freed, then the dense bias gradient and
  // the dense weight gradient allocated, in that order, and oneDNN's freed.
  const bool blocked_input = b.one_by_one || b.c_in != 3;
  const std::int64_t input_b = blocked_input ? b.n * PadToBlock(b.c_in) * b.in_hw * b.item : 0;
  const std::int64_t grad_weight_b =
      PadToBlock(b.c_out) * (blocked_input ? PadToBlock(b.c_in) : b.c_in) * b.kh * b.kw * b.item;
  std::int64_t scratchpad = 0;
  if (b.one_by_one && b.strided) {
    scratchpad += std::int64_t{threads} * PadToBlock(b.c_in) * b.out_hw * b.item + kScratchpadAlignment;
  }
  if (bias_grad && b.c_out % kChannelBlock != 0) scratchpad += PadToBlock(b.c_out) * b.item + kScratchpadAlignment;
  b.alloc(b.grad_output_b);
  if (input_b > 0) b.alloc(input_b);
  b.alloc(grad_weight_b);
  if (scratchpad > 0) b.alloc(scratchpad);
  if (bias_grad) b.alloc(b.grad_bias);
  if (scratchpad > 0) b.release(scratchpad);
  if (input_b > 0) b.release(input_b);
  b.release(b.grad_output_b);
  if (bias_grad) b.alloc(b.grad_bias, true);
  // ATen returns the weight gradient even when only the bias's was asked
  // for: not an output then, and not freed inside the op either.
  b.alloc(b.grad_weight, weight_grad);
  b.release(grad_weight_b);
  if (bias_grad) b.release(b.grad_bias);
  return true;
}

}  // namespace

std::optional<std::vector<ScratchEvent>> CpuConvolutionBackwardEvents(const ConvolutionCall& c, bool input_grad,
                                                                      bool weight_grad, bool bias_grad,
                                                                      std::string* why_not) {
  if (!CheckModelledCall(c, why_not)) return std::nullopt;
  const ConvolutionOperand& in = c.input;
  const ConvolutionOperand& w = c.weight;
  if (!IsContiguous(in.shape, in.strides) || !IsContiguous(w.shape, w.strides)) {
    *why_not = "the backward of a convolution with non-contiguous operands is not modelled";
    return std::nullopt;
  }
  if (!AllEqual(c.dilation, 1)) {
    *why_not = "the backward of a dilated convolution is not modelled";
    return std::nullopt;
  }
  ConvolutionBackward b(c);
  const ConvolutionOperand& g = c.grad_output;
  const bool strided_grad_output = !g.strides.empty() && !IsContiguous(g.shape, g.strides);

  if (!UsesOneDnn(c)) {
    if (strided_grad_output) {
      // Measured: the native kernel copies a channels-last grad_output once
      // for the input gradient and again for the weight's.
      *why_not = "the native kernel's backward of a non-contiguous grad_output is not modelled";
      return std::nullopt;
    }
    NativeBackward(b, input_grad, weight_grad, bias_grad);
    return std::move(b.events);
  }

  // oneDNN's direct kernels compute padding up to k - 1 on the fly (measured
  // up to 4: k = 3 with padding 2, k = 5 and 8 with padding 4); past that,
  // and for any padding of a 1x1 kernel, it runs its GEMM convolution, whose
  // im2col buffers are sized by the cache.
  for (std::size_t d = 0; d < 2; ++d) {
    if (c.padding[d] > w.shape[2 + d] - 1) {
      *why_not = "padding " + std::to_string(c.padding[d]) +
                 " runs oneDNN's GEMM convolution backward, whose buffers are not modelled";
      return std::nullopt;
    }
  }
  // mkldnn_convolution_backward reads grad_output contiguous in the
  // operands' memory format (contiguous: channels-last operands are not
  // modelled): a non-contiguous one (a transpose's gradient, an expanded
  // scalar's) is copied first and the copy held until the op returns.
  const std::int64_t grad_output_copy = strided_grad_output ? b.n * b.c_out * b.out_hw * b.item : 0;
  if (grad_output_copy > 0) b.alloc(grad_output_copy);
  if (input_grad && !OneDnnBackwardData(b, why_not)) return std::nullopt;
  if ((weight_grad || bias_grad) && !OneDnnBackwardWeights(b, weight_grad, bias_grad, why_not)) return std::nullopt;
  if (grad_output_copy > 0) b.release(grad_output_copy);
  return std::move(b.events);
}

ScratchEstimate FoldScratchEvents(std::span<const ScratchEvent> events) {
  std::int64_t outputs_total = 0;
  for (const ScratchEvent& e : events) {
    if (e.output) outputs_total += e.bytes;
  }
  ScratchEstimate out;
  std::int64_t scratch = 0, outputs = 0, highest_with = 0;
  bool any_output = false;
  for (const ScratchEvent& e : events) {
    if (e.output) {
      any_output = true;
      outputs += e.bytes;
    } else {
      scratch += e.bytes;
    }
    if (!any_output) {
      out.before_outputs = std::max(out.before_outputs, scratch);
    } else {
      highest_with = std::max(highest_with, scratch + outputs);
    }
  }
  out.with_outputs = std::max<std::int64_t>(0, highest_with - outputs_total);
  return out;
}

std::optional<ScratchEstimate> CpuConvolutionBackwardScratch(const ConvolutionCall& call, bool input_grad,
                                                             bool weight_grad, bool bias_grad,
                                                             std::string* why_not) {
  auto events = CpuConvolutionBackwardEvents(call, input_grad, weight_grad, bias_grad, why_not);
  if (!events) return std::nullopt;
  return FoldScratchEvents(*events);
}

}  // namespace peakmem
