// The training-step join on a step small enough to follow by hand: every
// figure below is derived in its comment from the step's rules
// (training_step.h; python/peakmem/step/__init__.py's docstring). f32[4, 8] is 128
// bytes, f32[] 4. The end-to-end numbers are checked against real PyTorch
// measurement elsewhere (tests/python/test_step.py).
#include "peakmem/models/training_step.h"

#include <gtest/gtest.h>

#include <string>

#include "test_util.h"
#include "training_step_test_util.h"

namespace peakmem {
namespace {

using testing_util::Parse;
using testing_util::kStepBackward;
using testing_util::kStepForward;
using testing_util::StepSpec;

std::int64_t Category(const TrainingStepResult& r, const std::string& name) {
  for (const auto& [c, b] : r.by_category)
    if (c == name) return b;
  ADD_FAILURE() << "no category " << name;
  return -1;
}

TEST(TrainingStep, OneStepPeaksInTheBackward) {
  const ParsedTrace fw = Parse(kStepForward), bw = Parse(kStepBackward);
  TrainingStepSpec spec = StepSpec();
  spec.value_modules = {{"t_lin_weight", "lin"}, {"t0", "lin"}, {"t4", "lin"}, {"t5", "lin"}, {"t6", "lin"}};
  spec.held = {{"lin", 128, true}};
  const TrainingStepResult r = SimulateTrainingStep(fw, bw, nullptr, nullptr, spec);
  // Forward (the caller holds x and w, 256): t0 +128, t1 +128, t2 +4 -> 516;
  // then t1 dies: it ends holding x, w, t0 and t2 (388).
  EXPECT_EQ(r.forward.peak_bytes, 516);
  EXPECT_EQ(r.forward.final_bytes, 388);
  // Backward: its own saved t0 (128; x is the caller's: external), then t4
  // -> 256; t0, t4, t5 die in turn; it returns t6 (128).
  EXPECT_EQ(r.backward.peak_bytes, 256);
  EXPECT_EQ(r.backward.final_bytes, 128);
  // Around the backward: the forward's final 388 + the cotangent 4 - the
  // saved t0 it counts itself 128 = 264; 264 + 256 = 520, above the
  // forward's 516.
  EXPECT_EQ(r.peak_bytes, 520);
  EXPECT_EQ(r.phase_at_peak, "backward");
  EXPECT_EQ(r.step_at_peak, 1);
  // zero_grad: .grad dropped; x and w remain.
  EXPECT_EQ(r.final_bytes, 256);
  // At the peak (after t4): w 128, x 128, the saved t0 128 (activations),
  // and t4 + the loss + the cotangent 136 (temporaries).
  EXPECT_EQ(Category(r, "parameters"), 128);
  EXPECT_EQ(Category(r, "inputs"), 128);
  EXPECT_EQ(Category(r, "gradients"), 0);
  EXPECT_EQ(Category(r, "activations"), 128);
  EXPECT_EQ(Category(r, "temporaries"), 136);
  // By module: w, t0 and t4 are "lin"'s (384); x, the loss and the cotangent the top's.
  ASSERT_EQ(r.by_module.size(), 2u);
  EXPECT_EQ(r.by_module[0], (std::pair<std::string, std::int64_t>{"lin", 384}));
  EXPECT_EQ(r.by_module[1], (std::pair<std::string, std::int64_t>{"", 136}));
  EXPECT_EQ(r.grad_bytes, 128);
  ASSERT_EQ(r.phases.size(), 2u);
  EXPECT_EQ(r.phases[1].around, 264);
}

TEST(TrainingStep, AccumulatingGradientsAreHeldIntoTheNextStep) {
  const ParsedTrace fw = Parse(kStepForward), bw = Parse(kStepBackward);
  TrainingStepSpec spec = StepSpec();
  spec.steps = 2;
  spec.zero_grad = false;
  spec.value_modules = {{"t_lin_weight", "lin"}, {"t0", "lin"}, {"t4", "lin"}};
  spec.held = {{"lin", 128, true}};
  const TrainingStepResult r = SimulateTrainingStep(fw, bw, nullptr, nullptr, spec);
  // Step 2 runs with w.grad (128) held: the backward's peak 520 + 128 = 648.
  EXPECT_EQ(r.peak_bytes, 648);
  EXPECT_EQ(r.phase_at_peak, "backward");
  EXPECT_EQ(r.step_at_peak, 2);
  EXPECT_EQ(Category(r, "gradients"), 128);
  // x, w and w.grad remain.
  EXPECT_EQ(r.final_bytes, 384);
  // "lin": w, w.grad, t0, t4.
  EXPECT_EQ(r.by_module[0], (std::pair<std::string, std::int64_t>{"lin", 512}));
}

TEST(TrainingStep, WithoutModulesThereIsNoModuleBreakdown) {
  const TrainingStepResult r = SimulateTrainingStep(Parse(kStepForward), Parse(kStepBackward), nullptr, nullptr, StepSpec());
  EXPECT_TRUE(r.by_module.empty());
  EXPECT_EQ(r.peak_bytes, 520);
}

TEST(TrainingStep, StepsThatDoNotFitTogetherAreErrors) {
  const ParsedTrace fw = Parse(kStepForward), bw = Parse(kStepBackward);
  TrainingStepSpec spec = StepSpec();
  spec.saved = {"t0", "nope"};
  EXPECT_THROW(
      {
        try {
          SimulateTrainingStep(fw, bw, nullptr, nullptr, spec);
        } catch (const std::runtime_error& e) {
          EXPECT_NE(std::string(e.what()).find("nope is not returned by the forward"), std::string::npos);
          throw;
        }
      },
      std::runtime_error);
  spec = StepSpec();
  spec.grads = {"t6"};  // one gradient for two arguments
  EXPECT_THROW(SimulateTrainingStep(fw, bw, nullptr, nullptr, spec), std::runtime_error);
  spec = StepSpec();
  spec.parameter_bytes = 0;  // the forward's arguments hold more than the step says it holds
  EXPECT_THROW(SimulateTrainingStep(fw, bw, nullptr, nullptr, spec), std::runtime_error);
  spec = StepSpec();
  spec.trainable_bytes = 64;  // with an optimizer: gradients that do not match the trainable parameters
  const ParsedTrace opt = Parse("def optimizer_step(p0, g0):\n  # p0: \"cpu f32[4, 8]\"\n  # g0: \"cpu f32[4, 8]\"\n  return ()\n");
  EXPECT_THROW(SimulateTrainingStep(fw, bw, &opt, nullptr, spec), std::invalid_argument);
}

}  // namespace
}  // namespace peakmem
