// peakmem's benchmarks (Google Benchmark): reader throughput and simulation
// speed on generated traces (bench/make_trace.py), each next to a baseline
// measured in the same run on the same bytes / the same statements, so the
// ratios mean something on any machine.
//
//   peakmem_bench --traces=DIR [--files=SUBSTRING] [--max_mb=N] [--benchmark_* flags]
//
// For every DIR/*.trace and DIR/*.json (smallest first), in this order:
//   scan/F            baseline: count the lines of the buffer with memchr
//   simdjson_dom/F    baseline (JSON only): simdjson DOM parse of the buffer
//   source_index/F    SourceFile construction alone (copy + line-start index)
//   read/F            ParseTrace: text or JSON reader, the whole trace (its
//                     teardown untimed: the CLI exits without one), on one
//                     thread (text: TextReadOptions threads = 1)
//   read_parallel/F   text only: the text reader as the CLI runs it, in
//                     chunks on every hardware thread; WALL time (the other
//                     benchmarks give the process's CPU time)
//   touch/F           baseline: a loop that reads each statement's kind,
//                     outputs and argument count (parsed once, outside timing)
//   analyze_thunder/F Analyze(parsed, "thunder"), the model only, full report
//   analyze_runtime/F Analyze(parsed, "runtime"), the model only, full report
//   simulate_thunder/F  peak only (no steps, breakdown, live set), through one
//                     Simulator, as an optimization pass scoring schedules
//                     runs it: the working memory of one run is reused by
//                     the next (the first, untimed run warms it)
//   simulate_runtime/F  the same for the runtime model: the simulation itself
//   replay_requested/F  baseline: the runtime model's event log (kept once,
//                     untimed) replayed through the requested-bytes counter
//   price_cuda_caching/F  the same log through the CUDA caching allocator
//                     model, as `--allocator cuda-caching` runs it; items are
//                     events
//
//   peakmem_bench --step_traces=DIR  (also) for every training step that
//   bench/bench_step.py --export wrote to DIR (NAME.step.json, a step file):
//   touch_step/NAME     baseline: touch every statement of both traces
//   simulate_step/NAME  the step's simulation itself: the runtime model over
//                     the forward (returned tensors kept: their identity
//                     carries into the backward) and the backward with its
//                     saved tensors' identity (RuntimeOptions::argument_tensors),
//                     peak only, each through a Simulator warmed by an
//                     untimed run; items are both traces' statements
//   join_step/NAME      the whole step as `peakmem step` simulates it
//                     (SimulateTrainingStep: full reports, the optimizer's
//                     programs, the join); items as above
// Byte rates come from SetBytesProcessed (file bytes), statement rates from
// SetItemsProcessed (statements in the parsed trace). Counters:
//   statements        statements in the trace
//   heap_per_stmt     bytes of malloc'd heap the parsed trace holds, per
//                     statement (mallinfo2 before/after one parse; the
//                     source text, which the trace keeps, included)
//   bytes_per_stmt    file bytes per statement
// A string field "label" gives the file name.
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <simdjson.h>

#include <algorithm>
#include <thread>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <tuple>
#include <string>
#include <vector>

#include "peakmem/analyze.h"
#include "peakmem/frontend/step_file.h"
#include "peakmem/models/training_step.h"
#include "peakmem/planning/planner.h"
#include "peakmem/sim/requested_bytes.h"
#include "peakmem/frontend/trace_json_reader.h"
#include "peakmem/frontend/trace_text_reader.h"

namespace fs = std::filesystem;

namespace {

struct TraceFile {
  std::string path;
  std::string name;  // file name
  bool json = false;
  std::uintmax_t bytes = 0;
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Bytes malloc has handed out: small chunks plus mmapped large blocks.
std::size_t HeapInUse() {
  const struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

// One trace's text and parse, kept while its benchmarks run (they are
// registered consecutively); loading another file drops the previous one so
// that only one large trace is in memory at a time.
class Cache {
 public:
  const std::string& Text(const TraceFile& f) {
    Switch(f);
    if (!text_) text_ = ReadAll(f.path);
    return *text_;
  }
  const peakmem::ParsedTrace& Parsed(const TraceFile& f) {
    Switch(f);
    if (!parsed_) {
      std::string copy = Text(f);
      parsed_.emplace(peakmem::ParseTrace(f.path, std::move(copy)));
    }
    return *parsed_;
  }
  std::size_t Statements(const TraceFile& f) { return Parsed(f).trace.statements.size(); }
  // Heap bytes held by one parsed trace (measured once).
  double HeapBytes(const TraceFile& f) {
    Switch(f);
    if (heap_ < 0) {
      std::string copy = Text(f);
      parsed_.reset();
      malloc_trim(0);
      const std::size_t before = HeapInUse();
      auto p = std::make_unique<peakmem::ParsedTrace>(peakmem::ParseTrace(f.path, std::move(copy)));
      const std::size_t after = HeapInUse();
      heap_ = static_cast<double>(after) - static_cast<double>(before);
      parsed_.emplace(std::move(*p));
    }
    return heap_;
  }

 private:
  void Switch(const TraceFile& f) {
    if (f.path == path_) return;
    parsed_.reset();
    text_.reset();
    heap_ = -1;
    malloc_trim(0);
    path_ = f.path;
  }
  std::string path_;
  std::optional<std::string> text_;
  std::optional<peakmem::ParsedTrace> parsed_;
  double heap_ = -1;
};

Cache& cache() {
  static Cache c;
  return c;
}

void Common(benchmark::State& state, const TraceFile& f, std::size_t statements) {
  state.SetLabel(f.name);
  state.counters["statements"] = static_cast<double>(statements);
  state.counters["bytes_per_stmt"] =
      static_cast<double>(f.bytes) / static_cast<double>(std::max<std::size_t>(statements, 1));
}

// Baseline for the readers: the cheapest pass that still looks at every
// byte, counting lines with memchr.
void BM_Scan(benchmark::State& state, TraceFile f) {
  const std::string& text = cache().Text(f);
  for (auto _ : state) {
    std::size_t lines = 0;
    const char* p = text.data();
    const char* end = p + text.size();
    while (p < end) {
      const void* nl = std::memchr(p, '\n', static_cast<std::size_t>(end - p));
      if (nl == nullptr) break;
      ++lines;
      p = static_cast<const char*>(nl) + 1;
    }
    benchmark::DoNotOptimize(lines);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
  Common(state, f, cache().Statements(f));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * cache().Statements(f)));
}

// Baseline for the JSON reader: simdjson's DOM parse of the same bytes (the
// library the reader is built on), no trace built.
void BM_SimdjsonDom(benchmark::State& state, TraceFile f) {
  const std::string& text = cache().Text(f);
  simdjson::padded_string padded(text);
  simdjson::dom::parser parser;
  for (auto _ : state) {
    auto doc = parser.parse(padded);
    if (doc.error()) {
      state.SkipWithError(simdjson::error_message(doc.error()));
      return;
    }
    benchmark::DoNotOptimize(doc.value_unsafe());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
  Common(state, f, cache().Statements(f));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * cache().Statements(f)));
}

// SourceFile construction alone: the text is copied (as ParseTrace's caller
// does) and its line starts indexed. Part of every read.
void BM_SourceIndex(benchmark::State& state, TraceFile f) {
  const std::string& text = cache().Text(f);
  for (auto _ : state) {
    std::string copy = text;
    auto source = std::make_shared<const peakmem::SourceFile>(f.path, std::move(copy));
    benchmark::DoNotOptimize(source->line_count());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
  Common(state, f, cache().Statements(f));
}

// Reads a trace as ParseTrace does, a printed one with `threads` threads.
peakmem::ParsedTrace ParseWith(const TraceFile& f, std::string text, int threads) {
  if (f.json) return peakmem::ParseTrace(f.path, std::move(text));
  peakmem::TextReadOptions options;
  options.threads = threads;
  return peakmem::ReadTraceText(
      std::make_shared<const peakmem::SourceFile>(f.path, std::move(text)), options);
}

// The reader: on a fresh copy of the text (the copy is made outside the
// timed region). The parsed trace is freed outside it too, as the CLI never
// frees it.
void BM_Read(benchmark::State& state, TraceFile f, int threads) {
  const std::string& text = cache().Text(f);
  std::size_t statements = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::string copy = text;
    state.ResumeTiming();
    try {
      auto parsed = std::make_unique<peakmem::ParsedTrace>(ParseWith(f, std::move(copy), threads));
      statements = parsed->trace.statements.size();
      benchmark::DoNotOptimize(parsed->trace.values.data());
      // Freeing the trace is not reading it (and the CLI never does: it
      // exits with the trace alive), so it happens outside the timing.
      state.PauseTiming();
      parsed.reset();
      state.ResumeTiming();
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
      return;
    }
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * statements));
  Common(state, f, statements);
  state.counters["threads"] = threads > 0 ? threads : static_cast<double>(std::thread::hardware_concurrency());
  const double heap = cache().HeapBytes(f);
  state.counters["heap_per_stmt"] = heap / static_cast<double>(std::max<std::size_t>(statements, 1));
  state.counters["heap_bytes"] = heap;
}

// Baseline for the models: touch every statement once (kind, outputs,
// argument and deletion counts), the least any simulation must do.
void BM_Touch(benchmark::State& state, TraceFile f) {
  const peakmem::ParsedTrace& parsed = cache().Parsed(f);
  const auto& stmts = parsed.trace.statements;
  for (auto _ : state) {
    std::uint64_t acc = 0;
    for (const peakmem::Statement& s : stmts) {
      acc += static_cast<std::uint64_t>(s.kind) + s.outputs.items.size() + s.outputs.value +
             s.args.size() + s.deleted.size();
    }
    benchmark::DoNotOptimize(acc);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * stmts.size()));
  Common(state, f, stmts.size());
}

// A model alone on a trace parsed once; the Report is built and destroyed
// inside the timed region (the CLI pays for both).
// `full`: the whole report (steps, breakdown, live tensors at the peak), as
// the CLI makes it, by a fresh Analyze each time (the CLI runs once);
// otherwise the peak only (ReportOptions all off), what an optimization pass
// comparing schedules asks for, by one Simulator warmed by an untimed run.
void BM_Analyze(benchmark::State& state, TraceFile f, std::string model, bool full) {
  const peakmem::ParsedTrace& parsed = cache().Parsed(f);
  peakmem::ReportOptions options;
  if (!full) options.steps = options.breakdown = options.live_at_peak = false;
  peakmem::Simulator simulator;
  try {
    if (!full) simulator.Analyze(parsed, model, {}, options);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  for (auto _ : state) {
    try {
      peakmem::Report report = full ? peakmem::Analyze(parsed, model, {}, options)
                                    : simulator.Analyze(parsed, model, {}, options);
      benchmark::DoNotOptimize(report.peak_bytes);
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
      return;
    }
  }
  const auto n = parsed.trace.statements.size();
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
  Common(state, f, n);
}

// The CUDA caching allocator model over a real trace's allocation events
// (the runtime model's stream, kept once outside timing), as
// `--allocator cuda-caching` runs it after the model; items are events.
// Its baseline is `replay_requested/F`: the same events through the
// requested-bytes counter (the cost of Replay itself).
void BM_PriceCuda(benchmark::State& state, TraceFile f, bool cuda) {
  const peakmem::ParsedTrace& parsed = cache().Parsed(f);
  peakmem::ReportOptions options;
  options.steps = options.breakdown = options.live_at_peak = false;
  options.alloc_log = true;
  const peakmem::Report report = peakmem::Analyze(parsed, "runtime", {}, options);
  const peakmem::AllocLog& log = *report.alloc_log;
  const peakmem::AllocatorOptions allocator =
      peakmem::MakeAllocatorOptions("cuda-caching", "", "");  // as the CLI makes them
  for (auto _ : state) {
    if (cuda) {
      const peakmem::AllocatorResult r = peakmem::RunAllocatorModel(log, allocator);
      benchmark::DoNotOptimize(r.stats.reserved_bytes_peak);
    } else {
      peakmem::RequestedBytesSink counter;
      peakmem::Replay(log, counter);
      benchmark::DoNotOptimize(counter.counter().peak());
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * log.events.size()));
  state.counters["events"] = static_cast<double>(log.events.size());
  Common(state, f, parsed.trace.statements.size());
}

// The memory planner (peakmem/planning/planner.h) with its default options
// (a 1 s time budget, 20,000 simulations at most) on a trace parsed once
// outside timing; its baseline is `simulate_runtime/F`, one simulation of
// the same trace. Counters: the simulations one plan ran, the peak before
// and after.
// Traces up to ~2*10^5 statements of text are planned (a plan re-simulates
// the trace hundreds of times).
constexpr std::uint64_t kPlanMaxBytes = 60'000'000;

void BM_Plan(benchmark::State& state, TraceFile f) {
  peakmem::ParsedTrace parsed = ParseWith(f, cache().Text(f), 1);
  peakmem::PlanResult plan;
  for (auto _ : state) {
    try {
      plan = peakmem::PlanTrace(parsed);
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
      return;
    }
    benchmark::DoNotOptimize(plan.planned_peak_bytes);
  }
  state.counters["simulations"] = static_cast<double>(plan.simulations);
  state.counters["peak_before"] = static_cast<double>(plan.original_peak_bytes);
  state.counters["peak_after"] = static_cast<double>(plan.planned_peak_bytes);
  state.counters["budget_reached"] = plan.time_budget_reached ? 1 : 0;
  Common(state, f, parsed.trace.statements.size());
}

// The traces in `dir` (none, with a message, when it cannot be listed).
std::vector<TraceFile> FindTraces(const std::string& dir) {
  std::vector<TraceFile> out;
  std::error_code error;
  fs::directory_iterator listing(dir, error);
  if (error) {
    std::cerr << "peakmem_bench: cannot list " << dir << ": " << error.message() << "\n";
    return out;
  }
  for (const auto& entry : listing) {
    if (!entry.is_regular_file()) continue;
    const fs::path& p = entry.path();
    const std::string ext = p.extension().string();
    if (ext != ".trace" && ext != ".json") continue;
    if (p.filename().string().find(".meta.") != std::string::npos) continue;
    TraceFile f;
    f.path = p.string();
    f.name = p.filename().string();
    f.json = ext == ".json";
    f.bytes = entry.file_size();
    out.push_back(f);
  }
  std::sort(out.begin(), out.end(), [](const TraceFile& a, const TraceFile& b) {
    return std::tie(a.bytes, a.name) < std::tie(b.bytes, b.name);
  });
  return out;
}

// A training step (a step file bench_step.py --export wrote), read once;
// the backward's argument tensors from one run of the forward.
struct StepTraces {
  std::string name;
  peakmem::StepFile file;
  std::vector<peakmem::ArgumentTensor> backward_arguments;
  std::size_t Statements() const {
    return file.forward.trace.statements.size() + file.backward.trace.statements.size();
  }
};

std::vector<std::shared_ptr<StepTraces>> FindSteps(const std::string& dir) {
  std::vector<std::shared_ptr<StepTraces>> out;
  const std::string suffix = ".step.json";
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string file = e.path().filename().string();
    if (file.size() <= suffix.size() || file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    auto step = std::make_shared<StepTraces>(StepTraces{file.substr(0, file.size() - suffix.size()),
                                                        peakmem::LoadStepFile(e.path().string()), {}});
    peakmem::ReportOptions report;
    report.returned_tensors = true;
    peakmem::RuntimeOptions forward;
    forward.convention = peakmem::CallingConvention::kForward;
    peakmem::BackwardArgumentTensors(step->file.spec,
                                     peakmem::Analyze(step->file.forward, "runtime", forward, report),
                                     &step->backward_arguments);
    out.push_back(std::move(step));
  }
  return out;
}

void BM_TouchStep(benchmark::State& state, std::shared_ptr<StepTraces> step) {
  for (auto _ : state) {
    std::uint64_t acc = 0;
    for (const peakmem::ParsedTrace* p : {&step->file.forward, &step->file.backward}) {
      for (const peakmem::Statement& s : p->trace.statements) {
        acc += static_cast<std::uint64_t>(s.kind) + s.outputs.items.size() + s.outputs.value +
               s.args.size() + s.deleted.size();
      }
    }
    benchmark::DoNotOptimize(acc);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * step->Statements()));
  state.SetLabel(step->name);
  state.counters["statements"] = static_cast<double>(step->Statements());
}

void BM_SimulateStep(benchmark::State& state, std::shared_ptr<StepTraces> step) {
  peakmem::ReportOptions report;
  report.steps = report.breakdown = report.live_at_peak = false;
  report.returned_tensors = true;
  peakmem::RuntimeOptions fw_options, bw_options;
  fw_options.convention = peakmem::CallingConvention::kForward;
  bw_options.convention = peakmem::CallingConvention::kBackward;
  bw_options.argument_tensors = step->backward_arguments;
  peakmem::Simulator forward, backward;
  try {
    forward.Analyze(step->file.forward, "runtime", fw_options, report);
    backward.Analyze(step->file.backward, "runtime", bw_options, report);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  for (auto _ : state) {
    peakmem::Report f = forward.Analyze(step->file.forward, "runtime", fw_options, report);
    peakmem::Report b = backward.Analyze(step->file.backward, "runtime", bw_options, report);
    benchmark::DoNotOptimize(f.peak_bytes + b.peak_bytes);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * step->Statements()));
  state.SetLabel(step->name);
  state.counters["statements"] = static_cast<double>(step->Statements());
}

// The whole step as `peakmem step` runs it (models/training_step.h): both
// traces with full reports, the optimizer's programs, the join.
void BM_JoinStep(benchmark::State& state, std::shared_ptr<StepTraces> step) {
  const peakmem::StepFile& f = step->file;
  auto run = [&] {
    return peakmem::SimulateTrainingStep(f.forward, f.backward, f.optimizer_first ? &*f.optimizer_first : nullptr,
                                         f.optimizer_later ? &*f.optimizer_later : nullptr, f.spec);
  };
  try {
    run();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(run().peak_bytes);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * step->Statements()));
  state.SetLabel(step->name);
  state.counters["statements"] = static_cast<double>(step->Statements());
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  std::string step_dir;  // training steps exported by bench_step.py --export
  std::string only;  // substring filter on file names
  double max_mb = 0;  // skip files larger than this (0: no limit)
  std::vector<char*> rest;
  rest.push_back(argv[0]);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--traces=", 0) == 0) {
      dir = a.substr(9);
    } else if (a.rfind("--step_traces=", 0) == 0) {
      step_dir = a.substr(14);
    } else if (a.rfind("--files=", 0) == 0) {
      only = a.substr(8);
    } else if (a.rfind("--max_mb=", 0) == 0) {
      max_mb = std::stod(a.substr(9));
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (dir.empty() && step_dir.empty()) {
    std::cerr << "usage: peakmem_bench [--traces=DIR] [--step_traces=DIR] [--files=SUBSTRING] [--max_mb=N] "
                 "[--benchmark_* flags]\n"
                 "  --traces: *.trace / *.json files made by bench/make_trace.py\n"
                 "  --step_traces: training steps written by bench/bench_step.py --export\n";
    return 2;
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  if (!step_dir.empty()) {
    for (const auto& step : FindSteps(step_dir)) {
      for (const auto& [what, fn] : {std::pair{std::string("touch_step/"), &BM_TouchStep},
                                     std::pair{std::string("simulate_step/"), &BM_SimulateStep},
                                     std::pair{std::string("join_step/"), &BM_JoinStep}}) {
        benchmark::RegisterBenchmark((what + step->name).c_str(),
                                     [step, fn = fn](benchmark::State& s) { fn(s, step); })
            ->Unit(benchmark::kMillisecond)
            ->MeasureProcessCPUTime();
      }
    }
  }
  const std::vector<TraceFile> files = dir.empty() ? std::vector<TraceFile>{} : FindTraces(dir);
  if (files.empty() && step_dir.empty()) {
    std::cerr << "peakmem_bench: no *.trace or *.json files in " << dir << "\n";
    return 2;
  }
  for (const TraceFile& f : files) {
    if (!only.empty() && f.name.find(only) == std::string::npos) continue;
    if (max_mb > 0 && static_cast<double>(f.bytes) > max_mb * 1e6) {
      std::cerr << "peakmem_bench: skipping " << f.name << " (" << f.bytes / 1000000
                << " MB > --max_mb=" << max_mb << ")\n";
      continue;
    }
    const auto reg = [&](const std::string& what, auto fn) {
      benchmark::RegisterBenchmark((what + "/" + f.name).c_str(), fn)
          ->Unit(benchmark::kMillisecond)
          ->MeasureProcessCPUTime();
    };
    reg("scan", [f](benchmark::State& s) { BM_Scan(s, f); });
    if (f.json) reg("simdjson_dom", [f](benchmark::State& s) { BM_SimdjsonDom(s, f); });
    reg("source_index", [f](benchmark::State& s) { BM_SourceIndex(s, f); });
    reg("read", [f](benchmark::State& s) { BM_Read(s, f, 1); });
    if (!f.json) {
      benchmark::RegisterBenchmark(("read_parallel/" + f.name).c_str(),
                                   [f](benchmark::State& s) { BM_Read(s, f, 0); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
    reg("touch", [f](benchmark::State& s) { BM_Touch(s, f); });
    reg("analyze_thunder", [f](benchmark::State& s) { BM_Analyze(s, f, "thunder", true); });
    reg("analyze_runtime", [f](benchmark::State& s) { BM_Analyze(s, f, "runtime", true); });
    reg("simulate_thunder", [f](benchmark::State& s) { BM_Analyze(s, f, "thunder", false); });
    reg("simulate_runtime", [f](benchmark::State& s) { BM_Analyze(s, f, "runtime", false); });
    reg("replay_requested", [f](benchmark::State& s) { BM_PriceCuda(s, f, false); });
    reg("price_cuda_caching", [f](benchmark::State& s) { BM_PriceCuda(s, f, true); });
    if (f.bytes <= kPlanMaxBytes) reg("plan", [f](benchmark::State& s) { BM_Plan(s, f); });
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
