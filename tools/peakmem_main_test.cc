// The `peakmem` command, run as a separate process through popen. Inputs are
// only read: the reference trace is checked unchanged after each run, and
// every file a test writes lives under the GoogleTest temporary directory.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "planning_test_util.h"
#include "training_step_test_util.h"

namespace peakmem {
namespace {

const std::string kCli = PEAKMEM_CLI_PATH;
const std::string kReferenceTrace = PEAKMEM_TEST_DATA_DIR "/nvfusion_broadcast_fw.trace";

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// A fresh path under the test temporary directory.
std::string TempPath(const std::string& name) {
  static int counter = 0;
  return ::testing::TempDir() + "peakmem_cli_" + std::to_string(getpid()) + "_" +
         std::to_string(counter++) + "_" + name;
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs the CLI with already quoted `args`; stdout through the pipe, stderr
// through a temporary file.
CliResult RunCli(const std::string& args) {
  CliResult result;
  const std::string err_path = TempPath("stderr.txt");
  const std::string command = ShellQuote(kCli) + " " + args + " 2>" + ShellQuote(err_path);
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "popen failed: " << command;
    return result;
  }
  char buffer[4096];
  std::size_t n = 0;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) result.out.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.err = ReadFile(err_path);
  std::remove(err_path.c_str());
  return result;
}

// Content and modification time, to check a file was left alone.
struct FileState {
  std::string content;
  struct timespec mtime {};
  bool operator==(const FileState& o) const {
    return content == o.content && mtime.tv_sec == o.mtime.tv_sec &&
           mtime.tv_nsec == o.mtime.tv_nsec;
  }
};

FileState StateOf(const std::string& path) {
  FileState state;
  state.content = ReadFile(path);
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) state.mtime = st.st_mtim;
  return state;
}

using Breakdown = std::vector<std::pair<std::string, std::int64_t>>;

Breakdown BreakdownOf(const nlohmann::ordered_json& report) {
  Breakdown items;
  for (const auto& [key, value] : report.at("breakdown").items()) {
    items.emplace_back(key, value.get<std::int64_t>());
  }
  return items;
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(kCli.empty()) << "the peakmem CLI was not built"; }
};

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

// ---------------------------------------------------------------- plan

namespace peakmem {
namespace {

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
  const std::string backward = testing_util::kStepBackward;
  return backward.substr(0, backward.find("  t4 = ")) + R"(  t7 = torch.mul(x, x)  # t7: "cpu f32[4, 8]"
  t8 = torch.mul(t7, t7)  # t8: "cpu f32[4, 8]"
  del t7
  t9 = torch.sum(t8)  # t9: "cpu f32[]"
  del t8
  t4 = torch.add(t0, t0)  # t4: "cpu f32[4, 8]"
  del t0
  t5 = torch.mul(t4, t3)  # t5: "cpu f32[4, 8]"
  del t4, t3
  t10 = torch.mul(t5, t9)  # t10: "cpu f32[4, 8]"
  del t5, t9
  t6 = torch.mul(t10, x)  # t6: "cpu f32[4, 8]"
  del t10, x
  return (None, t6)
)";
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
  const CliResult fits = RunCli("plan " + ShellQuote(input) + " --recompute --budget 700");
  ASSERT_EQ(fits.exit_code, 0) << fits.err;
  EXPECT_NE(fits.err.find("step peak 648 -> 648 bytes (0.0% lower); recomputed 0 values (), added FLOPs 0; 1 "
                          "simulations\n  budget 700 bytes: fits"),
            std::string::npos)
      << fits.err;
  EXPECT_EQ(nlohmann::json::parse(fits.out), step);
  const CliResult tight = RunCli("plan " + ShellQuote(input) + " --recompute --budget 500 -o " + ShellQuote(output));
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
  const CliResult negative = RunCli("plan " + ShellQuote(path) + " --recompute --budget -5");
  EXPECT_EQ(negative.exit_code, 2);
  EXPECT_NE(negative.err.find("--budget"), std::string::npos) << negative.err;
  const CliResult reorder = RunCli("plan " + ShellQuote(path) + " --recompute --time-budget 2");
  EXPECT_EQ(reorder.exit_code, 2);
  EXPECT_NE(reorder.err.find("--time-budget applies to reordering a trace"), std::string::npos) << reorder.err;
  const CliResult no_recompute = RunCli("plan " + ShellQuote(kReferenceTrace) + " --budget 1GiB");
  EXPECT_EQ(no_recompute.exit_code, 2);
  EXPECT_NE(no_recompute.err.find("--budget applies with --recompute"), std::string::npos) << no_recompute.err;
  std::remove(path.c_str());
}

// `peakmem step` on the hand-derived step (training_step_test_util.h; the
// figures are derived in src/models/training_step_test.cc).
TEST_F(Cli, StepSimulatesAStepFile) {
  const std::string path = TempPath("step.json");
  WriteFile(path, testing_util::StepFileJson().dump());
  const FileState before = StateOf(path);
  const CliResult text = RunCli("step " + ShellQuote(path) + " --budget 512");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("peak 520 bytes in the backward of step 1; final 256 bytes"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("budget 512 bytes: does not fit, headroom -8 bytes"), std::string::npos) << text.out;
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
  EXPECT_NE(command.err.find("peakmem: did you mean 'analyze'?"), std::string::npos) << command.err;
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
  const CliResult steps = RunCli("step " + ShellQuote(path) + " --steps 2");
  EXPECT_EQ(steps.exit_code, 1);
  EXPECT_NE(steps.err.find("fixed when it was recorded"), std::string::npos) << steps.err;
  // A recording is one run: recomputation is planned with the model, and
  // the error says where.
  const CliResult plan = RunCli("plan " + ShellQuote(path) + " --recompute");
  EXPECT_EQ(plan.exit_code, 1);
  EXPECT_NE(plan.err.find("a recorded eager step cannot be planned from its file"), std::string::npos) << plan.err;
  EXPECT_NE(plan.err.find("export_step(..., frontend='eager', recompute=BUDGET)"), std::string::npos) << plan.err;
  std::remove(path.c_str());
}

}  // namespace
}  // namespace peakmem
