// Each recipe in docs/design.md ("Recipes") followed once, through the
// extension points the recipe names, on an input small enough that the
// expected numbers are derived by hand in the comments.
#include <cstdint>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "peakmem/frontend/frontend.h"
#include "peakmem/models/model_choice.h"
#include "peakmem/report/report.h"
#include "peakmem/report/writer.h"
#include "peakmem/semantics/op_registry.h"
#include "peakmem/sim/alloc_events.h"
#include "peakmem/sim/alloc_stream.h"

namespace peakmem {
namespace {

// A made-up trace format, "toytrace": a header line, then
//   input NAME FLOATS      a cpu f32 argument of FLOATS elements
//   add OUT A B            OUT = A + B (same shape)
//   free NAME              NAME's last use
//   return NAME
// The toy reader prints the program as the text front end's trace and
// reads that with the registered "text" front end: the recipe's "fills a
// TraceBuilder (or a Trace) and returns a ParsedTrace" through the
// smallest public route (TraceBuilder's statement API is the text
// reader's own). The text reader runs InferAliasTypes itself.
constexpr std::string_view kToyHeader = "toytrace\n";

bool SniffToy(std::string_view text) { return text.substr(0, kToyHeader.size()) == kToyHeader; }

ParsedTrace ReadToy(std::shared_ptr<const SourceFile> source, const ReadOptions& options) {
  std::istringstream in(std::string(source->text()));
  std::string line;
  std::getline(in, line);  // the header
  std::vector<std::string> params;
  std::string header_types;
  std::string body;
  std::string shape_of_all;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string op;
    words >> op;
    if (op == "input") {
      std::string name, floats;
      words >> name >> floats;
      params.push_back(name);
      shape_of_all = "cpu f32[" + floats + "]";
      header_types += "  # " + name + ": \"" + shape_of_all + "\"\n";
    } else if (op == "add") {
      std::string out, a, b;
      words >> out >> a >> b;
      body += "  " + out + " = torch.add(" + a + ", " + b + ")  # " + out + ": \"" + shape_of_all +
              "\"\n";
    } else if (op == "free") {
      std::string name;
      words >> name;
      body += "  del " + name + "\n";
    } else if (op == "return") {
      std::string name;
      words >> name;
      body += "  return " + name + "\n";
    }
  }
  std::string text = "def f(";
  for (std::size_t i = 0; i < params.size(); ++i) text += (i ? ", " : "") + params[i];
  text += "):\n" + header_types + body;
  const auto printed = std::make_shared<const SourceFile>(std::string(source->name()), text);
  return FindFrontend("text")->read(printed, options);
}

// RegisterFrontend refuses a name registered before, and the registry
// lives for the process: register once, whichever test runs first.
void RegisterToy() {
  static const bool registered = [] {
    if (!FindFrontend("toytrace").has_value()) {
      RegisterFrontend(Frontend{.name = "toytrace", .sniff = SniffToy, .read = ReadToy});
    }
    return true;
  }();
  (void)registered;
}

ParsedTrace ParseToy(const std::string& text) {
  RegisterToy();
  return ParseTrace("<toy>", text);
}

// a, b: 4 floats each, 16 bytes, held by the caller.
// step 0: t0 = a + b, +16 (live 48)
// step 1: t1 = t0 + t0, +16 (live 64: the peak, at step 1)
// step 2: del t0, -16 (live 48)
// step 3: return t1.
constexpr std::string_view kToyProgram =
    "toytrace\ninput a 4\ninput b 4\nadd t0 a b\nadd t1 t0 t0\nfree t0\nreturn t1\n";

TEST(DesignRecipesFrontend, ToyReaderIsSniffedReadAndAnalysed) {
  RegisterToy();
  ASSERT_TRUE(FindFrontend("toytrace").has_value());
  EXPECT_EQ(FrontendFor(kToyProgram).name, "toytrace");
  const ParsedTrace parsed = ParseTrace("<toy>", std::string(kToyProgram));
  const Report report = Analyze(parsed, "runtime");
  EXPECT_EQ(report.peak_bytes, 64);
  EXPECT_EQ(report.peak_step, 1);
}

// An allocator model that records what it is shown.
class RecordingAllocator : public AllocSink {
 public:
  void Alloc(StorageId, const StorageRecord& storage, std::int32_t step) override {
    seen.push_back({step, storage.bytes});
  }
  void Free(StorageId, const StorageRecord& storage, std::int32_t step) override {
    seen.push_back({step, -storage.bytes});
  }
  void StepEnd(std::int32_t) override { ++steps_ended; }
  std::vector<std::pair<std::int32_t, std::int64_t>> seen;
  int steps_ended = 0;
};

TEST(DesignRecipesAllocator, SinkReplaysTheModelsEventStream) {
  const ParsedTrace parsed = ParseToy(std::string(kToyProgram));
  ReportOptions options;
  options.alloc_log = true;
  const Report report = Analyze(parsed, "runtime", {}, options);
  ASSERT_NE(report.alloc_log, nullptr);
  RecordingAllocator allocator;
  Replay(*report.alloc_log, allocator);
  // The arguments before the first step (-1), then the steps above.
  const std::vector<std::pair<std::int32_t, std::int64_t>> expected = {
      {-1, 16}, {-1, 16}, {0, 16}, {1, 16}, {2, -16}};
  EXPECT_EQ(allocator.seen, expected);
  EXPECT_GT(allocator.steps_ended, 0);
}

// An output format. AllWriters is a fixed list in src/report/writer.cc that
// a test cannot extend, so this follows the rest of the recipe: a writer
// used through the ReportWriter interface (WriteToString,
// ReportOptionsFor).
class PeakLineWriter : public ReportWriter {
 public:
  std::string_view name() const override { return "peakline"; }
  std::string_view description() const override { return "one line: the peak"; }
  void Write(const Report& report, const WriterOptions&, const ReportSink& sink) const override {
    sink("peak " + std::to_string(report.peak_bytes) + " at " +
         std::to_string(report.peak_step) + "\n");
  }
};

TEST(DesignRecipesWriter, WriterWritesAReport) {
  const PeakLineWriter writer;
  EXPECT_FALSE(ReportOptionsFor(writer).alloc_log);  // it does not read the event stream
  const Report report = Analyze(ParseToy(std::string(kToyProgram)), "runtime");
  EXPECT_EQ(WriteToString(writer, report), "peak 64 at 1\n");
}

// Add an op: the registry is a static table a test cannot extend; what can
// be followed is the lookup every model makes and the claim that an op
// fitting the existing rules needs no model change: the same program is
// analysed by both models with the same hand-derived peak (64 above).
TEST(DesignRecipesOp, OpFittingExistingRulesNeedsNoModelChange) {
  EXPECT_NE(FindOp("add"), nullptr);
  const ParsedTrace parsed = ParseToy(std::string(kToyProgram));
  EXPECT_EQ(Analyze(parsed, "runtime").peak_bytes, 64);
  EXPECT_EQ(Analyze(parsed, "thunder").peak_bytes, 64);
}

// Add a model: a toy model that walks the IR, consults the registry
// (FindOp on each call's symbol) and emits into an AllocStream. It gives
// every call's single output its type's bytes and frees what `del` names;
// the caller's arguments are allocated before the first step. Filling a
// Report with a StepRecorder and BreakdownKeys is what the real models do
// (src/models/runtime_model.cc); this checks the stream's numbers only.
TEST(DesignRecipesModel, ToyModelEmitsIntoAnAllocStream) {
  const ParsedTrace parsed = ParseToy(std::string(kToyProgram));
  const Trace& trace = parsed.trace;
  std::vector<StorageRecord> storages;
  AllocLog log;
  AllocStream stream(&storages, &log, /*name_steps=*/false);
  std::map<ValueId, StorageId> held;
  for (const Parameter& p : trace.params) {
    held[p.value] = stream.Alloc(static_cast<std::int64_t>(trace.value(p.value).type->bytes),
                                 p.value, StorageRole::kArgument);
  }
  int known_ops = 0;
  std::int32_t step = 0;
  for (const Statement& s : trace.statements) {
    stream.BeginStep(step++);
    if (s.kind == StatementKind::kCall && s.outputs.kind == Pattern::Kind::kValue) {
      if (FindOp(trace.SymbolOf(s)) != nullptr) ++known_ops;
      const ValueId out = s.outputs.value;
      held[out] = stream.Alloc(static_cast<std::int64_t>(trace.value(out).type->bytes), out,
                               StorageRole::kIntermediate);
    } else if (s.kind == StatementKind::kDel) {
      for (const ValueId v : s.deleted) stream.Free(held.at(v));
    }
    stream.EndStep();
  }
  // Both adds are registered ops; the live bytes go 32, 48, 64, 48 (see
  // kToyProgram): the same peak the runtime model reports.
  EXPECT_EQ(known_ops, 2);
  EXPECT_EQ(stream.counter().peak(), 64);
  EXPECT_EQ(stream.counter().live(), 48);
  EXPECT_EQ(log.events.size(), 5u);
}

}  // namespace
}  // namespace peakmem
