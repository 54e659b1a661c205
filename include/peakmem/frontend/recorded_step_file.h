// Reader and writer of a recorded step file (docs/step-file.md, "Recorded steps"):
// a step the eager front end recorded (ir/recorded_step.h), as
// peakmem.export_step(..., frontend="eager") writes it, so that
// `peakmem step FILE` simulates it without Python.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "peakmem/ir/recorded_step.h"

namespace peakmem {

// The version of the recorded step file's schema, its "peakmem_recorded_step" field.
inline constexpr int kRecordedStepFileVersion = 1;

// Reads `text` (named `name` in messages) when it is a recorded step file
// (a JSON object with "peakmem_recorded_step"); nullopt when it is another
// kind of file (a traced step file). Throws StepFileError
// (frontend/step_spec_json.h), naming the file and the field, for a
// malformed one or an unknown key.
std::optional<RecordedStep> ParseRecordedStepFile(const std::string& name, const std::string& text);

// The recorded step file of `step` (version kRecordedStepFileVersion):
// what ParseRecordedStepFile reads back as `step`.
nlohmann::ordered_json RecordedStepToJson(const RecordedStep& step);

}  // namespace peakmem
