// The CPU convolution rules against calls measured with the profiler
// (torch 2.13, ONEDNN_MAX_CPU_ISA=AVX2, float32; each event list below is
// the call's allocation sequence, frees negative). Each expectation is
// derived by hand from the rule and agrees with that sequence: `before`
// is the highest the buffers reach before the result exists, `with` what
// lives beside the result.
#include "peakmem/semantics/convolution_scratch.h"

#include <gtest/gtest.h>

namespace peakmem {
namespace {

Dims Contiguous(const Dims& shape) {
  Dims s(shape.size(), 1);
  for (std::size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

ConvolutionCall Call(Dims input, Dims weight, Dims output, Dims stride = {1, 1}, Dims padding = {0, 0},
                     int threads = 2) {
  const DType* f32 = FindDType("f32");
  ConvolutionCall c;
  c.input = {input, Contiguous(input), f32};
  c.weight = {weight, Contiguous(weight), f32};
  c.output_shape = std::move(output);
  c.stride = std::move(stride);
  c.padding = std::move(padding);
  c.dilation = {1, 1};
  c.threads = threads;
  return c;
}

ScratchEstimate Scratch(const ConvolutionCall& c) {
  std::string why;
  auto s = CpuConvolutionScratch(c, &why);
  EXPECT_TRUE(s.has_value()) << why;
  return s.value_or(ScratchEstimate{});
}

TEST(ConvolutionScratch, BlockedInputWeightAndOutputAroundTheResult) {
  // x[4,64,32,32] w[64,64,3,3] padding 1: events [1048576, 147456, 1048576,
  // -147456, -1048576, result 1048576, -1048576]: input, weight and output
  // reordered (64 channels: no padding), then the result beside the output.
  auto s = Scratch(Call({4, 64, 32, 32}, {64, 64, 3, 3}, {4, 64, 32, 32}, {1, 1}, {1, 1}));
  EXPECT_EQ(s.before_outputs, 1048576 + 147456 + 1048576);
  EXPECT_EQ(s.with_outputs, 1048576);
}

TEST(ConvolutionScratch, ChannelsArePaddedToBlocksOfEight) {
  // x[2,12,10,10] w[20,12,3,3]: events [12800, 13824, 19200, -13824, -12800,
  // 16000, -19200]: input 2*16*100*4, weight 24*16*9*4, output 2*24*100*4.
  auto s = Scratch(Call({2, 12, 10, 10}, {20, 12, 3, 3}, {2, 20, 10, 10}, {1, 1}, {1, 1}));
  EXPECT_EQ(s.before_outputs, 12800 + 13824 + 19200);
  EXPECT_EQ(s.with_outputs, 19200);
}

TEST(ConvolutionScratch, FewerThanEightInputChannelsReadTheInputAsItIs) {
  // x[2,7,10,10] w[20,7,3,3]: events [6048, 19200, -6048, 16000, -19200]:
  // weight 24*7*9*4 (input channels not padded), no input reorder.
  auto s = Scratch(Call({2, 7, 10, 10}, {20, 7, 3, 3}, {2, 20, 10, 10}, {1, 1}, {1, 1}));
  EXPECT_EQ(s.before_outputs, 6048 + 19200);
  EXPECT_EQ(s.with_outputs, 19200);
}

TEST(ConvolutionScratch, StridedOneByOneBooksAScratchpadPerThread) {
  // x[4,64,32,32] w[128,64,1,1] stride 2, 2 threads: events [131200,
  // 1048576, 32768, 524288, -32768, -1048576, -131200, 524288, -524288];
  // scratchpad 2 * 64 * 16*16 * 4 + 128. With 1 thread 65536 + 128.
  auto two = Scratch(Call({4, 64, 32, 32}, {128, 64, 1, 1}, {4, 128, 16, 16}, {2, 2}, {0, 0}, 2));
  EXPECT_EQ(two.before_outputs, 131200 + 1048576 + 32768 + 524288);
  EXPECT_EQ(two.with_outputs, 524288);
  auto one = Scratch(Call({4, 64, 32, 32}, {128, 64, 1, 1}, {4, 128, 16, 16}, {2, 2}, {0, 0}, 1));
  EXPECT_EQ(one.before_outputs, 65664 + 1048576 + 32768 + 524288);
}

TEST(ConvolutionScratch, OneByOneBlocksEvenThreeInputChannels) {
  // x[2,3,16,16] w[64,3,1,1] stride 2, 1 thread: events [2176, 16384, 2048,
  // 32768, ...]: 3 channels padded to 8 in the scratchpad (8*64*4 + 128),
  // the input (2*8*256*4) and the weight (64*8*4).
  auto s = Scratch(Call({2, 3, 16, 16}, {64, 3, 1, 1}, {2, 64, 8, 8}, {2, 2}, {0, 0}, 1));
  EXPECT_EQ(s.before_outputs, 2176 + 16384 + 2048 + 32768);
}

TEST(ConvolutionScratch, SmallSingleImagesRunTheNativeKernelWithColumns) {
  // x[1,64,8,8] w[64,64,3,3] padding 1 (batch 1, 4096 elements: not oneDNN):
  // events [147456, 16384, -147456]: the columns 64*9 * 8*8 * 4 beside the result.
  auto s = Scratch(Call({1, 64, 8, 8}, {64, 64, 3, 3}, {1, 64, 8, 8}, {1, 1}, {1, 1}));
  EXPECT_EQ(s.with_outputs, 147456);
  // A 1x1 kernel on one thread, stride 1: the native kernel needs no columns
  // (x[4,64,32,32] w[128,64,1,1] measured [2097152]: the result alone).
  auto none = Scratch(Call({4, 64, 32, 32}, {128, 64, 1, 1}, {4, 128, 32, 32}, {1, 1}, {0, 0}, 1));
  EXPECT_EQ(none.before_outputs, 0);
  EXPECT_EQ(none.with_outputs, 0);
}

TEST(ConvolutionScratch, NonContiguousOperandsAreCopiedForTheWholeCall) {
  // Thunder's weight gradient: x[64,4,31,31] permuted from [4,64,31,31],
  // w[128,4,16,16] permuted, dilation 2 -> [64,128,1,1]: events [984064,
  // 524288, 524288, 32768, -524288, 32768, -32768, -524288, -984064]: both
  // copies first and last, the weight reordered (4 input channels: flat).
  ConvolutionCall c = Call({64, 4, 31, 31}, {128, 4, 16, 16}, {64, 128, 1, 1});
  c.input.strides = {961, 61504, 31, 1};
  c.weight.strides = {256, 32768, 16, 1};
  c.dilation = {2, 2};
  auto s = Scratch(c);
  EXPECT_EQ(s.before_outputs, 984064 + 524288 + 524288 + 32768);
  EXPECT_EQ(s.with_outputs, 984064 + 524288 + 32768);
}

TEST(ConvolutionScratch, CasesTheRulesDoNotCoverSayWhy) {
  std::string why;
  ConvolutionCall bf16 = Call({2, 8, 4, 4}, {8, 8, 3, 3}, {2, 8, 2, 2});
  bf16.input.dtype = bf16.weight.dtype = FindDType("bf16");
  EXPECT_FALSE(CpuConvolutionScratch(bf16, &why));
  EXPECT_NE(why.find("float32"), std::string::npos);
  ConvolutionCall grouped = Call({2, 8, 4, 4}, {8, 4, 3, 3}, {2, 8, 2, 2});
  grouped.groups = 2;
  EXPECT_FALSE(CpuConvolutionScratch(grouped, &why));
  EXPECT_NE(why.find("grouped"), std::string::npos);
  ConvolutionCall padded = Call({2, 64, 16, 16}, {64, 64, 1, 1}, {2, 64, 9, 9}, {2, 2}, {1, 1});
  EXPECT_FALSE(CpuConvolutionScratch(padded, &why));
  EXPECT_NE(why.find("GEMM"), std::string::npos);
  // Thunder's input gradient of a dilated convolution pads by (k - 1) * d:
  // x[4,8,8,6] w[8,8,3,3] padding 4 dilation 2 measured [34688 (1 thread),
  // 15360, -34688, 15360, -15360]: im2col, not the direct kernel.
  ConvolutionCall full = Call({4, 8, 8, 6}, {8, 8, 3, 3}, {4, 8, 12, 10}, {1, 1}, {4, 4});
  full.dilation = {2, 2};
  EXPECT_FALSE(CpuConvolutionScratch(full, &why));
  EXPECT_NE(why.find("GEMM"), std::string::npos);
  ConvolutionCall nhwc = Call({2, 8, 4, 4}, {8, 8, 3, 3}, {2, 8, 2, 2});
  nhwc.input.strides = {128, 1, 32, 8};
  EXPECT_FALSE(CpuConvolutionScratch(nhwc, &why));
  EXPECT_NE(why.find("channels-last"), std::string::npos);
}


// The backward, aten::convolution_backward, against calls measured with the
// profiler the same way (torch 2.13 CPU, ONEDNN_MAX_CPU_ISA=AVX2, float32,
// contiguous operands and grad_output): each list is the op's allocation
// sequence in bytes, frees negative, the outputs named.
namespace backward {

std::vector<std::int64_t> Sizes(const ConvolutionCall& c, bool input_grad, bool weight_grad, bool bias_grad) {
  std::string why;
  auto events = CpuConvolutionBackwardEvents(c, input_grad, weight_grad, bias_grad, &why);
  EXPECT_TRUE(events.has_value()) << why;
  std::vector<std::int64_t> sizes;
  for (const ScratchEvent& e : events.value_or(std::vector<ScratchEvent>{})) sizes.push_back(e.bytes);
  return sizes;
}

std::vector<bool> Outputs(const ConvolutionCall& c, bool input_grad, bool weight_grad, bool bias_grad) {
  std::string why;
  std::vector<bool> outputs;
  auto events = CpuConvolutionBackwardEvents(c, input_grad, weight_grad, bias_grad, &why);
  for (const ScratchEvent& e : events.value_or(std::vector<ScratchEvent>{})) outputs.push_back(e.output);
  return outputs;
}

ScratchEstimate Folded(const ConvolutionCall& c, bool input_grad, bool weight_grad, bool bias_grad) {
  std::string why;
  auto s = CpuConvolutionBackwardScratch(c, input_grad, weight_grad, bias_grad, &why);
  EXPECT_TRUE(s.has_value()) << why;
  return s.value_or(ScratchEstimate{});
}

using Sequence = std::vector<std::int64_t>;

TEST(ConvolutionBackwardScratch, PatchEmbeddingWeightAndBiasGradients) {
  // ViT patch embedding: x[2,3,32,32] not requiring grad, w[64,3,8,8], bias,
  // stride 8 -> [2,64,4,4], 2 threads: [8192, 49152, 256, -8192,
  // grad_bias 256, grad_weight 49152, -49152, -256]. grad_output reordered
  // (64 channels: no padding), the weight gradient computed blocked (3 input
  // channels read as they are, not padded), the bias gradient beside it; 8
  // output-channel blocks for 2 threads: no reduction buffers.
  ConvolutionCall c = Call({2, 3, 32, 32}, {64, 3, 8, 8}, {2, 64, 4, 4}, {8, 8}, {0, 0}, 2);
  EXPECT_EQ(Sizes(c, false, true, true), (Sequence{8192, 49152, 256, -8192, 256, 49152, -49152, -256}));
  EXPECT_EQ(Outputs(c, false, true, true), (std::vector<bool>{false, false, false, false, true, true, false, false}));
  // Before the gradients: 8192 + 49152 + 256; beside them at most the two
  // blocked buffers (49152 + 256).
  ScratchEstimate s = Folded(c, false, true, true);
  EXPECT_EQ(s.before_outputs, 57600);
  EXPECT_EQ(s.with_outputs, 49408);
}

TEST(ConvolutionBackwardScratch, InputGradientThenWeightGradient) {
  // x[2,8,16,16] w[8,8,3,3] padding 1, bias, 1 thread, every gradient:
  // [16384, 2304, 16384, -2304, -16384, grad_input 16384, -16384,
  //  16384, 16384, 2304, 32, -16384, -16384, grad_bias 32,
  //  grad_weight 2304, -2304, -32]: backward data (grad_output, weight and
  // input gradient blocked), then backward weights (grad_output and input
  // reordered again).
  ConvolutionCall c = Call({2, 8, 16, 16}, {8, 8, 3, 3}, {2, 8, 16, 16}, {1, 1}, {1, 1}, 1);
  EXPECT_EQ(Sizes(c, true, true, true), (Sequence{16384, 2304, 16384, -2304, -16384, 16384, -16384, 16384, 16384,
                                                  2304, 32, -16384, -16384, 32, 2304, -2304, -32}));
  // Peak with the input gradient alone (16384 + 16384 blocked), then with it
  // and the second phase's 16384 + 16384 + 2304 + 32: 51488 over 18720 of
  // gradients.
  ScratchEstimate s = Folded(c, true, true, true);
  EXPECT_EQ(s.before_outputs, 16384 + 2304 + 16384);
  EXPECT_EQ(s.with_outputs, 16384 + 16384 + 2304 + 32 + 16384 - (16384 + 32 + 2304));
}

TEST(ConvolutionBackwardScratch, TwoThreadsWithEnoughOutputChannelBlocks) {
  // x[2,16,16,16] w[64,16,3,3] padding 1, 2 threads, input and weight
  // gradients: [131072, 36864, 32768, -36864, -131072, grad_input 32768,
  // -32768, 131072, 32768, 36864, -32768, -131072, grad_weight 36864, -36864].
  ConvolutionCall c = Call({2, 16, 16, 16}, {64, 16, 3, 3}, {2, 64, 16, 16}, {1, 1}, {1, 1}, 2);
  EXPECT_EQ(Sizes(c, true, true, false), (Sequence{131072, 36864, 32768, -36864, -131072, 32768, -32768, 131072,
                                                   32768, 36864, -32768, -131072, 36864, -36864}));
}

TEST(ConvolutionBackwardScratch, StridedOneByOneGathersTheInputAndPadsTheBias) {
  // x[16,3,16,16] w[64,3,1,1] stride 2, bias, 1 thread, weight and bias:
  // [262144, 131072, 2048, 2176, 256, -2176, -131072, -262144, grad_bias 256,
  // grad_weight 768, -2048, -256]: a 1x1 kernel blocks even 3 input
  // channels; scratchpad 8 * 8*8 * 4 + 128 (the gathered input).
  ConvolutionCall c = Call({16, 3, 16, 16}, {64, 3, 1, 1}, {16, 64, 8, 8}, {2, 2}, {0, 0}, 1);
  EXPECT_EQ(Sizes(c, false, true, true),
            (Sequence{262144, 131072, 2048, 2176, 256, -2176, -131072, -262144, 256, 768, -2048, -256}));
  // x[2,5,16,16] w[12,5,1,1] stride 2, bias: [8192, 16384, 512, 2368, 48,
  // -2368, -16384, -8192, grad_bias 48, grad_weight 240, -512, -48]: 12
  // output channels pad the bias in the scratchpad, 16 * 4 + 128 beside the
  // gathered input 8 * 8*8 * 4 + 128; the bias gradient itself unpadded.
  ConvolutionCall odd = Call({2, 5, 16, 16}, {12, 5, 1, 1}, {2, 12, 8, 8}, {2, 2}, {0, 0}, 1);
  EXPECT_EQ(Sizes(odd, false, true, true),
            (Sequence{8192, 16384, 512, 2368, 48, -2368, -16384, -8192, 48, 240, -512, -48}));
}

TEST(ConvolutionBackwardScratch, OnlyThreeInputChannelsAreReadUnblocked) {
  // x[2,5,16,16] w[16,5,3,3] padding 1, 1 thread, weight gradient: [32768,
  // 16384, 4608, -16384, -32768, grad_weight 2880, -4608]: 5 channels are
  // reordered and padded to 8 (so are 1, 2, 4, 6 and 7; 3 are not).
  ConvolutionCall c = Call({2, 5, 16, 16}, {16, 5, 3, 3}, {2, 16, 16, 16}, {1, 1}, {1, 1}, 1);
  EXPECT_EQ(Sizes(c, false, true, false), (Sequence{32768, 16384, 4608, -16384, -32768, 2880, -4608}));
}

TEST(ConvolutionBackwardScratch, TheWeightGradientComesBackWithTheBiasGradient) {
  // x[2,3,16,16] w[8,3,3,3], bias, 1 thread, input and bias gradients (the
  // weight's not asked for): [12544, 2304, 16384, -2304, -12544,
  // grad_input 6144, -16384, 12544, 864, 32, -12544, grad_bias 32,
  // 864 (the weight gradient, returned all the same), -864, -32].
  ConvolutionCall c = Call({2, 3, 16, 16}, {8, 3, 3, 3}, {2, 8, 14, 14}, {1, 1}, {0, 0}, 1);
  EXPECT_EQ(Sizes(c, true, false, true), (Sequence{12544, 2304, 16384, -2304, -12544, 6144, -16384, 12544, 864, 32,
                                                   -12544, 32, 864, -864, -32}));
  EXPECT_EQ(Outputs(c, true, false, true),
            (std::vector<bool>{false, false, false, false, false, true, false, false, false, false, false, true, false,
                               false, false}));
  // The most beside the gradients: the blocked input gradient beside the
  // dense one, 16384 + 6144, over 6144 + 32 of gradients.
  EXPECT_EQ(Folded(c, true, false, true).with_outputs, 16384 + 6144 - (6144 + 32));
}

TEST(ConvolutionBackwardScratch, NativeKernelUnfoldsTheInputForTheWeightGradientOnly) {
  // x[1,16,16,16] w[64,16,3,3] padding 1, bias, 1 thread (batch 1, 4096
  // elements: slow_conv2d): [grad_input 16384, grad_bias 256,
  // grad_weight 36864, 147456, -147456]: columns 16*9 * 16*16 * 4.
  ConvolutionCall c = Call({1, 16, 16, 16}, {64, 16, 3, 3}, {1, 64, 16, 16}, {1, 1}, {1, 1}, 1);
  EXPECT_EQ(Sizes(c, true, true, true), (Sequence{16384, 256, 36864, 147456, -147456}));
  ScratchEstimate s = Folded(c, true, true, true);
  EXPECT_EQ(s.before_outputs, 0);
  EXPECT_EQ(s.with_outputs, 147456);
  // Input gradient alone, x[1,3,16,16] w[8,3,3,3]: [grad_input 3072].
  EXPECT_EQ(Sizes(Call({1, 3, 16, 16}, {8, 3, 3, 3}, {1, 8, 14, 14}, {1, 1}, {0, 0}, 1), true, false, false),
            (Sequence{3072}));
  // A 1x1 kernel, stride 1, no padding: no columns. x[1,3,16,16]
  // w[8,3,1,1]: [grad_weight 96].
  EXPECT_EQ(Sizes(Call({1, 3, 16, 16}, {8, 3, 1, 1}, {1, 8, 16, 16}, {1, 1}, {0, 0}, 1), false, true, false),
            (Sequence{96}));
}

TEST(ConvolutionBackwardScratch, AStridedGradOutputIsCopiedFirstAndHeldToTheEnd) {
  // ViT's patch embedding as the model runs it: the conv's output is
  // flattened and transposed, so its gradient arrives channels-last,
  // strides (1024, 1, 256, 64). Measured: [8192, 8192, 49152, 256, -8192,
  // grad_bias 256, grad_weight 49152, -49152, -256, -8192]: the contiguous
  // copy of grad_output first, freed after the gradients exist; between,
  // the contiguous case's sequence (PatchEmbeddingWeightAndBiasGradients).
  ConvolutionCall c = Call({2, 3, 32, 32}, {64, 3, 8, 8}, {2, 64, 4, 4}, {8, 8}, {0, 0}, 2);
  c.grad_output = {{2, 64, 4, 4}, {1024, 1, 256, 64}, FindDType("f32")};
  EXPECT_EQ(Sizes(c, false, true, true),
            (Sequence{8192, 8192, 49152, 256, -8192, 256, 49152, -49152, -256, -8192}));
  ScratchEstimate s = Folded(c, false, true, true);
  EXPECT_EQ(s.before_outputs, 8192 + 57600);
  EXPECT_EQ(s.with_outputs, 8192 + 49408);
  // x[2,8,16,16] w[8,8,3,3] padding 1, 1 thread, an expanded scalar's
  // gradient (strides 0) measured [16384 (copy), InputGradientThenWeightGradient's
  // 17 events, -16384]; a contiguous grad_output copies nothing.
  ConvolutionCall e = Call({2, 8, 16, 16}, {8, 8, 3, 3}, {2, 8, 16, 16}, {1, 1}, {1, 1}, 1);
  e.grad_output = {{2, 8, 16, 16}, {0, 0, 0, 0}, FindDType("f32")};
  EXPECT_EQ(Sizes(e, true, true, true),
            (Sequence{16384, 16384, 2304, 16384, -2304, -16384, 16384, -16384, 16384, 16384, 2304, 32, -16384,
                      -16384, 32, 2304, -2304, -32, -16384}));
  e.grad_output.strides = {2048, 256, 16, 1};
  EXPECT_EQ(Sizes(e, true, true, true).front(), 16384);
  EXPECT_EQ(Sizes(e, true, true, true).size(), 17u);
}

TEST(ConvolutionBackwardScratch, TheNativeKernelWithAStridedGradOutputIsNotModelled) {
  // x[1,4,8,8] w[6,4,1,1], 1 thread (the native kernel), grad_output
  // channels-last: measured [1536, 1024, -1536, 24, 96, 1536, -1536, ...]:
  // grad_output copied for each gradient apart. Declined, with the reason.
  ConvolutionCall c = Call({1, 4, 8, 8}, {6, 4, 1, 1}, {1, 6, 8, 8}, {1, 1}, {0, 0}, 1);
  c.grad_output = {{1, 6, 8, 8}, {384, 1, 48, 6}, FindDType("f32")};
  std::string why;
  EXPECT_FALSE(CpuConvolutionBackwardEvents(c, true, true, true, &why));
  EXPECT_NE(why.find("grad_output"), std::string::npos);
}

TEST(ConvolutionBackwardScratch, CasesTheRulesDoNotCoverSayWhy) {
  std::string why;
  // x[2,8,16,16] w[64,8,3,3] stride 2 padding 1, 1 thread, input gradient:
  // measured [32768, 18432, 16384, 53272 (scratchpad), ...], another kernel.
  ConvolutionCall strided = Call({2, 8, 16, 16}, {64, 8, 3, 3}, {2, 64, 8, 8}, {2, 2}, {1, 1}, 1);
  EXPECT_FALSE(CpuConvolutionBackwardEvents(strided, true, true, false, &why));
  EXPECT_NE(why.find("strided"), std::string::npos);
  EXPECT_TRUE(CpuConvolutionBackwardEvents(strided, false, true, false, &why));
  // x[2,3,16,16] w[8,3,3,3] padding 1, 2 threads, weight gradient: measured
  // [16384, 864, 13152 (reduction scratchpad), -13152, ...].
  ConvolutionCall one_block = Call({2, 3, 16, 16}, {8, 3, 3, 3}, {2, 8, 16, 16}, {1, 1}, {1, 1}, 2);
  EXPECT_FALSE(CpuConvolutionBackwardEvents(one_block, false, true, false, &why));
  EXPECT_NE(why.find("reduction"), std::string::npos);
  // x[2,16,16,16] w[64,16,1,1], 2 threads: measured [131072, 32768, 4096,
  // 16512 (reduction scratchpad), ...].
  ConvolutionCall one_by_one = Call({2, 16, 16, 16}, {64, 16, 1, 1}, {2, 64, 16, 16}, {1, 1}, {0, 0}, 2);
  EXPECT_FALSE(CpuConvolutionBackwardEvents(one_by_one, false, true, false, &why));
  EXPECT_NE(why.find("1x1"), std::string::npos);
  // x[2,16,16,16] w[64,16,3,3] padding 3: oneDNN's GEMM convolution.
  ConvolutionCall padded = Call({2, 16, 16, 16}, {64, 16, 3, 3}, {2, 64, 20, 20}, {1, 1}, {3, 3}, 1);
  EXPECT_FALSE(CpuConvolutionBackwardEvents(padded, false, true, false, &why));
  EXPECT_NE(why.find("GEMM"), std::string::npos);
  // x[2,3,64,64] w[64,3,16,16] stride 16: the weight gradient's GEMM
  // kernel (measured [196608, 835840, -835840, ...]: no grad_output reorder).
  ConvolutionCall large = Call({2, 3, 64, 64}, {64, 3, 16, 16}, {2, 64, 4, 4}, {16, 16}, {0, 0}, 1);
  EXPECT_FALSE(CpuConvolutionBackwardEvents(large, false, true, false, &why));
  EXPECT_NE(why.find("13"), std::string::npos);
  // x[2,16,12,12] w[64,16,9,9]: the input gradient's GEMM kernel.
  ConvolutionCall nine = Call({2, 16, 12, 12}, {64, 16, 9, 9}, {2, 64, 4, 4}, {1, 1}, {0, 0}, 1);
  EXPECT_FALSE(CpuConvolutionBackwardEvents(nine, true, false, false, &why));
  EXPECT_NE(why.find("8"), std::string::npos);
  EXPECT_TRUE(CpuConvolutionBackwardEvents(nine, false, true, false, &why));
  ConvolutionCall dilated = Call({2, 8, 16, 16}, {8, 8, 3, 3}, {2, 8, 12, 12});
  dilated.dilation = {2, 2};
  EXPECT_FALSE(CpuConvolutionBackwardEvents(dilated, true, true, false, &why));
  EXPECT_NE(why.find("dilated"), std::string::npos);
  ConvolutionCall permuted = Call({2, 8, 4, 4}, {8, 8, 3, 3}, {2, 8, 2, 2});
  permuted.input.strides = {16, 32, 4, 1};
  EXPECT_FALSE(CpuConvolutionBackwardEvents(permuted, true, true, false, &why));
  EXPECT_NE(why.find("non-contiguous"), std::string::npos);
}

}  // namespace backward

}  // namespace
}  // namespace peakmem
