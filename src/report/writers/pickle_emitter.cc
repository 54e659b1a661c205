#include "pickle_emitter.h"

#include "registry.h"

namespace peakmem::writers {
namespace {

// The opcodes used, from CPython's Lib/pickle.py.
constexpr char kProto = '\x80';
constexpr char kStop = '.';
constexpr char kMark = '(';
constexpr char kEmptyDict = '}';
constexpr char kSetItems = 'u';
constexpr char kEmptyList = ']';
constexpr char kAppends = 'e';
constexpr char kBinUnicode = 'X';  // 4-byte little-endian length, UTF-8 bytes
constexpr char kBinInt1 = 'K';     // 1-byte unsigned
constexpr char kBinInt2 = 'M';     // 2-byte little-endian unsigned
constexpr char kBinInt = 'J';      // 4-byte little-endian signed
constexpr char kLong1 = '\x8a';    // 1-byte length, little-endian two's complement
constexpr char kNone = 'N';
constexpr char kNewTrue = '\x88';
constexpr char kNewFalse = '\x89';
constexpr char kBinPut = 'q';      // 1-byte memo index
constexpr char kLongBinPut = 'r';  // 4-byte memo index
constexpr char kBinGet = 'h';
constexpr char kLongBinGet = 'j';

// The length of the valid UTF-8 sequence at text[i], or 0 (RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF).
std::size_t Utf8Length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > text.size() || byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return n;
}

}  // namespace

std::string ValidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = Utf8Length(text, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    } else {
      out.append(text, i, n);
      i += n;
    }
  }
  return out;
}

PickleEmitter::PickleEmitter(const ReportSink& sink) : sink_(sink) {
  out_.reserve(kFlushBytes + 4096);
  Op(kProto);
  out_ += '\x02';
}

void PickleEmitter::Le32(std::uint32_t value) {
  for (int k = 0; k < 4; ++k) out_ += static_cast<char>((value >> (8 * k)) & 0xFF);
}

void PickleEmitter::FlushIfFull() { writers::FlushIfFull(&out_, sink_); }

void PickleEmitter::BeginDict() {
  Op(kEmptyDict);
  Op(kMark);
}

void PickleEmitter::EndDict() {
  Op(kSetItems);
  FlushIfFull();
}

void PickleEmitter::BeginList() {
  Op(kEmptyList);
  Op(kMark);
}

void PickleEmitter::EndList() {
  Op(kAppends);
  FlushIfFull();
}

void PickleEmitter::Str(std::string_view text) {
  bool ascii = true;
  for (const char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  const std::string checked = ascii ? std::string() : ValidUtf8(text);
  const std::string_view bytes = ascii ? text : std::string_view(checked);
  Op(kBinUnicode);
  Le32(static_cast<std::uint32_t>(bytes.size()));
  out_ += bytes;
}

void PickleEmitter::Memo(std::string_view text) {
  const auto [it, added] =
      memo_.try_emplace(std::string(text), static_cast<std::uint32_t>(memo_.size()));
  const std::uint32_t index = it->second;
  if (!added) {
    if (index < 256) {
      Op(kBinGet);
      out_ += static_cast<char>(index);
    } else {
      Op(kLongBinGet);
      Le32(index);
    }
    return;
  }
  Str(text);
  if (index < 256) {
    Op(kBinPut);
    out_ += static_cast<char>(index);
  } else {
    Op(kLongBinPut);
    Le32(index);
  }
}

void PickleEmitter::Int(std::int64_t value) {
  if (value >= 0 && value < 0x100) {
    Op(kBinInt1);
    out_ += static_cast<char>(value);
  } else if (value >= 0 && value < 0x10000) {
    Op(kBinInt2);
    out_ += static_cast<char>(value & 0xFF);
    out_ += static_cast<char>(value >> 8);
  } else if (value >= INT32_MIN && value <= INT32_MAX) {
    Op(kBinInt);
    Le32(static_cast<std::uint32_t>(static_cast<std::int32_t>(value)));
  } else {
    // Eight bytes of two's complement hold any int64 (pickle needs no
    // shortest form).
    Op(kLong1);
    out_ += '\x08';
    const auto bits = static_cast<std::uint64_t>(value);
    for (int k = 0; k < 8; ++k) out_ += static_cast<char>((bits >> (8 * k)) & 0xFF);
  }
}

void PickleEmitter::None() { Op(kNone); }

void PickleEmitter::Bool(bool value) { Op(value ? kNewTrue : kNewFalse); }

void PickleEmitter::Finish() {
  Op(kStop);
  sink_(out_);
  out_.clear();
}

}  // namespace peakmem::writers
