#include "peakmem/models/recorded_step.h"

#include <stdexcept>
#include <string_view>

#include "peakmem/models/step_stream.h"

namespace peakmem {
namespace {

// Emits a recorded storage's allocation or free into the stream, checking
// that the record says something a stream can (see the header).
class RecordedEmitter {
 public:
  RecordedEmitter(const RecordedStep& step, StepStream* stream)
      : step_(step), stream_(*stream), ids_(step.storages.size(), kNoStorage) {}

  void Event(std::int64_t event, std::string_view where) {
    const bool alloc = event >= 0;
    const std::int64_t index = alloc ? event : -1 - event;
    if (index >= static_cast<std::int64_t>(step_.storages.size())) {
      throw std::invalid_argument(std::string(where) + ": storage " + std::to_string(index) +
                                  " is out of range (the record has " + std::to_string(step_.storages.size()) +
                                  " storages)");
    }
    StorageId& id = ids_[static_cast<std::size_t>(index)];
    const RecordedStorage& s = step_.storages[static_cast<std::size_t>(index)];
    if (alloc) {
      if (id != kNoStorage) throw std::invalid_argument(std::string(where) + ": " + s.name + " is allocated twice");
      if (s.category >= kStepCategoryCount) {
        throw std::invalid_argument(std::string(where) + ": " + s.name + " has category " +
                                    std::to_string(s.category) + ", not one of the step's");
      }
      if (s.bytes < 0) throw std::invalid_argument(std::string(where) + ": " + s.name + " has negative bytes");
      id = stream_.Alloc(s.bytes, s.name, s.scratch ? StorageRole::kScratch : StorageRole::kIntermediate,
                         static_cast<StepCategory>(s.category), s.module, stream_.Device(s.device));
    } else {
      if (id == kNoStorage || !stream_.alive(id)) {
        throw std::invalid_argument(std::string(where) + ": " + s.name + " is freed but not alive");
      }
      stream_.Free(id);
    }
  }

 private:
  const RecordedStep& step_;
  StepStream& stream_;
  std::vector<StorageId> ids_;
};

// Each statement's row label: its phase's "forward 1", else "step".
std::vector<std::string> Labels(const RecordedStep& step) {
  std::vector<std::string> labels(step.statements.size(), "step");
  for (const RecordedPhase& p : step.phases) {
    if (p.first < 0 || p.end < p.first || static_cast<std::size_t>(p.end) > step.statements.size()) {
      throw std::invalid_argument("the phase " + p.name + " spans statements [" + std::to_string(p.first) + ", " +
                                  std::to_string(p.end) + "), not within the record's " +
                                  std::to_string(step.statements.size()));
    }
    for (std::int32_t i = p.first; i < p.end; ++i) labels[i] = p.name + " " + std::to_string(p.iteration);
  }
  return labels;
}

}  // namespace

TrainingStepResult SimulateRecordedStep(const RecordedStep& step, bool events, const AllocatorOptions& allocator) {
  const std::vector<std::string> labels = Labels(step);
  StepStream stream(events);
  RecordedEmitter emit(step, &stream);
  for (const std::int64_t held : step.held) {
    if (held < 0) throw std::invalid_argument("a held storage's index is negative");
    emit.Event(held, "before the step");
  }
  bool modules = false;
  for (const RecordedStorage& s : step.storages) modules = modules || !s.module.empty();
  for (std::size_t i = 0; i < step.statements.size(); ++i) {
    const RecordedStatement& statement = step.statements[i];
    stream.Begin();
    const std::string where = "statement " + std::to_string(i) + " (" + statement.op + ")";
    for (const std::int64_t event : statement.events) emit.Event(event, where);
    stream.End(labels[i], statement.op, statement.source, 0);
  }
  TrainingStepResult out;
  std::vector<ReportPhase> phases;
  for (const RecordedPhase& p : step.phases) {
    out.phases.push_back({p.name, p.iteration, 0, 0, 0, 0, p.first, p.end});
    phases.push_back({p.name, p.iteration, p.first, p.end});
  }
  FinishTrainingStep(stream, phases, modules, allocator, &out);
  // A recorded step has no programs apart: what a phase holds around it is
  // what is live as it starts.
  for (TrainingStepPhase& p : out.phases) p.around = stream.LiveBefore(p.first);
  out.step.diagnostics = step.diagnostics;
  return out;
}

}  // namespace peakmem
