// What a model emits into: the storage table, the requested-bytes counter,
// and, when asked, the event log and online consumers (see alloc_events.h).
//
// A model calls Alloc when a storage comes to exist and Free when its last
// user dies, between BeginStep(i) and EndStep() for statement i (arguments
// before the first BeginStep). Everything here is inline and a peak-only
// run keeps no log: its cost is the counter and one table row a storage.
#pragma once

#include <string_view>
#include <utility>
#include <vector>

#include "peakmem/sim/alloc_events.h"
#include "peakmem/sim/requested_bytes.h"

namespace peakmem {

// A storage a step made (+bytes) or freed (-bytes), by the value it was bound to.
using NamedBytes = std::pair<ValueId, std::int64_t>;

class AllocStream {
 public:
  // `storages`: the table to fill (cleared; a caller running many times
  // passes the same vector to reuse its memory). `log`: where to keep the
  // events (nullptr: none). `name_steps`: collect each step's named events
  // (step_named) for breakdown keys.
  AllocStream(std::vector<StorageRecord>* storages, AllocLog* log, bool name_steps)
      : storages_(*storages), log_(log), name_steps_(name_steps) {
    storages_.clear();
    if (log_ != nullptr) {
      log_->events.clear();
      log_->storages.clear();
      log_->devices.clear();
    }
  }

  // Online consumers, called as events happen (not owned).
  void AddSink(AllocSink* sink) { sinks_.push_back(sink); }

  // A new storage of `bytes`. Returns kNoStorage, changing nothing, when the
  // live total would overflow 64 bits (the model reports it where it is).
  StorageId Alloc(std::int64_t bytes, ValueId value, StorageRole role, std::uint8_t device = 0) {
    const auto id = static_cast<StorageId>(storages_.size());
    if (!counter_.Alloc(bytes, role == StorageRole::kScratch, step_, storages_.size() + 1, frees_)) {
      return kNoStorage;
    }
    StorageRecord& r = storages_.emplace_back();
    r.bytes = bytes;
    r.value = value;
    r.made_at = step_;
    r.role = role;
    r.device = device;
    if (name_steps_ && value != kNoValue) step_named_.emplace_back(value, bytes);
    if (log_ != nullptr) log_->events.push_back({step_, id, bytes, true});
    for (AllocSink* sink : sinks_) sink->Alloc(id, r, step_);
    return id;
  }

  void Free(StorageId id) {
    StorageRecord& r = storages_[id];
    r.freed_at = step_;
    r.free_seq = ++frees_;
    counter_.Free(r.bytes, r.role == StorageRole::kScratch);
    if (name_steps_ && r.value != kNoValue && r.bytes > 0) step_named_.emplace_back(r.value, -r.bytes);
    if (log_ != nullptr) log_->events.push_back({step_, id, -r.bytes, false});
    for (AllocSink* sink : sinks_) sink->Free(id, r, step_);
  }

  // Statement `step` starts (steps come in order, each once).
  void BeginStep(std::int32_t step) {
    step_ = step;
    counter_.BeginStep();
  }
  // The current step (or the arguments, before the first step) is done.
  void EndStep() {
    for (AllocSink* sink : sinks_) sink->StepEnd(step_);
  }
  // This step's named allocations and frees, in order (when name_steps).
  const std::vector<NamedBytes>& step_named() const { return step_named_; }
  void ClearStepNamed() { step_named_.clear(); }

  // The device index of a device name (for StorageRecord::device): its
  // place in the log's device table, added on first sight (0 without a log).
  std::uint8_t Device(std::string_view name) {
    if (log_ == nullptr) return 0;
    for (std::size_t i = 0; i < log_->devices.size(); ++i) {
      if (log_->devices[i] == name) return static_cast<std::uint8_t>(i);
    }
    log_->devices.emplace_back(name);
    return static_cast<std::uint8_t>(log_->devices.size() - 1);
  }

  // Ends the stream: the log (if any) gets the storage table, the step
  // count and the storages' names (from `trace`, whose values they name).
  void Finish(std::int32_t steps, const Trace& trace) {
    if (log_ == nullptr) return;
    log_->storages = storages_;
    log_->steps = steps;
    log_->name_text = std::make_shared<StringArena>();
    log_->storage_names.clear();
    log_->storage_names.reserve(storages_.size());
    for (const StorageRecord& r : storages_) {
      log_->storage_names.push_back(
          r.value == kNoValue ? std::string_view() : log_->name_text->Save(trace.value(r.value).name));
    }
  }

  const RequestedBytes& counter() const { return counter_; }
  const std::vector<StorageRecord>& storages() const { return storages_; }
  std::int32_t step() const { return step_; }

 private:
  std::vector<StorageRecord>& storages_;
  AllocLog* log_;
  bool name_steps_;
  RequestedBytes counter_;
  std::int32_t step_ = kBeforeFirstStep;
  std::uint32_t frees_ = 0;
  std::vector<NamedBytes> step_named_;
  std::vector<AllocSink*> sinks_;
};

}  // namespace peakmem
