// The recorded step file: what RecordedStepToJson writes reads back as the
// same step; an unknown key is an error naming it.
#include "peakmem/frontend/recorded_step_file.h"

#include <gtest/gtest.h>

#include <string>

#include "peakmem/frontend/step_spec_json.h"
#include "training_step_test_util.h"

namespace peakmem {
namespace {

// Two storages: a 64-byte parameter held before the step and a 32-byte
// activation the forward makes and the backward frees.
RecordedStep TwoStorages() {
  RecordedStep step;
  step.storages = {{64, "parameter w", 0, "lin", "meta", false}, {32, "aten.mm.default", 4, "lin", "meta", false}};
  step.held = {0};
  step.statements = {{"aten.mm.default", "mm", {1}}, {"aten.mul.default", "mul", {-2}}};
  step.phases = {{"forward", 1, 0, 1}, {"backward", 1, 1, 2}};
  step.diagnostics = {"aten.foo.default: no scratch rule"};
  step.optimizer = "SGD(lr=0.1)";
  return step;
}

TEST(RecordedStepFile, WhatIsWrittenReadsBackAsTheSameStep) {
  const RecordedStep step = TwoStorages();
  const std::optional<RecordedStep> read = ParseRecordedStepFile("r.json", RecordedStepToJson(step).dump());
  ASSERT_TRUE(read.has_value());
  ASSERT_EQ(read->storages.size(), 2u);
  EXPECT_EQ(read->storages[1].bytes, 32);
  EXPECT_EQ(read->storages[1].category, 4);
  EXPECT_EQ(read->storages[0].module, "lin");
  EXPECT_EQ(read->held, std::vector<std::int64_t>{0});
  ASSERT_EQ(read->statements.size(), 2u);
  EXPECT_EQ(read->statements[1].events, std::vector<std::int64_t>{-2});
  EXPECT_EQ(read->phases[1].name, "backward");
  EXPECT_EQ(read->phases[1].first, 1);
  EXPECT_EQ(read->diagnostics, step.diagnostics);
  EXPECT_EQ(read->optimizer, "SGD(lr=0.1)");
  // Without an optimizer the field is null (docs/step-file.md).
  RecordedStep plain = TwoStorages();
  plain.optimizer.clear();
  EXPECT_TRUE(RecordedStepToJson(plain)["optimizer"].is_null());
}

TEST(RecordedStepFile, AnUnknownKeyIsNamed) {
  nlohmann::ordered_json json = RecordedStepToJson(TwoStorages());
  json["statement"] = nlohmann::ordered_json::array();
  EXPECT_EQ(testing_util::StepFileErrorOf(json, [](const std::string& text) { ParseRecordedStepFile("r.json", text); }),
            "r.json: unknown key 'statement'");
}

}  // namespace
}  // namespace peakmem
