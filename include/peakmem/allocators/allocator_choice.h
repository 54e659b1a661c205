// Which allocator a report's memory is priced with, and running it over a
// model's allocation event stream (sim/alloc_events.h) after the model ran.
//
//   requested     the storages' own bytes: what every model counts (no
//                 allocator model runs; Report::allocator stays empty)
//   cuda-caching  PyTorch's CUDA caching allocator (cuda_caching_allocator.h):
//                 allocated and reserved bytes, segments, out of memory
//
// Adding an allocator: a class consuming the stream (an AllocSink), one
// enumerator here, its name in AllocatorModelName and the name lists of
// allocator_choice.cc, and one case in RunAllocatorModel.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "peakmem/allocators/cuda_caching_allocator.h"
#include "peakmem/sim/alloc_events.h"

namespace peakmem {

enum class AllocatorModel : std::uint8_t { kRequested, kCudaCaching };

// "requested", "cuda-caching".
const char* AllocatorModelName(AllocatorModel model);
// Parses those names; returns false otherwise.
bool ParseAllocatorModel(std::string_view text, AllocatorModel* out);
std::vector<std::string> AllocatorModelNames();

struct AllocatorOptions {
  AllocatorModel model = AllocatorModel::kRequested;
  // kCudaCaching: the allocator's settings (PYTORCH_CUDA_ALLOC_CONF and the
  // device's capacity). Its `device` is chosen by RunAllocatorModel.
  CudaCachingOptions cuda;
};

// What an allocator model made of a run.
struct AllocatorResult {
  AllocatorModel model = AllocatorModel::kRequested;
  CudaAllocatorStats stats;  // the allocator's counters at the end, and their peaks
  // The segments at the peak CudaCachingOptions::layout_at names (not
  // captured with kNone, which MakeAllocatorOptions chooses).
  CudaMemoryLayout peak_layout;
  // Which storages went through it: "cuda:0" (a trace's first CUDA device),
  // or "all" when the trace has no CUDA tensors (a CPU or meta trace priced
  // as if it ran on one GPU).
  std::string device;
  std::int64_t device_capacity = 0;  // CudaCachingOptions::device_capacity (0: unbounded)
  // The settings it ran with, its device chosen (CudaCachingOptions::device,
  // an index in the log's devices; -1: all): what a writer replaying the run
  // through the allocator again needs.
  CudaCachingOptions cuda;
  // The bytes the storage that ran out of memory asked for (0: none did).
  std::int64_t oom_requested_bytes = 0;
};

// The options a user's settings name, as the CLI and Python take them:
// `model` an AllocatorModelName; `alloc_conf` settings in
// PYTORCH_CUDA_ALLOC_CONF's syntax (nullopt: that environment variable's
// value, if set); `device_memory` the device's capacity as ParseByteSize
// reads it (empty: unbounded). Throws std::invalid_argument saying which
// setting is wrong, naming it as `conf_name` / `memory_name` (the flag or
// keyword the user wrote), also when either is given for an allocator
// other than cuda-caching. The layout at the peak is not kept (kNone).
AllocatorOptions MakeAllocatorOptions(std::string_view model,
                                      std::optional<std::string_view> alloc_conf,
                                      std::string_view device_memory,
                                      std::string_view conf_name = "--alloc-conf",
                                      std::string_view memory_name = "--device-memory");

// Replays `log` through the allocator `options` names. The storages
// simulated are those of the log's first device whose name starts with
// "cuda" (the others are on the CPU or another GPU, which this allocator
// does not hold), or every storage when no device does. Throws
// std::invalid_argument for kRequested (nothing to run) and for settings
// the allocator rejects.
AllocatorResult RunAllocatorModel(const AllocLog& log, const AllocatorOptions& options);

// A byte count as users write it: "80GiB", "80 GiB", "512MiB", "1.5GB",
// "4096" (bytes). Units: B, KB/MB/GB/TB (powers of 1000), KiB/MiB/GiB/TiB
// (powers of 1024), case-insensitive. Returns false, saying why in `error`,
// for anything else, a negative size or one that overflows 64 bits.
bool ParseByteSize(std::string_view text, std::int64_t* bytes, std::string* error);

// ParseByteSize for a size a person types (a budget, a device's memory):
// a bare number is refused ("48" is 48 bytes to ParseByteSize, rarely
// what was meant), the error suggesting "48GiB" or "48B".
bool ParseSizeWithUnit(std::string_view text, std::int64_t* bytes, std::string* error);

}  // namespace peakmem
