// The trace builder's name table: every name a trace binds, to what it is
// bound to, in the order the names first appeared.
//
// Why not a general hash map: at 10^6 statements the table holds ~700,000
// names, and nearly every lookup is for a name bound a few statements
// earlier, so what a lookup costs is set by where the table keeps its
// entries. A Swiss table keeps them at hashed places: each new name touched
// a random control byte and a random 32-byte slot (two cache misses, and in
// a virtual machine two slow TLB misses), and a lookup of a recent name
// landed on those same random lines. Here:
//
// * the entries are appended in order: a new name writes where the last one
//   was written, and a recent one is read where it was just written;
// * the index is 8-byte slots, each holding 32 bits of the name's hash and
//   its entry's position (linear probing, at most half full): a false match
//   on the hash bits costs a compare once in 4 billion probes;
// * the names added since the last batch are indexed in a small table of
//   their own (`recent_`, a few thousand slots: in cache), and enter the
//   big index a batch at a time, the batch's slots fetched before any is
//   written, so their cache misses overlap instead of stalling one insert
//   each;
// * a filter (`maybe_`, one bit per index slot, so at least two per name;
//   each name sets two bits of one cache line) says when a name is
//   certainly not in the big index: a new name, or one never bound, costs no
//   probe of it. One bit per slot, not four: at 10^6 statements the filter
//   is 512 KB instead of 2 MB, and the line a new name reads is far more
//   often in cache; ~8% of new names then get a false "maybe" (a probe)
//   instead of ~1% (measured: docs/scaling.md).
//
// Measured on the text reader: see docs/scaling.md ("Design", the text reader).
// Names are never erased (the builder only marks a deleted name's entry).
// Pointers returned by Find and Insert stay valid until the next Insert.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include "peakmem/ir/huge_page_allocator.h"
#include "peakmem/ir/name_key.h"
#include "peakmem/ir/string_hash.h"

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
    const std::size_t at = Locate(name, Hash()(name));
    return at == kAbsent ? nullptr : &entries_[at].value;
  }
  const V* Find(std::string_view name) const { return const_cast<NameTable*>(this)->Find(name); }

  // The entry for `name`, added with `value` if there was none; second:
  // whether it was added.
  std::pair<V*, bool> Insert(std::string_view name, const V& value) {
    const std::uint64_t hash = Hash()(name);
    if (const std::size_t at = Locate(name, hash); at != kAbsent) {
      return {&entries_[at].value, false};
    }
    if (entries_.size() >= kMaxEntries) throw std::length_error("too many names for the name table");
    if (entries_.size() + 1 > capacity() / 2) Rehash(SlotsFor(entries_.size() + 1));
    const std::size_t index = entries_.size();
    entries_.push_back(Entry{NameKey(name), value});
    Mark(hash);
    recent_[FreeSlot(recent_, hash)] = SlotFor(hash, index);
    recent_hashes_.push_back(hash);
    if (recent_hashes_.size() == recent_.size() / 4) Flush();
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
  static constexpr std::size_t kAbsent = static_cast<std::size_t>(-1);
  static constexpr std::size_t kMaxEntries = 0xFFFFFFFFu;
  static constexpr std::size_t kMaxRecentSlots = std::size_t{1} << 13;  // 64 KB
  using Slots = std::vector<std::uint64_t, HugePageAllocator<std::uint64_t>>;

  // The tag is the hash's high half, never 0 (0 marks an empty slot).
  static std::uint32_t Tag(std::uint64_t hash) { return static_cast<std::uint32_t>(hash >> 32) | 1u; }
  static std::uint64_t SlotFor(std::uint64_t hash, std::size_t index) {
    return (std::uint64_t{Tag(hash)} << 32) | index;
  }
  static std::size_t Index(std::uint64_t slot) { return static_cast<std::uint32_t>(slot); }
  std::size_t capacity() const { return slots_.size(); }
  // A power of two at least twice `n` (the index is at most half full).
  static std::size_t SlotsFor(std::size_t n) {
    std::size_t slots = 16;
    while (slots / 2 < n) {
      if (slots > (static_cast<std::size_t>(-1) >> 4)) throw std::length_error("name table too big");
      slots *= 2;
    }
    return slots;
  }

  // The entry of `name` in `slots`, or kAbsent (linear probing from the
  // hash's low bits; `slots` is a power of two in size, never full).
  std::size_t ProbeFor(const Slots& slots, std::string_view name, std::uint64_t hash) const {
    const std::size_t mask = slots.size() - 1;
    const std::uint32_t tag = Tag(hash);
    for (std::size_t at = hash & mask;; at = (at + 1) & mask) {
      const std::uint64_t slot = slots[at];
      if (slot == 0) return kAbsent;
      if (static_cast<std::uint32_t>(slot >> 32) == tag &&
          NameKeyEq()(entries_[Index(slot)].key, name)) {
        return Index(slot);
      }
    }
  }
  // The empty slot where a name not in `slots` goes.
  static std::size_t FreeSlot(const Slots& slots, std::uint64_t hash) {
    const std::size_t mask = slots.size() - 1;
    std::size_t at = hash & mask;
    while (slots[at] != 0) at = (at + 1) & mask;
    return at;
  }

  // The entry of `name`: among the recent names, else (unless the filter
  // rules it out) in the big index.
  std::size_t Locate(std::string_view name, std::uint64_t hash) const {
    if (slots_.empty()) return kAbsent;
    if (const std::size_t at = ProbeFor(recent_, name, hash); at != kAbsent) return at;
    if (!MaybeIndexed(hash)) return kAbsent;
    return ProbeFor(slots_, name, hash);
  }

  // The filter: 1 bit per index slot in 64-byte blocks; a name sets two
  // bits of one block (one cache line per check), the block and the bits
  // chosen by hash bits the index's low bits do not use (the bits may share
  // the tag's: the filter only ever says "maybe").
  std::size_t FilterWord(std::uint64_t hash, int which) const {
    const std::size_t block = static_cast<std::size_t>(hash >> 20) & (maybe_.size() / 8 - 1);
    return block * 8 + ((hash >> (which == 0 ? 44 : 50)) & 7);
  }
  static std::uint64_t FilterMask(std::uint64_t hash, int which) {
    return std::uint64_t{1} << ((hash >> (which == 0 ? 47 : 53)) & 63);
  }
  void Mark(std::uint64_t hash) {
    for (int k = 0; k < 2; ++k) maybe_[FilterWord(hash, k)] |= FilterMask(hash, k);
  }
  bool MaybeIndexed(std::uint64_t hash) const {
    for (int k = 0; k < 2; ++k) {
      if ((maybe_[FilterWord(hash, k)] & FilterMask(hash, k)) == 0) return false;
    }
    return true;
  }

  // Moves the recent names into the big index: every slot of the batch is
  // fetched first, then written.
  void Flush() {
    const std::size_t mask = slots_.size() - 1;
    for (std::uint64_t hash : recent_hashes_) __builtin_prefetch(&slots_[hash & mask], 1);
    std::size_t index = entries_.size() - recent_hashes_.size();
    for (std::uint64_t hash : recent_hashes_) slots_[FreeSlot(slots_, hash)] = SlotFor(hash, index++);
    recent_hashes_.clear();
    std::fill(recent_.begin(), recent_.end(), 0);
  }

  // A new big index of `slots` slots holding every entry (and an empty
  // recent table and a filter to match).
  void Rehash(std::size_t slots) {
    slots_.assign(slots, 0);
    maybe_.assign(std::max<std::size_t>(8, slots / 64), 0);  // 1 bit per slot, whole blocks
    recent_.assign(std::min(slots, kMaxRecentSlots), 0);
    recent_hashes_.clear();
    recent_hashes_.reserve(recent_.size() / 4);
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      const std::uint64_t hash = Hash()(entries_[i].key.view());
      slots_[FreeSlot(slots_, hash)] = SlotFor(hash, i);
      Mark(hash);
    }
  }

  std::vector<Entry> entries_;
  // Probed at random: on huge pages when big (see huge_page_allocator.h).
  Slots slots_;                               // entries before the recent ones
  Slots recent_;                              // the recent ones (at most a quarter full)
  std::vector<std::uint64_t> recent_hashes_;  // their hashes, in entry order
  std::vector<std::uint64_t> maybe_;          // the filter over every entry
};

}  // namespace peakmem
