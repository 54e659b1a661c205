// The step's spec (ir/training_step_spec.h) as JSON: the one schema that
// the step file holds it in (docs/step-file.md, "Fields") and that
// peakmem's Python package passes to the simulation (python/src's
// simulate_step), written and read by one key table
// (src/frontend/step_spec_json.cc). The step file adds the traces around
// it (frontend/step_file.h).
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "peakmem/ir/training_step_spec.h"

namespace peakmem {

// A step file or spec that is not what export_step writes: names the file
// and the field.
class StepFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The spec and the rank its traces are read as: `rank` of `world_size`
// (0, 0: as the traces say).
struct RankedStepSpec {
  TrainingStepSpec spec;
  int rank = 0;
  int world_size = 0;
};

// The spec as the step file holds it: its top-level fields and the
// "forward", "backward", "optimizer" (null without spec.optimizer_name)
// and "modules" objects, without the traces, the optimizer's description
// and its step() programs (the step file's own; StepFileToJson adds them).
nlohmann::ordered_json StepSpecToJson(const RankedStepSpec& spec);

// Reads what StepSpecToJson writes. `file` names the source in errors.
// `also`: the keys beside the spec's that the caller reads itself, as
// paths ("peakmem_step", "forward.trace"); any other key is an error
// naming it. Throws StepFileError "FILE: 'PATH' WHY" for a missing or
// malformed field, "FILE: unknown key 'PATH'" for an unknown one.
RankedStepSpec StepSpecFromJson(const nlohmann::ordered_json& json, const std::string& file,
                                const std::vector<std::string_view>& also = {});

}  // namespace peakmem
