// CudaCachingAllocator against a deliberately simple reference model of the
// same rules (reference_cuda_allocator.h), on random alloc/free sequences.
// The two must agree on
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
#include "reference_cuda_allocator.h"

namespace peakmem {
namespace {

constexpr std::int64_t MiB = 1 << 20;
using testing_util::ReferenceAllocator;

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
