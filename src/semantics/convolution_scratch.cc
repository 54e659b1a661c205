#include "peakmem/semantics/convolution_scratch.h"

#include <algorithm>

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
  if (!list) return std::nullopt;
  if (list->size() == 1) return Dims(spatial, (*list)[0]);
  if (list->size() != spatial) return std::nullopt;
  return list;
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
  const ConvolutionOperand& in = c.input;
  const ConvolutionOperand& w = c.weight;
  if (in.dtype == nullptr || in.dtype->short_name != "f32" || w.dtype != in.dtype) {
    *why_not = "only float32 convolutions are modelled";
    return std::nullopt;
  }
  if (in.shape.size() != 4 || w.shape.size() != 4 || c.output_shape.size() != 4 || c.stride.size() != 2) {
    *why_not = "only 2-d convolutions are modelled";
    return std::nullopt;
  }
  if (c.transposed || c.groups != 1) {
    *why_not = "transposed and grouped convolutions are not modelled";
    return std::nullopt;
  }
  const bool in_contiguous = IsContiguous(in.shape, in.strides);
  const bool w_contiguous = IsContiguous(w.shape, w.strides);
  if ((!in_contiguous && IsChannelsLast(in)) || (!w_contiguous && IsChannelsLast(w))) {
    *why_not = "channels-last convolutions are not modelled";
    return std::nullopt;
  }
  const std::int64_t n = in.shape[0], c_in = in.shape[1];
  const std::int64_t c_out = w.shape[0], kh = w.shape[2], kw = w.shape[3];
  const std::int64_t out_hw = c.output_shape[2] * c.output_shape[3];
  const int item = in.dtype->bits / 8;
  const bool one_by_one = kh == 1 && kw == 1;
  const bool strided = !AllEqual(c.stride, 1), dilated = !AllEqual(c.dilation, 1);
  const bool padded = !AllEqual(c.padding, 0);

  // `contiguous()` copies of the operands, alive until the op returns.
  std::int64_t copies = 0;
  if (!in_contiguous) copies += Bytes(in.shape, in.dtype);
  if (!w_contiguous) copies += Bytes(w.shape, w.dtype);

  const bool onednn = (strided || dilated || n >= 16 || !one_by_one || c.threads > 1) &&
                      ((kh > 3 && kw > 3) || n > 1 || Product(in.shape) > 20480);
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

}  // namespace peakmem
