// The step spec's one schema: what StepSpecToJson writes, StepSpecFromJson
// and the step file reader read back as the same spec; a key the schema
// does not have is an error naming it and where it is.
#include "peakmem/frontend/step_spec_json.h"

#include <gtest/gtest.h>

#include <string>

#include "peakmem/frontend/step_file.h"
#include "training_step_test_util.h"

namespace peakmem {
namespace {

// A spec with every field away from its default.
RankedStepSpec EveryField() {
  RankedStepSpec r;
  TrainingStepSpec& s = r.spec;
  s.saved = {"t0", "x"};
  s.outputs = {"t2"};
  s.flat_args = {"x", "w", "b"};
  s.grads = {"", "t6", "t7"};
  s.cotangents = {"t3"};
  s.cotangent_bytes = 4;
  s.parameter_bytes = 160;
  s.input_bytes = 96;
  s.trainable_bytes = 160;
  s.optimizer_state = {"exp_avg0", "step0"};
  s.optimizer_name = "AdamW";
  s.steps = 3;
  s.zero_grad = false;
  s.cpu_threads = 8;
  s.value_modules = {{"t0", "lin"}, {"t2", ""}};
  s.optimizer_modules = {{"exp_avg0", "lin"}};
  s.held = {{"lin", 128, true}, {"lin", 32, false}};
  s.input_storages = {64, 32};
  r.rank = 1;
  r.world_size = 2;
  return r;
}

std::string ErrorOf(const nlohmann::ordered_json& json) {
  try {
    StepSpecFromJson(json, "spec.json");
  } catch (const StepFileError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(StepSpecJson, WhatIsWrittenReadsBackAsTheSameSpec) {
  const RankedStepSpec spec = EveryField();
  const nlohmann::ordered_json json = nlohmann::ordered_json::parse(StepSpecToJson(spec).dump());
  const RankedStepSpec read = StepSpecFromJson(json, "spec.json");
  EXPECT_EQ(read.spec, spec.spec);
  EXPECT_EQ(read.rank, 1);
  EXPECT_EQ(read.world_size, 2);
  // The file's spellings (docs/step-file.md): no gradient is null, the
  // optimizer's fields are its object's.
  EXPECT_TRUE(json["backward"]["grads"][0].is_null());
  EXPECT_EQ(json["torch_threads"], 8);
  EXPECT_EQ(json["optimizer"]["state"][1], "step0");
  EXPECT_EQ(json["modules"]["held"][1]["bytes"], 32);
}

TEST(StepSpecJson, AStepWithoutOptimizerHasNullThere) {
  RankedStepSpec spec = EveryField();
  spec.spec.optimizer_name.clear();
  spec.spec.optimizer_state.clear();
  spec.spec.optimizer_modules.clear();
  spec.spec.trainable_bytes = -1;
  const nlohmann::ordered_json json = StepSpecToJson(spec);
  EXPECT_TRUE(json["optimizer"].is_null());
  EXPECT_EQ(StepSpecFromJson(json, "spec.json").spec, spec.spec);
}

TEST(StepSpecJson, TheStepFileWrittenReadsBackAsTheSameStep) {
  StepFileText text;
  text.forward = testing_util::kStepForward;
  text.backward = testing_util::kStepBackward;
  const StepFile hand = ParseStepFile("hand.json", testing_util::StepFileJson().dump());
  text.spec.spec = hand.spec;
  const StepFile read = ParseStepFile("step.json", StepFileToJson(text).dump());
  EXPECT_EQ(read.spec, hand.spec);
  EXPECT_EQ(read.forward.trace.function_name, "computation");
  EXPECT_FALSE(read.optimizer_first.has_value());
  // The hand-written file's keys, each where the writer puts it.
  const nlohmann::ordered_json written = StepFileToJson(text);
  // Held in a variable: items() of a temporary would outlive it.
  const nlohmann::json hand_json = testing_util::StepFileJson();
  for (const auto& [key, value] : hand_json.items()) {
    ASSERT_TRUE(written.contains(key)) << key;
    if (value.is_object()) {
      for (const auto& [inner, v] : value.items()) EXPECT_TRUE(written[key].contains(inner)) << key << "." << inner;
    }
  }
}

TEST(StepSpecJson, AnOptimizerNeedsItsPrograms) {
  StepFileText text;
  text.spec = EveryField();
  EXPECT_THROW(StepFileToJson(text), std::invalid_argument);
  text.optimizer_first = text.optimizer_later = "def step():\n  return None\n";
  text.optimizer = "torch.optim.AdamW(lr=0.001)";
  const nlohmann::ordered_json json = StepFileToJson(text);
  EXPECT_EQ(json["optimizer"]["description"], "torch.optim.AdamW(lr=0.001)");
  EXPECT_EQ(json["optimizer"]["trainable_bytes"], 160);
}

TEST(StepSpecJson, AnUnknownKeyIsNamedWithWhereItIs) {
  nlohmann::ordered_json json = StepSpecToJson(EveryField());
  json["cpu_threads"] = 1;
  EXPECT_EQ(ErrorOf(json), "spec.json: unknown key 'cpu_threads'");
  json = StepSpecToJson(EveryField());
  json["forward"]["savd"] = nlohmann::ordered_json::array();
  EXPECT_EQ(ErrorOf(json), "spec.json: unknown key 'forward.savd'");
  json = StepSpecToJson(EveryField());
  json["modules"]["held"][1]["device"] = "cuda";
  EXPECT_EQ(ErrorOf(json), "spec.json: unknown key 'modules.held[1].device'");
  // The traces are the step file's keys, not the spec's.
  json = StepSpecToJson(EveryField());
  json["forward"]["trace"] = "";
  EXPECT_EQ(ErrorOf(json), "spec.json: unknown key 'forward.trace'");
}

TEST(StepSpecJson, TheStepFileNamesAnUnknownKey) {
  nlohmann::json f = testing_util::StepFileJson();
  f["torch_thread"] = 1;
  EXPECT_EQ(testing_util::StepFileErrorOf(f), "step.json: unknown key 'torch_thread'");
  f = testing_util::StepFileJson();
  f["backward"]["grad"] = nlohmann::json::array();
  EXPECT_EQ(testing_util::StepFileErrorOf(f), "step.json: unknown key 'backward.grad'");
}

TEST(StepSpecJson, FieldsAcrossKeysAreChecked) {
  nlohmann::ordered_json json = StepSpecToJson(EveryField());
  json["input_storages"] = {64, 64};
  EXPECT_EQ(ErrorOf(json), "spec.json: 'input_storages' sums to 128 bytes, not input_bytes 96");
  json = StepSpecToJson(EveryField());
  json["optimizer"].erase("state");
  EXPECT_EQ(ErrorOf(json), "spec.json: 'optimizer.state' is missing");
}

}  // namespace
}  // namespace peakmem
