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

}  // namespace
}  // namespace peakmem
