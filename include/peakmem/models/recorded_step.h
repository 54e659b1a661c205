// A training step recorded as it ran, not traced: the eager front end
// (python/peakmem/eager_step.py) runs the user's step on `meta` (or real)
// tensors under a TorchDispatchMode and writes down, in order, each ATen
// call it sees, the storages that call made (its outputs, and the op's
// scratch from the registry, semantics/aten_ops.h) and the storages freed
// while it ran or after it (a Python reference or autograd's last
// reference to a saved tensor dropped). Lifetimes are the ones PyTorch
// itself produced; nothing here infers them.
//
// SimulateRecordedStep emits that record into the step's event stream
// (step_stream.h), so the result is read, reported and priced by the
// allocator models exactly as a traced step's is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "peakmem/allocators/allocator_choice.h"
#include "peakmem/models/training_step.h"
#include "peakmem/report/report.h"

namespace peakmem {

struct RecordedStorage {
  std::int64_t bytes = 0;
  std::string name;           // what made it: "parameter transformer.h.0.attn.c_attn.weight", "aten.mm.default"
  std::uint8_t category = 0;  // an index into kStepCategories
  std::string module;         // the nn.Module path it belongs to ("" for the top module)
  std::string device;         // "cpu", "cuda:0", ... (the device the step predicts for)
  bool scratch = false;       // allocated and freed by its op before the op returns
};

struct RecordedStatement {
  std::string op;      // "aten.mm.default", or a step moment such as "optimizer.step"
  std::string source;  // what the report's row shows for it
  // In order: k >= 0 allocates storage k; k < 0 frees storage -1 - k.
  std::vector<std::int64_t> events;
};

struct RecordedStep {
  std::vector<RecordedStorage> storages;
  // Storages alive before the first statement (parameters, buffers,
  // inputs), in the order they are allocated.
  std::vector<std::int64_t> held;
  std::vector<RecordedStatement> statements;
  // The phases over `statements`' indexes; a row's label is its phase's
  // ("forward 1"), "step" outside every phase.
  std::vector<ReportPhase> phases;
  // What the recording could not count (an op whose scratch rule does not
  // cover its call): the step Report's diagnostics.
  std::vector<std::string> diagnostics;
};

// The recorded step as one event stream. `events`: keep its rows and log
// (what writers and timelines read). The result's forward and backward
// reports are empty (there are no traces); `step`, the numbers, the phases
// and the allocator pricing are filled as SimulateTrainingStep fills them.
// Throws std::invalid_argument, naming the statement, for a record that
// is not a valid stream (an index out of range, a storage allocated twice,
// a free of a storage not alive, a category out of range).
TrainingStepResult SimulateRecordedStep(const RecordedStep& step, bool events = false,
                                        const AllocatorOptions& allocator = {});

}  // namespace peakmem
