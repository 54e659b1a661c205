// Recomputation on the step file of training_step_test_util.h (f32[4, 8]
// is 128 bytes): loss = (x * w * x * w).sum(), the forward saving t0 = x * w
// and x. Its one candidate is t0 (x is a flat argument).
#include "peakmem/planning/step_recompute.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"
#include "training_step_test_util.h"

namespace peakmem {
namespace {

using testing_util::StepFileJson;

StepFile Step() { return ParseStepFile("step.json", StepFileJson().dump()); }

TEST(StepRecompute, CandidatesAreSavedPointwiseResults) {
  const std::vector<RecomputeCandidate> pool = RecomputeCandidates(Step());
  ASSERT_EQ(pool.size(), 1u);
  EXPECT_EQ(pool[0].name, "t0");
  EXPECT_EQ(pool[0].flops, 32);  // torch.mul: one per element of f32[4, 8]
  EXPECT_EQ(pool[0].statement, 0u);
  EXPECT_EQ(pool[0].inputs, (std::vector<std::string>{"x", "t_lin_weight"}));
  // Recomputing t0 needs w, which the backward lacks: saved in its place.
  const RecomputeClosure closure = CloseRecomputation({"t0", "x"}, pool, {0});
  EXPECT_EQ(closure.saved, (std::vector<std::string>{"x", "t_lin_weight"}));
  EXPECT_EQ(closure.statements, (std::vector<std::size_t>{0}));
}

TEST(StepRecompute, NothingRecomputedPrintsTheTracesAsTheyWere) {
  const StepFile step = Step();
  const RecomputedTraces same = RewriteForRecomputation(step, RecomputeCandidates(step), {});
  EXPECT_EQ(same.forward, testing_util::kStepForward);
  EXPECT_EQ(same.backward, testing_util::kStepBackward);
  EXPECT_EQ(same.saved, step.spec.saved);
}

TEST(StepRecompute, RewritesBothTracesAsThunderWould) {
  const StepFile step = Step();
  const RecomputedTraces r = RewriteForRecomputation(step, RecomputeCandidates(step), {0});
  // The forward returns x and w; t0 is no longer saved, so it is freed
  // after t1, its last use.
  EXPECT_EQ(r.forward, R"(def computation(x, t_lin_weight):
  # x: "cpu f32[4, 8]"
  # t_lin_weight: "cpu f32[4, 8]"
  t0 = torch.mul(x, t_lin_weight)  # t0: "cpu f32[4, 8]"
  t1 = torch.mul(t0, t0)  # t1: "cpu f32[4, 8]"
  del t0
  t2 = torch.sum(t1)  # t2: "cpu f32[]"
  del t1
  return {'output': t2, 'flat_args': [x, t_lin_weight], 'flat_output': (t2,)}, ((x, t_lin_weight), ())
)");
  // The backward's prologue as it was; it unpacks x and w (w's type from
  // the forward), makes t0 right before t4 reads it, and frees w after that;
  // from t4 on, the backward as it was (t0's free included).
  const std::string backward = testing_util::kStepBackward;
  EXPECT_EQ(r.backward, backward.substr(0, backward.find("  t0, x, = C0")) + R"(  x, t_lin_weight, = C0
  # x: "cpu f32[4, 8]"
  # t_lin_weight: "cpu f32[4, 8]"
  clear_mutable_collection(C0)
  del C0
  t0 = torch.mul(x, t_lin_weight)  # t0: "cpu f32[4, 8]"
  del t_lin_weight
)" + backward.substr(backward.find("  t4 = ")));
  EXPECT_EQ(r.saved, (std::vector<std::string>{"x", "t_lin_weight"}));
}

TEST(StepRecompute, TheSearchKeepsNothingThatDoesNotLowerThePeak) {
  // The step peaks at 520 in the backward (training_step_test.cc). With t0
  // recomputed: the forward holds x, w (256) + t0 + t1 = 512 at t1, then
  // ends with x, w and the loss (260). The backward owns nothing it is
  // passed; around it 260 + the cotangent 4 = 264; its own peak is 256 (t0
  // and t4, then t4 and t5, then t5 and t6): 264 + 256 = 520 again, no
  // lower, so the search keeps nothing after 2 simulations.
  const StepFile step = Step();
  const StepRecomputation plan = PlanStepRecomputation(step, {});
  EXPECT_EQ(plan.search.peak_before, 520);
  EXPECT_EQ(plan.search.peak_after, 520);
  EXPECT_EQ(plan.search.simulations, 2u);
  EXPECT_TRUE(plan.names.empty());
  EXPECT_EQ(plan.traces.forward, testing_util::kStepForward);
  // The rewrite itself, simulated: the forward's peak is 512, the step's 520.
  const RecomputedTraces r = RewriteForRecomputation(step, plan.pool, {0});
  TrainingStepSpec spec = step.spec;
  spec.saved = r.saved;
  const TrainingStepResult sim =
      SimulateTrainingStep(testing_util::Parse(r.forward), testing_util::Parse(r.backward), nullptr, nullptr, spec);
  EXPECT_EQ(sim.forward.peak_bytes, 512);
  EXPECT_EQ(sim.peak_bytes, 520);
}

TEST(StepRecompute, WritesTheStepFileWithOnlyTheTracesAndSavedChanged) {
  const StepFile step = Step();
  const RecomputedTraces r = RewriteForRecomputation(step, RecomputeCandidates(step), {0});
  nlohmann::json expected = StepFileJson();
  expected["forward"]["trace"] = r.forward;
  expected["forward"]["saved"] = {"x", "t_lin_weight"};
  expected["backward"]["trace"] = r.backward;
  EXPECT_EQ(nlohmann::json::parse(WriteRecomputedStep("step.json", StepFileJson().dump(), r)), expected);
}

TEST(StepRecompute, TracesNotPrintedOrNotThundersAreErrors) {
  nlohmann::json f = StepFileJson();
  std::string fw = testing_util::kStepForward;
  f["forward"]["trace"] = fw.substr(0, fw.find("  return")) + "  return t2\n";
  const StepFile bad = ParseStepFile("step.json", f.dump());
  try {
    RewriteForRecomputation(bad, RecomputeCandidates(bad), {0});
    ADD_FAILURE() << "no error";
  } catch (const StepFileError& e) {
    EXPECT_NE(std::string(e.what()).find("step.json#forward.trace: the forward does not end with `return (data, "
                                         "(saved, other))`"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace peakmem
