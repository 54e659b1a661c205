// A training step recorded as it ran, not traced: what the eager front end
// (python/peakmem/eager_step.py) saw, as data. The eager front end runs the
// user's step on `meta` stand-ins under a TorchDispatchMode and writes down,
// in order, each ATen call, the storages that call made (its outputs, and
// the op's scratch from the registry, semantics/aten_ops.h) and the
// storages freed while it ran or after it (a Python reference or
// autograd's last reference to a saved tensor dropped). Lifetimes are the
// ones PyTorch itself produced; nothing infers them.
//
// models/recorded_step.h emits it into the step's event stream; a recorded
// step file (frontend/recorded_step_file.h) carries it to the CLI.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace peakmem {

struct RecordedStorage {
  std::int64_t bytes = 0;
  std::string name;           // what made it: "parameter transformer.h.0.attn.c_attn.weight", "aten.mm.default"
  std::uint8_t category = 0;  // an index into kStepCategories (report/attribution.h)
  std::string module;         // the nn.Module path it belongs to ("" for the top module)
  std::string device;         // "cpu", "meta", "cuda:0", ...
  bool scratch = false;       // allocated and freed by its op before the op returns
};

struct RecordedStatement {
  std::string op;      // "aten.mm.default", or a step moment such as "optimizer.step() returns"
  std::string source;  // what the report's row shows for it
  // In order: k >= 0 allocates storage k; k < 0 frees storage -1 - k.
  std::vector<std::int64_t> events;
};

// A phase over the statements' indexes [first, end): "forward", "backward"
// or "optimizer" of iteration `iteration` (1-based).
struct RecordedPhase {
  std::string name;
  int iteration = 1;
  std::int32_t first = 0, end = 0;
};

struct RecordedStep {
  std::vector<RecordedStorage> storages;
  // Storages alive before the first statement (parameters, buffers,
  // inputs), in the order they are allocated.
  std::vector<std::int64_t> held;
  std::vector<RecordedStatement> statements;
  // A row's label is its phase's ("forward 1"), "step" outside every phase.
  std::vector<RecordedPhase> phases;
  // What the recording could not count (an op whose scratch rule does not
  // cover its call, ops the registry lacks): the step Report's diagnostics.
  std::vector<std::string> diagnostics;
  std::string optimizer;  // the optimizer's description ("" without one)
  // The target device it was recorded for ("cuda:h100", "cpu"; "" where
  // the file does not say): its kernels were chosen then, and a GPU
  // model's memory and context judge the budget.
  std::string device;
};

}  // namespace peakmem
