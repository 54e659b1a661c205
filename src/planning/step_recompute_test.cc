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
  ASSERT_EQ(pool.size(), 1u);  // t0's region is t0's statement alone: not listed again
  EXPECT_EQ(pool[0].name, "t0");
  EXPECT_EQ(pool[0].flops, 32);  // torch.mul: one per element of f32[4, 8]
  EXPECT_FALSE(pool[0].expensive);
  EXPECT_EQ(pool[0].dropped, (std::vector<std::string>{"t0"}));
  ASSERT_EQ(pool[0].steps.size(), 1u);
  EXPECT_EQ(pool[0].steps[0].statement, 0u);
  EXPECT_EQ(pool[0].steps[0].inputs, (std::vector<std::string>{"x", "t_lin_weight"}));
  EXPECT_EQ(pool[0].steps[0].outputs, (std::vector<std::string>{"t0"}));
  // Recomputing t0 needs w, which the backward lacks: saved in its place.
  const RecomputeClosure closure = CloseRecomputation({"t0", "x"}, pool, {0});
  EXPECT_EQ(closure.saved, (std::vector<std::string>{"x", "t_lin_weight"}));
  EXPECT_EQ(closure.statements, (std::vector<std::size_t>{0}));
}

// A forward saving a matmul's result through shallow_copy (t9), its softmax
// (t10), a product of that (t11) and a view of the weight (t7).
StepFile RegionStep() {
  StepFile step;
  step.forward = testing_util::Parse(R"(def computation(x, t_lin_weight):
  # x: "cpu f32[4, 8]"
  # t_lin_weight: "cpu f32[4, 8]"
  t7 = torch.permute(t_lin_weight, (1, 0))  # t7: "cpu f32[8, 4]"
  t8 = torch.matmul(x, t7)  # t8: "cpu f32[4, 4]"
  t9 = shallow_copy(t8)  # t9: "cpu f32[4, 4]"
  t10 = torch.softmax(t9, -1)  # t10: "cpu f32[4, 4]"
  t11 = torch.mul(t10, t10)  # t11: "cpu f32[4, 4]"
  t12 = torch.sum(t11)  # t12: "cpu f32[]"
  return {'output': t12, 'flat_args': [x, t_lin_weight], 'flat_output': (t12,)}, ((t9, t10, t11, x, t7), ())
)");
  step.spec.saved = {"t9", "t10", "t11", "x", "t7"};
  step.spec.outputs = {"t12"};
  step.spec.flat_args = {"x", "t_lin_weight"};
  return step;
}

TEST(StepRecompute, RegionsRecomputeContractionsBackToWhatTheBackwardHas) {
  const std::vector<RecomputeCandidate> pool = RecomputeCandidates(RegionStep());
  // Cheap, in saved order: t11 (mul, 16 elements) and t7 (a view, free).
  // Then the regions, in saved order: t9's storage is t8's (shallow_copy),
  // which no other saved tensor shares; t8 is not saved, so its matmul runs
  // again too, from x and t7 (both saved): 2 * 16 outputs * 8 = 256 FLOPs.
  // t10's region is its softmax alone (t9 is saved), 16 FLOPs. t11's is its
  // mul alone, the cheap candidate: not listed again. t7's storage is the
  // weight's: dropping it frees nothing.
  ASSERT_EQ(pool.size(), 4u);
  EXPECT_EQ(pool[0].name, "t11");
  EXPECT_EQ(pool[1].name, "t7");
  EXPECT_EQ(pool[1].flops, 0);
  EXPECT_EQ(pool[2].name, "t9+");
  EXPECT_TRUE(pool[2].expensive);
  EXPECT_EQ(pool[2].dropped, (std::vector<std::string>{"t9"}));
  EXPECT_EQ(pool[2].flops, 256);
  ASSERT_EQ(pool[2].steps.size(), 2u);
  EXPECT_EQ(pool[2].steps[0].statement, 1u);
  EXPECT_EQ(pool[2].steps[1].statement, 2u);
  EXPECT_EQ(pool[3].name, "t10+");
  EXPECT_EQ(pool[3].flops, 16);
  // t9's and t10's regions together: the backward keeps t11, x and t7 and
  // runs the matmul, the shallow_copy and the softmax.
  RecomputeClosure closure = CloseRecomputation(RegionStep().spec.saved, pool, {3, 2});
  EXPECT_EQ(closure.saved, (std::vector<std::string>{"t11", "x", "t7"}));
  EXPECT_EQ(closure.statements, (std::vector<std::size_t>{1, 2, 3}));
  // t11 with t10's region: t10 made again from t9, then t11 from it.
  closure = CloseRecomputation(RegionStep().spec.saved, pool, {0, 3});
  EXPECT_EQ(closure.saved, (std::vector<std::string>{"t9", "x", "t7"}));
  EXPECT_EQ(closure.statements, (std::vector<std::size_t>{3, 4}));
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
