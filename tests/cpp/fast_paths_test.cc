// The paths added for speed must not change what peakmem computes.
//
// A Simulator reuses the runtime model's working memory from run to run. The
// reuse must not leak state from one run into the next: every corpus trace,
// run through ONE Simulator in an order that alternates big and small traces
// (and each twice), must still give the peak and final bytes measured from
// real PyTorch runs (tests/data/corpus/<program>/measured.json, written by
// peakmem.measure; see tests/data/corpus/README.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "peakmem/analyze.h"
#include "peakmem/semantics/fusion.h"
#include "peakmem/frontend/trace_text_reader.h"
#include "peakmem/report/step_recorder.h"
#include "test_util.h"

namespace peakmem {
namespace {

namespace fs = std::filesystem;

struct MeasuredTrace {
  std::string path;
  std::int64_t peak_bytes = 0;
  std::int64_t final_bytes = 0;
};

std::vector<MeasuredTrace> CorpusTraces() {
  std::vector<MeasuredTrace> out;
  const fs::path corpus = fs::path(PEAKMEM_TEST_DATA_DIR) / "corpus";
  for (const auto& entry : fs::directory_iterator(corpus)) {
    const fs::path measured = entry.path() / "measured.json";
    if (!fs::exists(measured)) continue;
    const nlohmann::json m = nlohmann::json::parse(std::ifstream(measured));
    for (const char* kind : {"fw", "bw"}) {
      const fs::path trace = entry.path() / (std::string(kind) + ".trace");
      if (!fs::exists(trace) || !m.contains(kind)) continue;
      out.push_back({trace.string(), m[kind]["peak_bytes"].get<std::int64_t>(),
                     m[kind]["final_bytes"].get<std::int64_t>()});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const MeasuredTrace& a, const MeasuredTrace& b) { return a.path < b.path; });
  return out;
}

TEST(Simulator, ReusedWorkspaceGivesTheMeasuredBytes) {
  std::vector<MeasuredTrace> traces = CorpusTraces();
  ASSERT_GE(traces.size(), 10u);
  std::vector<ParsedTrace> parsed;
  for (const MeasuredTrace& t : traces) parsed.push_back(LoadTrace(t.path));
  // Big after small and small after big: largest first, then smallest, ...
  std::vector<std::size_t> order(traces.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return parsed[a].trace.statements.size() > parsed[b].trace.statements.size();
  });
  std::vector<std::size_t> alternating;
  for (std::size_t lo = 0, hi = order.size(); lo < hi;) {
    alternating.push_back(order[lo++]);
    if (lo < hi) alternating.push_back(order[--hi]);
  }
  Simulator simulator;
  ReportOptions peak_only;
  peak_only.steps = peak_only.breakdown = peak_only.live_at_peak = false;
  for (int round = 0; round < 2; ++round) {
    for (std::size_t i : alternating) {
      const Report r = simulator.Analyze(parsed[i], "runtime", {}, round == 0 ? ReportOptions{} : peak_only);
      EXPECT_EQ(r.peak_bytes, traces[i].peak_bytes) << traces[i].path << " round " << round;
      EXPECT_EQ(r.final_bytes, traces[i].final_bytes) << traces[i].path << " round " << round;
    }
  }
}

// The readers list the unpack statements as they read (Trace::unpacks), so
// CollectionContents need not walk every statement. The list must be exactly
// the unpacks a walk finds, from the text and the JSON form of every trace.
TEST(ReaderFastPaths, ReadersListEveryUnpack) {
  int unpacks_seen = 0;
  for (const MeasuredTrace& t : CorpusTraces()) {
    for (const std::string& path : {t.path, t.path.substr(0, t.path.size() - 6) + ".json"}) {
      if (!fs::exists(path)) continue;
      const ParsedTrace parsed = LoadTrace(path);
      ASSERT_TRUE(parsed.trace.unpacks_listed) << path;
      std::vector<std::uint32_t> walked;
      for (std::size_t i = 0; i < parsed.trace.statements.size(); ++i) {
        if (parsed.trace.statements[i].kind == StatementKind::kUnpack) {
          walked.push_back(static_cast<std::uint32_t>(i));
        }
      }
      EXPECT_EQ(parsed.trace.unpacks, walked) << path;
      unpacks_seen += static_cast<int>(walked.size());
    }
  }
  EXPECT_GT(unpacks_seen, 0);  // the corpus's backward traces unpack their saved lists
}

// The JSON reader parses a mapped file in place, relying on readable bytes
// after its end (SourceFile::kReadablePadding). A file that ends exactly on a
// page boundary has no slack in its last page: the padding must still be
// there (a plain mapping would fault past the file's last page). The trace
// is the corpus's embedding forward, padded with blanks to 8192 bytes; its
// bytes are the ones measured for it (measured.json).
TEST(ReaderFastPaths, JsonFileEndingOnAPageBoundaryReadsInPlace) {
  const fs::path dir = fs::path(PEAKMEM_TEST_DATA_DIR) / "corpus" / "embedding";
  std::ifstream in(dir / "fw.json", std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_LT(text.size(), 8192u);
  text.append(8192 - text.size(), ' ');
  const fs::path path = fs::temp_directory_path() / "peakmem_page_boundary_test.json";
  std::ofstream(path, std::ios::binary) << text;
  ASSERT_EQ(fs::file_size(path), 8192u);
  const nlohmann::json m = nlohmann::json::parse(std::ifstream(dir / "measured.json"));
  const Report r = Analyze(LoadTrace(path.string()), "runtime");
  fs::remove(path);
  EXPECT_EQ(r.peak_bytes, m["fw"]["peak_bytes"].get<std::int64_t>());
  EXPECT_EQ(r.final_bytes, m["fw"]["final_bytes"].get<std::int64_t>());
}


// Both models build a big trace's steps and breakdown keys on a second
// thread (StepRecorder); the report must be the one each builds on one (whose
// thunder breakdown the Python tests compare with Thunder's get_alloc_memory).
// 60,000 links are ~120,000 statements, past
// StepRecorder::kConcurrentStatements; the chain has calls (one key per call
// in the thunder model, one per allocation in the runtime model) and `del`s
// (one thunder key per freed tensor).
TEST(FastPaths, ReportRowsBuiltOnASecondThreadAreTheSame) {
  const ParsedTrace parsed = testing_util::Parse(testing_util::ChainTrace(60000));
  ASSERT_GE(parsed.trace.statements.size(), StepRecorder::kConcurrentStatements);
  for (const char* model : {"runtime", "thunder"}) {
    SCOPED_TRACE(model);
    ReportOptions one_thread;
    one_thread.second_thread = false;
    const Report alone = Analyze(parsed, model, {}, one_thread);
    const Report two = Analyze(parsed, model, {}, {});
    EXPECT_EQ(alone.steps.size(), parsed.trace.statements.size());
    EXPECT_GT(alone.breakdown.items().size(), 60000u);
    EXPECT_EQ(ReportToJson(two, 0), ReportToJson(alone, 0));
    // And in a Simulator, run after run.
    Simulator simulator;
    for (int run = 0; run < 2; ++run) {
      EXPECT_EQ(ReportToJson(simulator.Analyze(parsed, model), 0), ReportToJson(alone, 0));
    }
  }
}

// TextReadOptions::fusion_subsymbols_only (the CLI's) keeps the subsymbol
// lines of nvFuser regions only: every report, both models, is the one of a
// full read, and the types a statement's subsymbols give its untyped outputs
// are still found. Checked on the measured corpus, the nvFuser trace, and a
// trace mixing a region with torch ops whose outputs have no type comment,
// read in one pass and in chunks of every size down to one statement.
TEST(FastPaths, FusionSubSymbolsOnlyChangesNoReport) {
  std::vector<std::pair<std::string, std::string>> texts;
  for (const MeasuredTrace& t : CorpusTraces()) {
    std::ifstream in(t.path, std::ios::binary);
    texts.emplace_back(t.path, std::string(std::istreambuf_iterator<char>(in), {}));
  }
  {
    const std::string path = PEAKMEM_TEST_DATA_DIR "/nvfusion_broadcast_fw.trace";
    std::ifstream in(path, std::ios::binary);
    texts.emplace_back(path, std::string(std::istreambuf_iterator<char>(in), {}));
  }
  texts.emplace_back("mixed.trace", R"(def f(a, b):
  # a: "cpu f32[2, 3]"
  # b: "cpu f32[1, 3]"
  t0 = torch.add(a, b)
    # t0 = ltorch.add(a, b)  # t0: "cpu f32[2, 3]"
      # t1 = prims.broadcast_in_dim(b, (2, 3), (0, 1))  # t1: "cpu f32[2, 3]"
      # t0 = prims.add(a, t1)  # t0: "cpu f32[2, 3]"
  [t2] = nvFusion0(t0, b)
    # t3 = prims.broadcast_in_dim(b, (2, 3), (0, 1))  # t3: "cpu f32[2, 3]"
    # t2 = prims.mul(t0, t3)  # t2: "cpu f32[2, 3]"
  t4 = torch.neg(t2)
    # t4 = ltorch.neg(t2)  # t4: "cpu f32[2, 3]"
  del t0
  return (t2, t4)
)");
  for (const auto& [path, text] : texts) {
    SCOPED_TRACE(path);
    const auto source = std::make_shared<const SourceFile>(path, text);
    const ParsedTrace full = ReadTraceText(source);
    for (int threads : {1, 2, 4}) {
      TextReadOptions options;
      options.threads = threads;
      options.min_chunk_bytes = 1;
      options.fusion_subsymbols_only = true;
      const ParsedTrace lean = ReadTraceText(source, options);
      ASSERT_EQ(lean.trace.statements.size(), full.trace.statements.size());
      std::size_t kept = 0;
      for (std::size_t i = 0; i < full.trace.statements.size(); ++i) {
        const Statement& s = lean.trace.statements[i];
        const auto lean_subs = lean.trace.SubSymbolsOf(s);
        const auto full_subs = full.trace.SubSymbolsOf(full.trace.statements[i]);
        if (UsesSubSymbols(lean.trace.SymbolOf(s))) {
          ASSERT_EQ(lean_subs.size(), full_subs.size()) << i;
          for (std::size_t k = 0; k < lean_subs.size(); ++k) EXPECT_EQ(lean_subs[k].text, full_subs[k].text);
          kept += lean_subs.size();
        } else {
          EXPECT_TRUE(lean_subs.empty()) << i;
        }
      }
      EXPECT_EQ(lean.trace.subsymbols.size(), kept);
      for (std::size_t v = 0; v < full.trace.values.size(); ++v) {
        EXPECT_EQ(lean.trace.values[v].type->text, full.trace.values[v].type->text) << v;
      }
      for (const char* model : {"runtime", "thunder"}) {
        EXPECT_EQ(ReportToJson(Analyze(lean, model), 0), ReportToJson(Analyze(full, model), 0))
            << model << " threads " << threads;
      }
    }
  }
}

// The thunder model's caller builds every other block of rows with a
// StepMaker of its own while the second thread builds the rest: two makers
// of one report at once. Warm() copies every op name a step can have, so
// that making steps of a printed trace afterwards writes nothing to the
// report's strings (which the other maker may be writing): checked here
// through the arena's size, for every statement of a trace with calls, an
// alias op, `del`s and a return.
TEST(FastPaths, WarmedStepMakerWritesNoStrings) {
  const ParsedTrace parsed = testing_util::Parse(testing_util::ChainTrace(300));
  ASSERT_TRUE(parsed.source_is_printed_trace);
  Report report;
  StepMaker maker(parsed, &report);
  maker.Warm();
  const std::size_t warmed = report.strings->bytes_reserved();
  EXPECT_GT(warmed, 0u);
  for (std::size_t i = 0; i < parsed.trace.statements.size(); ++i) maker.Make(i, 0, 0);
  EXPECT_EQ(report.strings->bytes_reserved(), warmed);
  // Without Warm the first steps do write (so the check above can fail).
  Report cold;
  StepMaker cold_maker(parsed, &cold);
  cold_maker.Make(0, 0, 0);
  EXPECT_GT(cold.strings->bytes_reserved(), 0u);
}

// A big step table is rendered on two threads (WriteStepRows in report.cc):
// every row must still be there, once, in order, cut and marked as on one
// thread. 140,001 rows (past the 65,536 at which the second thread starts,
// and not a whole number of blocks); each row formatted here independently
// with fmt, as the table's header documents.
TEST(FastPaths, TextReportRenderedOnTwoThreadsHasEveryRowInOrder) {
  constexpr int kRows = 140001;
  std::vector<std::string> sources;
  sources.reserve(kRows);
  for (int i = 0; i < kRows; ++i) {
    // Every seventh statement is longer than the 80 columns shown.
    sources.push_back(fmt::format("t{} = torch.add(t{}, t{}){}", i, i - 1, i - 2,
                                  i % 7 == 0 ? std::string(90, 'x') : std::string()));
  }
  Report report;
  report.model = "runtime";
  report.peak_step = 100003;
  for (int i = 0; i < kRows; ++i) {
    Step step;
    step.index = i;
    step.line = 10 + 3 * i;
    step.op = "add";
    step.source = sources[i];
    step.delta_bytes = (i % 2 == 0 ? 1 : -1) * static_cast<std::int64_t>(i) * 1024;
    step.live_bytes = std::int64_t{1} << 33 | i;
    step.peak_bytes = step.live_bytes + i % 13;
    report.steps.push_back(step);
  }
  std::string expected_rows;
  for (const Step& s : report.steps) {
    const bool cut = s.source.size() > 80;
    expected_rows += fmt::format("{:>5} {:>5} {:>14} {:>14} {:>14}  {}{}{}\n", s.index, s.line,
                                 s.delta_bytes, s.live_bytes, s.peak_bytes,
                                 cut ? s.source.substr(0, 77) : s.source, cut ? "..." : "",
                                 s.index == report.peak_step ? "   <- peak" : "");
  }
  std::string text;
  std::size_t pieces = 0;
  WriteReportText(report, [&](std::string_view piece) {
    text += piece;
    ++pieces;
  });
  const std::string header = fmt::format("\n{:>5} {:>5} {:>14} {:>14} {:>14}  {}\n", "step", "line",
                                         "delta", "live", "peak in step", "statement");
  const std::size_t table = text.find(header);
  ASSERT_NE(table, std::string::npos);
  EXPECT_TRUE(text.compare(table + header.size(), std::string::npos, expected_rows) == 0);
  EXPECT_EQ(text.size(), table + header.size() + expected_rows.size());
  EXPECT_GT(pieces, 10u);  // streamed, never held whole
}

// The CLI's text report asks for the largest kTextReportLiveTensors storages
// alive at the peak only (ReportOptions::live_at_peak_limit): the list must
// be the full list's first entries, the count the full count, and the text
// report the same byte for byte. On every corpus trace, runtime model.
TEST(FastPaths, LiveTensorLimitKeepsTheLargestAndTheCount) {
  int cut = 0;
  for (const MeasuredTrace& t : CorpusTraces()) {
    const ParsedTrace parsed = LoadTrace(t.path);
    const Report full = Analyze(parsed, "runtime");
    for (std::size_t limit : {std::size_t{1}, std::size_t{3}, kTextReportLiveTensors}) {
      ReportOptions options;
      options.live_at_peak_limit = limit;
      const Report limited = Analyze(parsed, "runtime", {}, options);
      EXPECT_EQ(limited.live_at_peak_total, full.live_at_peak.size()) << t.path;
      ASSERT_EQ(limited.live_at_peak.size(), std::min(limit, full.live_at_peak.size())) << t.path;
      for (std::size_t i = 0; i < limited.live_at_peak.size(); ++i) {
        const LiveTensor& a = limited.live_at_peak[i];
        const LiveTensor& b = full.live_at_peak[i];
        EXPECT_EQ(std::tie(a.name, a.bytes, a.made_by, a.line, a.role),
                  std::tie(b.name, b.bytes, b.made_by, b.line, b.role))
            << t.path << " entry " << i;
      }
      if (limit == kTextReportLiveTensors) {
        EXPECT_EQ(ReportToText(limited), ReportToText(full)) << t.path;
      }
      cut += full.live_at_peak.size() > limit;
    }
  }
  EXPECT_GT(cut, 5);  // the limit did cut lists (the corpus has big ones)
}

}  // namespace
}  // namespace peakmem
