// A fast hash for the short strings peakmem keys maps by: value names,
// type strings, breakdown keys, op names.
//
// Name lookups run several times per statement on traces of millions of
// statements; the general-purpose string hash (std::hash, which Abseil's
// maps use for std::string_view in this build) costs more than the rest of
// a lookup. This one reads 8 bytes at a time and ends with MurmurHash3's
// 64-bit finalizer, so every output bit depends on every input bit (Abseil's
// Swiss tables use both the low 7 bits and the high bits).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace peakmem {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    std::uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
    const char* p = s.data();
    std::size_t n = s.size();
    while (n >= 8) {
      std::uint64_t w;
      std::memcpy(&w, p, 8);
      h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
      h ^= h >> 31;
      p += 8;
      n -= 8;
    }
    if (n > 0) {
      std::uint64_t w = 0;
      for (std::size_t i = 0; i < n; ++i) {
        w |= static_cast<std::uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
      }
      h = (h ^ w) * 0x94D049BB133111EBull;
      h ^= h >> 29;
    }
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 33;
    return static_cast<std::size_t>(h);
  }
};

}  // namespace peakmem
