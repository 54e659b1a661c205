// The trace builder's name table: every name a trace binds, to what it is
// bound to, in the order the names first appeared.
//
// Why not a general hash map: at 10^6 statements the table holds ~700,000
// names, and nearly every lookup is for a name bound a few statements
// earlier, so what a lookup costs is set by where the table keeps its
// entries. A Swiss table keeps them at hashed places: each new name touched
// a random control byte and a random 32-byte slot (two cache misses, and in
// a virtual machine two slow TLB misses), and a lookup of a recent name
// landed on those same random lines. Here the entries are appended in order
// (a new name writes where the last one was written; a recent name is read
// where it was just written) and the hashed part is an index of 8-byte
// slots, each holding 32 bits of the name's hash and its entry's position:
// one random line per new name, half the bytes of the old slots, and a
// false match on the hash bits costs a compare once in 4 billion probes.
// Measured on the text reader (docs/scaling.md): see the sixth session.
//
// Names are never erased (the builder only marks a deleted name's entry).
// Pointers returned by Find and Insert stay valid until the next Insert.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include "peakmem/huge_page_allocator.h"
#include "peakmem/name_key.h"
#include "peakmem/string_hash.h"

namespace peakmem {

// `Hash` maps a name to 64 bits (tests give a poor one to force collisions).
template <typename V, typename Hash = StringHash>
class NameTable {
 public:
  struct Entry {
    NameKey key;  // holds a short name itself; a long one must outlive the table
    V value;
  };

  // Room for `n` names without growing the index.
  void Reserve(std::size_t n) {
    entries_.reserve(n);
    if (n > capacity() / 2) Rehash(SlotsFor(n));
  }

  // The value bound to `name`, or nullptr.
  V* Find(std::string_view name) {
    const std::size_t at = Probe(name, Hash()(name));
    return slots_.empty() || slots_[at] == 0 ? nullptr : &entries_[Index(slots_[at])].value;
  }
  const V* Find(std::string_view name) const { return const_cast<NameTable*>(this)->Find(name); }

  // The entry for `name`, added with `value` if there was none; second:
  // whether it was added.
  std::pair<V*, bool> Insert(std::string_view name, const V& value) {
    if (entries_.size() + 1 > capacity() / 2) Rehash(SlotsFor(entries_.size() + 1));
    const std::uint64_t hash = Hash()(name);
    const std::size_t at = Probe(name, hash);
    if (slots_[at] != 0) return {&entries_[Index(slots_[at])].value, false};
    if (entries_.size() >= kMaxEntries) throw std::length_error("too many names for the name table");
    slots_[at] = (std::uint64_t{Tag(hash)} << 32) | entries_.size();
    entries_.push_back(Entry{NameKey(name), value});
    return {&entries_.back().value, true};
  }

  void InsertOrAssign(std::string_view name, const V& value) {
    auto [slot, inserted] = Insert(name, value);
    if (!inserted) *slot = value;
  }

  std::size_t size() const { return entries_.size(); }
  // Every entry, in the order the names were first inserted.
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  static constexpr std::size_t kMaxEntries = 0xFFFFFFFFu;
  // The tag is the hash's high half, never 0 (0 marks an empty slot).
  static std::uint32_t Tag(std::uint64_t hash) { return static_cast<std::uint32_t>(hash >> 32) | 1u; }
  static std::size_t Index(std::uint64_t slot) { return static_cast<std::uint32_t>(slot); }
  std::size_t capacity() const { return slots_.size(); }
  // A power of two at least twice `n` (the index is at most half full).
  static std::size_t SlotsFor(std::size_t n) {
    std::size_t slots = 16;
    while (slots / 2 < n) {
      if (slots > (static_cast<std::size_t>(-1) >> 2)) throw std::length_error("name table too big");
      slots *= 2;
    }
    return slots;
  }

  // The slot holding `name`, or the empty slot where it would go (linear
  // probing from the hash's low bits). The index must not be empty.
  std::size_t Probe(std::string_view name, std::uint64_t hash) const {
    if (slots_.empty()) return 0;
    const std::size_t mask = slots_.size() - 1;
    const std::uint32_t tag = Tag(hash);
    for (std::size_t at = hash & mask;; at = (at + 1) & mask) {
      const std::uint64_t slot = slots_[at];
      if (slot == 0) return at;
      if (static_cast<std::uint32_t>(slot >> 32) == tag &&
          NameKeyEq()(entries_[Index(slot)].key, name)) {
        return at;
      }
    }
  }

  void Rehash(std::size_t slots) {
    slots_.assign(slots, 0);
    const std::size_t mask = slots - 1;
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      const std::uint64_t hash = Hash()(entries_[i].key.view());
      std::size_t at = hash & mask;
      while (slots_[at] != 0) at = (at + 1) & mask;
      slots_[at] = (std::uint64_t{Tag(hash)} << 32) | i;
    }
  }

  std::vector<Entry> entries_;
  // Probed at random: on huge pages when big (see huge_page_allocator.h).
  std::vector<std::uint64_t, HugePageAllocator<std::uint64_t>> slots_;
};

}  // namespace peakmem
