// A deliberately simple reference model of PyTorch's CUDA caching
// allocator's rules, for tests: it keeps a plain list of segments, each a
// vector of blocks in address order, finds blocks by linear scans, rounds by
// stepping through powers of two and counts bytes by summing the blocks
// after every event. CudaCachingAllocator must agree with it
// (src/allocators/cuda_caching_allocator_reference_test.cc on random
// alloc/free sequences, src/models/training_step_stream_test.cc on random
// training steps' streams). Garbage collection is not modelled.
#pragma once

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

#include "peakmem/allocators/cuda_caching_allocator.h"

namespace peakmem::testing_util {

constexpr std::int64_t MiB = 1 << 20;

class ReferenceAllocator {
 public:
  explicit ReferenceAllocator(const CudaCachingOptions& o) : o_(o) {}

  struct Blk {
    std::int64_t size;
    bool allocated;
    StorageId id;
    std::int64_t requested;
  };
  struct Seg {
    std::int64_t addr;
    bool small;
    std::vector<Blk> blocks;
    std::int64_t Size() const {
      std::int64_t s = 0;
      for (const Blk& b : blocks) s += b.size;
      return s;
    }
  };

  std::int64_t Round(std::int64_t n) const {
    if (n < 512) return 512;
    int interval = 0;
    while (interval < 15 && (MiB << (interval + 1)) <= n) ++interval;
    const std::int64_t div = o_.roundup_power2_divisions[interval];
    if (div > 1 && n > 512 * div) {
      std::int64_t p = 1;
      while (p * 2 <= n) p *= 2;
      const std::int64_t step = p / div;
      return (n + step - 1) / step * step;
    }
    return (n + 511) / 512 * 512;
  }

  bool Malloc(StorageId id, std::int64_t n) {
    const std::int64_t s = Round(n);
    const bool small = s <= MiB;
    const std::int64_t seg_size = small ? 2 * MiB : (s < 10 * MiB ? 20 * MiB : (s + 2 * MiB - 1) / (2 * MiB) * (2 * MiB));
    const std::int64_t mss = o_.max_split_size;
    // Best fit over every free block of the pool: smallest, then lowest address.
    Seg* best_seg = nullptr;
    std::size_t best = 0;
    std::int64_t best_addr = 0;
    for (Seg& seg : segs_) {
      if (seg.small != small) continue;
      std::int64_t addr = seg.addr;
      for (std::size_t i = 0; i < seg.blocks.size(); addr += seg.blocks[i].size, ++i) {
        const Blk& b = seg.blocks[i];
        if (b.allocated || b.size < s) continue;
        if (!best_seg || std::tie(b.size, addr) < std::tie(best_seg->blocks[best].size, best_addr)) {
          best_seg = &seg, best = i, best_addr = addr;
        }
      }
    }
    if (best_seg) {
      const std::int64_t bs = best_seg->blocks[best].size;
      if ((s < mss && bs >= mss) || (s >= mss && bs >= s + o_.max_non_split_rounding_size)) best_seg = nullptr;
    }
    if (!best_seg) {
      if (!NewSegment(small, seg_size) && !(ReleaseOversize(small, s) && NewSegment(small, seg_size))) {
        ReleaseWholeSegments();
        ++retries;
        if (!NewSegment(small, seg_size)) {
          ++ooms;
          return false;
        }
      }
      best_seg = &segs_.back();
      best = 0;
    }
    std::vector<Blk>& blocks = best_seg->blocks;
    const std::int64_t rest = blocks[best].size - s;
    const bool split = small ? rest >= 512 : (s < mss && rest > MiB);
    if (split) {
      blocks[best].size = s;
      blocks.insert(blocks.begin() + static_cast<std::ptrdiff_t>(best) + 1, Blk{rest, false, kNoStorage, 0});
    }
    blocks[best].allocated = true;
    blocks[best].id = id;
    blocks[best].requested = n;
    return true;
  }

  void Free(StorageId id) {
    for (Seg& seg : segs_) {
      for (Blk& b : seg.blocks) {
        if (b.allocated && b.id == id) {
          b = Blk{b.size, false, kNoStorage, 0};
          // Merge runs of free blocks.
          std::vector<Blk> merged;
          for (const Blk& x : seg.blocks) {
            if (!x.allocated && !merged.empty() && !merged.back().allocated) {
              merged.back().size += x.size;
            } else {
              merged.push_back(x);
            }
          }
          seg.blocks = merged;
          return;
        }
      }
    }
  }

  void ReleaseWholeSegments() {
    std::erase_if(segs_, [](const Seg& s) { return s.blocks.size() == 1 && !s.blocks[0].allocated; });
  }

  std::int64_t Allocated() const { return Sum([](const Blk& b) { return b.allocated ? b.size : 0; }); }
  std::int64_t Requested() const { return Sum([](const Blk& b) { return b.allocated ? b.requested : 0; }); }
  std::int64_t Reserved() const { return Sum([](const Blk& b) { return b.size; }); }
  std::int64_t Segments() const { return static_cast<std::int64_t>(segs_.size()); }

  // (address, size, allocated, storage) of every block, in address order.
  std::vector<std::tuple<std::int64_t, std::int64_t, bool, StorageId>> Layout() const {
    std::vector<std::tuple<std::int64_t, std::int64_t, bool, StorageId>> out;
    for (const Seg& seg : segs_) {
      std::int64_t addr = seg.addr;
      for (const Blk& b : seg.blocks) out.emplace_back(addr, b.size, b.allocated, b.id), addr += b.size;
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  std::int64_t retries = 0;
  std::int64_t ooms = 0;

 private:
  template <typename F>
  std::int64_t Sum(F f) const {
    std::int64_t total = 0;
    for (const Seg& seg : segs_) {
      for (const Blk& b : seg.blocks) total += f(b);
    }
    return total;
  }

  bool NewSegment(bool small, std::int64_t size) {
    const std::int64_t limit = o_.device_capacity > 0 ? o_.device_capacity : std::numeric_limits<std::int64_t>::max();
    if (Reserved() + size > limit) return false;
    segs_.push_back(Seg{next_addr_, small, {Blk{size, false, kNoStorage, 0}}});
    next_addr_ += size;
    return true;
  }

  // Whole free oversize segments of the pool, sorted by (size, address):
  // free the first >= max(s, mss), or else from the largest down.
  bool ReleaseOversize(bool small, std::int64_t s) {
    if (o_.max_split_size == kCudaNoMaxSplitSize) return false;
    std::vector<std::pair<std::int64_t, std::int64_t>> whole;  // (size, addr) of every free block of the pool
    for (const Seg& seg : segs_) {
      std::int64_t addr = seg.addr;
      for (const Blk& b : seg.blocks) {
        if (seg.small == small && !b.allocated) whole.emplace_back(b.size, addr);
        addr += b.size;
      }
    }
    std::sort(whole.begin(), whole.end());
    const std::int64_t key = std::max(s, o_.max_split_size);
    auto drop = [&](std::int64_t addr) {
      std::erase_if(segs_, [&](const Seg& seg) { return seg.addr == addr; });
    };
    for (const auto& [size, addr] : whole) {
      if (size >= key) {
        drop(addr);
        return true;
      }
    }
    std::int64_t released = 0;
    for (auto it = whole.rbegin(); it != whole.rend() && released < key && it->first >= o_.max_split_size; ++it) {
      released += it->first;
      drop(it->second);
    }
    return released >= key;
  }

  CudaCachingOptions o_;
  std::vector<Seg> segs_;
  std::int64_t next_addr_ = 0;
};


}  // namespace peakmem::testing_util
