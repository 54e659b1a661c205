// Reader for a recorded step file (docs/step-file.md, "Recorded steps"):
// a step the eager front end recorded (ir/recorded_step.h), as
// peakmem.export_step(..., frontend="eager") writes it, so that
// `peakmem step FILE` simulates it without Python.
#pragma once

#include <optional>
#include <string>

#include "peakmem/ir/recorded_step.h"

namespace peakmem {

// The version of the recorded step file's schema, its "peakmem_recorded_step" field.
inline constexpr int kRecordedStepFileVersion = 1;

// Reads `text` (named `name` in messages) when it is a recorded step file
// (a JSON object with "peakmem_recorded_step"); nullopt when it is another
// kind of file (a traced step file). Throws StepFileError
// (frontend/step_file.h), naming the file and the field, for a malformed one.
std::optional<RecordedStep> ParseRecordedStepFile(const std::string& name, const std::string& text);

}  // namespace peakmem
