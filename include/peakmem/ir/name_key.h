// A name-table key that holds a short name in itself.
//
// The trace builder's name table maps every name a trace binds to its value.
// At 10^6 statements it has ~700,000 entries, and a lookup that finds its
// name must compare the name's bytes with the key's. A key that only viewed
// the name where the trace text defines it sent every such compare to a
// random place in hundreds of MB of text: a cache miss on top of the probe's.
// Names of up to 15 bytes (Thunder's t123, C4, ...) are copied into the key,
// next to the probe's slot; longer ones are viewed where they lie (they must
// outlive the key, as before: the builder keeps its names).
//
// 16 bytes, like the std::string_view it replaces. Hashes and compares as the
// name it holds (NameKeyHash, NameKeyEq: both also take a std::string_view,
// so lookups need no key).
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

#include "peakmem/ir/string_hash.h"

namespace peakmem {

class NameKey {
 public:
  static constexpr std::size_t kInline = 15;

  NameKey(std::string_view name) {  // NOLINT: converts implicitly, as a view would
    if (name.size() <= kInline) {
      std::memset(bytes_, 0, sizeof bytes_);
      if (!name.empty()) std::memcpy(bytes_, name.data(), name.size());
      bytes_[kInline] = static_cast<char>(name.size());
    } else {
      const char* data = name.data();
      const std::uint64_t tagged = static_cast<std::uint64_t>(name.size()) | kLongTag;
      std::memcpy(bytes_, &data, sizeof data);
      std::memcpy(bytes_ + 8, &tagged, sizeof tagged);
    }
  }

  std::string_view view() const {
    const auto tag = static_cast<unsigned char>(bytes_[kInline]);
    if (tag <= kInline) return std::string_view(bytes_, tag);
    const char* data = nullptr;
    std::uint64_t tagged = 0;
    std::memcpy(&data, bytes_, sizeof data);
    std::memcpy(&tagged, bytes_ + 8, sizeof tagged);
    return std::string_view(data, static_cast<std::size_t>(tagged & ~kLongTag));
  }
  operator std::string_view() const { return view(); }  // NOLINT

 private:
  // Long names: the size in the low 56 bits of the second word, 0xFF in its
  // top byte (the last byte, where a short name keeps its length).
  static constexpr std::uint64_t kLongTag = std::uint64_t{0xFF} << 56;
  static_assert(sizeof(void*) == 8, "NameKey packs a pointer into 8 bytes");
  char bytes_[16];
};
static_assert(sizeof(NameKey) == 16);

struct NameKeyHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view name) const noexcept { return StringHash()(name); }
  std::size_t operator()(const NameKey& key) const noexcept { return StringHash()(key.view()); }
};

struct NameKeyEq {
  using is_transparent = void;
  static std::string_view View(std::string_view s) { return s; }
  static std::string_view View(const NameKey& k) { return k.view(); }
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const noexcept {
    return View(a) == View(b);
  }
};

}  // namespace peakmem
