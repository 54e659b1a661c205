#include "peakmem/allocators/cuda_caching_allocator.h"

#include <absl/container/btree_set.h>

#include <algorithm>
#include <map>
#include <stdexcept>

namespace peakmem {
namespace {

using Index = std::uint32_t;
constexpr Index kNil = 0xFFFFFFFFu;

// A block: a piece of a segment, free or handed out. Blocks of a segment
// are linked in address order (Block::prev / Block::next in PyTorch).
struct Block {
  std::uint64_t addr = 0;
  std::uint64_t size = 0;
  std::uint64_t requested = 0;  // the storage's bytes while allocated
  std::int64_t gc_count_base = 0;
  Index prev = kNil;
  Index next = kNil;
  StorageId storage = kNoStorage;
  bool allocated = false;
  bool small = false;
  bool is_split() const { return prev != kNil || next != kNil; }
};

// A free block in a pool, ordered as BlockComparatorSize orders them
// (stream, size, address), with one stream.
struct PoolKey {
  std::uint64_t size;
  std::uint64_t addr;
  Index block;
  friend bool operator<(const PoolKey& a, const PoolKey& b) {
    return a.size != b.size ? a.size < b.size : a.addr < b.addr;
  }
};

// BlockPool: the free blocks of the small or the large pool.
struct Pool {
  absl::btree_set<PoolKey> blocks;
  std::int64_t get_free_blocks_call_count = 0;
};

void Increase(std::int64_t& current, std::int64_t& peak, std::int64_t amount) {
  current += amount;
  peak = std::max(peak, current);
}

}  // namespace

class CudaCachingAllocator::Impl {
 public:
  explicit Impl(const CudaCachingOptions& options) : o_(options) {
    std::string invalid = ValidateCudaCachingOptions(options);
    if (!invalid.empty()) throw std::invalid_argument("CUDA caching allocator: " + invalid);
    set_fraction_ = options.per_process_memory_fraction > 0.0;
    if (set_fraction_) {
      // setMemoryFraction: static_cast<size_t>(fraction * device_total).
      allowed_memory_maximum_ = static_cast<std::uint64_t>(options.per_process_memory_fraction *
                                                           static_cast<double>(options.device_capacity));
    }
    gc_enabled_ = set_fraction_ && options.garbage_collection_threshold > 0.0;
    max_split_size_ = static_cast<std::uint64_t>(options.max_split_size);
    max_non_split_rounding_ = static_cast<std::uint64_t>(options.max_non_split_rounding_size);
  }

  bool Wanted(const StorageRecord& s) const {
    return !stopped_ && s.bytes > 0 && (o_.device < 0 || s.device == o_.device);
  }

  // DeviceCachingAllocator::malloc.
  bool Malloc(StorageId id, std::int64_t orig_size, std::int32_t step) {
    if (stopped_) return false;
    if (o_.layout_at == CudaLayoutAt::kPeakReserved) CapturePending();
    const std::uint64_t size = static_cast<std::uint64_t>(CudaRoundSize(orig_size, o_));
    const bool small = size <= static_cast<std::uint64_t>(kCudaSmallSize);  // get_pool
    Pool& pool = small ? small_ : large_;
    const std::uint64_t alloc_size = static_cast<std::uint64_t>(CudaAllocationSize(static_cast<std::int64_t>(size)));
    step_ = step;

    Index block = GetFreeBlock(pool, size);
    if (block == kNil) {
      // The slow path may free segments: the layout at a peak is taken first.
      CapturePending();
      if (gc_enabled_) GarbageCollectCachedBlocks();
      block = AllocBlock(pool, small, alloc_size, /*is_retry=*/false);
      if (block == kNil && ReleaseAvailableCachedBlocks(pool, size)) {
        block = AllocBlock(pool, small, alloc_size, false);
      }
      if (block == kNil) {
        ReleaseCachedBlocks();
        block = AllocBlock(pool, small, alloc_size, /*is_retry=*/true);
      }
    }
    if (block == kNil) {
      ++stats_.num_ooms;
      if (stats_.oom_step == kCudaNoStep) {
        stats_.oom_step = step;
        stats_.oom_storage = id;
        stats_.oom_size = static_cast<std::int64_t>(size);
        stats_.oom_alloc_size = static_cast<std::int64_t>(alloc_size);
      }
      if (observer_ != nullptr) observer_->OutOfMemory(id, static_cast<std::int64_t>(size));
      if (o_.stop_at_oom) stopped_ = true;
      return false;
    }
    AllocFoundBlock(pool, block, size, static_cast<std::uint64_t>(orig_size), id, ShouldSplit(block, size));
    return true;
  }

  // DeviceCachingAllocator::free (one stream: no events to wait for).
  void Free(StorageId id, std::int32_t step) {
    if (stopped_ || id >= block_of_.size() || block_of_[id] == kNil) return;
    CapturePending();
    step_ = step;
    Index b = block_of_[id];
    block_of_[id] = kNil;
    Block& block = blocks_[b];
    if (observer_ != nullptr) {
      observer_->BlockFree(id, static_cast<std::int64_t>(block.addr), static_cast<std::int64_t>(block.requested));
    }
    block.allocated = false;
    block.storage = kNoStorage;
    stats_.allocated_bytes -= static_cast<std::int64_t>(block.size);
    stats_.requested_bytes -= static_cast<std::int64_t>(block.requested);
    block.requested = 0;
    FreeBlock(b);
  }

  // DeviceCachingAllocator::emptyCache.
  void EmptyCache() {
    CapturePending();
    ReleaseCachedBlocks();
  }

  CudaMemoryLayout Snapshot() const;
  const CudaMemoryLayout& PeakLayout() {
    CapturePending();
    return peak_layout_;
  }
  const CudaAllocatorStats& stats() const { return stats_; }
  void SetObserver(CudaAllocatorObserver* observer) { observer_ = observer; }
  bool stopped() const { return stopped_; }

 private:
  Index NewBlock() {
    if (!free_ids_.empty()) {
      Index i = free_ids_.back();
      free_ids_.pop_back();
      blocks_[i] = Block{};
      return i;
    }
    blocks_.emplace_back();
    return static_cast<Index>(blocks_.size() - 1);
  }
  void DeleteBlock(Index i) { free_ids_.push_back(i); }
  Pool& PoolOf(const Block& b) { return b.small ? small_ : large_; }

  // BlockPool::insert_into_blocks: the block's age for garbage collection
  // counts from now.
  void InsertIntoPool(Pool& pool, Index i) {
    Block& b = blocks_[i];
    b.gc_count_base = pool.get_free_blocks_call_count;
    pool.blocks.insert(PoolKey{b.size, b.addr, i});
  }
  void EraseFromPool(Pool& pool, Index i) { pool.blocks.erase(PoolKey{blocks_[i].size, blocks_[i].addr, i}); }

  // get_free_block: the smallest free block that fits (the lowest address
  // among equals), unless max_split_size rules it out; no further search.
  Index GetFreeBlock(Pool& pool, std::uint64_t size) {
    if (gc_enabled_) ++pool.get_free_blocks_call_count;
    auto it = pool.blocks.lower_bound(PoolKey{size, 0, 0});
    if (it == pool.blocks.end()) return kNil;
    // Do not return an oversized block for a request below max_split_size.
    if (size < max_split_size_ && it->size >= max_split_size_) return kNil;
    // An oversized block serves a large request only within the rounding limit.
    if (size >= max_split_size_ && it->size >= size + max_non_split_rounding_) return kNil;
    Index block = it->block;
    pool.blocks.erase(it);
    return block;
  }

  // should_split.
  bool ShouldSplit(Index i, std::uint64_t size) const {
    const Block& b = blocks_[i];
    const std::uint64_t remaining = b.size - size;
    if (b.small) return remaining >= static_cast<std::uint64_t>(kCudaMinBlockSize);
    return size < max_split_size_ && remaining > static_cast<std::uint64_t>(kCudaSmallSize);
  }

  // alloc_found_block: hands out `size` bytes of block `i` (the front part
  // when split; the rest goes back to the pool).
  void AllocFoundBlock(Pool& pool, Index i, std::uint64_t size, std::uint64_t orig_size, StorageId id, bool split) {
    if (split) {
      Index r = NewBlock();
      Block& block = blocks_[i];
      Block& rest = blocks_[r];
      rest.addr = block.addr + size;
      rest.size = block.size - size;
      rest.small = block.small;
      rest.prev = i;
      rest.next = block.next;
      if (rest.next != kNil) blocks_[rest.next].prev = r;
      block.next = r;
      block.size = size;
      InsertIntoPool(pool, r);
    }
    Block& block = blocks_[i];
    block.allocated = true;
    block.requested = orig_size;
    block.storage = id;
    if (id >= block_of_.size()) block_of_.resize(std::max<std::size_t>(id + 1, block_of_.size() * 2), kNil);
    block_of_[id] = i;
    if (observer_ != nullptr) {
      observer_->BlockAlloc(id, static_cast<std::int64_t>(block.addr), static_cast<std::int64_t>(orig_size));
    }
    Increase(stats_.requested_bytes, stats_.requested_bytes_peak, static_cast<std::int64_t>(orig_size));
    const std::int64_t before = stats_.allocated_bytes_peak;
    Increase(stats_.allocated_bytes, stats_.allocated_bytes_peak, static_cast<std::int64_t>(block.size));
    if (stats_.allocated_bytes_peak > before) {
      stats_.allocated_peak_step = step_;
      if (o_.layout_at == CudaLayoutAt::kPeakAllocated) capture_pending_ = true, pending_step_ = step_;
    }
  }

  // free_block + try_merge_blocks: merges with free neighbours (the merged
  // block keeps the lower one's slot) and returns the block to its pool.
  void FreeBlock(Index i) {
    Pool& pool = PoolOf(blocks_[i]);
    const Index prev = blocks_[i].prev;
    if (prev != kNil && !blocks_[prev].allocated) {
      EraseFromPool(pool, prev);
      Absorb(prev, i);
      i = prev;
    }
    const Index next = blocks_[i].next;
    if (next != kNil && !blocks_[next].allocated) {
      EraseFromPool(pool, next);
      Absorb(i, next);
    }
    InsertIntoPool(pool, i);
  }

  // `lower` takes over its next neighbour `upper` (its bytes and its place
  // in the segment's list); upper's slot is deleted.
  void Absorb(Index lower, Index upper) {
    Block& b = blocks_[lower];
    b.size += blocks_[upper].size;
    b.next = blocks_[upper].next;
    if (b.next != kNil) blocks_[b.next].prev = lower;
    DeleteBlock(upper);
  }

  // alloc_block: cudaMalloc of a new segment, which fails past the memory
  // fraction or the device's capacity.
  Index AllocBlock(Pool& pool, bool small, std::uint64_t size, bool is_retry) {
    (void)pool;
    if (is_retry) ++stats_.num_alloc_retries;
    if (set_fraction_ && total_allocated_memory_ + size > allowed_memory_maximum_) return kNil;
    if (o_.device_capacity > 0 && total_allocated_memory_ + size > static_cast<std::uint64_t>(o_.device_capacity)) {
      return kNil;
    }
    total_allocated_memory_ += size;
    Index i = NewBlock();
    Block& b = blocks_[i];
    b.addr = next_address_;
    b.size = size;
    b.small = small;
    next_address_ += size;
    segments_.emplace(b.addr, i);
    if (observer_ != nullptr) {
      observer_->SegmentAlloc(static_cast<std::int64_t>(b.addr), static_cast<std::int64_t>(size), small);
    }
    ++stats_.num_device_alloc;
    Increase(stats_.segments, stats_.segments_peak, 1);
    const std::int64_t before = stats_.reserved_bytes_peak;
    Increase(stats_.reserved_bytes, stats_.reserved_bytes_peak, static_cast<std::int64_t>(size));
    if (stats_.reserved_bytes_peak > before) {
      stats_.reserved_peak_step = step_;
      if (o_.layout_at == CudaLayoutAt::kPeakReserved) capture_pending_ = true, pending_step_ = step_;
    }
    return i;
  }

  // release_block: cudaFree of a whole free segment.
  void ReleaseBlock(Pool& pool, Index i) {
    const Block& b = blocks_[i];
    if (observer_ != nullptr) {
      observer_->SegmentFree(static_cast<std::int64_t>(b.addr), static_cast<std::int64_t>(b.size));
    }
    EraseFromPool(pool, i);
    segments_.erase(b.addr);
    total_allocated_memory_ -= b.size;
    ++stats_.num_device_free;
    --stats_.segments;
    stats_.reserved_bytes -= static_cast<std::int64_t>(b.size);
    DeleteBlock(i);
  }

  bool ReleaseAvailableCachedBlocks(Pool& pool, std::uint64_t size);
  void ReleaseCachedBlocks();
  void GarbageCollectCachedBlocks();
  void CapturePending() {
    if (!capture_pending_) return;
    capture_pending_ = false;
    peak_layout_ = Snapshot();
    peak_layout_.step = pending_step_;
  }

  CudaCachingOptions o_;
  CudaAllocatorObserver* observer_ = nullptr;
  bool set_fraction_ = false;
  bool gc_enabled_ = false;
  bool stopped_ = false;
  // The state after the event that last raised the peak is the peak's
  // layout; it is taken just before anything changes it (the next free or
  // segment release; for reserved bytes, the next event), not at every rise.
  bool capture_pending_ = false;
  std::int32_t pending_step_ = kBeforeFirstStep;
  std::int32_t step_ = kBeforeFirstStep;
  std::uint64_t allowed_memory_maximum_ = 0;
  std::uint64_t max_split_size_ = 0;
  std::uint64_t max_non_split_rounding_ = 0;
  std::uint64_t total_allocated_memory_ = 0;  // the bytes cudaMalloc'd (reserved)
  std::uint64_t next_address_ = 0;
  std::vector<Block> blocks_;
  std::vector<Index> free_ids_;
  std::vector<Index> block_of_;  // StorageId -> its block (kNil: none)
  std::map<std::uint64_t, Index> segments_;  // address -> first block
  Pool small_;
  Pool large_;
  CudaAllocatorStats stats_;
  CudaMemoryLayout peak_layout_;
};

// release_available_cached_blocks: with max_split_size set, frees the
// smallest oversize block of the request's pool that is at least
// max(size, max_split_size); if there is none, frees oversize blocks from
// the largest down until that much is freed (and reports failure when it
// runs out of them first, having freed them anyway).
bool CudaCachingAllocator::Impl::ReleaseAvailableCachedBlocks(Pool& pool, std::uint64_t size) {
  if (o_.max_split_size == kCudaNoMaxSplitSize) return false;
  const std::uint64_t key_size = std::max(size, max_split_size_);
  auto it = pool.blocks.lower_bound(PoolKey{key_size, 0, 0});
  if (it != pool.blocks.end()) {
    ReleaseBlock(pool, it->block);
    return true;
  }
  if (it == pool.blocks.begin()) return false;
  // The walk only reads sizes, which releasing does not change: collect
  // first (a btree erase moves the others), then release in the same order.
  std::vector<Index> to_release;
  std::uint64_t released = 0;
  do {
    --it;
    if (it->size < max_split_size_) break;
    released += it->size;
    to_release.push_back(it->block);
  } while (released < key_size && it != pool.blocks.begin());
  for (Index i : to_release) ReleaseBlock(pool, i);
  return released >= key_size;
}

// release_cached_blocks / release_blocks: cudaFree every free block that is
// a whole segment, large pool first.
void CudaCachingAllocator::Impl::ReleaseCachedBlocks() {
  for (Pool* pool : {&large_, &small_}) {
    std::vector<Index> whole;
    for (const PoolKey& key : pool->blocks) {
      if (!blocks_[key.block].is_split()) whole.push_back(key.block);
    }
    for (Index i : whole) ReleaseBlock(*pool, i);
  }
}

// garbage_collect_cached_blocks: once the segments pass
// garbage_collection_threshold of the allowed memory, frees whole free
// large-pool segments whose age (get_free_block calls since they were
// cached) is at least the average, in rounds, until the excess is freed or
// a round frees nothing.
void CudaCachingAllocator::Impl::GarbageCollectCachedBlocks() {
  const auto gc_threshold = static_cast<std::uint64_t>(o_.garbage_collection_threshold *
                                                       static_cast<double>(allowed_memory_maximum_));
  if (total_allocated_memory_ <= gc_threshold) return;
  const std::uint64_t target_size = total_allocated_memory_ - gc_threshold;
  auto gc_count = [&](const Block& b) {
    return static_cast<std::uint64_t>(static_cast<int>(large_.get_free_blocks_call_count - b.gc_count_base));
  };
  std::uint64_t gc_reclaimed = 0;
  std::uint64_t total_age = 0;
  int freeable_block_count = 0;
  for (const PoolKey& key : large_.blocks) {
    if (!blocks_[key.block].is_split()) {
      total_age += gc_count(blocks_[key.block]);
      ++freeable_block_count;
    }
  }
  if (freeable_block_count == 0) return;
  bool block_freed = true;
  while (gc_reclaimed < target_size && block_freed && freeable_block_count > 0) {
    const double age_threshold = static_cast<double>(total_age) / freeable_block_count;
    block_freed = false;
    std::vector<Index> old;
    for (const PoolKey& key : large_.blocks) {
      const Block& b = blocks_[key.block];
      if (!b.is_split() && static_cast<double>(gc_count(b)) >= age_threshold) old.push_back(key.block);
    }
    for (Index i : old) {
      block_freed = true;
      gc_reclaimed += blocks_[i].size;
      total_age -= gc_count(blocks_[i]);
      --freeable_block_count;
      ReleaseBlock(large_, i);
    }
  }
}

CudaMemoryLayout CudaCachingAllocator::Impl::Snapshot() const {
  CudaMemoryLayout layout;
  layout.captured = true;
  layout.step = step_;
  layout.allocated_bytes = stats_.allocated_bytes;
  layout.reserved_bytes = stats_.reserved_bytes;
  layout.requested_bytes = stats_.requested_bytes;
  layout.segments.reserve(segments_.size());
  for (const auto& [addr, head] : segments_) {
    CudaSegmentInfo& seg = layout.segments.emplace_back();
    seg.address = static_cast<std::int64_t>(addr);
    seg.small_pool = blocks_[head].small;
    for (Index i = head; i != kNil; i = blocks_[i].next) {
      const Block& b = blocks_[i];
      seg.blocks.push_back(CudaBlockInfo{static_cast<std::int64_t>(b.addr), static_cast<std::int64_t>(b.size),
                                         static_cast<std::int64_t>(b.requested), b.allocated, b.storage});
      seg.size += static_cast<std::int64_t>(b.size);
    }
  }
  return layout;
}

CudaCachingAllocator::CudaCachingAllocator(const CudaCachingOptions& options)
    : impl_(std::make_unique<Impl>(options)) {}
CudaCachingAllocator::~CudaCachingAllocator() = default;

void CudaCachingAllocator::Alloc(StorageId id, const StorageRecord& storage, std::int32_t step) {
  if (impl_->Wanted(storage)) impl_->Malloc(id, storage.bytes, step);
}
void CudaCachingAllocator::Free(StorageId id, const StorageRecord& storage, std::int32_t step) {
  (void)storage;
  impl_->Free(id, step);
}
bool CudaCachingAllocator::Malloc(StorageId id, std::int64_t bytes, std::int32_t step) {
  if (bytes <= 0) return !impl_->stopped();
  return impl_->Malloc(id, bytes, step);
}
void CudaCachingAllocator::Release(StorageId id, std::int32_t step) { impl_->Free(id, step); }
void CudaCachingAllocator::EmptyCache() { impl_->EmptyCache(); }
const CudaAllocatorStats& CudaCachingAllocator::stats() const { return impl_->stats(); }
bool CudaCachingAllocator::stopped() const { return impl_->stopped(); }
CudaMemoryLayout CudaCachingAllocator::Snapshot() const { return impl_->Snapshot(); }
void CudaCachingAllocator::SetObserver(CudaAllocatorObserver* observer) { impl_->SetObserver(observer); }
const CudaMemoryLayout& CudaCachingAllocator::PeakLayout() { return impl_->PeakLayout(); }

CudaAllocatorStats SimulateCudaCaching(const AllocLog& log, const CudaCachingOptions& options,
                                       CudaMemoryLayout* peak_layout) {
  CudaCachingAllocator allocator(options);
  Replay(log, allocator);
  if (peak_layout) *peak_layout = allocator.PeakLayout();
  return allocator.stats();
}

}  // namespace peakmem
