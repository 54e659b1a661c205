// `peakmem step`: a training step's file (traced by Thunder, or recorded by
// the eager front end) simulated without Python. The command runs as a
// separate process (cli_test_util.h); inputs are only read.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_test_util.h"
#include "peakmem/frontend/recorded_step_file.h"
#include "training_step_test_util.h"

namespace peakmem {
namespace {

using namespace cli_test;  // NOLINT(google-build-using-namespace): the tests' shared helpers

// `peakmem step` on the hand-derived step (training_step_test_util.h; the
// figures are derived in src/models/training_step_test.cc).
TEST_F(Cli, StepSimulatesAStepFile) {
  const std::string path = TempPath("step.json");
  WriteFile(path, testing_util::StepFileJson().dump());
  const FileState before = StateOf(path);
  const CliResult text = RunCli("step " + ShellQuote(path) + " --budget 512B");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("peak 520 bytes (520 B) in the backward of step 1; final 256 bytes (256 B)"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("budget 512 bytes (512 B): does not fit, headroom -8 bytes (-8 B)"), std::string::npos)
      << text.out;
  const CliResult json = RunCli("step " + ShellQuote(path) + " --format json --steps 2 --keep-grad");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(json.out);
  EXPECT_EQ(j.at("kind"), "training_step");
  EXPECT_EQ(j.at("peak_bytes"), 648);  // step 2 with w.grad held (training_step_test.cc)
  EXPECT_EQ(j.at("final_bytes"), 384);
  EXPECT_EQ(j.at("step_at_peak"), 2);
  EXPECT_EQ(j.at("by_category").at("gradients"), 128);
  EXPECT_EQ(j.at("by_module").at("lin"), 512);
  EXPECT_EQ(j.at("phases").size(), 4u);
  EXPECT_TRUE(j.at("fits").is_null());
  EXPECT_EQ(StateOf(path), before);
}

// A budget without a unit is refused, as Python refuses it ("48" bytes is
// rarely what was meant); on a GPU model of the catalog the verdict is the
// caching allocator's reserved peak plus the CUDA context against the card's
// memory (report/budget_verdict.h), with the budget the card's unless given.
TEST_F(Cli, StepJudgesTheBudgetAsTheCardRunsOut) {
  const std::string path = TempPath("step.json");
  WriteFile(path, testing_util::StepFileJson().dump());
  const CliResult bare = RunCli("step " + ShellQuote(path) + " --budget 48");
  EXPECT_EQ(bare.exit_code, 2);
  EXPECT_NE(bare.err.find("--budget: '48' has no unit: give a size such as 48GiB (or 48B for bytes)"),
            std::string::npos)
      << bare.err;
  const CliResult cpu = RunCli("step " + ShellQuote(path) + " --budget 512B --format json");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  const nlohmann::ordered_json c = nlohmann::ordered_json::parse(cpu.out);
  EXPECT_EQ(c.at("budget_basis"), "requested");
  EXPECT_EQ(c.at("context_bytes"), 0);
  EXPECT_EQ(c.at("counted_bytes"), 520);  // the hand-derived peak
  const CliResult gpu = RunCli("step " + ShellQuote(path) + " --device cuda:h100 --format json");
  ASSERT_EQ(gpu.exit_code, 0) << gpu.err;
  const nlohmann::ordered_json g = nlohmann::ordered_json::parse(gpu.out);
  EXPECT_EQ(g.at("budget"), 85'045'477'376);  // the H100 SXM's total_memory (execution_context.cc)
  EXPECT_EQ(g.at("budget_basis"), "reserved");
  EXPECT_EQ(g.at("context_bytes"), 512 << 20);
  const std::int64_t reserved = g.at("allocator").at("reserved_peak_bytes");
  EXPECT_GE(reserved, g.at("peak_bytes").get<std::int64_t>());
  EXPECT_EQ(g.at("counted_bytes"), reserved + (512 << 20));
  EXPECT_EQ(g.at("headroom_bytes"), 85'045'477'376 - reserved - (512 << 20));
  EXPECT_EQ(g.at("fits"), true);
  // A card the step does not fit: a budget below the context.
  const CliResult tight = RunCli("step " + ShellQuote(path) + " --device cuda:h100 --budget 100MiB");
  ASSERT_EQ(tight.exit_code, 0) << tight.err;
  EXPECT_NE(tight.out.find("budget 104,857,600 bytes (100.0 MiB): does not fit; the caching allocator runs out of memory"), std::string::npos) << tight.out;
  const CliResult context = RunCli("step " + ShellQuote(path) + " --device cuda:h100 --context-bytes 1GiB --format json");
  ASSERT_EQ(context.exit_code, 0) << context.err;
  EXPECT_EQ(nlohmann::ordered_json::parse(context.out).at("context_bytes"), 1 << 30);
}

// `peakmem step` on an eager step's record, written by hand: a parameter
// (64 B) and an input (16 B) held; the forward makes an activation (32 B),
// then the loss (4 B) with an 8 B scratch inside; the backward makes the
// gradient (64 B) and frees the activation; the optimizer phase frees the
// loss. By hand: the forward starts at 80 and peaks at 124 (80 + 32 + 4 +
// 8); the backward starts at 116 and peaks at 180; the optimizer starts at
// 148 and only frees. Each phase's line prints its peak and what is live as
// it starts, and the record's diagnostics follow.
TEST_F(Cli, StepPrintsARecordedStepsPhasePeaks) {
  const std::string path = TempPath("recorded.json");
  nlohmann::ordered_json record = {
      {"peakmem_recorded_step", kRecordedStepFileVersion},
      {"optimizer", nullptr},
      {"storages",
       {{64, "parameter w", 0, "lin", "cpu", false},
        {16, "input", 1, "", "cpu", false},
        {32, "aten.mm.default", 4, "lin", "cpu", false},
        {4, "aten.sum.default", 5, "", "cpu", false},
        {8, "(scratch)", 5, "", "cpu", true},
        {64, "aten.mm.default", 2, "lin", "cpu", false}}},
      {"held", {0, 1}},
      {"statements",
       {{"aten.mm.default", "mm", {2}},
        {"aten.sum.default", "sum", {3, 4, -5}},
        {"aten.mm.default", "mm backward", {5, -3}},
        {"step() returns", "the loss released", {-4}}}},
      {"phases", {{"forward", 1, 0, 2}, {"backward", 1, 2, 3}, {"optimizer", 1, 3, 4}}},
      {"diagnostics", {"aten.foo.default: not modelled"}}};
  WriteFile(path, record.dump());
  const CliResult text = RunCli("step " + ShellQuote(path));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("forward   step 1   peak            124  around             80"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("backward  step 1   peak            180  around            116"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("optimizer step 1   peak            148  around            148"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("diagnostics:\n  aten.foo.default: not modelled"), std::string::npos) << text.out;
}

// Every analyze format renders the whole step (training_step_stream_test.cc
// derives its numbers), and the caching allocator prices it: every storage
// of the hand step is under 1 MiB, a 512-byte block of one 2 MiB segment;
// six are live at the requested peak (w, x, t0, t2, the cotangent, t4).
TEST_F(Cli, StepWritesEveryFormatAndTakesTheCachingAllocator) {
  const std::string path = TempPath("step_formats.json");
  WriteFile(path, testing_util::StepFileJson().dump());
  for (const char* format : {"html", "snapshot", "chrome-trace", "annotated"}) {
    const CliResult r = RunCli("step " + ShellQuote(path) + " --format " + format);
    ASSERT_EQ(r.exit_code, 0) << format << ": " << r.err;
    EXPECT_FALSE(r.out.empty()) << format;
  }
  const CliResult html = RunCli("step " + ShellQuote(path) + " --format html");
  EXPECT_NE(html.out.find("data-phase=\"forward\" data-iteration=\"1\""), std::string::npos);
  EXPECT_NE(html.out.find("data-phase=\"backward\" data-iteration=\"1\""), std::string::npos);
  EXPECT_NE(html.out.find("data-category=\"activations\""), std::string::npos);
  const CliResult json =
      RunCli("step " + ShellQuote(path) + " --format json --allocator cuda-caching --device-memory 4MiB");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(json.out);
  EXPECT_EQ(j.at("peak_bytes"), 520);
  EXPECT_EQ(j.at("allocator").at("requested_peak_bytes"), 520);
  EXPECT_EQ(j.at("allocator").at("allocated_peak_bytes"), 6 * 512);
  EXPECT_EQ(j.at("allocator").at("reserved_peak_bytes"), 2 << 20);
  EXPECT_EQ(j.at("allocator").at("fits"), true);
  const CliResult text = RunCli("step " + ShellQuote(path) + " --allocator cuda-caching");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("reserved:  peak 2097152 bytes"), std::string::npos) << text.out;
  EXPECT_EQ(nlohmann::ordered_json::parse(RunCli("step " + ShellQuote(path) + " --format json").out).at("allocator"),
            nullptr);
  EXPECT_EQ(RunCli("step " + ShellQuote(path) + " --format nope").exit_code, 2);
  EXPECT_EQ(RunCli("step " + ShellQuote(path) + " --device-memory 4MiB").exit_code, 2);  // needs cuda-caching
  std::remove(path.c_str());
}

TEST_F(Cli, AMistypedCommandOrOptionGetsASuggestion) {
  const CliResult command = RunCli("analyse " + ShellQuote(kReferenceTrace));
  EXPECT_EQ(command.exit_code, 2);
  // The suggestion is the first line, before CLI11's own message.
  EXPECT_EQ(command.err.rfind("peakmem: did you mean 'analyze'?\n", 0), 0u) << command.err;
  // Two letters swapped are one edit.
  EXPECT_EQ(RunCli("stpe x.json").err.rfind("peakmem: did you mean 'step'?\n", 0), 0u);
  // A step file given to analyze points to `peakmem step`.
  const std::string step_file = TempPath("a_step.json");
  WriteFile(step_file, testing_util::StepFileJson().dump());
  ExpectFailure("analyze " + ShellQuote(step_file), 1, "this is a training step's file, not a trace: run `peakmem step FILE`");
  std::remove(step_file.c_str());
  const CliResult option = RunCli("analyze " + ShellQuote(kReferenceTrace) + " --fromat json");
  EXPECT_EQ(option.exit_code, 2);
  EXPECT_NE(option.err.find("peakmem: --fromat: did you mean '--format'?"), std::string::npos) << option.err;
  const CliResult with_value = RunCli("step x.json --allocater=cuda-caching");
  EXPECT_NE(with_value.err.find("--allocater: did you mean '--allocator'?"), std::string::npos) << with_value.err;
  // Nothing close: no guess.
  const CliResult far = RunCli("zzz");
  EXPECT_EQ(far.exit_code, 2);
  EXPECT_EQ(far.err.find("did you mean"), std::string::npos) << far.err;
}

TEST_F(Cli, StepBadFilesAndUsageAreErrors) {
  const CliResult missing = RunCli("step " + ShellQuote(TempPath("no_such.json")));
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("cannot read the file"), std::string::npos) << missing.err;
  const std::string path = TempPath("bad_step.json");
  nlohmann::json f = testing_util::StepFileJson();
  f["forward"]["saved"] = {"t0", "nope"};
  WriteFile(path, f.dump());
  const CliResult bad = RunCli("step " + ShellQuote(path));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("the backward's saved tensor nope is not returned by the forward"), std::string::npos)
      << bad.err;
  WriteFile(path, "{}");
  EXPECT_EQ(RunCli("step " + ShellQuote(path)).exit_code, 1);
  WriteFile(path, testing_util::StepFileJson().dump());
  EXPECT_EQ(RunCli("step " + ShellQuote(path) + " --budget lots").exit_code, 2);
  EXPECT_EQ(RunCli("step " + ShellQuote(path) + " --zero-grad --keep-grad").exit_code, 2);
}

// An older printer's DTensor type (no mesh or placements) with the layout
// given on the command line: `a` is f32[10, 16] sharded by rows over 4 ranks
// (torch.chunk: 3, 3, 3, 1 rows), and `b = a * a` the same: rank 3 holds one
// row of each, 64 + 64 bytes; rank 0 three, 192 + 192.
TEST_F(Cli, OlderDTensorTypesReadWithTheLayoutGiven) {
  const std::string path = TempPath("older_dtensor.trace");
  WriteFile(path,
            "def f(a):\n"
            "  # a: \"DTensor cuda:0 f32[10, 16]\"\n"
            "  b = dtensor_mul_prim(a, a)  # b: \"DTensor cuda:0 f32[10, 16]\"\n"
            "  return b\n");
  const std::string layout =
      ShellQuote(" mesh=DeviceMesh((4,), 'cuda', stride=(1,)), placements=(Shard(dim=0),)");
  const CliResult rank3 = RunCli("analyze " + ShellQuote(path) + " --format json --rank 3 --dtensor-layout " + layout);
  ASSERT_EQ(rank3.exit_code, 0) << rank3.err;
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(rank3.out);
  EXPECT_EQ(j.at("peak_bytes"), 128);
  const CliResult rank0 = RunCli("analyze " + ShellQuote(path) + " --format json --dtensor-layout " + layout);
  ASSERT_EQ(rank0.exit_code, 0) << rank0.err;
  EXPECT_EQ(nlohmann::ordered_json::parse(rank0.out).at("peak_bytes"), 384);
  const CliResult none = RunCli("analyze " + ShellQuote(path));
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("'a': the DTensor type names no mesh and placements"), std::string::npos) << none.err;
}

// A rank's all-gather over 4 ranks: NCCL's buffers are an estimate apart
// (allocators/nccl_buffers.h, derived in its test): with 16 channels a ring of
// 16 x 12 MiB and channel structures of 16 x 6 + 4 MiB, 292 MiB; with 4
// channels 4 x 12 + 4 x 6 + 4 = 76 MiB. The exact figures do not move.
TEST_F(Cli, NcclsBuffersAreAnEstimateApart) {
  const std::string path = TempPath("gather.trace");
  WriteFile(path,
            "def f(a):\n"
            "  # a: \"cpu f32[4]\"\n"
            "  ft0 = torch_all_gather_prim_impl(a, _pg, True, None)  # ft0: \"FUTURE "
            "thunder.devices.Device(type='cpu') f32[16]\"\n"
            "  t1 = torch_wait_prim_impl(ft0)  # t1: \"cpu f32[16]\"\n"
            "  return t1\n");
  const CliResult plain = RunCli("analyze " + ShellQuote(path) + " --format json");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(plain.out);
  EXPECT_EQ(j.at("nccl_estimate").at("total_bytes"), 292 << 20);
  EXPECT_EQ(j.at("nccl_estimate").at("tree_bytes"), 0);  // no all-reduce
  const CliResult four = RunCli("analyze " + ShellQuote(path) + " --format json --nccl-channels 4");
  ASSERT_EQ(four.exit_code, 0) << four.err;
  const nlohmann::ordered_json k = nlohmann::ordered_json::parse(four.out);
  EXPECT_EQ(k.at("nccl_estimate").at("total_bytes"), 76 << 20);
  EXPECT_EQ(k.at("peak_bytes"), j.at("peak_bytes"));
  const CliResult text = RunCli("analyze " + ShellQuote(path));
  EXPECT_NE(text.out.find("NCCL's own buffers (an estimate, outside PyTorch's allocator"), std::string::npos);
  const CliResult zero = RunCli("analyze " + ShellQuote(path) + " --nccl-channels 0");
  EXPECT_NE(zero.exit_code, 0);
  EXPECT_NE(zero.err.find("--nccl-channels"), std::string::npos) << zero.err;
}

// RecordedStep.TheRecordIsTheStream's step (src/models/recorded_step_test.cc),
// as a recorded step file: peak 180 in the backward, final 144, by hand.
const char* kRecordedStepFile = R"json({"peakmem_recorded_step": 1, "optimizer": null,
 "storages": [[64, "parameter w", 0, "lin", "cpu", false], [16, "input", 1, "", "cpu", false],
              [32, "aten.mm.default", 4, "lin", "cpu", false], [4, "aten.sum.default", 5, "", "cpu", false],
              [8, "(scratch)", 5, "", "cpu", true], [64, "aten.mm.default", 2, "lin", "cpu", false]],
 "held": [0, 1],
 "statements": [["aten.mm.default", "mm", [2]], ["aten.sum.default", "sum", [3, 4, -5]],
                ["aten.mm.default", "mm backward", [5, -3]], ["step() returns", "the loss released", [-4]]],
 "phases": [["forward", 1, 0, 2], ["backward", 1, 2, 3], ["optimizer", 1, 3, 4]], "diagnostics": []})json";

TEST_F(Cli, StepReadsARecordedStepFile) {
  const std::string path = TempPath("recorded.json");
  WriteFile(path, kRecordedStepFile);
  const CliResult r = RunCli("step " + ShellQuote(path) + " --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::ordered_json report = nlohmann::ordered_json::parse(r.out);
  EXPECT_EQ(report.at("peak_bytes"), 180);
  EXPECT_EQ(report.at("final_bytes"), 144);
  EXPECT_EQ(report.at("phase_at_peak"), "backward");
  // A malformed entry is named; the iteration options do not apply.
  std::string broken = kRecordedStepFile;
  broken.replace(broken.find("[2]]"), 4, "[\"x\"]]");
  WriteFile(path, broken);
  const CliResult bad = RunCli("step " + ShellQuote(path));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("'statements[0]' must hold an integer"), std::string::npos) << bad.err;
  WriteFile(path, kRecordedStepFile);
  ExpectFailure("step " + ShellQuote(path) + " --steps 2", 1, "fixed when it was recorded");
  // A recording is one run: recomputation is planned with the model, and
  // the error says where.
  ExpectFailure("plan " + ShellQuote(path) + " --recompute", 1,
                "a recorded eager step cannot be planned from its file (each recomputation plan changes what the "
                "step runs, and the file holds one run): plan it in Python with peakmem.estimate_step(..., "
                "frontend='eager', recompute=BUDGET), and write the planned step's file with "
                "peakmem.export_step(..., frontend='eager', recompute=BUDGET)");
  ExpectFailure("step " + ShellQuote(path) + " --device cuda", 1,
                "a recorded step's kernels were chosen when it was recorded (--device does not apply)");
  std::remove(path.c_str());
}

// --device: the traced step's op scratch as the named device's kernels
// allocate it (execution_context.h); the step's traces are the CPU's, which
// the report says; an unknown name is a usage error naming the known ones.
TEST_F(Cli, StepTakesATargetDevice) {
  const std::string path = TempPath("step_device.json");
  WriteFile(path, testing_util::StepFileJson().dump());
  const CliResult cuda = RunCli("step " + ShellQuote(path) + " --device cuda:h100");
  ASSERT_EQ(cuda.exit_code, 0) << cuda.err;
  EXPECT_NE(cuda.out.find("the trace's tensors are on the CPU: its program is predicted with CUDA's kernels"),
            std::string::npos)
      << cuda.out;
  ExpectFailure("step " + ShellQuote(path) + " --device tpu", 2, "unknown device 'tpu'");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace peakmem
