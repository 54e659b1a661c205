// Each recipe in docs/design.md ("Recipes") followed once, through the
// extension points the recipe names, on an input small enough that the
// expected numbers are derived by hand in the comments.
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "peakmem/frontend/frontend.h"
#include "peakmem/frontend/type_inference.h"
#include "peakmem/ir/trace_builder.h"
#include "peakmem/models/model_choice.h"
#include "peakmem/report/breakdown_keys.h"
#include "peakmem/report/report.h"
#include "peakmem/report/step_recorder.h"
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
// The toy reader fills a TraceBuilder itself, as the recipe says: it binds
// names (Define, LookupForUse, Delete), types each value (SetType), and
// appends the statements the models read (a call with its symbol and
// arguments, a del, a return).
constexpr std::string_view kToyHeader = "toytrace\n";

bool SniffToy(std::string_view text) { return text.substr(0, kToyHeader.size()) == kToyHeader; }

Expr ValueExpr(ValueId value, SourceLocation at) {
  Expr e;
  e.kind = Expr::Kind::kValue;
  e.value = value;
  e.at = at;
  return e;
}

ParsedTrace ReadToy(std::shared_ptr<const SourceFile> source, const ReadOptions&) {
  TraceBuilder builder(source);
  Trace& trace = builder.trace();
  std::istringstream in{std::string(source->text())};
  std::string line, type;
  std::getline(in, line);  // the header
  for (int line_number = 2; std::getline(in, line); ++line_number) {
    const SourceLocation at{line_number, 1};
    std::istringstream words(line);
    std::string op, name, a, b;
    words >> op >> name;
    if (op == "input") {
      std::string floats;
      words >> floats;
      type = "cpu f32[" + floats + "]";
      Parameter p;
      p.value = builder.Define(builder.Keep(name), at);
      builder.SetType(p.value, type, at);
      trace.params.push_back(std::move(p));
      continue;
    }
    Statement s;
    s.at = at;
    s.source_line = line_number;
    if (op == "add") {
      words >> a >> b;
      const std::vector<Expr> args = {ValueExpr(builder.LookupForUse(a, at), at),
                                      ValueExpr(builder.LookupForUse(b, at), at)};
      s.kind = StatementKind::kCall;
      s.args = trace.SaveExprs(args);
      s.outputs.kind = Pattern::Kind::kValue;
      s.outputs.value = builder.Define(builder.Keep(name), at);
      s.outputs.at = at;
      builder.SetType(s.outputs.value, type, at);
      s.call_symbol = builder.InternCallSymbol("torch.add", "add", "add");
    } else if (op == "free") {
      s.kind = StatementKind::kDel;
      const std::vector<ValueId> deleted = {builder.Delete(name, at, line_number)};
      s.deleted = trace.SaveArray(deleted);
    } else if (op == "return") {
      s.kind = StatementKind::kReturn;
      s.returned = ValueExpr(builder.LookupForUse(name, at), at);
    } else {
      builder.Fail(at, "unknown toytrace line '" + op + "'");
    }
    trace.statements.push_back(std::move(s));
  }
  ParsedTrace parsed;
  parsed.trace = std::move(trace);
  InferAliasTypes(&parsed.trace);  // types outputs a reader left untyped (none here)
  parsed.source = std::move(source);
  parsed.source_is_printed_trace = false;  // reports re-print its statements
  return parsed;
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
// (FindOp on each call's symbol), emits into an AllocStream and fills a
// Report through a StepRecorder with the model's choice of BreakdownKeys,
// as the real models do (src/models/runtime_model.cc). It gives every
// call's single output its type's bytes and frees what `del` names; the
// caller's arguments are allocated before the first step.
// The toy model's own breakdown keys: "{op} made" / "{op} freed" = the
// statement's delta, for each statement that made or freed a storage.
class ToyKeys final : public BreakdownKeys {
 public:
  void Set(const Trace& trace, const Statement& s, std::uint8_t style, std::int64_t delta,
           std::span<const NamedBytes> named, std::string* key, OrderedBreakdown* out) const override {
    if (style == 0 || named.empty()) return;
    key->assign(trace.SymbolName(s));
    *key += delta >= 0 ? " made" : " freed";
    out->Set(*key, delta);
  }
};

Report RunToyModel(const ParsedTrace& parsed, int* known_ops, AllocLog* log) {
  const Trace& trace = parsed.trace;
  Report report;
  report.model = "toy";
  std::vector<StorageRecord> storages;
  AllocStream stream(&storages, log, /*name_steps=*/true);
  std::map<ValueId, StorageId> held;
  for (const Parameter& p : trace.params) {
    held[p.value] = stream.Alloc(static_cast<std::int64_t>(trace.value(p.value).type->bytes),
                                 p.value, StorageRole::kArgument);
  }
  stream.ClearStepNamed();  // the arguments are no statement's entry
  const ReportOptions options;
  const ToyKeys keys;
  StepRecorder recorder(parsed, &report, options, keys);
  const RequestedBytes& counter = stream.counter();
  for (std::size_t i = 0; i < trace.statements.size(); ++i) {
    const Statement& s = trace.statements[i];
    const std::int64_t before = counter.live();
    stream.BeginStep(static_cast<std::int32_t>(i));
    if (s.kind == StatementKind::kCall && s.outputs.kind == Pattern::Kind::kValue) {
      if (FindOp(trace.SymbolOf(s)) != nullptr) ++*known_ops;
      const ValueId out = s.outputs.value;
      held[out] = stream.Alloc(static_cast<std::int64_t>(trace.value(out).type->bytes), out,
                               StorageRole::kIntermediate);
    } else if (s.kind == StatementKind::kDel) {
      for (const ValueId v : s.deleted) stream.Free(held.at(v));
    }
    stream.EndStep();
    recorder.Record(i, counter.live() - before, counter.live(), counter.step_peak(), stream.step_named(), 1);
    stream.ClearStepNamed();
  }
  recorder.Finish();
  report.peak_bytes = counter.peak();
  report.peak_step = counter.peak_moment().step;
  report.final_bytes = counter.live();
  return report;
}

TEST(DesignRecipesModel, ToyModelFillsAReportThroughAStepRecorder) {
  const ParsedTrace parsed = ParseToy(std::string(kToyProgram));
  int known_ops = 0;
  AllocLog log;
  const Report report = RunToyModel(parsed, &known_ops, &log);
  // Both adds are registered ops; the live bytes go 32 (arguments), 48,
  // 64, 48, 48 (see kToyProgram): peak 64 at step 1, 48 at the end, five
  // events (two arguments, two adds, one free).
  EXPECT_EQ(known_ops, 2);
  EXPECT_EQ(report.peak_bytes, 64);
  EXPECT_EQ(report.peak_step, 1);
  EXPECT_EQ(report.final_bytes, 48);
  EXPECT_EQ(log.events.size(), 5u);
  ASSERT_EQ(report.steps.size(), 4u);
  const std::vector<std::int64_t> live = {48, 64, 48, 48}, delta = {16, 16, -16, 0};
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(report.steps[i].live_bytes, live[i]) << i;
    EXPECT_EQ(report.steps[i].delta_bytes, delta[i]) << i;
  }
  EXPECT_EQ(report.steps[0].op, "add");
  // ToyKeys: the two adds share a key (a key set twice keeps its first
  // place and its last value, report.h's OrderedBreakdown), the del has
  // its own.
  const std::vector<std::pair<std::string_view, std::int64_t>> breakdown = {
      {"add made", 16}, {"python_del freed", -16}};
  EXPECT_EQ(report.breakdown.items(), breakdown);
}

}  // namespace
}  // namespace peakmem
