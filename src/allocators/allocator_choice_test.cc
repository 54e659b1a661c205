// Choosing the allocator a report is priced with: names, byte sizes as users
// write them, and which storages of a log the CUDA allocator is run over.
// Expected numbers are derived in the comments from the rules of
// cuda_caching_allocator.h (512-byte blocks; a 2 MiB segment for small
// requests).
#include "peakmem/allocators/allocator_choice.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace peakmem {
namespace {

constexpr std::int64_t MiB = 1 << 20;

TEST(AllocatorChoice, NamesRoundTrip) {
  for (const std::string& name : AllocatorModelNames()) {
    AllocatorModel m = AllocatorModel::kRequested;
    ASSERT_TRUE(ParseAllocatorModel(name, &m)) << name;
    EXPECT_EQ(AllocatorModelName(m), name);
  }
  AllocatorModel m = AllocatorModel::kCudaCaching;
  EXPECT_FALSE(ParseAllocatorModel("cuda", &m));
  EXPECT_EQ(m, AllocatorModel::kCudaCaching);  // unchanged
}

std::int64_t Size(const std::string& text) {
  std::int64_t bytes = -1;
  std::string error;
  EXPECT_TRUE(ParseByteSize(text, &bytes, &error)) << text << ": " << error;
  return bytes;
}

std::string SizeError(const std::string& text) {
  std::int64_t bytes = -7;
  std::string error;
  EXPECT_FALSE(ParseByteSize(text, &bytes, &error)) << text;
  EXPECT_EQ(bytes, -7) << "a failed parse must leave the output alone";
  return error;
}

TEST(ByteSize, UnitsArePowersOf1000Or1024) {
  EXPECT_EQ(Size("4096"), 4096);
  EXPECT_EQ(Size("4096B"), 4096);
  EXPECT_EQ(Size("80GiB"), 80 * 1024 * MiB);  // 85,899,345,920
  EXPECT_EQ(Size("80 GiB"), 80 * 1024 * MiB);
  EXPECT_EQ(Size("80gib"), 80 * 1024 * MiB);
  EXPECT_EQ(Size("80GB"), 80'000'000'000);
  EXPECT_EQ(Size("512MiB"), 512 * MiB);
  EXPECT_EQ(Size("2KB"), 2000);
  EXPECT_EQ(Size("1TiB"), std::int64_t{1} << 40);
  EXPECT_EQ(Size("1.5GB"), 1'500'000'000);
  EXPECT_EQ(Size("0.5KiB"), 512);
  // Exact in bytes beyond a double's 53 bits: 2^62 + 1.
  EXPECT_EQ(Size("4611686018427387905"), (std::int64_t{1} << 62) + 1);
}

TEST(ByteSize, ASizeAPersonTypesNamesItsUnit) {
  std::int64_t bytes = -7;
  std::string error;
  EXPECT_FALSE(ParseSizeWithUnit("48", &bytes, &error));
  EXPECT_EQ(bytes, -7);
  EXPECT_NE(error.find("'48' has no unit: give a size such as 48GiB (or 48B for bytes)"), std::string::npos) << error;
  EXPECT_FALSE(ParseSizeWithUnit(" 1.5 ", &bytes, &error));
  ASSERT_TRUE(ParseSizeWithUnit("48GiB", &bytes, &error)) << error;
  EXPECT_EQ(bytes, 48 * 1024 * MiB);
  ASSERT_TRUE(ParseSizeWithUnit("4096B", &bytes, &error)) << error;
  EXPECT_EQ(bytes, 4096);
  EXPECT_FALSE(ParseSizeWithUnit("48XB", &bytes, &error));  // ParseByteSize's own errors stand
  EXPECT_NE(error.find("cannot read the size '48XB'"), std::string::npos) << error;
}

TEST(ByteSize, RejectsWhatIsNotASize) {
  EXPECT_NE(SizeError("").find("expected a number and a unit"), std::string::npos);
  EXPECT_NE(SizeError("GiB").find("expected a number and a unit"), std::string::npos);
  EXPECT_NE(SizeError("80XB").find("cannot read the size '80XB'"), std::string::npos);
  EXPECT_NE(SizeError("-1GiB").find("expected a number"), std::string::npos);
  EXPECT_NE(SizeError("1.2.3GiB").find("expected a number"), std::string::npos);
  EXPECT_NE(SizeError("0.1KiB").find("not a whole number of bytes"), std::string::npos);  // 102.4
  EXPECT_NE(SizeError("9223372036854775808").find("does not fit 64 bits"), std::string::npos);
  EXPECT_NE(SizeError("9000000TiB").find("does not fit 64 bits"), std::string::npos);
}

// A log of three storages: 100 B and 600 B on devices[cuda_index], 4 KiB on
// the CPU, all allocated before the first step and never freed.
AllocLog MixedLog(bool with_cuda) {
  AllocLog log;
  log.devices = with_cuda ? std::vector<std::string>{"cpu", "cuda:0"}
                          : std::vector<std::string>{"cpu", "meta"};
  const std::uint8_t other = 1;
  log.storages = {{.bytes = 100, .device = other},
                  {.bytes = 4096, .device = 0},
                  {.bytes = 600, .device = other}};
  for (StorageId id = 0; id < log.storages.size(); ++id) {
    log.events.push_back({kBeforeFirstStep, id, log.storages[id].bytes, true});
  }
  log.steps = 0;
  return log;
}

TEST(AllocatorChoice, CudaCachingRunsOverTheFirstCudaDeviceOnly) {
  AllocatorOptions options;
  options.model = AllocatorModel::kCudaCaching;
  const AllocatorResult r = RunAllocatorModel(MixedLog(true), options);
  EXPECT_EQ(r.device, "cuda:0");
  // round_size: 100 -> 512, 600 -> 1024; both small: one 2 MiB segment.
  // The CPU's 4096 B are not the GPU's.
  EXPECT_EQ(r.stats.requested_bytes_peak, 700);
  EXPECT_EQ(r.stats.allocated_bytes_peak, 1536);
  EXPECT_EQ(r.stats.reserved_bytes_peak, 2 * MiB);
  EXPECT_EQ(r.stats.segments_peak, 1);
}

TEST(AllocatorChoice, ATraceWithoutCudaTensorsIsPricedAsOneGpu) {
  AllocatorOptions options;
  options.model = AllocatorModel::kCudaCaching;
  const AllocatorResult r = RunAllocatorModel(MixedLog(false), options);
  EXPECT_EQ(r.device, "all");
  // 512 + 4096 + 1024 = 5632 allocated, in one 2 MiB small segment.
  EXPECT_EQ(r.stats.requested_bytes_peak, 4796);
  EXPECT_EQ(r.stats.allocated_bytes_peak, 5632);
  EXPECT_EQ(r.stats.reserved_bytes_peak, 2 * MiB);
}

TEST(AllocatorChoice, OutOfMemoryNamesTheRequest) {
  AllocatorOptions options;
  options.model = AllocatorModel::kCudaCaching;
  options.cuda.device_capacity = MiB;  // less than the first 2 MiB segment
  const AllocatorResult r = RunAllocatorModel(MixedLog(true), options);
  EXPECT_EQ(r.stats.oom_step, kBeforeFirstStep);
  EXPECT_EQ(r.stats.oom_storage, 0u);
  EXPECT_EQ(r.oom_requested_bytes, 100);
  EXPECT_EQ(r.stats.oom_size, 512);
  EXPECT_EQ(r.stats.oom_alloc_size, 2 * MiB);
  EXPECT_EQ(r.device_capacity, MiB);
}

TEST(AllocatorChoice, RequestedHasNothingToRun) {
  EXPECT_THROW(RunAllocatorModel(MixedLog(true), AllocatorOptions{}), std::invalid_argument);
}

}  // namespace
}  // namespace peakmem
