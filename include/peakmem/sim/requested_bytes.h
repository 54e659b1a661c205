// The requested-bytes counter: what a CPU allocator (and the PyTorch
// profiler's allocation events) counts, and what CUDA's
// `memory_stats()["requested_bytes"]` counts: the sum of the live storages'
// bytes, with no rounding. It runs on every stream (AllocStream calls it
// inline, so a peak-only run pays for nothing else) and, as
// RequestedBytesSink, on a replayed log.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>

#include "peakmem/sim/alloc_events.h"

namespace peakmem {

// The moment the peak was first reached: which storages existed and how
// many had been freed then (enough, with StorageRecord::free_seq, to list
// what was alive; see report/live_at_peak.h).
struct PeakMoment {
  std::int32_t step = kBeforeFirstStep;
  std::size_t storages = 0;  // storages allocated by then
  std::uint32_t frees = 0;   // frees done by then
};

class RequestedBytes {
 public:
  // Counts an allocation of `bytes` (scratch: op scratch memory, kept out
  // of tensor_peak). Returns false, counting nothing, when the live total
  // would pass 64 bits. `storages` is the number of storages allocated
  // with this one, `frees` the frees done so far.
  bool Alloc(std::int64_t bytes, bool scratch, std::int32_t step, std::size_t storages,
             std::uint32_t frees) {
    std::int64_t now = 0;
    if (__builtin_add_overflow(live_, bytes, &now)) return false;
    live_ = now;
    if (scratch) scratch_live_ += bytes;
    step_peak_ = std::max(step_peak_, live_);
    tensor_peak_ = std::max(tensor_peak_, live_ - scratch_live_);
    if (live_ > peak_) {
      peak_ = live_;
      moment_ = {step, storages, frees};
    }
    return true;
  }
  void Free(std::int64_t bytes, bool scratch) {
    live_ -= bytes;
    if (scratch) scratch_live_ -= bytes;
  }
  // A new step starts: its peak starts at the live bytes.
  void BeginStep() { step_peak_ = live_; }

  std::int64_t live() const { return live_; }
  std::int64_t peak() const { return peak_; }
  // The most bytes live inside the current step.
  std::int64_t step_peak() const { return step_peak_; }
  // The peak of storages other than op scratch.
  std::int64_t tensor_peak() const { return tensor_peak_; }
  const PeakMoment& peak_moment() const { return moment_; }

 private:
  std::int64_t live_ = 0;
  std::int64_t scratch_live_ = 0;
  std::int64_t peak_ = 0;
  std::int64_t step_peak_ = 0;
  std::int64_t tensor_peak_ = 0;
  PeakMoment moment_;
};

// The counter over a replayed log (an allocator model's companion: the
// requested bytes beside its allocated and reserved ones).
class RequestedBytesSink : public AllocSink {
 public:
  void Alloc(StorageId id, const StorageRecord& storage, std::int32_t step) override {
    counter_.Alloc(storage.bytes, storage.role == StorageRole::kScratch, step, id + 1, frees_);
  }
  void Free(StorageId, const StorageRecord& storage, std::int32_t) override {
    ++frees_;
    counter_.Free(storage.bytes, storage.role == StorageRole::kScratch);
  }
  void StepEnd(std::int32_t) override { counter_.BeginStep(); }
  const RequestedBytes& counter() const { return counter_; }

 private:
  RequestedBytes counter_;
  std::uint32_t frees_ = 0;
};

}  // namespace peakmem
