// A training step small enough to follow by hand, for the tests of the
// step's join (src/models/training_step_test.cc), the step file
// (src/frontend/step_file_test.cc, step_spec_json_test.cc) and `peakmem
// step` (tools/): f32[4, 8] is 128 bytes, f32[] 4.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "peakmem/frontend/step_file.h"
#include "peakmem/models/training_step.h"

namespace peakmem::testing_util {

// loss = (x * w * x * w).sum(), w a parameter of module "lin"; the forward
// saves t0 = x * w (its own) and x (the caller's input).
inline constexpr const char* kStepForward = R"(def computation(x, t_lin_weight):
  # x: "cpu f32[4, 8]"
  # t_lin_weight: "cpu f32[4, 8]"
  t0 = torch.mul(x, t_lin_weight)  # t0: "cpu f32[4, 8]"
  t1 = torch.mul(t0, t0)  # t1: "cpu f32[4, 8]"
  t2 = torch.sum(t1)  # t2: "cpu f32[]"
  del t1
  return {'output': t2, 'flat_args': [x, t_lin_weight], 'flat_output': (t2,)}, ((t0, x), ())
)";

// d loss / d w = (t0 + t0) * cotangent * x.
inline constexpr const char* kStepBackward = R"(def backward_fn(saved_for_backward, cotangents):
  # saved_for_backward: "Collection"
  # cotangents: "Collection"
  C0, C1, = saved_for_backward
  # C0: "Collection"
  # C1: "Collection"
  clear_mutable_collection(saved_for_backward)
  clear_mutable_collection(C1)
  del C1, saved_for_backward
  t3, = cotangents
  # t3: "cpu f32[]"
  clear_mutable_collection(cotangents)
  del cotangents
  t0, x, = C0
  # t0: "cpu f32[4, 8]"
  # x: "cpu f32[4, 8]"
  clear_mutable_collection(C0)
  del C0
  t4 = torch.add(t0, t0)  # t4: "cpu f32[4, 8]"
  del t0
  t5 = torch.mul(t4, t3)  # t5: "cpu f32[4, 8]"
  del t4, t3
  t6 = torch.mul(t5, x)  # t6: "cpu f32[4, 8]"
  del t5, x
  return (None, t6)
)";

inline TrainingStepSpec StepSpec() {
  TrainingStepSpec spec;
  spec.saved = {"t0", "x"};
  spec.outputs = {"t2"};
  spec.flat_args = {"x", "t_lin_weight"};
  spec.grads = {"", "t6"};
  spec.cotangents = {"t3"};
  spec.cotangent_bytes = 4;
  spec.parameter_bytes = 128;
  spec.input_bytes = 128;
  spec.cpu_threads = 1;
  return spec;
}

// The step as peakmem.export_step writes it (docs/step-file.md), with
// module paths: w, and what is made from it, are module "lin"'s.
inline nlohmann::json StepFileJson() {
  return {
      {"peakmem_step", 1},
      {"steps", 1},
      {"zero_grad", true},
      {"torch_threads", 1},
      {"parameter_bytes", 128},
      {"input_bytes", 128},
      {"cotangent_bytes", 4},
      {"forward", {{"trace", kStepForward}, {"saved", {"t0", "x"}}, {"outputs", {"t2"}}, {"flat_args", {"x", "t_lin_weight"}}}},
      {"backward", {{"trace", kStepBackward}, {"cotangents", {"t3"}}, {"grads", {nullptr, "t6"}}}},
      {"optimizer", nullptr},
      {"modules",
       {{"values", {{"t_lin_weight", "lin"}, {"t0", "lin"}, {"t4", "lin"}, {"t5", "lin"}, {"t6", "lin"}}},
        {"held", {{{"module", "lin"}, {"bytes", 128}, {"trainable", true}}}}}},
  };
}

// The StepFileError `parse` throws for `file`'s text, or "(no error)".
template <typename Json, typename Parse>
std::string StepFileErrorOf(const Json& file, Parse parse) {
  try {
    parse(file.dump());
  } catch (const StepFileError& e) {
    return e.what();
  }
  return "(no error)";
}

// The StepFileError ParseStepFile throws for `file` (named "step.json"),
// or "(no error)".
inline std::string StepFileErrorOf(const nlohmann::json& file) {
  return StepFileErrorOf(file, [](const std::string& text) { ParseStepFile("step.json", text); });
}

}  // namespace peakmem::testing_util
