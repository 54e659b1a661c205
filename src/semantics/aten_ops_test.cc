#include "peakmem/semantics/aten_ops.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace peakmem {
namespace {

AtenArgument Tensor(std::string name, std::string_view dtype, std::vector<std::int64_t> shape) {
  AtenArgument a;
  a.name = std::move(name);
  a.kind = AtenArgument::Kind::kTensor;
  a.type = *MakeTensorType("cpu", dtype, Dims(shape.begin(), shape.end()), false, nullptr);
  a.strides = a.type.contiguous_strides;
  return a;
}

AtenArgument Number(std::string name, NumberKind kind, std::int64_t integer = 0) {
  AtenArgument a;
  a.name = std::move(name);
  a.kind = AtenArgument::Kind::kNumber;
  a.number = kind;
  a.integer = integer;
  return a;
}

AtenArgument Ints(std::string name, std::vector<std::int64_t> ints) {
  AtenArgument a;
  a.name = std::move(name);
  a.kind = AtenArgument::Kind::kInts;
  a.ints = std::move(ints);
  return a;
}

ScratchEstimate Scratch(std::string_view op, const std::vector<AtenArgument>& arguments, int threads = 1) {
  std::string why_not;
  const ScratchEstimate s = EstimateAtenScratch(op, arguments, threads, &why_not);
  EXPECT_EQ(why_not, "");
  return s;
}

TEST(AtenOps, OverloadsFindTheRegistrysOp) {
  EXPECT_EQ(FindAtenOp("aten.div_.Scalar"), FindOp("div_"));
  EXPECT_EQ(FindAtenOp("aten::lt.Scalar"), FindOp("lt"));
  EXPECT_EQ(FindAtenOp("aten.mm.default"), FindOp("mm"));
  EXPECT_EQ(FindAtenOp("aten.no_such_op.default"), nullptr);
}

TEST(AtenOps, ANumberInAFloat32DivisionIsWrappedAndCast) {
  // Measured on the CPU (torch 2.13, AdamW's `exp_avg_sq.sqrt() / c` on a
  // f32[128, 128]): inside aten::div, an 8-byte allocation (the wrapped
  // double) and a 4-byte one (aten::to: its cast to f32), both freed before
  // div returns, beside the 65,536-byte output.
  const ScratchEstimate s =
      Scratch("aten.div.Tensor", {Tensor("self", "f32", {128, 128}), Number("other", NumberKind::kFloat)});
  EXPECT_EQ(s.with_outputs, 12);
  EXPECT_EQ(s.before_outputs, 0);
}

TEST(AtenOps, ANumberWrappedBeforeTheCallIsWrappedToo) {
  // A backward formula's `grad * 0.5` reaches the mode as a 0-d double it
  // never saw made: the same 8 + 4 bytes as a number passed in `other`.
  AtenArgument wrapped = Tensor("other", "f64", {});
  wrapped.wrapped = true;
  wrapped.number = NumberKind::kFloat;
  EXPECT_EQ(Scratch("aten.mul.Tensor", {Tensor("self", "f32", {4}), wrapped}).with_outputs, 12);
}

TEST(AtenOps, OnlySelfAndOtherAreWrapped) {
  // add.Tensor's alpha is a Scalar the kernel takes as it is: no scratch.
  EXPECT_EQ(Scratch("aten.add.Tensor", {Tensor("self", "f32", {4}), Tensor("other", "f32", {4}),
                                        Number("alpha", NumberKind::kInt, 2)})
                .with_outputs,
            0);
}

TEST(AtenOps, AFloat64OperandNeedsNoCast) {
  // The wrapped double is already the computation's dtype: 8 bytes only.
  EXPECT_EQ(Scratch("aten.mul_.Scalar", {Tensor("self", "f64", {4}), Number("other", NumberKind::kFloat)}).with_outputs,
            8);
}

TEST(AtenOps, WithoutANumberThereIsNothingToWrap) {
  EXPECT_EQ(Scratch("aten.add.Tensor", {Tensor("self", "f32", {4}), Tensor("other", "f32", {4})}).with_outputs, 0);
  EXPECT_EQ(Scratch("aten.mm.default", {Tensor("self", "f32", {4, 4}), Tensor("mat2", "f32", {4, 4})}).with_outputs,
            0);
}

TEST(AtenOps, TrueDivisionOfIntegersComputesInFloat32) {
  // Measured on the CPU: torch.div(torch.arange(4), 2) allocates 8 (the
  // wrapped int64), 16 (the i64[4] copied to f32), 4 (the number cast to
  // f32), then its 16-byte output; with rounding_mode="floor" only the 8
  // beside its 32-byte int64 output.
  const std::vector<AtenArgument> args = {Tensor("self", "i64", {4}), Number("other", NumberKind::kInt, 2)};
  EXPECT_EQ(Scratch("aten.div.Tensor", args).with_outputs, 16 + 8 + 4);
  EXPECT_EQ(Scratch("aten.div.Tensor_mode", args).with_outputs, 8);
}

TEST(AtenOps, AProductClonesTheOperandsBlasCannotTake) {
  // Measured on the CPU: torch.mm(a, b) with a = f32[8, 6] and b a
  // [6, 8] slice b0[:, ::2] of a f32[6, 16] (strides (16, 2): neither row-
  // nor column-major) allocates 192 bytes (b's contiguous clone) beside
  // its 256-byte output; with b contiguous, or b0.t() of a [8, 6] (column-
  // major), only the output. addmm's `self` (the bias) is added, never cloned.
  AtenArgument strided = Tensor("mat2", "f32", {6, 8});
  strided.strides = {16, 2};
  EXPECT_EQ(Scratch("aten.mm.default", {Tensor("self", "f32", {8, 6}), strided}).with_outputs, 192);
  AtenArgument transposed = Tensor("mat2", "f32", {6, 8});
  transposed.strides = {1, 6};
  EXPECT_EQ(Scratch("aten.mm.default", {Tensor("self", "f32", {8, 6}), transposed}).with_outputs, 0);
  AtenArgument bias = Tensor("self", "f32", {8, 8});
  bias.strides = {0, 1};
  EXPECT_EQ(Scratch("aten.addmm.default", {bias, Tensor("mat1", "f32", {8, 6}), transposed}).with_outputs, 0);
}

TEST(AtenOps, WhereWithANumberMakesAScalarTensorOfTheResultsDtype) {
  // scratch.cc's kWhereScalar, measured on the CPU: where(cond, x, 0.0) on
  // f32 makes a 4-byte scalar_tensor; with two tensors nothing.
  const std::vector<AtenArgument> with_number = {Tensor("condition", "b8", {4}), Tensor("self", "f32", {4}),
                                                 Number("other", NumberKind::kFloat)};
  EXPECT_EQ(Scratch("aten.where.ScalarOther", with_number).with_outputs, 4);
  const std::vector<AtenArgument> tensors = {Tensor("condition", "b8", {4}), Tensor("self", "f32", {4}),
                                             Tensor("other", "f32", {4})};
  EXPECT_EQ(Scratch("aten.where.self", tensors).with_outputs, 0);
}

TEST(AtenOps, ADTypeRuleThatCannotApplyIsNoScratch) {
  // sum without a dtype argument computes in its input's dtype: no cast.
  EXPECT_EQ(Scratch("aten.sum.dim_IntList", {Tensor("self", "f32", {4, 4}), Ints("dim", {1})}).with_outputs, 0);
}

TEST(AtenOps, ARuleNotAppliedToAtenCallsIsSaid) {
  std::string why_not;
  const std::vector<AtenArgument> args = {Tensor("self", "f32", {4})};
  EstimateAtenScratch("aten.sort.default", args, 1, &why_not);
  EXPECT_NE(why_not.find("not applied to ATen calls"), std::string::npos) << why_not;
}

TEST(AtenOps, ACpuConvolutionsOneDnnBuffers) {
  // Measured on the CPU (torch 2.13, two threads, ONEDNN_MAX_CPU_ISA=AVX2):
  // ViT's patch embedding, conv2d(f32[2, 3, 32, 32], f32[64, 3, 8, 8],
  // stride 8), allocates inside aten::mkldnn_convolution the weight
  // reordered into blocks (64 * 3 * 8 * 8 * 4 = 49,152 bytes) and the
  // blocked output (2 * 64 * 4 * 4 * 4 = 8,192), frees the weight's, then
  // allocates the 8,192-byte result and frees the blocked output.
  const std::vector<AtenArgument> args = {Tensor("input", "f32", {2, 3, 32, 32}), Tensor("weight", "f32", {64, 3, 8, 8}),
                                          Tensor("bias", "f32", {64}),           Ints("stride", {8, 8}),
                                          Ints("padding", {0, 0}),               Ints("dilation", {1, 1}),
                                          Number("transposed", NumberKind::kBool, 0), Ints("output_padding", {0, 0}),
                                          Number("groups", NumberKind::kInt, 1)};
  const ScratchEstimate s = Scratch("aten.convolution.default", args, 2);
  EXPECT_EQ(s.before_outputs, 49152 + 8192);  // both blocked buffers, before the result exists
  EXPECT_EQ(s.with_outputs, 8192);            // the blocked output, beside the result
}

TEST(AtenOps, AFloatBmmClonesOneBatchsMatrixItCannotTakeAtATime) {
  // Measured (torch 2.13, the profiler): bmm of f32 [8, 32, 16] with
  // strides (1024, 32, 2) (a column slice: neither row- nor column-major)
  // and a contiguous [8, 16, 32]: inside, eight clones of 2,048 bytes (one
  // [32, 16] matrix each), each freed before the next; net the output.
  AtenArgument sliced = Tensor("self", "f32", {8, 32, 16});
  sliced.strides = {1024, 32, 2};
  EXPECT_EQ(Scratch("aten.bmm.default", {sliced, Tensor("mat2", "f32", {8, 16, 32})}).with_outputs, 2048);
  // Products under 400 multiply-adds take the naive kernel: no clone
  // (measured: [8, 4, 4] sliced from [8, 4, 8] by [8, 4, 4]: the output only).
  AtenArgument small = Tensor("self", "f32", {8, 4, 4});
  small.strides = {32, 8, 2};
  EXPECT_EQ(Scratch("aten.bmm.default", {small, Tensor("mat2", "f32", {8, 4, 4})}).with_outputs, 0);
}

TEST(AtenOps, LayerNormBackwardKeepsPerThreadPartialSumsOfGammaAndBeta) {
  // Measured (torch 2.13, 2 threads, the profiler): inside
  // native_layer_norm_backward, a resize_ of 2 * threads * N float32 for
  // dgamma's and dbeta's partial sums: [1, 8] 128 bytes, [4, 16] 256,
  // [64, 48] 768 (the rows do not matter).
  const auto call = [](std::vector<std::int64_t> shape, std::vector<std::int64_t> mask) {
    const std::int64_t n = shape.back();
    return std::vector<AtenArgument>{Tensor("grad_out", "f32", shape), Tensor("input", "f32", shape),
                                     Ints("normalized_shape", {n}), Tensor("mean", "f32", {shape[0], 1}),
                                     Tensor("rstd", "f32", {shape[0], 1}), Tensor("weight", "f32", {n}),
                                     Tensor("bias", "f32", {n}), Ints("output_mask", std::move(mask))};
  };
  EXPECT_EQ(Scratch("aten.native_layer_norm_backward.default", call({1, 8}, {1, 1, 1}), 2).with_outputs, 128);
  EXPECT_EQ(Scratch("aten.native_layer_norm_backward.default", call({4, 16}, {1, 1, 1}), 2).with_outputs, 256);
  EXPECT_EQ(Scratch("aten.native_layer_norm_backward.default", call({64, 48}, {1, 1, 1}), 2).with_outputs, 768);
  // Neither dgamma nor dbeta asked: no buffer.
  EXPECT_EQ(Scratch("aten.native_layer_norm_backward.default", call({4, 16}, {1, 0, 0}), 2).with_outputs, 0);
}

TEST(AtenOps, CpuFlashAttentionKeepsPerThreadBuffers) {
  // Measured (torch 2.13, 2 threads, the profiler): causal attention of f32
  // [2, 4, 256, 64] (queries split by 64, keys by 256). The forward's buf,
  // 2 x (64 * 256 + 2 * 64 + 64 * 64) floats: 164,864 bytes; the
  // backward's, 2 x 2 x 64 * 256 floats (262,144) and one dsum of 64 (256).
  const std::vector<AtenArgument> forward{Tensor("query", "f32", {2, 4, 256, 64}),
                                          Tensor("key", "f32", {2, 4, 256, 64}),
                                          Tensor("value", "f32", {2, 4, 256, 64})};
  EXPECT_EQ(Scratch("aten._scaled_dot_product_flash_attention_for_cpu.default", forward, 2).with_outputs, 164864);
  // The backward's grad_out as attention's output gradient arrives when the
  // output was transposed back to [B, T, H, D]: contiguous in that order.
  AtenArgument grad = Tensor("grad_out", "f32", {2, 4, 256, 64});
  grad.strides = {65536, 64, 256, 1};
  std::vector<AtenArgument> backward{grad, forward[0], forward[1], forward[2]};
  EXPECT_EQ(Scratch("aten._scaled_dot_product_flash_attention_for_cpu_backward.default", backward, 2).with_outputs,
            262144 + 256);
  // The gradient of .sum() (expanded, zero strides) is copied first:
  // 2 * 256 * 4 * 64 floats, 524,288 bytes (measured: the step's peak
  // 786,688 bytes over an estimate without the rule).
  backward[0].strides = {0, 0, 0, 0};
  EXPECT_EQ(Scratch("aten._scaled_dot_product_flash_attention_for_cpu_backward.default", backward, 2).with_outputs,
            524288 + 262144 + 256);
}

TEST(AtenOps, CpuFlashAttentionInBf16KeepsReducedCopies) {
  // Measured (torch 2.13, 2 threads, the profiler): the same causal step in
  // bf16, the backward's buffers 655,616 bytes over an estimate without
  // them: grad_out copied (2 * 4 * 256 * 64 bf16, 262,144), buf in float32
  // (2 x 2 * 64 * 256, 262,144), buf_reduced in bf16 (2 x 2 * 64 * 256,
  // 131,072) and a float32 dsum of 64 (256).
  std::vector<AtenArgument> backward{Tensor("grad_out", "bf16", {2, 4, 256, 64}),
                                     Tensor("query", "bf16", {2, 4, 256, 64}), Tensor("key", "bf16", {2, 4, 256, 64}),
                                     Tensor("value", "bf16", {2, 4, 256, 64})};
  backward[0].strides = {0, 0, 0, 0};
  EXPECT_EQ(Scratch("aten._scaled_dot_product_flash_attention_for_cpu_backward.default", backward, 2).with_outputs,
            655616);
  // The forward (from the kernel's source): buf, 2 x (64 * 256 + 2 * 64 +
  // 64 * 64) floats (164,864), and buf_reduced, 2 x 64 * 256 bf16 (65,536).
  const std::vector<AtenArgument> forward{backward[1], backward[2], backward[3]};
  EXPECT_EQ(Scratch("aten._scaled_dot_product_flash_attention_for_cpu.default", forward, 2).with_outputs,
            164864 + 65536);
  // f16 with 4 heads of 64 may be packed for oneDNN's brgemm: named.
  std::vector<AtenArgument> half = forward;
  for (AtenArgument& a : half) a = Tensor(a.name, "f16", {2, 4, 256, 64});
  std::string why;
  EXPECT_EQ(EstimateAtenScratch("aten._scaled_dot_product_flash_attention_for_cpu.default", half, 2, &why).with_outputs,
            0);
  EXPECT_NE(why.find("pack"), std::string::npos);
}

}  // namespace
}  // namespace peakmem
