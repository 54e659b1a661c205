#include "peakmem/semantics/aten_ops.h"

#include <gtest/gtest.h>

#include <vector>

namespace peakmem {
namespace {

ValueType Tensor(std::string_view dtype, std::vector<std::int64_t> shape) {
  return *MakeTensorType("cpu", dtype, Dims(shape.begin(), shape.end()), false, nullptr);
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
  const ValueType t = Tensor("f32", {128, 128});
  const std::vector<const ValueType*> tensors = {&t};
  const std::vector<NumberKind> wrapped = {NumberKind::kFloat};
  const ScratchEstimate s = EstimateAtenScratch("aten.div.Tensor", {tensors, wrapped});
  EXPECT_EQ(s.with_outputs, 12);
  EXPECT_EQ(s.before_outputs, 0);
}

TEST(AtenOps, AFloat64OperandNeedsNoCast) {
  // The wrapped double is already the computation's dtype: 8 bytes only.
  const ValueType t = Tensor("f64", {4});
  const std::vector<const ValueType*> tensors = {&t};
  const std::vector<NumberKind> wrapped = {NumberKind::kFloat};
  EXPECT_EQ(EstimateAtenScratch("aten.mul_.Scalar", {tensors, wrapped}).with_outputs, 8);
}

TEST(AtenOps, WithoutANumberThereIsNothingToWrap) {
  const ValueType t = Tensor("f32", {4});
  const std::vector<const ValueType*> tensors = {&t, &t};
  EXPECT_EQ(EstimateAtenScratch("aten.add.Tensor", {tensors, {}}).with_outputs, 0);
  EXPECT_EQ(EstimateAtenScratch("aten.mm.default", {tensors, {}}).with_outputs, 0);
}

TEST(AtenOps, TrueDivisionOfIntegersComputesInFloat32) {
  // Measured on the CPU: torch.div(torch.arange(4), 2) allocates 8 (the
  // wrapped int64), 16 (the i64[4] copied to f32), 4 (the number cast to
  // f32), then its 16-byte output; with rounding_mode="floor" only the 8
  // beside its 32-byte int64 output.
  const ValueType t = Tensor("i64", {4});
  const std::vector<const ValueType*> tensors = {&t};
  const std::vector<NumberKind> wrapped = {NumberKind::kInt};
  EXPECT_EQ(EstimateAtenScratch("aten.div.Tensor", {tensors, wrapped}).with_outputs, 16 + 8 + 4);
  EXPECT_EQ(EstimateAtenScratch("aten.div.Tensor_mode", {tensors, wrapped}).with_outputs, 8);
}

}  // namespace
}  // namespace peakmem
