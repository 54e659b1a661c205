#include "peakmem/ir/value_type.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

#include "peakmem/ir/dtensor_layout.h"
#include "peakmem/ir/source.h"

namespace peakmem {
namespace {

// Thunder's dtypes (thunder/core/dtypes.py): short name = prefix + bits
// [+ "_" + variant]; {short name, PyTorch bits per element, Thunder's}.
// Every one but the packed fp4 type is sized alike by both; that one is a
// byte per element in PyTorch (torch.float4_e2m1fn_x2.itemsize == 1) and
// half a byte in Thunder (dtypes.float4_e2m1fn_x2.bytes == 0.5).
const std::vector<DType> kDTypes = {
    {"b8", 8, 8},         {"i8", 8, 8},          {"i16", 16, 16},        {"i32", 32, 32},
    {"i64", 64, 64},      {"ui8", 8, 8},         {"ui64", 64, 64},       {"bf16", 16, 16},
    {"f16", 16, 16},      {"f32", 32, 32},       {"f64", 64, 64},        {"f8_e5m2", 8, 8},
    {"f8_e5m2fnuz", 8, 8}, {"f8_e4m3fn", 8, 8},  {"f8_e4m3fnuz", 8, 8},  {"f8_e8m0fnu", 8, 8},
    {"f4_e2m1fn_x2", 8, 4}, {"c32", 32, 32},     {"c64", 64, 64},        {"c128", 128, 128},
};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

template <class T = ValueType>
std::optional<T> Fail(TypeStringError* error, std::size_t offset, std::string message) {
  if (error != nullptr) *error = {offset, std::move(message)};
  return std::nullopt;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// Computes numel and bytes with overflow checks; `error_offset` locates the
// shape in the type string for the message.
std::optional<ValueType> FinishTensor(ValueType type, std::size_t error_offset,
                                      TypeStringError* error) {
  std::uint64_t numel = 1;
  for (std::int64_t dim : type.shape) {
    if (dim < 0) return Fail(error, error_offset, "negative dimension " + std::to_string(dim));
    if (__builtin_mul_overflow(numel, static_cast<std::uint64_t>(dim), &numel)) {
      return Fail(error, error_offset, "tensor size overflows 64 bits");
    }
  }
  // PyTorch's size is a whole number of bytes (bits is a multiple of 8);
  // Thunder's is at most that, and may end in half a byte.
  std::uint64_t bits = 0;
  if (__builtin_mul_overflow(numel, static_cast<std::uint64_t>(type.dtype->bits), &bits) ||
      bits / 8 > static_cast<std::uint64_t>(INT64_MAX)) {
    return Fail(error, error_offset, "tensor size overflows 64 bits");
  }
  const std::uint64_t thunder_bits = numel * static_cast<std::uint64_t>(type.dtype->thunder_bits);
  type.numel = numel;
  type.bytes = bits / 8;
  type.thunder_bytes = thunder_bits / 8;
  type.thunder_half_byte = thunder_bits % 8 != 0;
  // The strides of a contiguous tensor of this shape (size-0 and size-1
  // dimensions step as size 1, as PyTorch's); none if they overflow.
  type.contiguous_strides.assign(type.shape.size(), 1);
  std::int64_t next = 1;
  for (std::size_t i = type.shape.size(); i-- > 0;) {
    type.contiguous_strides[i] = next;
    if (i > 0 && __builtin_mul_overflow(next, std::max<std::int64_t>(type.shape[i], 1), &next)) {
      type.contiguous_strides.clear();
      break;
    }
  }
  return type;
}

}  // namespace

const ValueType& UnknownValueType() {
  static const ValueType unknown;
  return unknown;
}

const DType* FindDType(std::string_view short_name) {
  for (const DType& d : kDTypes) {
    if (d.short_name == short_name) return &d;
  }
  return nullptr;
}

const std::vector<DType>& AllDTypes() { return kDTypes; }

bool IsTensorKind(ValueKind kind) {
  return kind == ValueKind::kTensor || kind == ValueKind::kFutureTensor;
}

const char* ValueKindName(ValueKind kind) {
  switch (kind) {
    case ValueKind::kUnknown: return "unknown";
    case ValueKind::kTensor: return "tensor";
    case ValueKind::kFutureTensor: return "future tensor";
    case ValueKind::kCollection: return "collection";
    case ValueKind::kNumber: return "number";
    case ValueKind::kString: return "string";
    case ValueKind::kNone: return "None";
    case ValueKind::kOpaque: return "opaque";
  }
  return "?";
}

std::optional<ValueType> MakeTensorType(std::string device, std::string_view dtype,
                                        Dims shape, bool future,
                                        TypeStringError* error) {
  ValueType type;
  type.kind = future ? ValueKind::kFutureTensor : ValueKind::kTensor;
  type.device = std::move(device);
  type.dtype = FindDType(dtype);
  if (type.dtype == nullptr) return Fail(error, 0, "unknown dtype '" + EscapeForMessage(dtype) + "'");
  type.shape = std::move(shape);
  // The string Thunder prints for it (also what equal types are shared by).
  type.text = future ? "FUTURE " : "";
  type.text += type.device;
  type.text += ' ';
  type.text += type.dtype->short_name;
  type.text += '[';
  for (std::size_t i = 0; i < type.shape.size(); ++i) {
    if (i) type.text += ", ";
    type.text += std::to_string(type.shape[i]);
  }
  type.text += ']';
  return FinishTensor(std::move(type), 0, error);
}

namespace {

// The kind of a type string that names no tensor, or nullopt for a tensor.
std::optional<ValueKind> NonTensorKind(std::string_view text) {
  if (text == "Collection") return ValueKind::kCollection;
  for (std::string_view number : {"int ", "bool ", "float ", "complex "}) {
    if (StartsWith(text, number)) return ValueKind::kNumber;
  }
  if (text == "None") return ValueKind::kNone;
  if (text == "str" || StartsWith(text, "str ")) return ValueKind::kString;
  // Anything without a shape bracket is an opaque object type ("Any", ...).
  if (text.find('[') == std::string_view::npos) return ValueKind::kOpaque;
  return std::nullopt;
}

// The dimensions between `[` (at `bracket`) and the final `]` of a tensor
// type; false, with `error` set, when one is not a non-negative integer that
// fits 64 bits.
bool ParseShape(std::string_view text, std::size_t bracket, Dims* shape, TypeStringError* error) {
  std::size_t i = bracket + 1;
  const std::size_t end = text.size() - 1;
  while (i < end) {
    while (i < end && text[i] == ' ') ++i;
    const std::size_t start = i;
    if (i < end && text[i] == '-') ++i;
    while (i < end && IsDigit(text[i])) ++i;
    const std::string_view digits = text.substr(start, i - start);
    if (digits.empty() || digits == "-") {
      std::size_t stop = start;
      while (stop < end && text[stop] != ',') ++stop;
      std::string dim(text.substr(start, stop - start));
      while (!dim.empty() && dim.back() == ' ') dim.pop_back();
      if (!dim.empty() && (std::isalpha(static_cast<unsigned char>(dim[0])) || dim[0] == '_' ||
                           dim[0] == '[' || dim[0] == '<')) {
        Fail(error, start, "symbolic dimension '" + dim + "': peakmem needs concrete shapes");
        return false;
      }
      Fail(error, start, "expected an integer dimension");
      return false;
    }
    std::int64_t value = 0;
    const bool negative = digits[0] == '-';
    for (char c : digits.substr(negative ? 1 : 0)) {
      if (__builtin_mul_overflow(value, 10, &value) ||
          __builtin_add_overflow(value, c - '0', &value)) {
        Fail(error, start, "dimension " + std::string(digits) + " overflows 64 bits");
        return false;
      }
    }
    if (negative) {
      Fail(error, start, "negative dimension " + std::string(digits));
      return false;
    }
    shape->push_back(value);
    while (i < end && text[i] == ' ') ++i;
    if (i < end) {
      if (text[i] != ',') {
        Fail(error, i, "expected ',' or ']' in shape");
        return false;
      }
      ++i;
    }
  }
  return true;
}

constexpr std::string_view kThunderDevicePrefix = "thunder.devices.Device(type='";

// thunder.devices.Device's repr (thunder/core/devices.py), as FUTURE types
// print it: `thunder.devices.Device(type='cpu')`, `...(type='cuda', index=1)`.
// Returns the device as plain types print it (`cpu`, `cuda:1`); `*end` is
// the offset past the closing parenthesis.
std::optional<std::string> ThunderDeviceRepr(std::string_view text, std::size_t pos,
                                             std::size_t* end, TypeStringError* error) {
  const std::size_t name_at = pos + kThunderDevicePrefix.size();
  const std::size_t quote = text.find('\'', name_at);
  if (quote == std::string_view::npos) {
    return Fail<std::string>(
        error, pos, "unterminated device type in '" + EscapeForMessage(text.substr(pos)) + "'");
  }
  std::string device(text.substr(name_at, quote - name_at));
  std::string_view rest = text.substr(quote + 1);
  constexpr std::string_view kIndex = ", index=";
  std::size_t after = quote + 1;
  if (StartsWith(rest, kIndex)) {
    std::size_t digits = after + kIndex.size();
    std::size_t stop = digits;
    while (stop < text.size() && IsDigit(text[stop])) ++stop;
    if (stop == digits) return Fail<std::string>(error, digits, "expected a device index");
    device += ":" + std::string(text.substr(digits, stop - digits));
    after = stop;
  }
  if (after >= text.size() || text[after] != ')') {
    return Fail<std::string>(error, after, "expected ')' closing the device");
  }
  *end = after + 1;
  return device;
}

// "DTensor <device> <dtype>[global shape]<layout>" (dtensor_layout.h).
std::optional<ValueType> ParseDTensorType(std::string_view text, std::size_t base_at, int rank,
                                          std::string_view default_layout, TypeStringError* error) {
  const std::size_t close = text.find(']', base_at);
  if (close == std::string_view::npos)
    return Fail(error, text.size(), "expected ']' after the DTensor's shape");
  std::optional<ValueType> global =
      ParseTypeString(text.substr(base_at, close + 1 - base_at), error);
  if (!global) {
    if (error != nullptr) error->offset += base_at;
    return std::nullopt;
  }
  if (global->kind != ValueKind::kTensor)
    return Fail(error, base_at, "expected '<device> <dtype>[shape]' after 'DTensor'");
  DTensorLayout layout;
  std::string_view layout_text = text.substr(close + 1);
  const bool defaulted = layout_text.find_first_not_of(' ') == std::string_view::npos && !default_layout.empty();
  if (defaulted) layout_text = default_layout;
  if (!ParseDTensorLayout(layout_text, &layout, error)) {
    if (defaulted) error->message = "the DTensor layout given for types that print none: " + error->message;
    error->offset = defaulted ? close + 1 : error->offset + close + 1;
    error->names_value = true;
    return std::nullopt;
  }
  ValueType local = *global;
  local.text = std::string(text);
  local.dtensor_layout = std::string(layout_text);
  local.global_shape = global->shape;
  if (std::string why = LocalShardShape(global->shape, layout, rank, &local.shape); !why.empty()) {
    auto failed = Fail(error, close + 1, "its shard is unknown: " + why);
    error->names_value = true;
    return failed;
  }
  std::optional<ValueType> out = FinishTensor(std::move(local), base_at, error);
  if (out) {
    out->thunder_bytes = global->thunder_bytes;
    out->thunder_half_byte = global->thunder_half_byte;
  }
  return out;
}

}  // namespace

std::optional<ValueType> ParseTypeString(std::string_view text, TypeStringError* error, int rank,
                                         std::string_view default_layout) {
  constexpr std::string_view kDTensor = "DTensor ";
  if (StartsWith(text, kDTensor)) return ParseDTensorType(text, kDTensor.size(), rank, default_layout, error);
  ValueType type;
  type.text = std::string(text);
  if (auto kind = NonTensorKind(text)) {
    type.kind = *kind;
    return type;
  }
  // [FUTURE ]<device> <dtype>[d0, d1, ...]
  const std::size_t bracket = text.find('[');
  std::size_t pos = 0;
  type.kind = ValueKind::kTensor;
  if (StartsWith(text, "FUTURE ")) {
    type.kind = ValueKind::kFutureTensor;
    pos = 7;
  }
  // A future's device is printed as Thunder's Device repr, which holds a
  // space when it has an index; it is read into the short form.
  std::size_t space = std::string_view::npos;
  if (StartsWith(text.substr(pos), kThunderDevicePrefix)) {
    std::size_t end = 0;
    auto device = ThunderDeviceRepr(text, pos, &end, error);
    if (!device) return std::nullopt;
    type.device = std::move(*device);
    space = end;
    if (space >= text.size() || text[space] != ' ') {
      return Fail(error, space, "expected ' <dtype>[shape]' after the device");
    }
  } else {
    space = text.find(' ', pos);
    if (space == std::string_view::npos || space > bracket) {
      return Fail(error, pos, "expected '<device> <dtype>[shape]' in tensor type");
    }
    type.device = std::string(text.substr(pos, space - pos));
  }
  const std::string_view device = type.device;
  if (!(device == "cpu" || device == "meta" || StartsWith(device, "cuda"))) {
    return Fail(error, pos, "unknown device '" + EscapeForMessage(type.device) + "'");
  }
  const std::string_view dtype_name = text.substr(space + 1, bracket - space - 1);
  type.dtype = FindDType(dtype_name);
  if (type.dtype == nullptr) {
    return Fail(error, space + 1, "unknown dtype '" + EscapeForMessage(dtype_name) + "'");
  }
  if (text.back() != ']') return Fail(error, text.size(), "expected ']' at end of tensor type");
  if (!ParseShape(text, bracket, &type.shape, error)) return std::nullopt;
  return FinishTensor(std::move(type), bracket, error);
}

}  // namespace peakmem
