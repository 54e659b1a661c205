// A model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp,
// DeviceCachingAllocator) for one device and one stream, fed by the
// allocation event stream (sim/alloc_events.h): an Alloc event asks it for
// the storage's bytes, a Free event gives them back. It says what PyTorch's
// memory_stats() would: allocated bytes (rounded blocks handed out),
// reserved bytes (cudaMalloc'd segments), requested bytes (the storages'
// own bytes), segment counts, retries and out-of-memory errors, and keeps
// the segments' layout at a peak for writers.
//
// What is modeled, each rule named after the function it comes from:
//   round_size, roundup_power2_next_division: 512-byte blocks or
//     power-of-two divisions (cuda_alloc_config.h);
//   get_pool: requests up to 1 MiB (kSmallSize) in the small pool, the rest
//     in the large pool;
//   get_allocation_size: a new segment is 2 MiB (small), 20 MiB (large
//     under 10 MiB) or the size rounded up to 2 MiB;
//   get_free_block: best fit, the pool ordered by (size, address); with
//     max_split_size, requests below it never take blocks of it or more,
//     and larger requests take such a block only if it is less than
//     max_non_split_rounding_size (20 MiB) larger;
//   should_split / alloc_found_block: a small block splits when 512 B or more
//     is left, a large one when more than 1 MiB is left and the request is
//     below max_split_size;
//   free_block / try_merge_blocks: a freed block merges with free neighbours;
//   malloc's slow path: garbage_collect_cached_blocks (with a memory
//     fraction and garbage_collection_threshold), alloc_block (cudaMalloc,
//     failing past device_capacity or the memory fraction),
//     release_available_cached_blocks (oversize blocks only) then
//     alloc_block, release_cached_blocks (every fully free segment) then
//     alloc_block as a retry (num_alloc_retries), then out of memory.
// Not modeled: expandable_segments (the constructor rejects it), streams
// other than one (no cross-stream reuse rules, no record_stream events),
// CUDA graph private pools, and free-memory callbacks (none are registered
// in plain PyTorch). cudaMalloc's own addresses are not knowable: segment
// i's address is the sum of the sizes of the segments cudaMalloc'd before
// it, so later segments sit higher (addresses only break ties between
// equal-sized blocks).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "peakmem/allocators/cuda_alloc_config.h"
#include "peakmem/sim/alloc_events.h"

namespace peakmem {

// "No such step": no peak yet, no out-of-memory error.
inline constexpr std::int32_t kCudaNoStep = std::numeric_limits<std::int32_t>::min();

// memory_stats()'s "all" figures, current and peak.
struct CudaAllocatorStats {
  std::int64_t allocated_bytes = 0;  // allocated_bytes.all.current: sizes of the blocks handed out
  std::int64_t allocated_bytes_peak = 0;
  std::int64_t reserved_bytes = 0;   // reserved_bytes.all.current: sizes of the segments held
  std::int64_t reserved_bytes_peak = 0;
  std::int64_t requested_bytes = 0;  // requested_bytes.all.current: the live storages' bytes
  std::int64_t requested_bytes_peak = 0;
  std::int64_t segments = 0;         // segment.all.current
  std::int64_t segments_peak = 0;
  // The step of the event that first reached each peak (kBeforeFirstStep:
  // the arguments; kCudaNoStep while nothing was allocated).
  std::int32_t allocated_peak_step = kCudaNoStep;
  std::int32_t reserved_peak_step = kCudaNoStep;
  std::int64_t num_alloc_retries = 0;  // alloc_block calls after release_cached_blocks
  std::int64_t num_ooms = 0;
  std::int64_t num_device_alloc = 0;  // cudaMalloc calls that succeeded
  std::int64_t num_device_free = 0;   // cudaFree calls
  // The first out-of-memory error: its step, storage and request size
  // after rounding (what PyTorch's message says it "tried to allocate" is
  // the segment size, oom_alloc_size).
  std::int32_t oom_step = kCudaNoStep;
  StorageId oom_storage = kNoStorage;
  std::int64_t oom_size = 0;
  std::int64_t oom_alloc_size = 0;
};

// A block of a segment, as torch.cuda.memory_snapshot() lists it.
struct CudaBlockInfo {
  std::int64_t address = 0;
  std::int64_t size = 0;            // the block's size (rounded)
  std::int64_t requested_size = 0;  // the storage's bytes (0 when free)
  bool allocated = false;
  StorageId storage = kNoStorage;   // the storage in it (kNoStorage when free)
};

struct CudaSegmentInfo {
  std::int64_t address = 0;
  std::int64_t size = 0;
  bool small_pool = false;              // segment_type "small" (else "large")
  std::vector<CudaBlockInfo> blocks;    // in address order, covering the segment
};

struct CudaMemoryLayout {
  bool captured = false;
  std::int32_t step = kBeforeFirstStep;  // the step of the event after which it was taken
  std::int64_t allocated_bytes = 0;
  std::int64_t reserved_bytes = 0;
  std::int64_t requested_bytes = 0;
  std::vector<CudaSegmentInfo> segments;  // in address order
};

// What the allocator does, as PyTorch's memory history records it
// (record_trace's TraceEntry actions): a segment cudaMalloc'd (alloc_block:
// SEGMENT_ALLOC) or cudaFree'd (release_block: SEGMENT_FREE), a block handed
// to a storage (alloc_found_block: ALLOC, with the storage's own bytes) or
// given back (free: FREE_REQUESTED, then free_block: FREE_COMPLETED, one
// call here: one stream has no events to wait for), a request that ran out
// of memory (OOM, with the rounded size). Addresses are the model's.
class CudaAllocatorObserver {
 public:
  virtual ~CudaAllocatorObserver() = default;
  virtual void SegmentAlloc(std::int64_t address, std::int64_t size, bool small_pool) = 0;
  virtual void SegmentFree(std::int64_t address, std::int64_t size) = 0;
  virtual void BlockAlloc(StorageId storage, std::int64_t address, std::int64_t requested) = 0;
  virtual void BlockFree(StorageId storage, std::int64_t address, std::int64_t requested) = 0;
  virtual void OutOfMemory(StorageId storage, std::int64_t size) = 0;
};

class CudaCachingAllocator final : public AllocSink {
 public:
  // Throws std::invalid_argument when ValidateCudaCachingOptions finds fault.
  explicit CudaCachingAllocator(const CudaCachingOptions& options = {});
  ~CudaCachingAllocator() override;
  CudaCachingAllocator(const CudaCachingAllocator&) = delete;
  CudaCachingAllocator& operator=(const CudaCachingAllocator&) = delete;

  // The stream. Storages of another device (CudaCachingOptions::device) and
  // zero-byte storages (PyTorch's allocate hands out nullptr for 0 bytes)
  // are ignored, and so are frees of storages the model never allocated.
  void Alloc(StorageId id, const StorageRecord& storage, std::int32_t step) override;
  void Free(StorageId id, const StorageRecord& storage, std::int32_t step) override;

  // The same by hand (tests, callers without a stream): Malloc returns
  // false on out of memory; Release frees what Malloc gave `id`.
  bool Malloc(StorageId id, std::int64_t bytes, std::int32_t step = 0);
  void Release(StorageId id, std::int32_t step = 0);
  // torch.cuda.empty_cache(): release_cached_blocks.
  void EmptyCache();

  const CudaAllocatorStats& stats() const;
  // True once an out-of-memory error stopped the run (stop_at_oom).
  bool stopped() const;
  // The segments now (torch.cuda.memory_snapshot()).
  CudaMemoryLayout Snapshot() const;
  // Tells `observer` (not owned; nullptr: none) what happens from now on.
  void SetObserver(CudaAllocatorObserver* observer);
  // The layout at the peak CudaCachingOptions::layout_at names (captured =
  // false when kNone or nothing was allocated).
  const CudaMemoryLayout& PeakLayout();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// Replays `log` through a CudaCachingAllocator; `peak_layout`, when given,
// receives its PeakLayout(). Throws std::invalid_argument as the
// constructor does.
CudaAllocatorStats SimulateCudaCaching(const AllocLog& log, const CudaCachingOptions& options,
                                       CudaMemoryLayout* peak_layout = nullptr);

}  // namespace peakmem
