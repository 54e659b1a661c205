// Reader and writer of peakmem's step file (docs/step-file.md): one
// training step as peakmem.export_step writes it, the forward and backward
// traces, what joins them and what the step holds (ir/training_step_spec.h,
// in frontend/step_spec_json.h's schema), and the optimizer's step()
// programs, so that `peakmem step STEP.json` simulates the step without
// Python.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "peakmem/frontend/step_spec_json.h"
#include "peakmem/ir/parsed_trace.h"
#include "peakmem/ir/training_step_spec.h"

namespace peakmem {

// The version of the step file's schema, its "peakmem_step" field.
inline constexpr int kStepFileVersion = 1;

struct StepFile {
  ParsedTrace forward, backward;
  std::optional<ParsedTrace> optimizer_first, optimizer_later;
  TrainingStepSpec spec;
  std::string optimizer;  // the optimizer's description ("" without one)
};

// Reads `path`. Throws StepFileError for a malformed file (an unknown key
// included), TraceError for a trace in it that cannot be read (its name is
// "PATH#forward.trace" and so on).
StepFile LoadStepFile(const std::string& path);
// Same for text held in memory; `name` is used in messages.
StepFile ParseStepFile(const std::string& name, const std::string& text);

// A step file's parts as export_step has them: the printed traces, the
// optimizer's step() programs and description (with spec.optimizer_name;
// none without), and the spec.
struct StepFileText {
  std::string forward, backward;
  std::optional<std::string> optimizer_first, optimizer_later;
  std::string optimizer;
  RankedStepSpec spec;
};

// The step file of `file` (version kStepFileVersion), what ParseStepFile
// reads. Throws std::invalid_argument when the optimizer's programs and
// spec.optimizer_name disagree (one given without the other).
nlohmann::ordered_json StepFileToJson(const StepFileText& file);

}  // namespace peakmem
