// The step file reader: what export_step writes is read back into the
// step's spec and traces; a file that is not one is an error naming the
// file and the field.
#include "peakmem/frontend/step_file.h"

#include <gtest/gtest.h>

#include <string>

#include "training_step_test_util.h"

namespace peakmem {
namespace {

using testing_util::StepFileJson;

std::string ErrorOf(const nlohmann::json& file) { return testing_util::StepFileErrorOf(file); }

TEST(StepFile, ReadsWhatExportStepWrites) {
  const StepFile f = ParseStepFile("step.json", StepFileJson().dump());
  EXPECT_EQ(f.spec.saved, (std::vector<std::string>{"t0", "x"}));
  EXPECT_EQ(f.spec.grads, (std::vector<std::string>{"", "t6"}));
  EXPECT_EQ(f.spec.cotangents, (std::vector<std::string>{"t3"}));
  EXPECT_EQ(f.spec.parameter_bytes, 128);
  EXPECT_EQ(f.spec.cpu_threads, 1);
  EXPECT_FALSE(f.optimizer_first.has_value());
  EXPECT_EQ(f.spec.value_modules.at("t4"), "lin");
  ASSERT_EQ(f.spec.held.size(), 1u);
  EXPECT_TRUE(f.spec.held[0].trainable);
  EXPECT_EQ(f.forward.trace.function_name, "computation");
  EXPECT_EQ(f.backward.trace.function_name, "backward_fn");
  // Simulated, it is the step the join's own test derives by hand (520 bytes).
  EXPECT_EQ(SimulateTrainingStep(f.forward, f.backward, nullptr, nullptr, f.spec).peak_bytes, 520);
}

TEST(StepFile, MalformedFilesNameTheField) {
  EXPECT_NE(ErrorOf(nlohmann::json::array()).find("step.json: the step file must be an object"), std::string::npos);
  nlohmann::json f = StepFileJson();
  f.erase("peakmem_step");
  EXPECT_NE(ErrorOf(f).find("is not a peakmem step file"), std::string::npos);
  f = StepFileJson();
  f["peakmem_step"] = 7;
  EXPECT_NE(ErrorOf(f).find("'peakmem_step' is version 7; this peakmem reads version 1"), std::string::npos);
  f = StepFileJson();
  f["forward"].erase("saved");
  EXPECT_NE(ErrorOf(f).find("'forward.saved' is missing"), std::string::npos);
  f = StepFileJson();
  f["backward"]["grads"] = {"t6"};
  EXPECT_NE(ErrorOf(f).find("'backward.grads' has 1 entries for the forward's 2 flat_args"), std::string::npos);
  f = StepFileJson();
  f["parameter_bytes"] = -1;
  EXPECT_NE(ErrorOf(f).find("'parameter_bytes' must be a non-negative integer"), std::string::npos);
  f = StepFileJson();
  f["modules"]["held"][0]["bytes"] = "many";
  EXPECT_NE(ErrorOf(f).find("'modules.held[0].bytes' must be a non-negative integer"), std::string::npos);
  f = StepFileJson();
  f["steps"] = 0;
  EXPECT_NE(ErrorOf(f).find("'steps' must be an integer >= 1"), std::string::npos);
  EXPECT_THROW(ParseStepFile("step.json", "{not json"), StepFileError);
}

TEST(StepFile, TheRankItWasExportedAsReadsTheTraces) {
  nlohmann::json f = StepFileJson();
  EXPECT_EQ(ParseStepFile("step.json", f.dump()).forward.rank, 0);  // optional: rank 0
  f["rank"] = 3;
  f["world_size"] = 4;
  const StepFile read = ParseStepFile("step.json", f.dump());
  EXPECT_EQ(read.forward.rank, 3);
  EXPECT_EQ(read.backward.world_size, 4);
  f["rank"] = 4;
  EXPECT_NE(ErrorOf(f).find("'rank' is 4, not below the world size 4"), std::string::npos);
  f["rank"] = -1;
  EXPECT_NE(ErrorOf(f).find("'rank' must be an integer >= 0"), std::string::npos);
}

TEST(StepFile, ABadTraceInsideIsATraceErrorNamingIt) {
  nlohmann::json f = StepFileJson();
  f["backward"]["trace"] = "def backward_fn(a):\n  t0 = torch.mul(a, \n";
  try {
    ParseStepFile("step.json", f.dump());
    FAIL() << "no error";
  } catch (const TraceError& e) {
    EXPECT_EQ(e.file(), "step.json#backward.trace");
  }
}

}  // namespace
}  // namespace peakmem
