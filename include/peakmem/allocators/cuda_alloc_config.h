// The settings of the CUDA caching allocator model (cuda_caching_allocator.h)
// and their reader: the text of PYTORCH_CUDA_ALLOC_CONF, read the way
// PyTorch reads it (c10/core/AllocatorConfig.cpp, AllocatorConfig::parseArgs
// and its parse* helpers; c10/cuda/CUDAAllocatorConfig.h forwards to them),
// plus what the model needs to know about the device.
//
// The allocator's size rules live here too (RoundSize, AllocationSize), as
// pure functions of the settings, so that tests and writers can call them.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace peakmem {

// The constants of c10/cuda/CUDACachingAllocator.cpp.
inline constexpr std::int64_t kCudaMinBlockSize = 512;        // kMinBlockSize: every size rounds to a multiple
inline constexpr std::int64_t kCudaSmallSize = 1 << 20;       // kSmallSize: largest "small" request (1 MiB)
inline constexpr std::int64_t kCudaSmallBuffer = 2 << 20;     // kSmallBuffer: small-pool segment (2 MiB)
inline constexpr std::int64_t kCudaLargeBuffer = 20 << 20;    // kLargeBuffer: segment for 1-10 MiB requests (20 MiB)
inline constexpr std::int64_t kCudaMinLargeAlloc = 10 << 20;  // kMinLargeAlloc: below it, a large request gets kLargeBuffer
inline constexpr std::int64_t kCudaRoundLarge = 2 << 20;      // kRoundLarge: larger segments round up to 2 MiB
// AllocatorConfig's roundup_power2_divisions intervals: one per power of two
// from 1 MiB ([0, 2 MiB) is the first) up to 64 GiB (the last takes the rest).
inline constexpr int kCudaRoundupIntervals = 16;
inline constexpr std::int64_t kCudaNoMaxSplitSize = std::numeric_limits<std::int64_t>::max();

// Where the model keeps the layout of segments and blocks for writers.
enum class CudaLayoutAt : std::uint8_t {
  kNone,           // keep none
  kPeakAllocated,  // the state when allocated bytes were at their peak (the first time)
  kPeakReserved,   // the state when reserved bytes were at their peak (the first time)
};

struct CudaCachingOptions {
  // --- PYTORCH_CUDA_ALLOC_CONF ---
  // max_split_size_mb, in bytes: blocks this large are never split, and
  // requests below it never take them. kCudaNoMaxSplitSize: unset (PyTorch's
  // default, SIZE_MAX).
  std::int64_t max_split_size = kCudaNoMaxSplitSize;
  // max_non_split_rounding_mb, in bytes: a request of at least
  // max_split_size takes a cached oversize block only if the block is less
  // than this much larger (default kLargeBuffer, 20 MiB).
  std::int64_t max_non_split_rounding_size = kCudaLargeBuffer;
  // roundup_power2_divisions, per interval (see kCudaRoundupIntervals);
  // 0 or 1: plain 512-byte rounding.
  std::array<std::int64_t, kCudaRoundupIntervals> roundup_power2_divisions{};
  // garbage_collection_threshold, in (0, 1); 0: off. PyTorch only collects
  // when a per-process memory fraction is set, and so does the model.
  double garbage_collection_threshold = 0.0;
  // expandable_segments: not modeled. The allocator rejects true (and so
  // does ParseCudaAllocConf) rather than simulate something else.
  bool expandable_segments = false;

  // --- the device ---
  // Bytes cudaMalloc can hand out in all (the device's free memory when the
  // program starts); 0: unbounded, nothing ever runs out.
  std::int64_t device_capacity = 0;
  // torch.cuda.set_per_process_memory_fraction (ParseCudaAllocConf also
  // reads a per_process_memory_fraction key, which only newer PyTorch
  // releases know): segments may total at most
  // fraction * device_capacity. 0: not set.
  double per_process_memory_fraction = 0.0;

  // --- the model ---
  // Which storages are simulated: those with StorageRecord::device equal to
  // this (an index in AllocLog::devices); -1: every storage.
  int device = -1;
  // On an out-of-memory error PyTorch raises and the program stops: so does
  // the model (every later event is ignored). false: the failing storage is
  // skipped (its free ignored) and the run goes on, counting num_ooms.
  bool stop_at_oom = true;
  CudaLayoutAt layout_at = CudaLayoutAt::kPeakAllocated;
};

// Reads `conf` (e.g. "max_split_size_mb:128,roundup_power2_divisions:[256:1,>:4]")
// into `options`, whose device settings are kept; keys not in `conf` get
// PyTorch's defaults. On error returns false, says what and where in
// `error` and leaves `options` unchanged. Keys: max_split_size_mb (>= 20),
// max_non_split_rounding_mb (>= 20), roundup_power2_divisions (a power of
// two, or the list form [MB:divisions,...,>:divisions] with MB a power of
// two and divisions a power of two or 0), garbage_collection_threshold (in
// (0, 1)), per_process_memory_fraction (in [0, 1]), expandable_segments
// (only False is accepted: not modeled), backend (only native), and
// release_lock_on_cudamalloc, pinned_use_cuda_host_register,
// pinned_num_register_threads, pinned_use_background_threads (accepted
// and ignored: they do not change what the device allocator holds).
bool ParseCudaAllocConf(std::string_view conf, CudaCachingOptions* options, std::string* error);

// Empty when `options` can be simulated, else what is wrong.
std::string ValidateCudaCachingOptions(const CudaCachingOptions& options);

// round_size: the block size a request of `bytes` gets (at least 512, a
// multiple of 512, or the next power-of-two division).
std::int64_t CudaRoundSize(std::int64_t bytes, const CudaCachingOptions& options);
// get_allocation_size: the segment cudaMalloc'd for a rounded size that no
// cached block can take.
std::int64_t CudaAllocationSize(std::int64_t rounded_size);
// AllocatorConfig::roundup_power2_divisions(size): the divisions for `size`'s interval.
std::int64_t CudaRoundupDivisions(std::int64_t size, const CudaCachingOptions& options);

}  // namespace peakmem
