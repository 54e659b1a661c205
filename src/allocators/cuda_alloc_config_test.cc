// ParseCudaAllocConf and the size rules (round_size, get_allocation_size).
// The expected sizes are worked out by hand in the comments; several come
// from PyTorch's own tests, named where they do.
#include "peakmem/allocators/cuda_alloc_config.h"

#include <gtest/gtest.h>

namespace peakmem {
namespace {

constexpr std::int64_t MiB = 1 << 20;

CudaCachingOptions Parse(std::string_view conf, std::int64_t device_capacity = 0) {
  CudaCachingOptions options;
  options.device_capacity = device_capacity;
  std::string error;
  EXPECT_TRUE(ParseCudaAllocConf(conf, &options, &error)) << conf << ": " << error;
  return options;
}

std::string ParseError(std::string_view conf) {
  CudaCachingOptions options;
  std::string error;
  EXPECT_FALSE(ParseCudaAllocConf(conf, &options, &error)) << conf;
  return error;
}

TEST(CudaRoundSize, RoundSizeMinimumBlockIs512Bytes) {
  CudaCachingOptions o;
  EXPECT_EQ(CudaRoundSize(1, o), 512);    // below kMinBlockSize: 512
  EXPECT_EQ(CudaRoundSize(511, o), 512);
  EXPECT_EQ(CudaRoundSize(512, o), 512);
  EXPECT_EQ(CudaRoundSize(513, o), 1024);  // the next multiple of 512
  // 311 * 411 float32 (test_cuda.py test_memory_snapshot's x): 511,284 B
  // = 998.6 * 512 -> 999 * 512 = 511,488.
  EXPECT_EQ(CudaRoundSize(311 * 411 * 4, o), 511488);
}

// test_cuda.py TestCuda.test_allocator_settings (the same numbers are in
// torch_mlu's port of it): nelems = 21 Mi floats, nbytes = 84 MiB.
TEST(CudaRoundSize, RoundupPower2DivisionsTestAllocatorSettings) {
  const std::int64_t nbytes = 4 * 21 * MiB;
  // No settings: 84 MiB is a multiple of 512, allocated as it is.
  EXPECT_EQ(CudaRoundSize(nbytes, Parse("")), nbytes);
  // "roundup_power2_divisions:4": 84 MiB lies in [64, 128) MiB, whose four
  // divisions are 64, 80, 96, 112 MiB: power2_div(nbytes, 4) = 96 MiB.
  EXPECT_EQ(CudaRoundSize(nbytes, Parse("roundup_power2_divisions:4")), 96 * MiB);
  // "[64:8,128:2,256:2,512:2,1024:1,>:1]": [64, 128) MiB has 8 divisions
  // (steps of 8 MiB: 64, 72, 80, 88) -> 88 MiB = power2_div(nbytes, 8).
  CudaCachingOptions list = Parse("garbage_collection_threshold:0.5,roundup_power2_divisions:[64:8,128:2,256:2,512:2,1024:1,>:1]");
  EXPECT_EQ(CudaRoundSize(nbytes, list), 88 * MiB);
  // nbytes_big = 400 MiB in [256, 512) MiB: 2 divisions (256, 384, 512) -> 512 MiB.
  EXPECT_EQ(CudaRoundSize(400 * MiB, list), 512 * MiB);
  // "max_split_size_mb:40" after it resets the divisions: 84 MiB again.
  EXPECT_EQ(CudaRoundSize(nbytes, Parse("garbage_collection_threshold:0.5,max_split_size_mb:40")), nbytes);
}

// torch_mlu's test_roundup_power2_divisions_0 / _1 (ports of the
// roundup tests of test_cuda.py).
TEST(CudaRoundSize, RoundupPower2DivisionsZeroAndOneMeanPlainRounding) {
  CudaCachingOptions o = Parse("roundup_power2_divisions:[128:1,256:0,512:4]");
  // 268 MiB in [256, 512) MiB, divisions 0: plain 512-byte rounding.
  EXPECT_EQ(CudaRoundSize(4 * 67 * MiB, o), 268 * MiB);
  // 520 MiB in [512, 1024) MiB, 4 divisions (512, 640, ...): 640 MiB.
  EXPECT_EQ(CudaRoundSize(4 * 130 * MiB, o), 640 * MiB);
  // "roundup_power2_divisions:1": 4 * 21 * 125 * 125 = 1,312,500 B ->
  // ceil(/512) = 2564 * 512 = 1,312,768.
  EXPECT_EQ(CudaRoundSize(4 * 21 * 125 * 125, Parse("roundup_power2_divisions:1")), 1312768);
}

TEST(CudaRoundSize, RoundupPower2DivisionsOnlyAbove512TimesDivisions) {
  CudaCachingOptions o = Parse("roundup_power2_divisions:4");
  // 1200 <= 512 * 4: plain rounding to 1536 (round_size's guard).
  EXPECT_EQ(CudaRoundSize(1200, o), 1536);
  // 3000 > 2048: [2048, 4096) in steps of 512: 2560 < 3000 <= 3072.
  EXPECT_EQ(CudaRoundSize(3000, o), 3072);
  // A power of two is kept: 4096.
  EXPECT_EQ(CudaRoundSize(4096, o), 4096);
  // 2 MiB + 1: steps of 512 KiB above 2 MiB -> 2.5 MiB.
  EXPECT_EQ(CudaRoundSize(2 * MiB + 1, o), 2 * MiB + 512 * 1024);
  // An exact division is kept: 2.5 MiB.
  EXPECT_EQ(CudaRoundSize(2 * MiB + 512 * 1024, o), 2 * MiB + 512 * 1024);
}

TEST(CudaRoundSize, RoundupIntervalsClampAtBothEnds) {
  CudaCachingOptions o;
  for (int i = 0; i < kCudaRoundupIntervals; ++i) o.roundup_power2_divisions[i] = i == 0 ? 2 : (i == 15 ? 8 : 0);
  // Below 1 MiB the first interval applies: 600 KiB + 1 lies in
  // [512, 1024) KiB, whose halves are 512 and 768 KiB -> 768 KiB.
  EXPECT_EQ(CudaRoundupDivisions(1, o), 2);
  EXPECT_EQ(CudaRoundSize(600 * 1024 + 1, o), 768 * 1024);
  // 64 GiB and above: the last interval.
  EXPECT_EQ(CudaRoundupDivisions(std::int64_t{1} << 40, o), 8);
}

TEST(CudaAllocationSize, GetAllocationSizeSegmentSizes) {
  EXPECT_EQ(CudaAllocationSize(512), 2 * MiB);             // small: kSmallBuffer
  EXPECT_EQ(CudaAllocationSize(1 * MiB), 2 * MiB);         // 1 MiB is still small
  EXPECT_EQ(CudaAllocationSize(1 * MiB + 512), 20 * MiB);  // large below 10 MiB: kLargeBuffer
  EXPECT_EQ(CudaAllocationSize(10 * MiB - 512), 20 * MiB);
  EXPECT_EQ(CudaAllocationSize(10 * MiB), 10 * MiB);       // from 10 MiB: rounded up to 2 MiB
  EXPECT_EQ(CudaAllocationSize(11 * MiB + 512), 12 * MiB);
}

TEST(ParseCudaAllocConf, ReadsEveryModeledKey) {
  CudaCachingOptions o = Parse(
      " max_split_size_mb:128, max_non_split_rounding_mb:64,garbage_collection_threshold:0.6,"
      "expandable_segments:False,backend:native,release_lock_on_cudamalloc:True,"
      "per_process_memory_fraction:0.5",
      /*device_capacity=*/1024 * MiB);
  EXPECT_EQ(o.max_split_size, 128 * MiB);
  EXPECT_EQ(o.max_non_split_rounding_size, 64 * MiB);
  EXPECT_DOUBLE_EQ(o.garbage_collection_threshold, 0.6);
  EXPECT_DOUBLE_EQ(o.per_process_memory_fraction, 0.5);
  EXPECT_FALSE(o.expandable_segments);
}

TEST(ParseCudaAllocConf, KeepsDeviceSettingsAndResetsTheRest) {
  CudaCachingOptions o;
  o.device_capacity = 80 * MiB;
  o.max_split_size = 100 * MiB;
  std::string error;
  ASSERT_TRUE(ParseCudaAllocConf("roundup_power2_divisions:2", &o, &error)) << error;
  EXPECT_EQ(o.device_capacity, 80 * MiB);
  EXPECT_EQ(o.max_split_size, kCudaNoMaxSplitSize);  // not in the text: PyTorch's default
  EXPECT_EQ(o.roundup_power2_divisions[5], 2);
}

TEST(ParseCudaAllocConf, RoundupListFillsIntervals) {
  // [64:8,128:2,...,>:1]: 64 MiB is interval 6, so 0-5 get 8 too; ">"
  // fills from the last listed interval (1024 MiB = 10) to the end.
  CudaCachingOptions o = Parse("roundup_power2_divisions:[64:8,128:2,256:2,512:2,1024:1,>:1]");
  const std::array<std::int64_t, 16> want = {8, 8, 8, 8, 8, 8, 8, 2, 2, 2, 1, 1, 1, 1, 1, 1};
  EXPECT_EQ(o.roundup_power2_divisions, want);
  // ">" alone sets every interval.
  CudaCachingOptions all = Parse("roundup_power2_divisions:[>:4]");
  for (std::int64_t d : all.roundup_power2_divisions) EXPECT_EQ(d, 4);
}

// test_cuda.py TestCuda.test_allocator_settings: these three raise.
TEST(ParseCudaAllocConf, RejectsWhatTestAllocatorSettingsRejects) {
  EXPECT_NE(ParseError("foo:1,bar:2").find("unrecognized option 'foo'"), std::string::npos);
  EXPECT_NE(ParseError("garbage_collection_threshold:1.2").find("garbage_collection_threshold"), std::string::npos);
  EXPECT_NE(ParseError("max_split_size_mb:2").find("max_split_size_mb too small, must be >= 20"), std::string::npos);
}

TEST(ParseCudaAllocConf, ErrorsNameTheKey) {
  EXPECT_NE(ParseError("expandable_segments:True").find("not modeled"), std::string::npos);
  EXPECT_NE(ParseError("backend:cudaMallocAsync").find("cudaMallocAsync"), std::string::npos);
  EXPECT_NE(ParseError("roundup_power2_divisions:3").find("power of 2"), std::string::npos);
  EXPECT_NE(ParseError("roundup_power2_divisions:[100:2]").find("'100'"), std::string::npos);
  EXPECT_NE(ParseError("roundup_power2_divisions:[64:2").find("']'"), std::string::npos);
  EXPECT_NE(ParseError("max_split_size_mb:abc").find("'abc' is not a non-negative integer"), std::string::npos);
  EXPECT_NE(ParseError("max_split_size_mb").find("':' after max_split_size_mb"), std::string::npos);
  EXPECT_NE(ParseError("max_split_size_mb:40:40").find("expected ','"), std::string::npos);
  EXPECT_NE(ParseError("expandable_segments:yes").find("True or False"), std::string::npos);
  EXPECT_NE(ParseError("per_process_memory_fraction:0.5").find("device_capacity"), std::string::npos);
  // A failed parse leaves the options as they were.
  CudaCachingOptions o;
  o.max_split_size = 64 * MiB;
  std::string error;
  EXPECT_FALSE(ParseCudaAllocConf("max_split_size_mb:40,bogus:1", &o, &error));
  EXPECT_EQ(o.max_split_size, 64 * MiB);
}

}  // namespace
}  // namespace peakmem
