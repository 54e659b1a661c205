#include "peakmem/models/recorded_step.h"

#include <gtest/gtest.h>

#include "peakmem/models/step_stream.h"
#include "peakmem/models/training_step_report.h"

namespace peakmem {
namespace {

// A parameter (64 B) and an input (16 B) held; the forward makes an
// activation (32 B) and the loss (4 B, with an 8 B scratch alive beside
// it); the backward makes the gradient (64 B), frees the activation; the
// step ends with the loss freed. By hand: live 80 -> 112 -> 116 (+8
// scratch: 124 inside) -> 116 -> 180 -> 148 -> 144.
RecordedStep Example() {
  RecordedStep step;
  step.storages = {
      {64, "parameter w", kParameters, "lin", "cpu", false}, {16, "input", kInputs, "", "cpu", false},
      {32, "aten.mm.default", kActivations, "lin", "cpu", false}, {4, "aten.sum.default", kTemporaries, "", "cpu", false},
      {8, "(scratch)", kTemporaries, "", "cpu", true},           {64, "aten.mm.default", kGradients, "lin", "cpu", false},
  };
  step.held = {0, 1};
  step.statements = {
      {"aten.mm.default", "mm", {2}},
      {"aten.sum.default", "sum", {3, 4, -1 - 4}},
      {"aten.mm.default", "mm backward", {5, -1 - 2}},
      {"step() returns", "the loss released", {-1 - 3}},
  };
  step.phases = {{"forward", 1, 0, 2}, {"backward", 1, 2, 3}, {"optimizer", 1, 3, 4}};
  return step;
}

TEST(RecordedStep, TheRecordIsTheStream) {
  const TrainingStepResult r = SimulateRecordedStep(Example(), true);
  EXPECT_EQ(r.peak_bytes, 180);
  EXPECT_EQ(r.final_bytes, 144);
  EXPECT_EQ(r.phase_at_peak, "backward");
  ASSERT_EQ(r.step.steps.size(), 4u);
  EXPECT_EQ(r.step.steps[1].peak_bytes, 124);  // the scratch, inside sum
  EXPECT_EQ(r.step.steps[1].live_bytes, 116);
  EXPECT_EQ(std::string(r.step.steps[2].source), "backward 1: mm backward");
  // At the peak: parameter 64, input 16, activation 32, loss 4, gradient 64.
  std::map<std::string, std::int64_t> by_category(r.by_category.begin(), r.by_category.end());
  EXPECT_EQ(by_category["parameters"], 64);
  EXPECT_EQ(by_category["gradients"], 64);
  EXPECT_EQ(by_category["activations"], 32);
  EXPECT_EQ(by_category["temporaries"], 4);
  std::map<std::string, std::int64_t> by_module(r.by_module.begin(), r.by_module.end());
  EXPECT_EQ(by_module["lin"], 64 + 32 + 64);
}

// Each phase's peak is the highest live bytes inside it, read off the one
// stream; what it holds around it is what is live as it starts. By hand,
// from Example's live bytes: forward [0, 2) starts at 80 (w + input), peaks
// at 124 inside sum (the scratch); backward [2, 3) starts at 116, peaks at
// 180 when the gradient is made before the activation goes; the optimizer
// [3, 4) starts at 148 and only frees the loss, so its peak is 148.
TEST(RecordedStep, EachPhasePeaksWhereItsStatementsDo) {
  RecordedStep step = Example();
  step.diagnostics = {"aten.foo.default: not modelled"};
  const TrainingStepResult r = SimulateRecordedStep(step, true);
  ASSERT_EQ(r.phases.size(), 3u);
  EXPECT_EQ(r.phases[0].peak, 124);
  EXPECT_EQ(r.phases[0].around, 80);
  EXPECT_EQ(r.phases[1].peak, 180);
  EXPECT_EQ(r.phases[1].around, 116);
  EXPECT_EQ(r.phases[2].peak, 148);
  EXPECT_EQ(r.phases[2].around, 148);
  // `peakmem step FILE` prints those figures, and the record's diagnostics.
  const std::string text = TrainingStepToText(r, {"example.json", "", std::nullopt, 10});
  EXPECT_NE(text.find("forward   step 1   peak            124  around             80"), std::string::npos) << text;
  EXPECT_NE(text.find("backward  step 1   peak            180  around            116"), std::string::npos) << text;
  EXPECT_NE(text.find("optimizer step 1   peak            148  around            148"), std::string::npos) << text;
  EXPECT_NE(text.find("diagnostics:\n  aten.foo.default: not modelled"), std::string::npos) << text;
  const std::string json = TrainingStepToJson(r, {"example.json", "", std::nullopt, 10}, -1);
  EXPECT_NE(json.find(R"({"phase":"backward","step":1,"peak_bytes":180,"around_bytes":116})"), std::string::npos)
      << json;
}

TEST(RecordedStep, TheCachingAllocatorPricesTheStream) {
  AllocatorOptions cuda;
  cuda.model = AllocatorModel::kCudaCaching;
  const TrainingStepResult r = SimulateRecordedStep(Example(), true, cuda);
  ASSERT_NE(r.step.allocator, nullptr);
  // Every request rounds up to one 512-byte block; at most five are out at
  // once (inside sum: w, input, activation, loss, scratch; after the
  // backward's mm: the gradient instead of the scratch), all in one 2 MiB
  // small-pool segment.
  EXPECT_EQ(r.step.allocator->stats.allocated_bytes_peak, 5 * 512);
  EXPECT_EQ(r.step.allocator->stats.reserved_bytes_peak, 2 << 20);
}

TEST(RecordedStep, AnInvalidRecordIsNamed) {
  RecordedStep twice = Example();
  twice.statements[2].events.push_back(5);
  EXPECT_THROW(
      {
        try {
          SimulateRecordedStep(twice);
        } catch (const std::invalid_argument& e) {
          EXPECT_NE(std::string(e.what()).find("statement 2 (aten.mm.default): aten.mm.default is allocated twice"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      std::invalid_argument);
  RecordedStep dead = Example();
  dead.statements[3].events.push_back(-1 - 2);
  EXPECT_THROW(SimulateRecordedStep(dead), std::invalid_argument);
  RecordedStep out_of_range = Example();
  out_of_range.statements[0].events.push_back(99);
  EXPECT_THROW(SimulateRecordedStep(out_of_range), std::invalid_argument);
}

}  // namespace
}  // namespace peakmem
