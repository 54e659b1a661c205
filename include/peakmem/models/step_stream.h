// A training step's allocation event stream as it is emitted
// (sim/alloc_events.h), with what a step's report needs beside it: each
// storage's name, step category (kStepCategories) and nn.Module path, the
// live bytes by category and their values when the peak is reached, and
// one report row a statement.
//
// Two front ends emit into it: the trace join (training_step.h: Thunder's
// forward, backward and optimizer programs replayed with the identity of
// every tensor carried across them) and the eager recording
// (recorded_step.h: the ATen calls a dispatch mode saw, in the order they
// ran). Both finish it with FinishTrainingStep, so a step's numbers, its
// Report and its allocator pricing mean the same whichever made them.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "peakmem/allocators/allocator_choice.h"
#include "peakmem/report/attribution.h"
#include "peakmem/report/report.h"
#include "peakmem/sim/alloc_stream.h"

namespace peakmem {

struct TrainingStepResult;

// kStepCategories' indexes.
enum StepCategory : std::uint8_t {
  kParameters,
  kInputs,
  kGradients,
  kOptimizerState,
  kActivations,
  kTemporaries,
  kWorkspaces
};
inline constexpr std::size_t kStepCategoryCount = std::size(kStepCategories);

// The module `modules` gives `name` ("" for none).
std::string_view ModuleOf(const std::map<std::string, std::string, std::less<>>& modules, std::string_view name);

class StepStream {
 public:
  // `rows`: keep one Step a statement, the log and what is live at the peak
  // (what writers and timelines read); without, only the numbers.
  explicit StepStream(bool rows);

  std::int32_t next_step() const { return next_step_; }
  std::int64_t live() const { return stream_.counter().live(); }
  std::int64_t live(StepCategory c) const { return live_[c]; }
  bool alive(StorageId id) const { return storages_[id].free_seq == 0; }

  // A new storage. Throws std::overflow_error when the live bytes would pass 2^63.
  StorageId Alloc(std::int64_t bytes, std::string_view name, StorageRole role, StepCategory category,
                  std::string_view module, std::uint8_t device);
  void Free(StorageId id);
  std::uint8_t Device(std::string_view name) { return stream_.Device(name); }

  // A statement of the step: Begin, its events, then End with its `op` and
  // `source` (prefixed with `label`) for its row.
  void Begin();
  void End(std::string_view label, std::string_view op, std::string_view source, int line);

  // Emits `program`'s events as statements labelled `label`. Its storages
  // made before its first statement (its arguments) are `argument(id)`'s
  // (kNoStorage: held elsewhere, no event); each of the others is new, of
  // `category(id)` and the module `modules` names for its value (or
  // `module_of(id)`'s, when that names one). Returns each of the program's
  // storages' id in the step (kNoStorage for an argument held elsewhere).
  template <typename Argument, typename Category, typename ModuleOverride>
  std::vector<StorageId> Run(const Report& program, std::string_view label, Argument argument, Category category,
                             const std::map<std::string, std::string, std::less<>>& modules,
                             ModuleOverride module_of);

  // The step's Report: the stream's numbers, and with rows its log, rows
  // and what is live at the peak.
  Report Finish(const std::vector<ReportPhase>& phases);

  const AllocLog& log() const { return log_; }
  // The highest live bytes inside statements [first, end) (scratch
  // included); 0 for an empty range.
  std::int64_t PeakWithin(std::int32_t first, std::int32_t end) const;
  // The live bytes just before statement `first` began (the stream's live
  // bytes now when no such statement ran).
  std::int64_t LiveBefore(std::int32_t first) const;
  const std::array<std::int64_t, kStepCategoryCount>& at_peak() const { return at_peak_; }

  // The bytes of each module live at the peak, largest first (ties: by name).
  std::vector<std::pair<std::string, std::int64_t>> ModulesAtPeak() const;

 private:
  // The storages of some bytes alive when the peak was first reached
  // (allocated by then and not yet freed), in allocation order.
  std::vector<StorageId> LiveAtPeakIds() const;
  // The storages live at the peak, largest first, each with its category as its role.
  std::vector<LiveTensor> LiveAtPeak(const Report& out, std::size_t* total) const;

  std::vector<StorageRecord> storages_;
  AllocLog log_;
  AllocStream stream_;
  bool rows_;
  std::shared_ptr<StringArena> names_arena_ = std::make_shared<StringArena>();
  std::shared_ptr<StringArena> strings_ = std::make_shared<StringArena>();
  std::vector<std::uint8_t> categories_;
  std::vector<std::string_view> modules_;
  std::array<std::int64_t, kStepCategoryCount> live_{}, at_peak_{};
  std::int64_t peak_seen_ = -1;
  std::int64_t live_before_ = 0;
  std::int32_t next_step_ = 0;
  std::vector<Step> rows_out_;
  std::vector<std::int64_t> statement_peaks_;   // one a statement, rows or not
  std::vector<std::int64_t> statement_starts_;  // the live bytes at each Begin
};

// Ends a step emitted into `stream`: `out`'s step Report (with `phases`),
// peak and final bytes, the phase and iteration at the peak, the bytes by
// category and (with `modules`) by module at the peak, and the allocator
// model `allocator` names run over the stream.
void FinishTrainingStep(StepStream& stream, const std::vector<ReportPhase>& phases, bool modules,
                        const AllocatorOptions& allocator, TrainingStepResult* out);

template <typename Argument, typename Category, typename ModuleOverride>
std::vector<StorageId> StepStream::Run(const Report& program, std::string_view label, Argument argument,
                                       Category category,
                                       const std::map<std::string, std::string, std::less<>>& modules,
                                       ModuleOverride module_of) {
  const AllocLog& log = *program.alloc_log;
  std::vector<std::uint8_t> devices;
  for (const std::string& d : log.devices) devices.push_back(Device(d));
  std::vector<StorageId> ids(log.storages.size(), kNoStorage);
  std::size_t e = 0;
  for (; e < log.events.size() && log.events[e].step == kBeforeFirstStep; ++e) {
    const StorageId local = log.events[e].storage;
    if (log.events[e].alloc) ids[local] = argument(local);
  }
  for (std::int32_t step = 0; step < log.steps; ++step) {
    Begin();
    for (; e < log.events.size() && log.events[e].step == step; ++e) {
      const AllocEvent& event = log.events[e];
      const StorageRecord& r = log.storages[event.storage];
      if (event.alloc) {
        const std::string_view name = log.storage_names[event.storage];
        std::string_view module = module_of(event.storage);
        if (module.empty()) module = ModuleOf(modules, name);
        ids[event.storage] = Alloc(r.bytes, name, r.role,
                                   r.role == StorageRole::kScratch ? kTemporaries : category(event.storage), module,
                                   devices.empty() ? 0 : devices[r.device]);
      } else if (ids[event.storage] != kNoStorage) {
        Free(ids[event.storage]);
      }
    }
    if (rows_ && static_cast<std::size_t>(step) < program.steps.size()) {
      const Step& s = program.steps[static_cast<std::size_t>(step)];
      End(label, s.op, s.source, s.line);
    } else {
      End(label, "", "", 0);
    }
  }
  return ids;
}

}  // namespace peakmem
