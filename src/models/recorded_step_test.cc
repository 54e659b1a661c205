#include "peakmem/models/recorded_step.h"

#include <gtest/gtest.h>

#include "peakmem/models/step_stream.h"

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
