// `peakmem plan`: reordering a printed trace, and `--recompute` on a step
// file. The command runs as a separate process (cli_test_util.h); inputs
// are only read.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_test_util.h"
#include "planning_test_util.h"
#include "training_step_test_util.h"

namespace peakmem {
namespace {

using namespace cli_test;  // NOLINT(google-build-using-namespace): the tests' shared helpers

TEST_F(Cli, PlanWritesTheReorderedTraceAndLeavesTheInputAlone) {
  // Two chains written breadth first (src/planning/planning_test_util.h's
  // trace; the peak derived there: 3076 -> 2056 bytes). The plan goes to
  // -o, the summary to stderr, the input file is not touched, and the
  // planned trace reads back with the planned peak.
  const std::string input = TempPath("two_chains.trace");
  const std::string output = TempPath("two_chains.planned");
  WriteFile(input, testing_util::kTwoChainsTrace);
  const FileState before = StateOf(input);
  const CliResult r = RunCli("plan " + ShellQuote(input) + " --convention forward -o " + ShellQuote(output));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("peak 3076 -> 2056 bytes"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("inductor lpmf"), std::string::npos) << r.err;
  EXPECT_TRUE(StateOf(input) == before);
  const CliResult again = RunCli("analyze " + ShellQuote(output) + " --convention forward --format json");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(nlohmann::ordered_json::parse(again.out).at("peak_bytes"), 2056);
  std::remove(input.c_str());
  std::remove(output.c_str());
}

TEST_F(Cli, PlanBadInputAndUsageAreErrors) {
  const CliResult missing = RunCli("plan " + ShellQuote(TempPath("no_such.trace")));
  EXPECT_EQ(missing.exit_code, 1);
  const CliResult thunder = RunCli("plan " + ShellQuote(kReferenceTrace) + " --model thunder");
  EXPECT_EQ(thunder.exit_code, 2);
  EXPECT_NE(thunder.err.find("only the runtime model"), std::string::npos) << thunder.err;
  const CliResult budget = RunCli("plan " + ShellQuote(kReferenceTrace) + " --time-budget -1");
  EXPECT_EQ(budget.exit_code, 2);
}

// The hand-derived step (training_step_test_util.h) with a backward that
// makes and drops two f32[4, 8] (t7, t8) before it reads the saved t0.
// Saved: the forward ends with x, w, t0, the loss (388), peak 516; around the
// backward 388 + the cotangent 4 - t0 (its own) = 264; its own bytes: t0,
// t7, t8 = 384 at t8: 648. With t0 recomputed (right before t4): the
// forward peaks at 512 (x, w, t0, t1) and ends with 260; around the backward
// 264; its own: t7 + t8 = 256, then t9 + t0 + t4 = 260: 524. One choice of
// 32 FLOPs, 2 simulations, 648 - 524 = 124 bytes (19.1%) lower.
std::string LateReadBackward() {
  std::string backward = testing_util::kStepBackward;
  backward.insert(backward.find("  t4 = "), R"(  t7 = torch.mul(x, x)  # t7: "cpu f32[4, 8]"
  t8 = torch.mul(t7, t7)  # t8: "cpu f32[4, 8]"
  del t7
  t9 = torch.sum(t8)  # t9: "cpu f32[]"
  del t8
)");
  const std::string last = "  t6 = torch.mul(t5, x)";
  backward.replace(backward.find(last), backward.find("  return") - backward.find(last),
                   R"(  t10 = torch.mul(t5, t9)  # t10: "cpu f32[4, 8]"
  del t5, t9
  t6 = torch.mul(t10, x)  # t6: "cpu f32[4, 8]"
  del t10, x
)");
  return backward;
}

TEST_F(Cli, PlanRecomputeWritesTheRecomputedStepFile) {
  const std::string input = TempPath("late_read_step.json");
  const std::string output = TempPath("late_read_step.planned.json");
  nlohmann::json step = testing_util::StepFileJson();
  step["backward"]["trace"] = LateReadBackward();
  WriteFile(input, step.dump());
  const FileState before = StateOf(input);
  const CliResult r = RunCli("plan " + ShellQuote(input) + " --recompute -o " + ShellQuote(output));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("peakmem plan: step peak 648 -> 524 bytes (19.1% lower); recomputed 1 values (t0), added "
                       "FLOPs 32; 2 simulations\n"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(StateOf(input) == before);
  const nlohmann::json planned = nlohmann::json::parse(ReadFile(output));
  EXPECT_EQ(planned.at("forward").at("saved"), nlohmann::json({"x", "t_lin_weight"}));
  EXPECT_EQ(planned.at("modules"), step.at("modules"));
  const std::string bw = planned.at("backward").at("trace");
  EXPECT_NE(bw.find("  del t8\n  t0 = torch.mul(x, t_lin_weight)  # t0: \"cpu f32[4, 8]\"\n  del t_lin_weight\n  t4 ="),
            std::string::npos)
      << bw;
  // The planned step file simulates to the planned peak.
  const CliResult again = RunCli("step " + ShellQuote(output) + " --format json");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(nlohmann::json::parse(again.out).at("peak_bytes"), 524);
  // A budget it already fits: nothing recomputed, the step file as it was
  // (to stdout); one it cannot fit: the lowest peak, and it says so.
  const CliResult fits = RunCli("plan " + ShellQuote(input) + " --recompute --budget 700B");
  ASSERT_EQ(fits.exit_code, 0) << fits.err;
  EXPECT_NE(fits.err.find("step peak 648 -> 648 bytes (0.0% lower); recomputed 0 values (), added FLOPs 0; 1 "
                          "simulations\n  budget 700 bytes: fits"),
            std::string::npos)
      << fits.err;
  EXPECT_EQ(nlohmann::json::parse(fits.out), step);
  const CliResult tight = RunCli("plan " + ShellQuote(input) + " --recompute --budget 500B -o " + ShellQuote(output));
  ASSERT_EQ(tight.exit_code, 0) << tight.err;
  EXPECT_NE(tight.err.find("648 -> 524 bytes"), std::string::npos) << tight.err;
  EXPECT_NE(tight.err.find("budget 500 bytes: does not fit"), std::string::npos) << tight.err;
  std::remove(input.c_str());
  std::remove(output.c_str());
}

TEST_F(Cli, PlanRecomputeBadInputAndUsageAreErrors) {
  // A plain trace is not a step file.
  const CliResult plain = RunCli("plan " + ShellQuote(kReferenceTrace) + " --recompute");
  EXPECT_EQ(plain.exit_code, 1);
  EXPECT_NE(plain.err.find("not JSON"), std::string::npos) << plain.err;
  EXPECT_NE(plain.err.find("plan --recompute reads a step file"), std::string::npos) << plain.err;
  // A step file whose traces are not printed traces (a JSON trace export).
  const std::string path = TempPath("json_traces_step.json");
  nlohmann::json step = testing_util::StepFileJson();
  step["backward"]["trace"] = ReadFile(std::string(PEAKMEM_TEST_DATA_DIR) + "/corpus/cross_entropy/bw.json");
  WriteFile(path, step.dump());
  const CliResult json = RunCli("plan " + ShellQuote(path) + " --recompute");
  EXPECT_EQ(json.exit_code, 1);
  EXPECT_NE(json.err.find("peakmem: error: " + path + "#backward.trace: the backward trace was not a printed trace"),
            std::string::npos)
      << json.err;
  WriteFile(path, testing_util::StepFileJson().dump());
  ExpectFailure("plan " + ShellQuote(path) + " --recompute --budget -5", 2, "--budget");
  ExpectFailure("plan " + ShellQuote(path) + " --recompute --time-budget 2", 2,
                "--time-budget applies to reordering a trace");
  ExpectFailure("plan " + ShellQuote(kReferenceTrace) + " --budget 1GiB", 2, "--budget applies with --recompute");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace peakmem
