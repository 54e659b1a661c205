// Thunder's dtypes and the type strings it prints (peakmem/value_type.h).
#include "peakmem/ir/value_type.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace peakmem {
namespace {

ValueType MustParse(const std::string& text) {
  TypeStringError error;
  std::optional<ValueType> type = ParseTypeString(text, &error);
  EXPECT_TRUE(type.has_value()) << text << ": " << error.message;
  return type.value_or(ValueType{});
}

TypeStringError ParseError(const std::string& text) {
  TypeStringError error;
  std::optional<ValueType> type = ParseTypeString(text, &error);
  EXPECT_FALSE(type.has_value()) << text << " parsed, but should not";
  return error;
}

// ---------------------------------------------------------------- dtypes

struct DTypeCase {
  const char* short_name;
  int bits;          // PyTorch: torch.<dtype>.itemsize * 8
  int thunder_bits;  // Thunder: thunder.core.dtypes.<dtype>.bytes * 8
};

// Thunder's short names are prefix + 8 * bytes [+ "_" + variant]. Both sizes
// as the two libraries give them (torch 2.13, lightning-thunder 0.2.6; the
// Python test tests/python/test_dtype_sizes.py checks them against real
// tensors): the packed fp4 type's element is one byte holding two 4-bit
// values (torch.float4_e2m1fn_x2.itemsize == 1), which Thunder sizes at
// half a byte (dtypes.float4_e2m1fn_x2.bytes == 0.5).
const DTypeCase kDTypeCases[] = {
    {"b8", 8, 8},          {"i8", 8, 8},         {"i16", 16, 16},       {"i32", 32, 32},
    {"i64", 64, 64},       {"ui8", 8, 8},        {"ui64", 64, 64},      {"bf16", 16, 16},
    {"f16", 16, 16},       {"f32", 32, 32},      {"f64", 64, 64},       {"f8_e5m2", 8, 8},
    {"f8_e5m2fnuz", 8, 8}, {"f8_e4m3fn", 8, 8},  {"f8_e4m3fnuz", 8, 8}, {"f8_e8m0fnu", 8, 8},
    {"f4_e2m1fn_x2", 8, 4}, {"c32", 32, 32},     {"c64", 64, 64},       {"c128", 128, 128},
};

class DTypeTest : public ::testing::TestWithParam<DTypeCase> {};

TEST_P(DTypeTest, FindDTypeKnowsTheBitWidth) {
  const DType* dtype = FindDType(GetParam().short_name);
  ASSERT_NE(dtype, nullptr) << GetParam().short_name;
  EXPECT_EQ(dtype->short_name, GetParam().short_name);
  EXPECT_EQ(dtype->bits, GetParam().bits);
  EXPECT_EQ(dtype->thunder_bits, GetParam().thunder_bits);
}

TEST_P(DTypeTest, TensorOfSixElementsHasSixTimesTheElementSize) {
  const ValueType type = MustParse(std::string("cpu ") + GetParam().short_name + "[2, 3]");
  EXPECT_EQ(type.kind, ValueKind::kTensor);
  ASSERT_NE(type.dtype, nullptr);
  EXPECT_EQ(type.dtype->short_name, GetParam().short_name);
  EXPECT_EQ(type.numel, 6u);
  // 6 elements * bits / 8: e.g. f32 -> 24 bytes; f4_e2m1fn_x2 -> 6 bytes
  // in PyTorch, 3 in Thunder's count.
  EXPECT_EQ(type.bytes, static_cast<std::uint64_t>(6 * GetParam().bits / 8));
  EXPECT_EQ(type.thunder_bytes, static_cast<std::uint64_t>(6 * GetParam().thunder_bits / 8));
  EXPECT_FALSE(type.thunder_half_byte);
}

INSTANTIATE_TEST_SUITE_P(AllThunderDTypes, DTypeTest, ::testing::ValuesIn(kDTypeCases),
                         [](const ::testing::TestParamInfo<DTypeCase>& info) {
                           return std::string(info.param.short_name);
                         });

TEST(DTypeTable, HoldsExactlyThunderDTypes) {
  std::vector<std::string> names;
  for (const DType& d : AllDTypes()) names.emplace_back(d.short_name);
  std::vector<std::string> expected;
  for (const DTypeCase& c : kDTypeCases) expected.emplace_back(c.short_name);
  EXPECT_EQ(names, expected);
}

TEST(DTypeTable, UnknownShortNameIsNull) {
  EXPECT_EQ(FindDType("f31"), nullptr);
  EXPECT_EQ(FindDType("float32"), nullptr);
  EXPECT_EQ(FindDType(""), nullptr);
}

TEST(ValueType, PackedFp4OfOddLengthIsWholeBytesInPyTorchAndHalfAByteMoreInThunder) {
  // 3 elements: torch.empty(3, dtype=torch.float4_e2m1fn_x2) has a 3-byte
  // storage; Thunder counts 3 * 0.5 = 1.5 bytes.
  const ValueType type = MustParse("cpu f4_e2m1fn_x2[3]");
  EXPECT_EQ(type.bytes, 3u);
  EXPECT_EQ(type.thunder_bytes, 1u);
  EXPECT_TRUE(type.thunder_half_byte);
}

// ---------------------------------------------------------------- devices

TEST(ValueType, CpuDevice) {
  const ValueType type = MustParse("cpu f32[4]");
  EXPECT_EQ(type.device, "cpu");
  EXPECT_EQ(type.shape, (Dims{4}));
  EXPECT_EQ(type.bytes, 16u);
  EXPECT_EQ(type.text, "cpu f32[4]");
}

TEST(ValueType, MetaDevice) {
  const ValueType type = MustParse("meta bf16[8]");
  EXPECT_EQ(type.kind, ValueKind::kTensor);
  EXPECT_EQ(type.device, "meta");
  EXPECT_EQ(type.bytes, 16u);
}

TEST(ValueType, CudaDeviceWithIndex) {
  EXPECT_EQ(MustParse("cuda:0 f32[2, 2]").device, "cuda:0");
  const ValueType type = MustParse("cuda:7 f16[3, 5]");
  EXPECT_EQ(type.device, "cuda:7");
  EXPECT_EQ(type.shape, (Dims{3, 5}));
  EXPECT_EQ(type.bytes, 30u);
}

TEST(ValueType, UnknownDeviceIsAnError) {
  const TypeStringError error = ParseError("tpu f32[4]");
  EXPECT_EQ(error.offset, 0u);
  EXPECT_EQ(error.message, "unknown device 'tpu'");
}

// ---------------------------------------------------------------- kinds

TEST(ValueType, FutureTensorCountsAsATensor) {
  const ValueType type = MustParse("FUTURE cuda:0 f32[4]");
  EXPECT_EQ(type.kind, ValueKind::kFutureTensor);
  EXPECT_TRUE(IsTensorKind(type.kind));
  EXPECT_EQ(type.device, "cuda:0");
  EXPECT_EQ(type.bytes, 16u);
}

// Collectives' futures print their device as thunder.devices.Device's repr
// (thunder/core/devices.py __repr__), seen in FSDP and DDP traces as
// `FUTURE thunder.devices.Device(type='cpu') f32[16, 128]`.
TEST(ValueType, FutureWithThunderDeviceRepr) {
  const ValueType cpu = MustParse("FUTURE thunder.devices.Device(type='cpu') f32[16, 128]");
  EXPECT_EQ(cpu.kind, ValueKind::kFutureTensor);
  EXPECT_EQ(cpu.device, "cpu");
  EXPECT_EQ(cpu.shape, (Dims{16, 128}));
  EXPECT_EQ(cpu.bytes, 8192u);
  const ValueType cuda = MustParse("FUTURE thunder.devices.Device(type='cuda', index=3) bf16[8]");
  EXPECT_EQ(cuda.device, "cuda:3");
  EXPECT_EQ(cuda.bytes, 16u);
}

TEST(ValueType, MalformedThunderDeviceReprIsAnError) {
  // The device starts at offset 7, after "FUTURE "; its missing index at 49.
  EXPECT_EQ(ParseError("FUTURE thunder.devices.Device(type='cuda', index=) f32[1]").offset, 49u);
  const TypeStringError unclosed = ParseError("FUTURE thunder.devices.Device(type='cpu' f32[1]");
  EXPECT_EQ(unclosed.message, "expected ')' closing the device");
  EXPECT_EQ(ParseError("FUTURE thunder.devices.Device(type='tpu') f32[1]").message,
            "unknown device 'tpu'");
}

// A DTensor's type gives its global shape; bytes are the rank's shard
// (dtensor_layout.h), Thunder's count the global tensor (get_alloc_memory
// sizes a DTensorProxy by its numel, the global one).
TEST(ValueType, DTensorBytesAreTheRanksShard) {
  const std::string text =
      "DTensor cpu f32[10, 16] mesh=DeviceMesh((4,), 'cpu', stride=(1,)), "
      "placements=(Shard(dim=0),)";
  TypeStringError error;
  auto rank0 = ParseTypeString(text, &error, 0);
  auto rank3 = ParseTypeString(text, &error, 3);
  ASSERT_TRUE(rank0 && rank3) << error.message;
  EXPECT_EQ(rank0->shape, (Dims{3, 16}));
  EXPECT_EQ(rank0->bytes, 192u);  // 3 * 16 * 4
  EXPECT_EQ(rank3->shape, (Dims{1, 16}));
  EXPECT_EQ(rank3->bytes, 64u);
  EXPECT_EQ(rank3->thunder_bytes, 640u);  // 10 * 16 * 4
  EXPECT_EQ(rank3->text, text);
  EXPECT_FALSE(rank3->dtensor_layout.empty());
  auto outside = ParseTypeString(text, &error, 4);
  EXPECT_FALSE(outside);
  EXPECT_TRUE(error.names_value);
  EXPECT_EQ(error.message, "its shard is unknown: rank 4 is not in its mesh of 4 ranks");
}

// Older printers write no mesh or placements (`DTensor cuda:0 f32[10, 16]`);
// given a default layout, such a type is read as if it printed that one.
// Shard(dim=0) over a (2, 2) mesh's first dimension and Replicate over the
// second: 10 rows in 2 chunks of 5; ranks 0 and 1 (mesh row 0) hold rows
// 0-4, ranks 2 and 3 rows 5-9: [5, 16], 320 bytes each.
TEST(ValueType, DTensorWithoutLayoutTakesTheDefaultGiven) {
  const std::string older = "DTensor cuda:0 f32[10, 16]";
  const std::string layout =
      " mesh=DeviceMesh((2, 2), 'cuda', stride=(2, 1)), placements=(Shard(dim=0), Replicate())";
  TypeStringError error;
  auto rank3 = ParseTypeString(older, &error, 3, layout);
  ASSERT_TRUE(rank3) << error.message;
  EXPECT_EQ(rank3->shape, (Dims{5, 16}));
  EXPECT_EQ(rank3->bytes, 320u);
  EXPECT_EQ(rank3->thunder_bytes, 640u);  // the global tensor, as Thunder counts it
  EXPECT_EQ(rank3->dtensor_layout, layout);
  // A type that prints its own layout keeps it.
  auto own = ParseTypeString(
      "DTensor cuda:0 f32[10, 16] mesh=DeviceMesh((4,), 'cuda', stride=(1,)), placements=(Shard(dim=0),)",
      &error, 3, layout);
  ASSERT_TRUE(own) << error.message;
  EXPECT_EQ(own->shape, (Dims{1, 16}));
  // Without a default it is an error naming the value; a malformed default says so.
  EXPECT_FALSE(ParseTypeString(older, &error, 0));
  EXPECT_TRUE(error.names_value);
  EXPECT_NE(error.message.find("names no mesh and placements"), std::string::npos);
  EXPECT_FALSE(ParseTypeString(older, &error, 0, " mesh=nonsense"));
  EXPECT_NE(error.message.find("the DTensor layout given for types that print none"), std::string::npos)
      << error.message;
}

TEST(ValueType, ZeroDimensionalTensorHasOneElement) {
  const ValueType type = MustParse("cpu f32[]");
  EXPECT_EQ(type.kind, ValueKind::kTensor);
  EXPECT_TRUE(type.shape.empty());
  EXPECT_EQ(type.numel, 1u);
  EXPECT_EQ(type.bytes, 4u);
}

TEST(ValueType, ZeroSizedDimensionHasNoBytes) {
  const ValueType type = MustParse("cpu f32[0, 4]");
  EXPECT_EQ(type.numel, 0u);
  EXPECT_EQ(type.bytes, 0u);
}

TEST(ValueType, Collection) {
  const ValueType type = MustParse("Collection");
  EXPECT_EQ(type.kind, ValueKind::kCollection);
  EXPECT_FALSE(IsTensorKind(type.kind));
  EXPECT_EQ(type.bytes, 0u);
}

TEST(ValueType, Numbers) {
  for (const char* text : {"int 4", "float 0.5", "bool True", "complex 1j"}) {
    const ValueType type = MustParse(text);
    EXPECT_EQ(type.kind, ValueKind::kNumber) << text;
    EXPECT_EQ(type.text, text);
    EXPECT_EQ(type.bytes, 0u) << text;
    EXPECT_FALSE(IsTensorKind(type.kind)) << text;
  }
}

TEST(ValueType, NoneStringAndOpaque) {
  EXPECT_EQ(MustParse("None").kind, ValueKind::kNone);
  EXPECT_EQ(MustParse("str").kind, ValueKind::kString);
  EXPECT_EQ(MustParse("Any").kind, ValueKind::kOpaque);
}

TEST(ValueType, KindNames) {
  EXPECT_STREQ(ValueKindName(ValueKind::kTensor), "tensor");
  EXPECT_STREQ(ValueKindName(ValueKind::kFutureTensor), "future tensor");
  EXPECT_STREQ(ValueKindName(ValueKind::kCollection), "collection");
  EXPECT_STREQ(ValueKindName(ValueKind::kUnknown), "unknown");
}

// ---------------------------------------------------------------- errors

TEST(ValueType, UnknownDTypeIsAnError) {
  // "cpu q7[4]": the dtype starts at offset 4.
  const TypeStringError error = ParseError("cpu q7[4]");
  EXPECT_EQ(error.offset, 4u);
  EXPECT_EQ(error.message, "unknown dtype 'q7'");
}

TEST(ValueType, SymbolicDimensionIsAnError) {
  // "cpu f32[i0, 4]": '[' at 7, the dimension at 8.
  const TypeStringError error = ParseError("cpu f32[i0, 4]");
  EXPECT_EQ(error.offset, 8u);
  EXPECT_EQ(error.message, "symbolic dimension 'i0': peakmem needs concrete shapes");
}

TEST(ValueType, SymbolicDimensionAfterAConcreteOneIsAnError) {
  // "cpu f32[4, s1]": s1 starts at offset 11.
  const TypeStringError error = ParseError("cpu f32[4, s1]");
  EXPECT_EQ(error.offset, 11u);
  EXPECT_EQ(error.message, "symbolic dimension 's1': peakmem needs concrete shapes");
}

TEST(ValueType, NegativeDimensionIsAnError) {
  const TypeStringError error = ParseError("cpu f32[-1, 4]");
  EXPECT_EQ(error.offset, 8u);
  EXPECT_EQ(error.message, "negative dimension -1");
}

TEST(ValueType, ElementCountOverflowIsAnError) {
  // 2^32 * 2^32 = 2^64 elements does not fit in 64 bits.
  const TypeStringError error = ParseError("cpu f32[4294967296, 4294967296]");
  EXPECT_EQ(error.offset, 7u);
  EXPECT_EQ(error.message, "tensor size overflows 64 bits");
}

TEST(ValueType, BitCountOverflowIsAnError) {
  // 2^61 elements fit, but 2^61 * 64 bits = 2^67 does not.
  const TypeStringError error = ParseError("cpu f64[2305843009213693952]");
  EXPECT_EQ(error.offset, 7u);
  EXPECT_EQ(error.message, "tensor size overflows 64 bits");
}

TEST(ValueType, DimensionLiteralOverflowIsAnError) {
  const TypeStringError error = ParseError("cpu f32[99999999999999999999]");
  EXPECT_EQ(error.offset, 8u);
  EXPECT_EQ(error.message, "dimension 99999999999999999999 overflows 64 bits");
}

TEST(ValueType, MissingClosingBracketIsAnError) {
  const TypeStringError error = ParseError("cpu f32[4");
  EXPECT_EQ(error.offset, 9u);
  EXPECT_EQ(error.message, "expected ']' at end of tensor type");
}

TEST(ValueType, MissingDeviceIsAnError) {
  const TypeStringError error = ParseError("f32[4]");
  EXPECT_EQ(error.offset, 0u);
  EXPECT_EQ(error.message, "expected '<device> <dtype>[shape]' in tensor type");
}

TEST(ValueType, NullErrorPointerIsAllowed) {
  EXPECT_FALSE(ParseTypeString("cpu q7[4]", nullptr).has_value());
}

// ---------------------------------------------------------------- MakeTensorType

TEST(MakeTensorType, BuildsATensor) {
  TypeStringError error;
  std::optional<ValueType> type = MakeTensorType("cuda:0", "bf16", {2, 3}, false, &error);
  ASSERT_TRUE(type.has_value()) << error.message;
  EXPECT_EQ(type->kind, ValueKind::kTensor);
  EXPECT_EQ(type->device, "cuda:0");
  EXPECT_EQ(type->numel, 6u);
  EXPECT_EQ(type->bytes, 12u);
}

TEST(MakeTensorType, BuildsAFutureTensor) {
  std::optional<ValueType> type = MakeTensorType("cuda:1", "f32", {4}, true, nullptr);
  ASSERT_TRUE(type.has_value());
  EXPECT_EQ(type->kind, ValueKind::kFutureTensor);
  EXPECT_EQ(type->bytes, 16u);
}

TEST(MakeTensorType, RejectsUnknownDType) {
  TypeStringError error;
  EXPECT_FALSE(MakeTensorType("cpu", "f31", {4}, false, &error).has_value());
  EXPECT_EQ(error.message, "unknown dtype 'f31'");
}

TEST(MakeTensorType, RejectsNegativeDimension) {
  TypeStringError error;
  EXPECT_FALSE(MakeTensorType("cpu", "f32", {2, -3}, false, &error).has_value());
  EXPECT_EQ(error.message, "negative dimension -3");
}

TEST(MakeTensorType, RejectsOverflow) {
  TypeStringError error;
  EXPECT_FALSE(
      MakeTensorType("cpu", "f32", {4294967296, 4294967296}, false, &error).has_value());
  EXPECT_EQ(error.message, "tensor size overflows 64 bits");
}

}  // namespace
}  // namespace peakmem
