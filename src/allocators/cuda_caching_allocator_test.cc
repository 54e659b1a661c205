// CudaCachingAllocator, one rule of c10/cuda/CUDACachingAllocator.cpp per
// test (named in the test's name), each on a short sequence whose
// allocated / reserved bytes are worked out by hand in the comments.
// Segment addresses: the first segment is at 0, each next one right after
// the ones cudaMalloc'd before it.
#include "peakmem/allocators/cuda_caching_allocator.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace peakmem {
namespace {

constexpr std::int64_t MiB = 1 << 20;

CudaCachingOptions WithMaxSplit(std::int64_t mb) {
  CudaCachingOptions o;
  o.max_split_size = mb * MiB;
  return o;
}

// The block holding storage `id` now.
CudaBlockInfo BlockOf(const CudaCachingAllocator& a, StorageId id) {
  for (const CudaSegmentInfo& seg : a.Snapshot().segments) {
    for (const CudaBlockInfo& b : seg.blocks) {
      if (b.allocated && b.storage == id) return b;
    }
  }
  ADD_FAILURE() << "storage " << id << " holds no block";
  return {};
}

TEST(CudaCachingAllocator, SmallPoolRoundSize512And2MiBSegment) {
  CudaCachingAllocator a;
  // 1 B -> a 512 B block from a new 2 MiB small segment, split (the rest,
  // 2 MiB - 512, is >= 512).
  ASSERT_TRUE(a.Malloc(0, 1));
  EXPECT_EQ(a.stats().allocated_bytes, 512);
  EXPECT_EQ(a.stats().requested_bytes, 1);
  EXPECT_EQ(a.stats().reserved_bytes, 2 * MiB);
  EXPECT_EQ(a.stats().segments, 1);
  // 1000 B -> 1024 B, cut from the same segment's free rest.
  ASSERT_TRUE(a.Malloc(1, 1000));
  EXPECT_EQ(a.stats().allocated_bytes, 512 + 1024);
  EXPECT_EQ(a.stats().reserved_bytes, 2 * MiB);
  CudaMemoryLayout l = a.Snapshot();
  ASSERT_EQ(l.segments.size(), 1u);
  EXPECT_TRUE(l.segments[0].small_pool);
  ASSERT_EQ(l.segments[0].blocks.size(), 3u);
  EXPECT_EQ(l.segments[0].blocks[1].address, 512);
  EXPECT_EQ(l.segments[0].blocks[1].size, 1024);
  EXPECT_EQ(l.segments[0].blocks[2].size, 2 * MiB - 1536);
  EXPECT_FALSE(l.segments[0].blocks[2].allocated);
}

TEST(CudaCachingAllocator, GetPoolOneMiBIsSmallAboveIsLarge) {
  CudaCachingAllocator a;
  // Exactly 1 MiB (kSmallSize) is small: a 2 MiB segment.
  ASSERT_TRUE(a.Malloc(0, 1 * MiB));
  EXPECT_EQ(a.stats().reserved_bytes, 2 * MiB);
  // 1 MiB + 1 -> 1 MiB + 512, large: a 20 MiB segment (get_allocation_size).
  ASSERT_TRUE(a.Malloc(1, 1 * MiB + 1));
  EXPECT_EQ(a.stats().allocated_bytes, 1 * MiB + 1 * MiB + 512);
  EXPECT_EQ(a.stats().reserved_bytes, 2 * MiB + 20 * MiB);
  EXPECT_EQ(a.stats().segments, 2);
  EXPECT_FALSE(a.Snapshot().segments[1].small_pool);
}

TEST(CudaCachingAllocator, GetAllocationSizeLargeRequests) {
  CudaCachingAllocator a;
  // 9 MiB (< 10 MiB) -> a 20 MiB segment, split: 11 MiB stay cached.
  ASSERT_TRUE(a.Malloc(0, 9 * MiB));
  EXPECT_EQ(a.stats().reserved_bytes, 20 * MiB);
  // 10 MiB -> the cached 11 MiB block fits (best fit) and the 1 MiB left
  // is not more than kSmallSize: not split, the whole 11 MiB is handed out.
  ASSERT_TRUE(a.Malloc(1, 10 * MiB));
  EXPECT_EQ(a.stats().allocated_bytes, 9 * MiB + 11 * MiB);
  EXPECT_EQ(a.stats().reserved_bytes, 20 * MiB);
  // 11 MiB + 1 -> 11 MiB + 512 -> a 12 MiB segment (rounded up to 2 MiB);
  // 1 MiB - 512 left: not split, allocated 12 MiB.
  ASSERT_TRUE(a.Malloc(2, 11 * MiB + 1));
  EXPECT_EQ(a.stats().reserved_bytes, 32 * MiB);
  EXPECT_EQ(a.stats().allocated_bytes, 32 * MiB);
  EXPECT_EQ(a.stats().requested_bytes, 9 * MiB + 10 * MiB + 11 * MiB + 1);
}

TEST(CudaCachingAllocator, ShouldSplitLargeRemainderMustExceed1MiB) {
  CudaCachingAllocator a;
  // 19 MiB -> a 20 MiB segment; 1 MiB left is not > kSmallSize: whole block.
  ASSERT_TRUE(a.Malloc(0, 19 * MiB));
  EXPECT_EQ(a.stats().allocated_bytes, 20 * MiB);
  a.Release(0);
  // 19 MiB - 512 takes the cached 20 MiB block; 1 MiB + 512 left: split.
  ASSERT_TRUE(a.Malloc(1, 19 * MiB - 512));
  EXPECT_EQ(a.stats().allocated_bytes, 19 * MiB - 512);
  EXPECT_EQ(a.stats().reserved_bytes, 20 * MiB);
  EXPECT_EQ(a.Snapshot().segments[0].blocks.size(), 2u);
}

TEST(CudaCachingAllocator, ShouldSplitSmallRemainderOf512Splits) {
  CudaCachingAllocator a;
  // [0: 1536][1536: 512][rest]: free the 1536 block, then ask for 1024:
  // best fit is the 1536 block (smaller than the rest), 512 left >= 512: split.
  ASSERT_TRUE(a.Malloc(0, 1536));
  ASSERT_TRUE(a.Malloc(1, 512));
  a.Release(0);
  ASSERT_TRUE(a.Malloc(2, 1024));
  EXPECT_EQ(BlockOf(a, 2).address, 0);
  EXPECT_EQ(a.stats().allocated_bytes, 1024 + 512);
  const CudaMemoryLayout snapshot = a.Snapshot();
  const auto& blocks = snapshot.segments[0].blocks;
  ASSERT_EQ(blocks.size(), 4u);
  EXPECT_EQ(blocks[1].size, 512);
  EXPECT_FALSE(blocks[1].allocated);
}

TEST(CudaCachingAllocator, GetFreeBlockBestFitSmallestThenLowestAddress) {
  CudaCachingAllocator a;
  // Three unsplit segments: 12 MiB @0, 14 MiB @12 MiB, 12 MiB @26 MiB, all freed.
  ASSERT_TRUE(a.Malloc(0, 12 * MiB));
  ASSERT_TRUE(a.Malloc(1, 14 * MiB));
  ASSERT_TRUE(a.Malloc(2, 12 * MiB));
  a.Release(2);
  a.Release(1);
  a.Release(0);
  // 11 MiB: the 12 MiB blocks are the smallest fit; the lower one first.
  ASSERT_TRUE(a.Malloc(3, 11 * MiB));
  EXPECT_EQ(BlockOf(a, 3).address, 0);
  EXPECT_EQ(BlockOf(a, 3).size, 12 * MiB);  // 1 MiB left: not split
  ASSERT_TRUE(a.Malloc(4, 11 * MiB));
  EXPECT_EQ(BlockOf(a, 4).address, 26 * MiB);
  // Then the 14 MiB block, split (3 MiB left > 1 MiB).
  ASSERT_TRUE(a.Malloc(5, 11 * MiB));
  EXPECT_EQ(BlockOf(a, 5).address, 12 * MiB);
  EXPECT_EQ(BlockOf(a, 5).size, 11 * MiB);
  EXPECT_EQ(a.stats().allocated_bytes, 12 * MiB + 12 * MiB + 11 * MiB);
  EXPECT_EQ(a.stats().reserved_bytes, 38 * MiB);
  EXPECT_EQ(a.stats().segments, 3);
}

TEST(CudaCachingAllocator, FreeBlockMergesNeighboursAndEmptyCacheReleasesWholeSegments) {
  CudaCachingAllocator a;
  ASSERT_TRUE(a.Malloc(0, 512));
  ASSERT_TRUE(a.Malloc(1, 512));
  ASSERT_TRUE(a.Malloc(2, 512));
  a.Release(0);
  a.Release(2);  // merges with the free rest: [free 512][b 512][free 2 MiB - 1024]
  EXPECT_EQ(a.Snapshot().segments[0].blocks.size(), 3u);
  a.EmptyCache();  // the segment is split: nothing to release
  EXPECT_EQ(a.stats().reserved_bytes, 2 * MiB);
  a.Release(1);  // merges both ways: one free 2 MiB block
  ASSERT_EQ(a.Snapshot().segments[0].blocks.size(), 1u);
  EXPECT_EQ(a.stats().allocated_bytes, 0);
  a.EmptyCache();
  EXPECT_EQ(a.stats().reserved_bytes, 0);
  EXPECT_EQ(a.stats().segments, 0);
  EXPECT_EQ(a.stats().segments_peak, 1);
  EXPECT_EQ(a.stats().reserved_bytes_peak, 2 * MiB);
  EXPECT_EQ(a.stats().num_device_free, 1);
}

// test_cuda.py TestCuda.test_memory_snapshot: "make x the second block in a
// segment". A 2*311*411 float tensor (1,022,568 B -> 1,022,976) takes a new
// small segment and is freed at once; `unused` (310*411*4 = 509,640 ->
// 509,952) takes the segment's front, and x (311*411*4 = 511,284 -> 511,488)
// the block right after it.
TEST(CudaCachingAllocator, TestMemorySnapshotXIsTheSecondBlock) {
  CudaCachingAllocator a;
  ASSERT_TRUE(a.Malloc(0, 2 * 311 * 411 * 4));
  a.Release(0);
  ASSERT_TRUE(a.Malloc(1, 310 * 411 * 4));
  ASSERT_TRUE(a.Malloc(2, 311 * 411 * 4));
  CudaBlockInfo x = BlockOf(a, 2);
  EXPECT_EQ(x.address, 509952);
  EXPECT_EQ(x.size, 511488);
  EXPECT_EQ(x.requested_size, 311 * 411 * 4);
  EXPECT_EQ(a.stats().segments, 1);
}

TEST(CudaCachingAllocator, MaxSplitSizeOversizeBlockReusedWholeWithinRoundingLimit) {
  CudaCachingAllocator a(WithMaxSplit(40));
  // 50 MiB >= max_split_size: its own 50 MiB segment.
  ASSERT_TRUE(a.Malloc(0, 50 * MiB));
  a.Release(0);
  // 45 MiB: the cached 50 MiB block is < 45 + 20 MiB: taken, never split.
  ASSERT_TRUE(a.Malloc(1, 45 * MiB));
  EXPECT_EQ(a.stats().allocated_bytes, 50 * MiB);
  EXPECT_EQ(a.stats().requested_bytes, 45 * MiB);
  EXPECT_EQ(a.stats().reserved_bytes, 50 * MiB);
}

TEST(CudaCachingAllocator, MaxSplitSizeSmallerRequestNeverTakesOversizeBlock) {
  CudaCachingAllocator a(WithMaxSplit(40));
  ASSERT_TRUE(a.Malloc(0, 50 * MiB));
  a.Release(0);
  // 30 MiB < max_split_size and the best fit (50 MiB) is >= it: no reuse,
  // a new 30 MiB segment.
  ASSERT_TRUE(a.Malloc(1, 30 * MiB));
  EXPECT_EQ(a.stats().reserved_bytes, 80 * MiB);
  EXPECT_EQ(BlockOf(a, 1).address, 50 * MiB);
  // Without max_split_size the 50 MiB block is split: 30 MiB out, 20 left.
  CudaCachingAllocator b;
  ASSERT_TRUE(b.Malloc(0, 50 * MiB));
  b.Release(0);
  ASSERT_TRUE(b.Malloc(1, 30 * MiB));
  EXPECT_EQ(b.stats().reserved_bytes, 50 * MiB);
  EXPECT_EQ(b.stats().allocated_bytes, 30 * MiB);
}

TEST(CudaCachingAllocator, MaxSplitSizeLargeBlockRoundingLimitIs20MiB) {
  CudaCachingAllocator a(WithMaxSplit(40));
  ASSERT_TRUE(a.Malloc(0, 70 * MiB));
  a.Release(0);
  // 45 MiB: the cached 70 MiB block is >= 45 + 20 MiB: refused; a new
  // segment of 45 MiB rounded up to 2 MiB = 46 MiB.
  ASSERT_TRUE(a.Malloc(1, 45 * MiB));
  EXPECT_EQ(a.stats().reserved_bytes, 116 * MiB);
  EXPECT_EQ(BlockOf(a, 1).size, 46 * MiB);
  // 51 MiB: 70 < 51 + 20: taken whole.
  ASSERT_TRUE(a.Malloc(2, 51 * MiB));
  EXPECT_EQ(BlockOf(a, 2).size, 70 * MiB);
  // max_non_split_rounding_mb:64 widens the limit: 70 < 45 + 64.
  CudaCachingOptions wide = WithMaxSplit(40);
  wide.max_non_split_rounding_size = 64 * MiB;
  CudaCachingAllocator b(wide);
  ASSERT_TRUE(b.Malloc(0, 70 * MiB));
  b.Release(0);
  ASSERT_TRUE(b.Malloc(1, 45 * MiB));
  EXPECT_EQ(b.stats().reserved_bytes, 70 * MiB);
}

TEST(CudaCachingAllocator, ReleaseAvailableCachedBlocksFreesOneLargeEnoughOversizeBlock) {
  CudaCachingOptions o = WithMaxSplit(40);
  o.device_capacity = 100 * MiB;
  CudaCachingAllocator a(o);
  ASSERT_TRUE(a.Malloc(0, 80 * MiB));
  a.Release(0);
  // 50 MiB: the 80 MiB block is >= 50 + 20: refused. cudaMalloc(50 MiB)
  // fails (80 + 50 > 100); release_available_cached_blocks frees the
  // smallest cached block >= max(50, 40) MiB, the 80 MiB one; cudaMalloc
  // then succeeds. No retry counted (that is after release_cached_blocks).
  ASSERT_TRUE(a.Malloc(1, 50 * MiB));
  EXPECT_EQ(a.stats().reserved_bytes, 50 * MiB);
  EXPECT_EQ(a.stats().reserved_bytes_peak, 80 * MiB);
  EXPECT_EQ(a.stats().num_device_free, 1);
  EXPECT_EQ(a.stats().num_alloc_retries, 0);
  EXPECT_EQ(a.stats().num_ooms, 0);
}

TEST(CudaCachingAllocator, ReleaseAvailableCachedBlocksFreesLargestFirstWhenNoneIsBigEnough) {
  CudaCachingOptions o = WithMaxSplit(40);
  o.device_capacity = 100 * MiB;
  CudaCachingAllocator a(o);
  // Cached oversize blocks of 40 and 44 MiB (84 MiB reserved).
  ASSERT_TRUE(a.Malloc(0, 40 * MiB));
  ASSERT_TRUE(a.Malloc(1, 44 * MiB));
  a.Release(0);
  a.Release(1);
  // 30 MiB (< 40): both cached blocks are oversize, refused; cudaMalloc
  // fails (84 + 30 > 100); the smallest block >= 40 MiB is freed (the 40
  // MiB one), 44 + 30 = 74 fits.
  ASSERT_TRUE(a.Malloc(2, 30 * MiB));
  EXPECT_EQ(a.stats().reserved_bytes, 74 * MiB);
  a.Release(2);
  // 60 MiB: no block >= 60; cudaMalloc fails (74 + 60 > 100); oversize
  // blocks are freed from the largest down until 60 MiB are: 44 (< 60),
  // then the 30 MiB block is below max_split_size: stop, 44 < 60 -> false
  // (the 44 MiB segment is gone all the same). release_cached_blocks then
  // frees the 30 MiB segment and the retry gets 60 MiB.
  ASSERT_TRUE(a.Malloc(3, 60 * MiB));
  EXPECT_EQ(a.stats().reserved_bytes, 60 * MiB);
  EXPECT_EQ(a.stats().num_alloc_retries, 1);
  EXPECT_EQ(a.stats().num_device_free, 3);
  EXPECT_EQ(a.stats().segments, 1);
}

TEST(CudaCachingAllocator, ReleaseCachedBlocksThenRetry) {
  CudaCachingOptions o;
  o.device_capacity = 40 * MiB;
  CudaCachingAllocator a(o);
  // A whole cached 2 MiB small segment and a whole cached 30 MiB one.
  ASSERT_TRUE(a.Malloc(0, 512));
  ASSERT_TRUE(a.Malloc(1, 30 * MiB));
  a.Release(0);
  a.Release(1);
  // 36 MiB: nothing cached fits; cudaMalloc fails (32 + 36 > 40); no
  // max_split_size, so release_cached_blocks frees both segments and the
  // retry (counted) gets the 36 MiB segment.
  ASSERT_TRUE(a.Malloc(2, 36 * MiB));
  EXPECT_EQ(a.stats().reserved_bytes, 36 * MiB);
  EXPECT_EQ(a.stats().segments, 1);
  EXPECT_EQ(a.stats().num_alloc_retries, 1);
  EXPECT_EQ(a.stats().num_device_free, 2);
}

TEST(CudaCachingAllocator, OutOfMemoryAfterRetryStopsTheRun) {
  CudaCachingOptions o;
  o.device_capacity = 40 * MiB;
  CudaCachingAllocator a(o);
  ASSERT_TRUE(a.Malloc(0, 30 * MiB, /*step=*/3));
  // 12 MiB: a 12 MiB segment would make 42 > 40; nothing cached to free;
  // the retry fails too: out of memory.
  EXPECT_FALSE(a.Malloc(1, 12 * MiB, /*step=*/5));
  EXPECT_EQ(a.stats().num_ooms, 1);
  EXPECT_EQ(a.stats().num_alloc_retries, 1);
  EXPECT_EQ(a.stats().oom_step, 5);
  EXPECT_EQ(a.stats().oom_storage, 1u);
  EXPECT_EQ(a.stats().oom_alloc_size, 12 * MiB);
  EXPECT_TRUE(a.stopped());
  // The program has died: later requests change nothing.
  EXPECT_FALSE(a.Malloc(2, 512, 6));
  a.Release(0, 6);
  EXPECT_EQ(a.stats().allocated_bytes, 30 * MiB);
  EXPECT_EQ(a.stats().reserved_bytes, 30 * MiB);
}

TEST(CudaCachingAllocator, PeakLayoutIsTakenBeforeTheOutOfMemoryPathFreesSegments) {
  CudaCachingOptions o;
  o.device_capacity = 40 * MiB;
  CudaCachingAllocator a(o);
  // Step 0: a 512 B block (2 MiB small segment), freed at step 1: the
  // allocated peak (512 B) is at step 0, with one segment.
  ASSERT_TRUE(a.Malloc(0, 512, 0));
  a.Release(0, 1);
  ASSERT_TRUE(a.Malloc(1, 30 * MiB, 2));  // new peak: 30 MiB at step 2, segments 2 + 30 MiB
  // Step 3: 12 MiB does not fit (32 + 12 > 40); release_cached_blocks frees
  // the small segment, the retry fails: out of memory. The layout at the
  // peak (step 2) still shows both segments.
  EXPECT_FALSE(a.Malloc(2, 12 * MiB, 3));
  const CudaMemoryLayout& peak = a.PeakLayout();
  EXPECT_EQ(peak.step, 2);
  EXPECT_EQ(peak.allocated_bytes, 30 * MiB);
  EXPECT_EQ(peak.reserved_bytes, 32 * MiB);
  EXPECT_EQ(peak.segments.size(), 2u);
  EXPECT_EQ(a.stats().reserved_bytes, 30 * MiB);
}

TEST(CudaCachingAllocator, OutOfMemoryWithoutStoppingSkipsTheStorage) {
  CudaCachingOptions o;
  o.device_capacity = 40 * MiB;
  o.stop_at_oom = false;
  CudaCachingAllocator a(o);
  ASSERT_TRUE(a.Malloc(0, 30 * MiB));
  EXPECT_FALSE(a.Malloc(1, 12 * MiB));
  EXPECT_FALSE(a.Malloc(2, 12 * MiB));
  // 512 B: a 2 MiB small segment, 32 <= 40.
  EXPECT_TRUE(a.Malloc(3, 512));
  a.Release(1);  // never allocated: ignored
  EXPECT_EQ(a.stats().num_ooms, 2);
  EXPECT_EQ(a.stats().num_alloc_retries, 2);
  EXPECT_EQ(a.stats().reserved_bytes, 32 * MiB);
  EXPECT_EQ(a.stats().allocated_bytes, 30 * MiB + 512);
}

TEST(CudaCachingAllocator, PerProcessMemoryFractionCapsSegments) {
  CudaCachingOptions o;
  o.device_capacity = 100 * MiB;
  o.per_process_memory_fraction = 0.5;  // 50 MiB allowed
  CudaCachingAllocator a(o);
  ASSERT_TRUE(a.Malloc(0, 40 * MiB));
  EXPECT_FALSE(a.Malloc(1, 12 * MiB));  // 40 + 12 > 50
  EXPECT_EQ(a.stats().num_ooms, 1);
}

TEST(CudaCachingAllocator, GarbageCollectCachedBlocksFreesAtLeastAverageAge) {
  CudaCachingOptions o;
  o.device_capacity = 100 * MiB;
  o.per_process_memory_fraction = 1.0;  // allowed 100 MiB
  o.garbage_collection_threshold = 0.5; // collect above 50 MiB
  CudaCachingAllocator a(o);
  // Large-pool get_free_block calls count ages: A (30 MiB) is call 1 and
  // is cached at count 1; B (34 MiB, call 2: the 30 MiB block is too small)
  // is cached at count 2.
  ASSERT_TRUE(a.Malloc(0, 30 * MiB));
  a.Release(0);
  ASSERT_TRUE(a.Malloc(1, 34 * MiB));
  a.Release(1);
  // C (36 MiB) is call 3 and fits no cached block. 64 MiB reserved > 50:
  // collect 14 MiB. Ages 3-1 = 2 (A) and 3-2 = 1 (B), average 1.5: A goes
  // (30 MiB >= 14: done). cudaMalloc(36): 34 + 36 = 70 <= 100.
  ASSERT_TRUE(a.Malloc(2, 36 * MiB));
  EXPECT_EQ(a.stats().reserved_bytes, 70 * MiB);
  EXPECT_EQ(a.stats().segments, 2);
  EXPECT_EQ(a.stats().num_device_free, 1);
  // Without the threshold nothing is collected: 30 + 34 + 36 = 100 MiB.
  o.garbage_collection_threshold = 0.0;
  CudaCachingAllocator b(o);
  ASSERT_TRUE(b.Malloc(0, 30 * MiB));
  b.Release(0);
  ASSERT_TRUE(b.Malloc(1, 34 * MiB));
  b.Release(1);
  ASSERT_TRUE(b.Malloc(2, 36 * MiB));
  EXPECT_EQ(b.stats().reserved_bytes, 100 * MiB);
}

TEST(CudaCachingAllocator, RoundupPower2DivisionsTestAllocatorSettings) {
  // test_cuda.py test_allocator_settings: with roundup_power2_divisions:4
  // an 84 MiB tensor adds power2_div(84 MiB, 4) = 96 MiB to allocated
  // bytes and 84 MiB to requested bytes.
  CudaCachingOptions o;
  std::string error;
  ASSERT_TRUE(ParseCudaAllocConf("roundup_power2_divisions:4", &o, &error)) << error;
  CudaCachingAllocator a(o);
  ASSERT_TRUE(a.Malloc(0, 84 * MiB));
  EXPECT_EQ(a.stats().allocated_bytes, 96 * MiB);
  EXPECT_EQ(a.stats().requested_bytes, 84 * MiB);
}

TEST(CudaCachingAllocator, RejectsExpandableSegments) {
  CudaCachingOptions o;
  o.expandable_segments = true;
  EXPECT_THROW(CudaCachingAllocator a(o), std::invalid_argument);
}

// The stream: Replay of a hand-made log. Storages: 0 (1 MiB + 1, cuda),
// 1 (3 MiB, cuda), 2 (0 B), 3 (5 MiB, cpu), 4 (1 MiB, cuda).
AllocLog MakeLog() {
  AllocLog log;
  log.devices = {"cpu", "cuda:0"};
  log.steps = 3;
  auto storage = [&](std::int64_t bytes, std::uint8_t device) {
    StorageRecord s;
    s.bytes = bytes;
    s.device = device;
    log.storages.push_back(s);
  };
  storage(MiB + 1, 1);
  storage(3 * MiB, 1);
  storage(0, 1);
  storage(5 * MiB, 0);
  storage(MiB, 1);
  auto event = [&](std::int32_t step, StorageId id, bool alloc) {
    log.events.push_back(AllocEvent{step, id, alloc ? log.storages[id].bytes : -log.storages[id].bytes, alloc});
  };
  event(kBeforeFirstStep, 0, true);
  event(0, 1, true);
  event(0, 2, true);
  event(0, 3, true);
  event(1, 0, false);
  event(1, 2, false);
  event(2, 4, true);
  event(2, 1, false);
  return log;
}

TEST(CudaCachingAllocator, ReplayFiltersDeviceAndZeroBytesAndKeepsPeakLayout) {
  CudaCachingOptions o;
  o.device = 1;
  CudaMemoryLayout layout;
  CudaAllocatorStats s = SimulateCudaCaching(MakeLog(), o, &layout);
  // Storage 0: 1 MiB + 512 from a new 20 MiB large segment (split).
  // Storage 1 (step 0): 3 MiB from its rest: allocated 4 MiB + 512, the
  // peak. Storage 2 has no bytes, storage 3 is on the cpu: ignored.
  // Step 1 frees 0; step 2 takes storage 4 (1 MiB, small: a 2 MiB
  // segment) and frees 1.
  EXPECT_EQ(s.allocated_bytes_peak, 4 * MiB + 512);
  EXPECT_EQ(s.allocated_peak_step, 0);
  EXPECT_EQ(s.requested_bytes_peak, 4 * MiB + 1);
  EXPECT_EQ(s.reserved_bytes, 22 * MiB);
  EXPECT_EQ(s.reserved_peak_step, 2);
  EXPECT_EQ(s.allocated_bytes, 1 * MiB);
  EXPECT_EQ(s.segments_peak, 2);
  // The layout at the allocated peak: one segment, [0: storage 0][1 MiB +
  // 512: storage 1][free rest].
  ASSERT_TRUE(layout.captured);
  EXPECT_EQ(layout.step, 0);
  EXPECT_EQ(layout.allocated_bytes, 4 * MiB + 512);
  ASSERT_EQ(layout.segments.size(), 1u);
  const auto& blocks = layout.segments[0].blocks;
  ASSERT_EQ(blocks.size(), 3u);
  EXPECT_EQ(blocks[0].storage, 0u);
  EXPECT_EQ(blocks[1].storage, 1u);
  EXPECT_EQ(blocks[1].address, MiB + 512);
  EXPECT_EQ(blocks[2].size, 20 * MiB - 4 * MiB - 512);
  EXPECT_FALSE(blocks[2].allocated);

  // At the reserved peak (step 2, after storage 4's small segment): two segments.
  o.layout_at = CudaLayoutAt::kPeakReserved;
  SimulateCudaCaching(MakeLog(), o, &layout);
  EXPECT_EQ(layout.step, 2);
  EXPECT_EQ(layout.reserved_bytes, 22 * MiB);
  ASSERT_EQ(layout.segments.size(), 2u);
  EXPECT_TRUE(layout.segments[1].small_pool);
  EXPECT_EQ(layout.segments[1].blocks[0].storage, 4u);

  // Every device: the cpu storage's 5 MiB is simulated too.
  o.device = -1;
  EXPECT_EQ(SimulateCudaCaching(MakeLog(), o).allocated_bytes_peak, 9 * MiB + 512);
}

}  // namespace
}  // namespace peakmem
