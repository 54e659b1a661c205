// CudaCachingAllocator against a deliberately simple reference model of the
// same rules, on random alloc/free sequences: the reference keeps a plain
// list of segments, each a vector of blocks in address order, finds blocks
// by linear scans, rounds by stepping through powers of two and counts
// bytes by summing the blocks after every event. The two must agree on
// allocated / reserved / requested bytes, segments, retries and
// out-of-memory errors after every event, and on the whole layout often.
// (Garbage collection is left to the hand-derived test.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <tuple>
#include <vector>

#include "peakmem/allocators/cuda_caching_allocator.h"

namespace peakmem {
namespace {

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

std::vector<std::tuple<std::int64_t, std::int64_t, bool, StorageId>> LayoutOf(const CudaCachingAllocator& a) {
  std::vector<std::tuple<std::int64_t, std::int64_t, bool, StorageId>> out;
  for (const CudaSegmentInfo& seg : a.Snapshot().segments) {
    for (const CudaBlockInfo& b : seg.blocks) out.emplace_back(b.address, b.size, b.allocated, b.storage);
  }
  return out;
}

std::int64_t RandomSize(std::mt19937_64& rng) {
  // Small, medium (1-10 MiB) and large (10-90 MiB) requests, log-uniform
  // within each, plus exact multiples of 512 now and then.
  std::uniform_int_distribution<int> kind(0, 9);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const int k = kind(rng);
  double lo = 1, hi = static_cast<double>(MiB);
  if (k >= 6 && k < 9) lo = static_cast<double>(MiB), hi = 10.0 * MiB;
  if (k == 9) lo = 10.0 * MiB, hi = 90.0 * MiB;
  auto n = static_cast<std::int64_t>(lo * std::pow(hi / lo, unit(rng)));
  if (unit(rng) < 0.2) n = (n + 511) / 512 * 512;
  return std::max<std::int64_t>(n, 1);
}

// Returns the model's stats at the end.
CudaAllocatorStats RunRandom(const CudaCachingOptions& options, std::uint64_t seed, int events) {
  std::mt19937_64 rng(seed);
  CudaCachingAllocator model(options);
  ReferenceAllocator ref(options);
  std::vector<StorageId> live;
  StorageId next_id = 0;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int e = 0; e < events; ++e) {
    const double r = unit(rng);
    if (r < 0.005) {
      model.EmptyCache();
      ref.ReleaseWholeSegments();
    } else if (live.empty() || r < 0.55) {
      const std::int64_t n = RandomSize(rng);
      const StorageId id = next_id++;
      const bool got = model.Malloc(id, n);
      EXPECT_EQ(got, ref.Malloc(id, n)) << "event " << e << " malloc " << n;
      if (got) live.push_back(id);
    } else {
      std::uniform_int_distribution<std::size_t> pick(0, live.size() - 1);
      const std::size_t i = pick(rng);
      model.Release(live[i]);
      ref.Free(live[i]);
      live[i] = live.back();
      live.pop_back();
    }
    const CudaAllocatorStats& s = model.stats();
    const bool same = s.allocated_bytes == ref.Allocated() && s.reserved_bytes == ref.Reserved() &&
                      s.requested_bytes == ref.Requested() && s.segments == ref.Segments() &&
                      s.num_alloc_retries == ref.retries && s.num_ooms == ref.ooms &&
                      (e % 50 != 0 || LayoutOf(model) == ref.Layout());
    if (!same) {
      ADD_FAILURE() << "event " << e << ": allocated " << s.allocated_bytes << " vs " << ref.Allocated()
                    << ", reserved " << s.reserved_bytes << " vs " << ref.Reserved() << ", requested "
                    << s.requested_bytes << " vs " << ref.Requested() << ", segments " << s.segments << " vs "
                    << ref.Segments() << ", retries " << s.num_alloc_retries << " vs " << ref.retries
                    << ", ooms " << s.num_ooms << " vs " << ref.ooms;
      return s;
    }
  }
  EXPECT_EQ(LayoutOf(model), ref.Layout());
  return model.stats();
}

std::vector<CudaCachingOptions> Configs() {
  std::vector<CudaCachingOptions> configs;
  CudaCachingOptions o;
  o.stop_at_oom = false;
  configs.push_back(o);  // unbounded, PyTorch's defaults
  o.device_capacity = 300 * MiB;
  configs.push_back(o);  // runs out: release_cached_blocks, retries, OOMs
  o.max_split_size = 40 * MiB;
  configs.push_back(o);  // + oversize blocks and release_available_cached_blocks
  o.max_split_size = 20 * MiB;
  o.max_non_split_rounding_size = 32 * MiB;
  o.roundup_power2_divisions.fill(4);
  configs.push_back(o);
  o.device_capacity = 120 * MiB;
  o.max_split_size = 64 * MiB;
  for (int i = 0; i < kCudaRoundupIntervals; ++i) o.roundup_power2_divisions[i] = i < 4 ? 8 : (i < 6 ? 0 : 2);
  configs.push_back(o);
  return configs;
}

TEST(CudaCachingAllocatorReference, RandomSequencesAgreeWithSimpleModel) {
  const std::vector<CudaCachingOptions> configs = Configs();
  for (std::size_t c = 0; c < configs.size(); ++c) {
    std::int64_t retries = 0, ooms = 0, device_frees = 0;
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      SCOPED_TRACE(testing::Message() << "config " << c << " seed " << seed);
      CudaAllocatorStats s = RunRandom(configs[c], seed * 7919 + c, 3000);
      if (HasFailure()) return;
      retries += s.num_alloc_retries, ooms += s.num_ooms, device_frees += s.num_device_free;
    }
    // The bounded configurations take the slow paths (the sequences are
    // meant to): cached segments freed, retries and out-of-memory errors.
    if (configs[c].device_capacity > 0) {
      EXPECT_GT(retries, 0) << "config " << c;
      EXPECT_GT(ooms, 0) << "config " << c;
      EXPECT_GT(device_frees, 0) << "config " << c;
    }
    std::printf("config %zu: %lld retries, %lld OOMs, %lld cudaFree\n", c, static_cast<long long>(retries),
                static_cast<long long>(ooms), static_cast<long long>(device_frees));
  }
}

}  // namespace
}  // namespace peakmem
