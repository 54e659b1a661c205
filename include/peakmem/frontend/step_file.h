// Reader for peakmem's step file (docs/step-file.md): one training step as
// peakmem.export_step writes it, the forward and backward traces, what joins
// them and what the step holds (ir/training_step_spec.h), and the optimizer's
// step() programs, so that `peakmem step STEP.json` simulates the step
// without Python.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

#include "peakmem/ir/parsed_trace.h"
#include "peakmem/ir/training_step_spec.h"

namespace peakmem {

// The version of the step file's schema, its "peakmem_step" field.
inline constexpr int kStepFileVersion = 1;

// A step file that is not what export_step writes: names the file and the field.
class StepFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct StepFile {
  ParsedTrace forward, backward;
  std::optional<ParsedTrace> optimizer_first, optimizer_later;
  TrainingStepSpec spec;
  std::string optimizer;  // the optimizer's description ("" without one)
};

// Reads `path`. Throws StepFileError for a malformed file, TraceError for a
// trace in it that cannot be read (its name is "PATH#forward" and so on).
StepFile LoadStepFile(const std::string& path);
// Same for text held in memory; `name` is used in messages.
StepFile ParseStepFile(const std::string& name, const std::string& text);

}  // namespace peakmem
