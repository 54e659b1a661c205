// Type promotion against PyTorch's documented results (torch.result_type,
// torch 2.13; each expectation is what torch.result_type returns for the
// operands named in its comment).
#include "peakmem/semantics/type_promotion.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace peakmem {
namespace {

std::string Promote(const char* a, const char* b) {
  const DType* d = PromoteTypes(FindDType(a), FindDType(b));
  return d == nullptr ? "none" : std::string(d->short_name);
}

ValueType Tensor(const char* dtype, Dims shape) {
  TypeStringError error;
  return *MakeTensorType("cpu", dtype, std::move(shape), false, &error);
}

std::string Result(const std::vector<ValueType>& tensors, const std::vector<NumberKind>& numbers) {
  std::vector<const ValueType*> ptrs;
  for (const ValueType& t : tensors) ptrs.push_back(&t);
  const DType* d = ResultType({ptrs, numbers});
  return d == nullptr ? "none" : std::string(d->short_name);
}

TEST(TypePromotion, PromoteTypesFollowsTorchsTable) {
  EXPECT_EQ(Promote("f32", "f32"), "f32");
  EXPECT_EQ(Promote("b8", "i32"), "i32");
  EXPECT_EQ(Promote("ui8", "i8"), "i16");  // torch.promote_types(uint8, int8)
  EXPECT_EQ(Promote("ui8", "i32"), "i32");
  EXPECT_EQ(Promote("i64", "f16"), "f16");   // integers with floats: the float
  EXPECT_EQ(Promote("f16", "bf16"), "f32");  // the two 16-bit floats
  EXPECT_EQ(Promote("bf16", "f32"), "f32");
  EXPECT_EQ(Promote("f64", "c64"), "c128");  // complex wide enough for float64
  EXPECT_EQ(Promote("f16", "c32"), "c32");
  EXPECT_EQ(Promote("bf16", "c32"), "c64");
  EXPECT_EQ(Promote("f8_e4m3fn", "f32"), "none");  // PyTorch refuses float8 promotion
}

TEST(TypePromotion, DimensionedTensorsDecideBeforeZeroDimAndNumbers) {
  // bf16[4] * 2.0: the float number does not raise bf16.
  EXPECT_EQ(Result({Tensor("bf16", {4})}, {NumberKind::kFloat}), "bf16");
  // i64[4] * 2.0: a float number over integers gives the default float32.
  EXPECT_EQ(Result({Tensor("i64", {4})}, {NumberKind::kFloat}), "f32");
  // bf16[4] + f32 0-d tensor: the same category, so bf16 stays.
  EXPECT_EQ(Result({Tensor("bf16", {4}), Tensor("f32", {})}, {}), "bf16");
  // i32[4] + f64 0-d tensor: a higher category, so float64.
  EXPECT_EQ(Result({Tensor("i32", {4}), Tensor("f64", {})}, {}), "f64");
  // f32 0-d / i64 0-d: both zero-dim, promoted together.
  EXPECT_EQ(Result({Tensor("f32", {}), Tensor("i64", {})}, {}), "f32");
  // bf16[4] + f32[4]: dimensioned tensors promote each other.
  EXPECT_EQ(Result({Tensor("bf16", {4}), Tensor("f32", {4})}, {}), "f32");
  // b8[4] + 1: bool with an int number is int64.
  EXPECT_EQ(Result({Tensor("b8", {4})}, {NumberKind::kInt}), "i64");
}

}  // namespace
}  // namespace peakmem
