// CUDA's fused attention workspaces (fused_attention_scratch.h), each
// figure derived by hand from the kernels' allocations in its comment.
#include "peakmem/semantics/fused_attention_scratch.h"

#include <gtest/gtest.h>

namespace peakmem {
namespace {

AttentionCall Call(std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d, bool half) {
  AttentionCall c;
  c.batch = b, c.heads = h, c.kv_heads = h, c.q_len = s, c.kv_len = s, c.qk_dim = d, c.v_dim = d;
  c.half = half;
  c.itemsize = half ? 2 : 4;
  return c;
}

TEST(FusedAttentionScratch, FlashBackwardKeepsSoftmaxDAndAFloat32DqAccumulator) {
  // bf16 [2, 4, 256, 64]: softmax_d f32 [2, 4, round128(256) = 256] = 8,192;
  // dq_accum f32 [2, 256, 4, round32(64) = 64] = 524,288.
  AttentionCall c = Call(2, 4, 256, 64, true);
  EXPECT_EQ(FlashAttentionBackwardScratch(c).with_outputs, 8'192 + 524'288);
  // grad_out not laid out [b, s, h, d]: copied first, 2*256*4*64*2 bytes.
  c.grad_out_bshd = false;
  EXPECT_EQ(FlashAttentionBackwardScratch(c).with_outputs, 8'192 + 524'288 + 262'144);
  // Two key/value heads for four query heads: dk and dv expanded to the
  // query heads, [2, 256, 4, 64] bf16 each.
  c.grad_out_bshd = true;
  c.kv_heads = 2;
  EXPECT_EQ(FlashAttentionBackwardScratch(c).with_outputs, 8'192 + 524'288 + 2 * 262'144);
}

TEST(FusedAttentionScratch, FlashForwardSplitsKeysWhenTooFewBlocksFillTheGpu) {
  // bf16 [1, 8, 512, 128] on 132 SMs: 1*8*ceil(512/64) = 64 blocks, under
  // 0.8 * 264; 4 key blocks of 128. Splits 1, 2, 4 are eligible (3 gives
  // the same 2 blocks as 2), with efficiencies 64/264, 128/264, 256/264:
  // 4 splits (the first within 85 % of the best). lse_accum f32 [4, 1, 8,
  // 512] = 65,536; out_accum f32 [4, 1, 8, 512, 128] = 8,388,608.
  AttentionCall c = Call(1, 8, 512, 128, true);
  EXPECT_EQ(FlashAttentionForwardScratch(c).with_outputs, 65'536 + 8'388'608);
  // Enough blocks to fill the GPU (batch 4: 256 >= 211.2): no split.
  EXPECT_EQ(FlashAttentionForwardScratch(Call(4, 8, 512, 128, true)).with_outputs, 0);
  // Dropout: split-KV is not implemented with it.
  c.dropout = 0.1;
  EXPECT_EQ(FlashAttentionForwardScratch(c).with_outputs, 0);
}

TEST(FusedAttentionScratch, EfficientBackwardInFloat32ComputesDeltaByOps) {
  // f32 [2, 4, 256, 64]: the 64x64 k64 kernel; no key/value accumulation in
  // float32. gq = ceil(256/64) * ceil(64/64) * (16 + 4*64*64) / 4 = 16,400
  // floats a (batch, head): workspace 8 * 16,400 * 4 = 524,800. delta: the
  // product grad_out * out (524,288) with its sum (8,192), then the sum
  // with its contiguous copy (16,384), then the copy beside the workspace
  // (8,192 + 524,800 = 532,992), the most.
  EXPECT_EQ(EfficientAttentionBackwardScratch(Call(2, 4, 256, 64, false)).with_outputs, 532'992);
}

TEST(FusedAttentionScratch, EfficientForwardAccumulatesWideHalfHeadsInFloat32) {
  // bf16 head dim 256 (> 128): an f32 [2, 256, 4, 256] accumulator, 2,097,152.
  EXPECT_EQ(EfficientAttentionForwardScratch(Call(2, 4, 256, 256, true)).with_outputs, 2'097'152);
  EXPECT_EQ(EfficientAttentionForwardScratch(Call(2, 4, 256, 64, true)).with_outputs, 0);
  EXPECT_EQ(EfficientAttentionForwardScratch(Call(2, 4, 256, 256, false)).with_outputs, 0);
}

TEST(FusedAttentionScratch, TheKernelsLayoutIsATransposedContiguousBshd) {
  // [2, 4, 8, 16] viewed from a contiguous [2, 8, 4, 16]: strides (512, 16, 64, 1).
  EXPECT_TRUE(IsTransposedBshd({2, 4, 8, 16}, {512, 16, 64, 1}));
  EXPECT_FALSE(IsTransposedBshd({2, 4, 8, 16}, {512, 128, 16, 1}));  // contiguous [b, h, s, d]
}

}  // namespace
}  // namespace peakmem
