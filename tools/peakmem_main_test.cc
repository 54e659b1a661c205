// The `peakmem` command, run as a separate process through popen. Inputs are
// only read: the reference trace is checked unchanged after each run, and
// every file a test writes lives under the GoogleTest temporary directory.
// `plan` and `step` have their own files (peakmem_plan_command_test.cc,
// peakmem_step_command_test.cc); the helpers are cli_test_util.h's.
#include <gtest/gtest.h>

#include <cstdio>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_test_util.h"

namespace peakmem {
namespace {

using namespace cli_test;  // NOLINT(google-build-using-namespace): the tests' shared helpers

// ---------------------------------------------------------------- analyze

TEST_F(Cli, JsonReportOfTheReferenceTrace) {
  // Derived in thunder_model_test (NvFusionBroadcastForwardReference):
  // a 16 + b 16, nvFusion0 outputs t14 (16) and t15 (96): peak = final = 144.
  const FileState before = StateOf(kReferenceTrace);
  const CliResult r =
      RunCli("analyze " + ShellQuote(kReferenceTrace) + " --model thunder --format json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const nlohmann::ordered_json report = nlohmann::ordered_json::parse(r.out);
  EXPECT_EQ(report.at("model"), "thunder");
  EXPECT_EQ(report.at("trace"), kReferenceTrace);
  EXPECT_EQ(report.at("peak_bytes").get<std::int64_t>(), 144);
  EXPECT_EQ(report.at("final_bytes").get<std::int64_t>(), 144);
  EXPECT_EQ(report.at("peak_step").get<int>(), 0);
  EXPECT_EQ(BreakdownOf(report), (Breakdown{{"argument a", 16},
                                            {"argument b", 16},
                                            {"nvFusion0 t14, t15", 112}}));
  ASSERT_EQ(report.at("steps").size(), 2u);
  EXPECT_EQ(report.at("steps")[0].at("op"), "nvFusion0");
  EXPECT_EQ(report.at("steps")[0].at("line").get<int>(), 4);
  EXPECT_EQ(report.at("steps")[0].at("delta_bytes").get<std::int64_t>(), 112);
  EXPECT_EQ(report.at("steps")[0].at("live_bytes").get<std::int64_t>(), 144);
  EXPECT_TRUE(report.at("diagnostics").empty());
  EXPECT_TRUE(StateOf(kReferenceTrace) == before) << "the input trace was modified";
}

// ---------------------------------------------------------------- --allocator

// The runtime model's storages of the reference trace (on cuda:0): a, b,
// t14 and t15 at 16 bytes each (t15 is a stride-0 broadcast:
// tests/data/nvfusion_broadcast_fw.md), all held to the end. Under the CUDA
// caching allocator each 16-byte request is a 512-byte block (round_size),
// carved from one 2 MiB small-pool segment (get_allocation_size): allocated
// 4 * 512 = 2048, reserved 2097152, at the peak and at the end.
TEST_F(Cli, CudaCachingAllocatorPricesTheReferenceTrace) {
  const FileState before = StateOf(kReferenceTrace);
  const CliResult r =
      RunCli("analyze " + ShellQuote(kReferenceTrace) + " --allocator cuda-caching --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::ordered_json report = nlohmann::ordered_json::parse(r.out);
  EXPECT_EQ(report.at("peak_bytes").get<std::int64_t>(), 64);  // requested, as without it
  const nlohmann::ordered_json& a = report.at("allocator");
  EXPECT_EQ(a.at("name"), "cuda-caching");
  EXPECT_EQ(a.at("device"), "cuda:0");
  EXPECT_EQ(a.at("requested_peak_bytes").get<std::int64_t>(), 64);
  EXPECT_EQ(a.at("allocated_peak_bytes").get<std::int64_t>(), 2048);
  EXPECT_EQ(a.at("allocated_final_bytes").get<std::int64_t>(), 2048);
  EXPECT_EQ(a.at("reserved_peak_bytes").get<std::int64_t>(), 2097152);
  EXPECT_EQ(a.at("reserved_final_bytes").get<std::int64_t>(), 2097152);
  EXPECT_EQ(a.at("segments_peak").get<std::int64_t>(), 1);
  EXPECT_TRUE(a.at("fits").is_null());  // no device capacity given
  EXPECT_TRUE(a.at("out_of_memory").is_null());
  EXPECT_TRUE(StateOf(kReferenceTrace) == before) << "the input trace was modified";
}

TEST_F(Cli, RequestedBytesReportsHaveNoAllocatorSection) {
  const CliResult r = RunCli("analyze " + ShellQuote(kReferenceTrace) + " --format json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(nlohmann::ordered_json::parse(r.out).contains("allocator"));
}

// A 2 MiB device holds the one 2 MiB segment exactly: headroom 0. A 1 MiB
// device cannot hold it: argument a (16 bytes, rounded to 512) fails
// before the first statement (step -1), with nothing allocated.
TEST_F(Cli, DeviceMemorySaysWhetherItFits) {
  const CliResult fits = RunCli("analyze " + ShellQuote(kReferenceTrace) +
                                " --allocator cuda-caching --device-memory 2MiB --format json");
  ASSERT_EQ(fits.exit_code, 0) << fits.err;
  const nlohmann::ordered_json a = nlohmann::ordered_json::parse(fits.out).at("allocator");
  EXPECT_EQ(a.at("device_capacity_bytes").get<std::int64_t>(), 2097152);
  EXPECT_EQ(a.at("fits"), true);
  EXPECT_EQ(a.at("headroom_bytes").get<std::int64_t>(), 0);

  const CliResult oom = RunCli("analyze " + ShellQuote(kReferenceTrace) +
                               " --allocator cuda-caching --device-memory 1MiB --format json");
  ASSERT_EQ(oom.exit_code, 0) << oom.err;
  const nlohmann::ordered_json b = nlohmann::ordered_json::parse(oom.out).at("allocator");
  EXPECT_EQ(b.at("fits"), false);
  EXPECT_TRUE(b.at("headroom_bytes").is_null());
  const nlohmann::ordered_json& o = b.at("out_of_memory");
  EXPECT_EQ(o.at("step").get<int>(), -1);
  EXPECT_EQ(o.at("requested_bytes").get<std::int64_t>(), 16);
  EXPECT_EQ(o.at("rounded_bytes").get<std::int64_t>(), 512);
  EXPECT_EQ(o.at("segment_bytes").get<std::int64_t>(), 2097152);
  EXPECT_EQ(o.at("allocated_bytes").get<std::int64_t>(), 0);

  const CliResult text = RunCli("analyze " + ShellQuote(kReferenceTrace) +
                                " --allocator cuda-caching --device-memory 1MiB");
  EXPECT_NE(text.out.find("OUT OF MEMORY at the arguments: a request of 16 bytes (a 2097152-byte "
                          "segment) failed"),
            std::string::npos)
      << text.out;
}

TEST_F(Cli, AllocatorSettingsAreChecked) {
  const std::string trace = ShellQuote(kReferenceTrace);
  const CliResult no_allocator = RunCli("analyze " + trace + " --device-memory 1GiB");
  EXPECT_EQ(no_allocator.exit_code, 2);
  EXPECT_NE(no_allocator.err.find("--alloc-conf and --device-memory need the cuda-caching allocator"), std::string::npos);
  const CliResult bad_size =
      RunCli("analyze " + trace + " --allocator cuda-caching --device-memory 80XB");
  EXPECT_EQ(bad_size.exit_code, 2);
  EXPECT_NE(bad_size.err.find("--device-memory: cannot read the size '80XB'"), std::string::npos);
  const CliResult bad_conf =
      RunCli("analyze " + trace + " --allocator cuda-caching --alloc-conf max_split_size_mb:5");
  EXPECT_EQ(bad_conf.exit_code, 2);
  EXPECT_NE(bad_conf.err.find("--alloc-conf: "), std::string::npos) << bad_conf.err;
  EXPECT_NE(bad_conf.err.find("max_split_size_mb"), std::string::npos) << bad_conf.err;
  const CliResult unknown = RunCli("analyze " + trace + " --allocator cuda");
  EXPECT_EQ(unknown.exit_code, 2);
}

// PYTORCH_CUDA_ALLOC_CONF is read when --alloc-conf is not given: a value
// PyTorch rejects (max_split_size_mb must be at least 20) is an error naming
// the variable.
TEST_F(Cli, AllocConfComesFromTheEnvironment) {
  const std::string command = "env PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:5 " + ShellQuote(kCli) +
                              " analyze " + ShellQuote(kReferenceTrace) +
                              " --allocator cuda-caching 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buffer[4096];
  std::size_t n = 0;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  const int status = pclose(pipe);
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 2);
  EXPECT_NE(out.find("PYTORCH_CUDA_ALLOC_CONF"), std::string::npos) << out;
  EXPECT_NE(out.find("max_split_size_mb"), std::string::npos) << out;
}

TEST_F(Cli, TextReportIsTheDefaultFormat) {
  const FileState before = StateOf(kReferenceTrace);
  const CliResult r = RunCli("analyze --model thunder " + ShellQuote(kReferenceTrace));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("model: thunder\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("peak:  144 bytes (144 B)\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("final: 144 bytes (144 B)\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nvFusion0 t14, t15"), std::string::npos) << r.out;
  EXPECT_TRUE(StateOf(kReferenceTrace) == before) << "the input trace was modified";
}

TEST_F(Cli, OutputOptionWritesTheReportToAFile) {
  const std::string out_path = TempPath("report.json");
  const CliResult r = RunCli("analyze --model thunder " + ShellQuote(kReferenceTrace) +
                             " --format json --output " + ShellQuote(out_path));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  const nlohmann::ordered_json report = nlohmann::ordered_json::parse(ReadFile(out_path));
  EXPECT_EQ(report.at("peak_bytes").get<std::int64_t>(), 144);
  std::remove(out_path.c_str());
}

TEST_F(Cli, AnnotatedFormatQuotesEachStatementWithItsLiveBytes) {
  // The thunder model on the reference trace (JsonReportOfTheReferenceTrace):
  // a 16 + b 16 before the first statement; nvFusion0 adds t14 and t15:
  // 144, the peak; the return frees nothing: 144.
  const std::string out_path = TempPath("annotated.py");
  const CliResult r = RunCli("analyze --model thunder " + ShellQuote(kReferenceTrace) +
                             " --format annotated -o " + ShellQuote(out_path));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(ReadFile(out_path),
            "# trace: " + kReferenceTrace + "\n"
            "# model: thunder; peak: 144 bytes at step 0; final: 144 bytes\n"
            "# live before the first statement (the arguments): 32 bytes\n"
            "[t14, t15] = nvFusion0(a, b)  # live: 144 bytes (peak)\n"
            "return {'output': (t14, t15), 'flat_args': [a, b], 'flat_output': (t14, t15)}, "
            "((), ())  # live: 144 bytes\n");
  std::remove(out_path.c_str());
}

TEST_F(Cli, ChromeTraceFormatHasASlicePerStatementAndALiveCounter) {
  const CliResult r =
      RunCli("analyze --model thunder " + ShellQuote(kReferenceTrace) + " --format chrome-trace");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json trace = nlohmann::json::parse(r.out);
  std::vector<std::string> slices;
  std::vector<std::int64_t> live;
  for (const nlohmann::json& e : trace.at("traceEvents")) {
    if (e.at("ph") == "X") slices.push_back(e.at("name"));
    if (e.at("ph") == "C" && e.at("name") == "live bytes") {
      live.push_back(e.at("args").at("bytes").get<std::int64_t>());
    }
  }
  EXPECT_EQ(slices, (std::vector<std::string>{"nvFusion0", "python_return"}));
  EXPECT_EQ(live, (std::vector<std::int64_t>{32, 144, 144}));  // as derived above
}

// ---------------------------------------------------------------- --at

// The runtime model on the reference trace: a and b (16 bytes each, the
// caller's), nvFusion0's outputs t14 and t15 (16 each; t15 is a stride-0
// broadcast), returned: at the peak (step 0, 64 bytes) the arguments and the
// outputs, 32 bytes each.
TEST_F(Cli, AtPeakAttributesTheLiveStoragesByCategoryAndOp) {
  const CliResult r = RunCli("analyze " + ShellQuote(kReferenceTrace) + " --format json --at peak");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json report = nlohmann::json::parse(r.out);
  const nlohmann::json& a = report.at("attribution");
  EXPECT_TRUE(a.at("at_peak").get<bool>());
  EXPECT_EQ(a.at("step"), 0);
  EXPECT_EQ(a.at("live_bytes"), 64);
  EXPECT_EQ(a.at("storages"), 4);
  // Equal bytes: by name.
  EXPECT_EQ(a.at("by_category"), nlohmann::json::parse(R"([
      {"key": "argument", "bytes": 32, "storages": 2},
      {"key": "output", "bytes": 32, "storages": 2}])"));
  EXPECT_EQ(a.at("by_op"), nlohmann::json::parse(R"([
      {"key": "caller", "bytes": 32, "storages": 2},
      {"key": "nvFusion0", "bytes": 32, "storages": 2}])"));
  ASSERT_EQ(a.at("largest").size(), 4u);
  EXPECT_EQ(a.at("largest")[2].at("name"), "t14");
  EXPECT_EQ(a.at("largest")[2].at("made_by"), "nvFusion0");
  EXPECT_EQ(a.at("largest")[2].at("line"), 4);
}

TEST_F(Cli, AtAStepInTheTextReport) {
  const CliResult r = RunCli("analyze " + ShellQuote(kReferenceTrace) + " --at -1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("alive before the first statement: 32 bytes (32 B) in 2 storages"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("argument       2 storages"), std::string::npos) << r.out;
}

TEST_F(Cli, AtAMomentNotInTheTraceIsBadUsage) {
  const CliResult late = RunCli("analyze " + ShellQuote(kReferenceTrace) + " --at 2");
  EXPECT_EQ(late.exit_code, 2);
  EXPECT_NE(late.err.find("step 2 is not in the trace (it has 2 statements, steps 0 to 1"),
            std::string::npos) << late.err;
  const CliResult word = RunCli("analyze " + ShellQuote(kReferenceTrace) + " --at top");
  EXPECT_EQ(word.exit_code, 2);
  EXPECT_NE(word.err.find("--at: 'top' is not a moment"), std::string::npos) << word.err;
}

TEST_F(Cli, HtmlFormatWritesOnePageWithThePeakMarked) {
  const std::string path = TempPath("report.html");
  const CliResult r =
      RunCli("analyze " + ShellQuote(kReferenceTrace) + " --format html -o " + ShellQuote(path));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string html = ReadFile(path);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("id=\"peak-marker\" data-step=\"0\" data-bytes=\"64\""), std::string::npos);
  EXPECT_NE(html.find("data-category=\"output\""), std::string::npos);
}

// ---------------------------------------------------------------- diff

// diff runs one model on both sides: a trace against itself differs in
// nothing, whichever the model. The reference trace's peak is 64 bytes
// under the runtime model (a, b, t14, t15: 16 each) and 144 under the
// thunder model (JsonReportOfTheReferenceTrace).
TEST_F(Cli, DiffOfATraceWithItselfIsZero) {
  for (const char* model : {"runtime", "thunder"}) {
    const CliResult r = RunCli("diff " + ShellQuote(kReferenceTrace) + " " + ShellQuote(kReferenceTrace) +
                               " --format json --model " + model);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json d = nlohmann::json::parse(r.out);
    EXPECT_EQ(d.at("peak_delta_bytes"), 0) << model;
    EXPECT_EQ(d.at("a").at("peak_bytes"), std::string(model) == "runtime" ? 64 : 144);
    EXPECT_TRUE(d.at("first_divergence").is_null());
  }
}

TEST_F(Cli, DiffNeedsTwoTracesAndTakesTextOrJson) {
  EXPECT_EQ(RunCli("diff " + ShellQuote(kReferenceTrace)).exit_code, 2);
  EXPECT_EQ(RunCli("diff " + ShellQuote(kReferenceTrace) + " " + ShellQuote(kReferenceTrace) +
                   " --format html").exit_code, 2);
  const CliResult missing = RunCli("diff " + ShellQuote(kReferenceTrace) + " /nonexistent/b.trace");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("/nonexistent/b.trace"), std::string::npos) << missing.err;
}

// ---------------------------------------------------------------- --table, --color

// A trace of 600 statements (more than 'auto' lists in full): statement i
// (0..598) makes t<i> = torch.zeros of i + 1 f32 elements, then the return:
// the 25 largest allocations are statements 574..598, and the peak is
// the last of them (nothing is freed).
std::string LongTrace() {
  std::string text = "def f(x):\n  # x: \"cpu f32[600]\"\n";
  std::string names;
  for (int i = 0; i < 599; ++i) {
    text += fmt::format("  t{} = torch.zeros(({},), device=torch.device('cpu'), dtype=torch.float32)"
                        "  # t{}: \"cpu f32[{}]\"\n", i, i + 1, i, i + 1);
    names += fmt::format("t{}, ", i);
  }
  return text + "  return (" + names + ")\n";
}

TEST_F(Cli, LongTracesGetACompactTableUnlessAskedForEveryRow) {
  const std::string path = TempPath("long.trace");
  WriteFile(path, LongTrace());
  const CliResult compact = RunCli("analyze " + ShellQuote(path));
  ASSERT_EQ(compact.exit_code, 0) << compact.err;
  EXPECT_NE(compact.out.find("the 25 statements that allocate the most, of 600"), std::string::npos);
  const std::size_t table = compact.out.find(" step  line");
  ASSERT_NE(table, std::string::npos);
  std::istringstream rows(compact.out.substr(table));
  std::string row;
  std::getline(rows, row);  // the header
  std::vector<int> steps;
  while (std::getline(rows, row)) steps.push_back(std::stoi(row.substr(0, 5)));
  std::vector<int> want;
  for (int i = 574; i < 599; ++i) want.push_back(i);  // t574..t598: 575..599 elements
  EXPECT_EQ(steps, want);
  // Keys: "argument x" and one per zeros.
  EXPECT_NE(compact.out.find("breakdown (the 25 largest of 600 keys)"), std::string::npos);
  const CliResult full = RunCli("analyze " + ShellQuote(path) + " --table full");
  EXPECT_NE(full.out.find("\n  598   601"), std::string::npos);
  EXPECT_NE(full.out.find("\n    0     3"), std::string::npos);
  EXPECT_EQ(full.out.find("allocate the most"), std::string::npos);
}

TEST_F(Cli, ColourOnlyWhenAsked) {
  // The tests' stdout is a pipe: 'auto' gives none.
  const CliResult plain = RunCli("analyze " + ShellQuote(kReferenceTrace));
  EXPECT_EQ(plain.out.find("\x1b["), std::string::npos);
  const CliResult colour = RunCli("analyze " + ShellQuote(kReferenceTrace) + " --color always");
  EXPECT_NE(colour.out.find("\x1b[1;31mpeak:  64 bytes"), std::string::npos) << colour.out;
  EXPECT_NE(colour.out.find("\x1b[1;31m<- peak\x1b[0m"), std::string::npos);
  EXPECT_EQ(RunCli("analyze " + ShellQuote(kReferenceTrace) + " --color sometimes").exit_code, 2);
}

TEST_F(Cli, FormatChoicesComeFromTheWriterRegistry) {
  const CliResult r = RunCli("analyze --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* format : {"text", "json", "annotated", "chrome-trace", "snapshot", "html"}) {
    EXPECT_NE(r.out.find(std::string("'") + format + "'"), std::string::npos) << format;
  }
}

// ---------------------------------------------------------------- help

TEST_F(Cli, HelpExitsZeroAndMentionsAnalyze) {
  const CliResult r = RunCli("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("analyze"), std::string::npos) << r.out;
}

TEST_F(Cli, HelpMentionsModelAndFormat) {
  // `peakmem --help` is where a new user looks first; it should name the
  // options that matter, not only the subcommand.
  const CliResult r = RunCli("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--model"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--format"), std::string::npos) << r.out;
}

TEST_F(Cli, AnalyzeHelpMentionsModelAndFormat) {
  const CliResult r = RunCli("analyze --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--model"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--format"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("json"), std::string::npos) << r.out;
}

// ---------------------------------------------------------------- failures

TEST_F(Cli, BadTraceExitsOneWithTheLocation) {
  const std::string path = TempPath("bad.trace");
  const std::string text = "def f(a):\n  # a: \"cpu f32[4]\"\n  del q\n  return a\n";
  WriteFile(path, text);
  const CliResult r = RunCli("analyze " + ShellQuote(path) + " --format json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "peakmem: error: " + path + ":3:7: 'del' of unknown name 'q'\n  del q\n      ^\n");
  EXPECT_EQ(ReadFile(path), text) << "the input trace was modified";
  std::remove(path.c_str());
}

TEST_F(Cli, TraceTheModelCannotSizeExitsOne) {
  const std::string path = TempPath("untyped.trace");
  WriteFile(path, "def f(a):\n  # a: \"cpu f32[4]\"\n  t0 = torch.neg(a)\n  return t0\n");
  const CliResult r = RunCli("analyze " + ShellQuote(path));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(path + ":3:3: cannot determine the size of 't0'"), std::string::npos)
      << r.err;
  std::remove(path.c_str());
}

TEST_F(Cli, RuntimeIsTheDefaultModel) {
  // The seed example's known run-time truth (tests/data/nvfusion_broadcast_fw.md):
  // nvFuser returns t15 [2, 3, 4] with strides (0, 0, 1), backed by 4 floats,
  // so a, b, t14 ([1, 1, 4]) and t15 live at 16 bytes each: 64 bytes.
  const CliResult r = RunCli("analyze --format json " + ShellQuote(kReferenceTrace));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::ordered_json report = nlohmann::ordered_json::parse(r.out);
  EXPECT_EQ(report.at("model").get<std::string>(), "runtime");
  EXPECT_EQ(report.at("peak_bytes").get<std::int64_t>(), 64);
  EXPECT_EQ(report.at("final_bytes").get<std::int64_t>(), 64);
}

TEST_F(Cli, UnknownModelExitsTwo) {
  const CliResult r = RunCli("analyze " + ShellQuote(kReferenceTrace) + " --model bogus");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "peakmem: error: unknown model 'bogus'; available models: runtime, thunder\n");
}

TEST_F(Cli, UnknownFormatExitsTwo) {
  const CliResult r = RunCli("analyze " + ShellQuote(kReferenceTrace) + " --format xml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("xml"), std::string::npos) << r.err;
}

TEST_F(Cli, MissingSubcommandExitsTwo) {
  const CliResult r = RunCli("");
  EXPECT_EQ(r.exit_code, 2);
}

TEST_F(Cli, MissingFileExitsOne) {
  const std::string path = TempPath("does_not_exist.trace");
  const CliResult r = RunCli("analyze " + ShellQuote(path));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "peakmem: error: " + path + ":0:0: cannot open file\n");
}

}  // namespace
}  // namespace peakmem
