// Types of trace values: Thunder's dtypes and the type strings it prints.
//
// Thunder prints a value's type as a string in a comment, e.g.
//   "cuda:0 f32[2, 3]"   a tensor: device, dtype short name, shape
//   "FUTURE cuda:0 f32[4]"  a tensor that an asynchronous op will produce
//   "Collection"         a list/tuple/dict proxy
//   "int 4", "float 0.5", "bool True", "complex 1j"   numbers
// This file turns those strings into ValueType. A tensor's byte size is
// computed here, once, with overflow checks, so every later stage can use it
// without re-checking.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/inlined_vector.h"

namespace peakmem {

// A shape or strides: up to 4 dimensions held inline (no heap allocation for
// almost every tensor of real models; more dimensions go to the heap).
using Dims = absl::InlinedVector<std::int64_t, 4>;

// One of Thunder's dtypes, named by its printed short name (`f32`, `bf16`,
// `f8_e4m3fn`, ...). Weak and strong variants print alike and have one size.
struct DType {
  std::string_view short_name;
  // What PyTorch stores per element (torch.dtype.itemsize * 8): 8 for the
  // packed fp4 type f4_e2m1fn_x2, whose one-byte element holds two values.
  int bits = 0;
  // What Thunder counts per element (its dtype.bytes * 8): equal to `bits`
  // except for f4_e2m1fn_x2, which Thunder sizes at half a byte
  // (thunder/core/dtypes.py: bytes=0.5), half what PyTorch allocates.
  int thunder_bits = 0;
};

// Looks a short name up; nullptr when Thunder has no such dtype.
const DType* FindDType(std::string_view short_name);
// Every dtype peakmem knows, in table order.
const std::vector<DType>& AllDTypes();

enum class ValueKind : std::uint8_t {
  kUnknown,       // no type was printed and none could be inferred
  kTensor,
  kFutureTensor,  // FutureTensorProxy: counts as a tensor for memory
  kCollection,
  kNumber,
  kString,
  kNone,
  kOpaque,  // any other printed type ("Any", a context object, ...)
};

bool IsTensorKind(ValueKind kind);
const char* ValueKindName(ValueKind kind);

struct ValueType {
  ValueKind kind = ValueKind::kUnknown;
  // Tensors only.
  std::string device;
  const DType* dtype = nullptr;
  Dims shape;
  // ContiguousStrides(shape) (layout.h), made once per distinct type: the
  // runtime model keeps no strides for a tensor that has these (most do).
  // Empty for other kinds, and where the strides would overflow 64 bits.
  Dims contiguous_strides;
  std::uint64_t numel = 0;
  std::uint64_t bytes = 0;  // numel * bits / 8 (what PyTorch allocates), checked for overflow
  // numel * thunder_bits / 8 (what Thunder's get_alloc_memory counts),
  // rounded down; thunder_half_byte when Thunder's count ends in half a byte
  // (an odd number of f4_e2m1fn_x2 elements).
  std::uint64_t thunder_bytes = 0;
  bool thunder_half_byte = false;
  // The printed type string, verbatim (for numbers: "int 4").
  std::string text;
  // A DTensor's mesh and placements as printed (" mesh=DeviceMesh(...),
  // placements=(...)", ir/dtensor_layout.h); empty for other values.
  std::string dtensor_layout;
  Dims global_shape;  // a DTensor's global shape (`shape` is the rank's shard)
};

// Why a type string could not be read, and where in it (0-based offset).
struct TypeStringError {
  std::size_t offset = 0;
  std::string message;
  // The message is about the value itself (a DTensor whose shard is
  // unknown): readers name the value in it.
  bool names_value = false;
};

// The type of a value nothing says anything about (kind kUnknown).
const ValueType& UnknownValueType();

// Parses a printed type string. On failure returns nullopt and fills `error`.
// `rank`: the process a DTensor type is read for (dtensor_layout.h): its
// shape, numel and bytes are that rank's shard; thunder_bytes stay the
// global tensor's, as Thunder's get_alloc_memory counts a DTensor proxy.
// `default_layout`: the mesh and placements (" mesh=DeviceMesh(...),
// placements=(...)", as the current printer writes them after the shape)
// of a DTensor type that prints none (older printers: `DTensor cuda:0
// f32[16, 16]`); empty: such a type is an error.
std::optional<ValueType> ParseTypeString(std::string_view text, TypeStringError* error,
                                         int rank = 0, std::string_view default_layout = {});

// Builds a tensor type from parts (used by the JSON reader and tests); the
// same checks as ParseTypeString apply.
std::optional<ValueType> MakeTensorType(std::string device, std::string_view dtype,
                                        Dims shape, bool future,
                                        TypeStringError* error);

}  // namespace peakmem
