// What a CPU convolution allocates inside the op: ATen's backend choice
// (oneDNN or the native slow_conv2d) and each backend's buffers, as pure
// functions of the operands' shapes, layouts and the thread count.
//
// Measured with the profiler on torch 2.13's CPU build, oneDNN limited to
// its AVX2 kernels (ONEDNN_MAX_CPU_ISA=AVX2, as the test suite runs it;
// AVX-512 kernels block channels by 16 instead of 8), float32, one call at a
// time (the op audit's convolution grid, docs/op-audit.md, checks each rule):
//
//   - Backend (aten/src/ATen/native/Convolution.cpp, ConvParams::use_mkldnn):
//     oneDNN when (strided or dilated or batch >= 16 or the kernel is not
//     1x1 or more than one thread) and (groups > 1 or both kernel sizes > 3
//     or batch > 1 or the input has more than 20480 elements); else the
//     native slow_conv2d.
//   - Both first copy a non-contiguous input or weight (`contiguous()`),
//     alive until the op returns.
//   - oneDNN's direct AVX2 convolution reorders the input into channel
//     blocks of 8 (nChw8c, channels padded to a multiple of 8) unless it has
//     fewer than 8 channels (the "flat" first-layer kernel reads NCHW), the
//     weight into blocks (output channels padded to 8, input channels too
//     unless flat), and computes into a blocked output (output channels
//     padded to 8). The reordered input and weight are freed when the
//     computation ends, then the dense result is allocated and the blocked
//     output copied into it and freed:
//       events: [input_b] weight_b output_b -weight_b [-input_b] result -output_b
//   - A 1x1 kernel without padding runs oneDNN's 1x1 kernel: the input is
//     always blocked (3 channels become 8); with a stride it first books a
//     scratchpad that gathers the strided input, one slice per thread:
//     threads * pad8(C_in) * OH * OW * 4 bytes plus 128 (oneDNN's scratchpad
//     alignment), freed with the reordered operands.
//   - slow_conv2d unfolds the input into a columns buffer of
//     N * C_in * kh * kw * OH * OW elements (none for a 1x1 kernel with
//     stride 1 and no padding), allocated before the result and freed after.
//
// Everything else (another dtype, transposed or grouped convolutions, 1-d
// and 3-d ones, channels-last operands, a 1x1 kernel with padding and
// padding past min(3, (k - 1) * dilation), which oneDNN runs as a GEMM with
// per-thread buffers sized by the cache) is not modelled: the rule says so
// and why, and the caller diagnoses it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "peakmem/ir/trace.h"
#include "peakmem/ir/value_type.h"
#include "peakmem/semantics/scratch.h"

namespace peakmem {

struct ConvolutionOperand {
  Dims shape;
  Dims strides;
  const DType* dtype = nullptr;
};

struct ConvolutionCall {
  ConvolutionOperand input;   // [N, C_in, H, W]
  ConvolutionOperand weight;  // [C_out, C_in / groups, kh, kw]
  Dims output_shape;          // [N, C_out, OH, OW]
  Dims stride, padding, dilation;  // one entry per spatial dimension (expanded)
  bool transposed = false;
  std::int64_t groups = 1;
  int threads = 1;  // PyTorch's intra-op threads (torch.get_num_threads())
};

// The call's arguments read from a statement of `op` (its CallForm:
// kConvolution, ATen's order: input, weight, bias, stride, padding,
// dilation, transposed, output_padding, groups; kConv2d: input, weight,
// bias, stride, padding, dilation, groups) into `call`, whose operands the caller fills
// (it knows their strides). False with `why_not` when an argument is not a
// constant the rule can read (conv2d's padding='same').
bool ReadConvolutionArguments(const Statement& s, const OpInfo& op, ConvolutionCall* call,
                              std::string* why_not);

// The scratch of one CPU convolution (ScratchEstimate: what lives before the
// result exists, and what lives beside it), or nullopt with `why_not` naming
// the case the rules do not cover.
std::optional<ScratchEstimate> CpuConvolutionScratch(const ConvolutionCall& call,
                                                     std::string* why_not);

}  // namespace peakmem
