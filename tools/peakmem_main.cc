// The `peakmem` command: a thin shell over the library (peakmem/analyze.h).
//
//   peakmem analyze TRACE [--model runtime|thunder] [--format FORMAT]
//                         [--convention auto|forward|backward|plain] [--no-scratch] [--torch-threads N]
//                         [--allocator requested|cuda-caching] [--alloc-conf CONF]
//                         [--device-memory SIZE] [--at peak|STEP] [--output FILE]
//   peakmem diff A B [--model runtime|thunder] [--convention ...] [--no-scratch]
//                    [--format text|json] [--output FILE]
//   peakmem plan TRACE [--convention ...] [--no-scratch] [--torch-threads N]
//                      [--time-budget SECONDS] [--max-simulations N] [--output PLANNED.trace]
//   peakmem plan STEP.json --recompute [--budget SIZE] [--max-simulations N] [--output PLANNED.json]
//   peakmem step STEP.json [--format text|json|html|snapshot|chrome-trace|...] [--steps N]
//                          [--zero-grad|--keep-grad] [--allocator requested|cuda-caching]
//                          [--alloc-conf CONF] [--device-memory SIZE]
//                          [--budget SIZE] [--output FILE]
//
// FORMAT is any registered report writer (peakmem/report/writer.h): text,
// json, annotated, chrome-trace, snapshot, html.
//
// Exit codes: 0 success, 1 bad input (trace error), 2 bad usage.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <fstream>
#include <iostream>
#include <sstream>

#include "peakmem/analyze.h"
#include "peakmem/frontend/recorded_step_file.h"
#include "peakmem/frontend/step_file.h"
#include "peakmem/models/recorded_step.h"
#include "peakmem/planning/planner.h"
#include "peakmem/planning/step_recompute.h"
#include "peakmem/report/report_diff.h"
#include "peakmem/models/training_step_report.h"
#include "peakmem/report/writer.h"
#include "peakmem/semantics/execution_context.h"
#include "spelling_suggestions.h"

namespace {

enum ExitCode : int { kExitOk = 0, kExitBadInput = 1, kExitUsage = 2 };

struct AnalyzeArgs {
  std::string trace;
  std::string model = "runtime";
  std::string format = "text";
  std::string convention = "auto";
  bool no_scratch = false;
  int torch_threads = 0;
  std::string device = "auto";  // --device (execution_context.h)
  std::string output;
  int threads = 0;
  int rank = 0;
  int world_size = 0;
  std::string dtensor_layout;
  peakmem::NcclOptions nccl;  // the NCCL estimate's (world size and collectives: the trace's)
  std::string allocator = "requested";
  std::string alloc_conf;  // empty: PYTORCH_CUDA_ALLOC_CONF's
  std::string device_memory;
  std::string at;  // empty: no attribution section
  std::string table = "auto";
  std::string color = "auto";
};

// The text report's table: every statement up to kFullTableUpTo of them
// ('auto'), else the kCompactRows that allocate the most.
constexpr std::size_t kFullTableUpTo = 500;
constexpr std::size_t kCompactRows = 25;

// How the text report looks: a compact table for long traces, colour on a
// terminal (not with -o, not when NO_COLOR is set, not on TERM=dumb).
peakmem::TextOptions TextOptionsFor(const AnalyzeArgs& args, std::size_t statements) {
  peakmem::TextOptions text;
  const bool compact = args.table == "compact" || (args.table == "auto" && statements > kFullTableUpTo);
  if (compact) text.table_rows = kCompactRows;
  if (args.color == "always") {
    text.colour = true;
  } else if (args.color == "auto") {
    const char* no_color = std::getenv("NO_COLOR");
    const char* term = std::getenv("TERM");
    text.colour = args.output.empty() && isatty(fileno(stdout)) && (no_color == nullptr || *no_color == 0) &&
                  !(term != nullptr && std::string_view(term) == "dumb");
  }
  return text;
}

// The allocator the report is priced with, from the flags (and
// PYTORCH_CUDA_ALLOC_CONF when --alloc-conf is not given). Throws
// std::invalid_argument (bad usage) for settings it cannot take.
peakmem::AllocatorOptions AllocatorFromArgs(const AnalyzeArgs& args) {
  std::optional<std::string_view> conf;
  if (!args.alloc_conf.empty()) conf = args.alloc_conf;
  return peakmem::MakeAllocatorOptions(args.allocator, conf, args.device_memory);
}

// The trace and the report outlive RunAnalyze on purpose: the process exits
// right after it, and freeing the millions of small objects of a big trace
// one by one would take a tenth of the run (compilers skip freeing their
// ASTs for the same reason). Held by statics, they still count as reachable
// for leak checkers.
peakmem::ParsedTrace* kept_trace = nullptr;
peakmem::Report* kept_report = nullptr;

// Runs `body` (which returns an exit code), turning errors into messages
// and exit codes: bad input 1, bad usage 2. `input` names what was read.
template <typename Body>
int Guarded(const std::string& input, Body body) {
  try {
    return body();
  } catch (const peakmem::TraceError& e) {
    std::cerr << "peakmem: error: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::invalid_argument& e) {
    std::cerr << "peakmem: error: " << e.what() << "\n";
    return kExitUsage;
  } catch (const peakmem::StepFileError& e) {
    std::cerr << "peakmem: error: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::bad_alloc&) {
    std::cerr << "peakmem: error: out of memory reading or analysing " << input << "\n";
    return kExitBadInput;
  }
}

// Hands a sink writing to `path` (stdout when empty) to `write`; returns the
// exit code (1 when the file cannot be written).
int WriteOutput(const std::string& path, const std::function<void(const peakmem::ReportSink&)>& write) {
  std::FILE* out = path.empty() ? stdout : std::fopen(path.c_str(), "wb");
  if (out == nullptr) {
    std::cerr << "peakmem: error: cannot write " << path << "\n";
    return kExitBadInput;
  }
  write([out](std::string_view chunk) { std::fwrite(chunk.data(), 1, chunk.size(), out); });
  const bool failed = std::fflush(out) != 0 || std::ferror(out) != 0;
  if (out != stdout) std::fclose(out);
  if (failed) {
    std::cerr << "peakmem: error: cannot write " << (path.empty() ? "stdout" : path) << "\n";
    return kExitBadInput;
  }
  return kExitOk;
}

peakmem::RuntimeOptions RuntimeOptionsFrom(const std::string& convention, bool no_scratch,
                                           int torch_threads, const std::string& device) {
  peakmem::RuntimeOptions options;
  peakmem::ParseCallingConvention(convention, &options.convention);  // (checked by the parser)
  options.model_scratch = !no_scratch;
  options.cpu_threads = torch_threads;
  std::string error;
  options.context = peakmem::ParseTargetDevice(device, &error).value();  // (checked by the parser)
  return options;
}

int RunAnalyze(const AnalyzeArgs& args) {
  return Guarded(args.trace, [&] {
    // Before the trace is read: bad settings fail at once.
    const peakmem::AllocatorOptions allocator = AllocatorFromArgs(args);
    peakmem::WriterOptions writing;
    if (!args.at.empty()) {
      peakmem::AttributionMoment at;
      std::string problem;
      if (!peakmem::ParseAttributionMoment(args.at, &at, &problem)) {
        throw std::invalid_argument("--at: " + problem);
      }
      writing.at = at;
    }
    peakmem::TextReadOptions text_options;
    text_options.threads = args.threads;
    text_options.fusion_subsymbols_only = true;  // the models read no others
    text_options.rank = args.rank;
    text_options.dtensor_layout = args.dtensor_layout;
    text_options.world_size = args.world_size;
    kept_trace = new peakmem::ParsedTrace(peakmem::LoadTrace(args.trace, text_options));
    // --format took only registered names.
    const peakmem::ReportWriter& writer = *peakmem::FindWriter(args.format);
    // What the writer reads: the allocation event log for some, and only as
    // many storages alive at the peak as it shows (the text report: the
    // largest few, and how many there were).
    const peakmem::ReportOptions report_options = peakmem::ReportOptionsFor(writer, {}, writing);
    kept_report = new peakmem::Report(peakmem::Analyze(
        *kept_trace, args.model, RuntimeOptionsFrom(args.convention, args.no_scratch, args.torch_threads, args.device),
        report_options, allocator));
    kept_report->nccl = peakmem::DefaultNcclEstimate(kept_report->distribution, args.nccl);
    const peakmem::Report& report = *kept_report;
    writing.text = TextOptionsFor(args, report.steps.size());
    // Before the output file is made.
    if (writer.needs_alloc_log()) peakmem::RequireAllocLog(report, writer.name());
    // The report is streamed: a 10^6-step table is never held whole.
    return WriteOutput(args.output,
                       [&](const peakmem::ReportSink& sink) { writer.Write(report, writing, sink); });
  });
}

struct DiffArgs {
  std::string a, b;
  std::string model = "runtime";
  std::string convention = "auto";
  bool no_scratch = false;
  int torch_threads = 0;
  std::string device = "auto";  // --device (execution_context.h)
  std::string format = "text";
  std::string output;
};

int RunDiff(const DiffArgs& args) {
  return Guarded(args.a + " and " + args.b, [&] {
    peakmem::ReportOptions report_options;
    report_options.alloc_log = true;
    report_options.returned_tensors = true;
    report_options.live_at_peak = false;
    const peakmem::RuntimeOptions options = RuntimeOptionsFrom(args.convention, args.no_scratch, args.torch_threads, args.device);
    const peakmem::ParsedTrace a_trace = peakmem::LoadTrace(args.a);
    const peakmem::Report a = peakmem::Analyze(a_trace, args.model, options, report_options);
    const peakmem::ParsedTrace b_trace = peakmem::LoadTrace(args.b);
    const peakmem::Report b = peakmem::Analyze(b_trace, args.model, options, report_options);
    const peakmem::ReportDiff diff = peakmem::DiffReports(a, b);
    const std::string text = args.format == "json" ? peakmem::DiffToJson(diff, args.a, args.b)
                                                   : peakmem::DiffToText(diff, args.a, args.b);
    return WriteOutput(args.output, [&](const peakmem::ReportSink& sink) { sink(text); });
  });
}

}  // namespace

// The CLI reads one trace, reports and exits, freeing little on the way, so
// glibc's malloc is set for a short batch process: one arena (the reader's
// threads share it; they allocate little, in 64 KB arena chunks), no mmap for
// big blocks and no returning freed memory to the system. Then what one step
// frees (a chunk reader's tables, the copies made joining chunks) is what the
// next one allocates, without the kernel zeroing fresh pages for it: at 10^6
// statements ~20,000 fewer page faults (~13% of them), and no munmap of the
// model's tables (docs/scaling.md). The library and the
// Python extension leave malloc as it is.
void TuneMallocForOneShot() {
  mallopt(M_ARENA_MAX, 1);
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);  // never trim (the value is taken as unsigned)
}

namespace {

// --device's check: a name ParseTargetDevice knows (its error lists them).
CLI::Validator DeviceName() {
  return CLI::Validator(
      [](const std::string& value) {
        std::string error;
        return peakmem::ParseTargetDevice(value, &error) ? std::string() : error;
      },
      "DEVICE");
}

// --model, --convention, --no-scratch, --torch-threads and --device, which analyze, diff and plan share.
void AddModelOptions(CLI::App* command, std::string* model, std::string* convention,
                     bool* no_scratch, int* torch_threads, std::string* device) {
  command
      ->add_option("-m,--model", *model,
                   "Model: 'runtime' predicts what PyTorch really allocates (requested bytes, "
                   "views, aliasing, Python reference semantics, op scratch); 'thunder' "
                   "reproduces thunder.examine.memory_calculation.get_alloc_memory exactly "
                   "(keys and quirks included)")
      ->capture_default_str();
  command
      ->add_option("--convention", *convention,
                   "Runtime model: how the caller passes arguments. 'auto' infers it (a Thunder "
                   "backward_fn(saved_for_backward, cotangents) is called with lists, as "
                   "Thunder's autograd function does; anything else is a forward whose caller "
                   "holds every argument)")
      ->check(CLI::IsMember({"auto", "forward", "backward", "plain"}))
      ->capture_default_str();
  command->add_flag("--no-scratch", *no_scratch,
                    "Runtime model: leave op scratch memory (wrapped scalars, ...) out of the peak");
  command
      ->add_option("--torch-threads", *torch_threads,
                   "Runtime model: the intra-op threads PyTorch runs the CPU kernels with "
                   "(torch.get_num_threads()); some kernels' scratch is per thread. "
                   "Default: this machine's CPUs, PyTorch's own default")
      ->check(CLI::Range(1, 1 << 16));
  command
      ->add_option("--device", *device,
                   "Runtime model: whose kernels run the trace: 'auto' each tensor's own device "
                   "(meta stands for the CPU), 'cpu', or a CUDA GPU ('cuda', 'cuda:h100', 'cuda:a100', "
                   "'cuda:l4', ...): the op scratch CUDA's kernels allocate instead of the CPU's")
      ->check(DeviceName())
      ->capture_default_str();
}

// Declares `analyze`'s options: one statement each, with its help text (the
// length is the options' number, not logic).
CLI::App* AddAnalyze(CLI::App& app, AnalyzeArgs& args) {
  std::string format_help = "Output format:";
  for (const peakmem::ReportWriter* writer : peakmem::AllWriters()) {
    format_help += fmt::format("{} '{}' ({})", writer == peakmem::AllWriters().front() ? "" : ";",
                               writer->name(), writer->description());
  }
  CLI::App* analyze = app.add_subcommand(
      "analyze", "Analyse a trace file (printed Thunder trace text, or peakmem's JSON export).");
  analyze->add_option("trace", args.trace, "Path of the trace file")->required();
  AddModelOptions(analyze, &args.model, &args.convention, &args.no_scratch, &args.torch_threads, &args.device);
  analyze
      ->add_option("-f,--format", args.format, format_help)
      ->check(CLI::IsMember(peakmem::WriterNames()))
      ->capture_default_str();
  analyze
      ->add_option("--allocator", args.allocator,
                   "Allocator the memory is priced with: 'requested' counts the storages' own "
                   "bytes; 'cuda-caching' also runs PyTorch's CUDA caching allocator over them "
                   "(allocated and reserved bytes, segments, out of memory)")
      ->check(CLI::IsMember(peakmem::AllocatorModelNames()))
      ->capture_default_str();
  analyze->add_option("--alloc-conf", args.alloc_conf,
                      "cuda-caching: allocator settings in PYTORCH_CUDA_ALLOC_CONF's syntax, e.g. "
                      "'max_split_size_mb:128,roundup_power2_divisions:4' (default: the "
                      "PYTORCH_CUDA_ALLOC_CONF environment variable)");
  analyze->add_option("--device-memory", args.device_memory,
                      "cuda-caching: the memory the device can hand out (e.g. 80GiB): the report "
                      "says whether the run fits, with the headroom, or where it runs out");
  analyze->add_option("--at", args.at,
                      "text and json: what is alive at this moment, by category (argument, "
                      "cotangent, saved, output, intermediate, scratch), by the op that made it, "
                      "and the largest storages: 'peak', or a step number (after that statement; "
                      "-1: the arguments alone)");
  analyze
      ->add_option("--table", args.table,
                   fmt::format("text: the per-step table: 'full' (every statement), 'compact' (the "
                               "{} that allocate the most, the peak's among them, and the {} "
                               "largest breakdown keys), 'auto' (full up to {} statements)",
                               kCompactRows, kCompactRows, kFullTableUpTo))
      ->check(CLI::IsMember({"auto", "full", "compact"}))
      ->capture_default_str();
  analyze
      ->add_option("--color", args.color,
                   "text: ANSI colour: 'auto' (on a terminal, without -o, unless NO_COLOR is set), "
                   "'always', 'never'")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  analyze->add_option("-o,--output", args.output, "Write the report to this file, not stdout");
  analyze
      ->add_option("--rank", args.rank,
                   "The rank of a distributed program the report is for: DTensor values count "
                   "the shard it holds (their types give the mesh and placements)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  analyze->add_option("--dtensor-layout", args.dtensor_layout,
                      "The mesh and placements of DTensor types that print none (older printers' "
                      "'DTensor cuda:0 f32[16, 16]'), as the current printer writes them after the "
                      "shape: \" mesh=DeviceMesh((4,), 'cuda', stride=(1,)), placements=(Shard(dim=0),)\"");
  analyze
      ->add_option("--world-size", args.world_size,
                   "The world size of a distributed program, where the trace does not say it (a "
                   "collective's shapes or a DTensor mesh do; given and said must agree); 0: as "
                   "the trace says")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  analyze
      ->add_option("--nccl-channels", args.nccl.channels,
                   "NCCL's estimate for a distributed trace (docs/nccl-buffers.md): its collective "
                   "channels (NCCL's INFO log says 'N coll channels')")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  analyze
      ->add_option("--gpus-per-node", args.nccl.gpus_per_node,
                   "NCCL's estimate: GPUs in a node (a larger world crosses nodes over the network)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  analyze->add_flag("--nccl-nvls", args.nccl.nvls,
                    "NCCL's estimate: NVSwitch multicast (NVLS) buffers, as on H100/H200 SXM systems");
  analyze
      ->add_option("-j,--threads", args.threads,
                   "Threads that read a big printed trace (one chunk of its body each; the "
                   "result is the same as one pass): 0 for one per CPU, 1 for none")
      ->check(CLI::Range(0, 256))
      ->capture_default_str();
  return analyze;
}

CLI::App* AddDiff(CLI::App& app, DiffArgs& args) {
  CLI::App* diff = app.add_subcommand(
      "diff",
      "Compare two traces of one program (two executors, two configurations, before and after "
      "a change) under one model: peak and final difference, the first statement where the "
      "live bytes differ, and what accounts for the difference at the peaks (by category, by "
      "op, by storage matched by name).");
  diff->add_option("a", args.a, "Path of trace A")->required();
  diff->add_option("b", args.b, "Path of trace B (differences are B - A)")->required();
  AddModelOptions(diff, &args.model, &args.convention, &args.no_scratch, &args.torch_threads, &args.device);
  diff->add_option("-f,--format", args.format, "Output format: 'text' or 'json' (docs/report.schema.json, \"diff\")")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  diff->add_option("-o,--output", args.output, "Write the comparison to this file, not stdout");
  return diff;
}

struct PlanArgs {
  std::string trace;
  std::string model = "runtime";  // (AddModelOptions' --model: only the runtime model plans)
  std::string convention = "auto";
  bool no_scratch = false;
  int torch_threads = 0;
  std::string device = "auto";  // --device (execution_context.h)
  double time_budget = 1.0;
  std::size_t max_simulations = 20000;
  std::string allocator = "requested";
  std::string alloc_conf;
  std::string output;
  bool recompute = false;
  std::string budget;  // --recompute: bytes the step should fit in
  // The reordering options given on the command line (none apply with
  // --recompute), and whether --max-simulations was.
  std::vector<std::string> reorder_options_given;
  bool max_simulations_given = false;
};

// Runs `simulate` on a step file's traces: a step the model does not cover,
// or traces that do not fit together, are bad input naming the file.
template <typename Simulate>
auto SimulatingStepFile(const std::string& file, Simulate simulate) {
  try {
    return simulate();
  } catch (const std::invalid_argument& e) {
    throw peakmem::StepFileError(file + ": " + e.what());
  } catch (const peakmem::TraceError&) {
    throw;
  } catch (const peakmem::StepFileError&) {  // names the file already
    throw;
  } catch (const std::runtime_error& e) {
    throw peakmem::StepFileError(file + ": " + e.what());
  }
}

// A size such as 80GiB for the option `name`; a bare number is refused.
std::int64_t SizeOption(const std::string& name, const std::string& text) {
  std::int64_t bytes = 0;
  std::string error;
  if (!peakmem::ParseSizeWithUnit(text, &bytes, &error)) throw std::invalid_argument(name + ": " + error);
  return bytes;
}

// A size such as 80GiB, for --budget.
std::int64_t BudgetBytes(const std::string& text) { return SizeOption("--budget", text); }

// `plan STEP.json --recompute`: writes the step file with the chosen
// values recomputed in the backward (to --output, else stdout) and a
// summary of the search to stderr.
int RunRecomputePlan(const PlanArgs& args) {
  return Guarded(args.trace, [&] {
    if (!args.reorder_options_given.empty()) {
      throw std::invalid_argument("plan --recompute: " + args.reorder_options_given.front() +
                                  " applies to reordering a trace, not to recomputation");
    }
    peakmem::RecomputeSearchOptions options;
    if (!args.budget.empty()) options.budget = BudgetBytes(args.budget);
    if (args.max_simulations_given) options.max_simulations = args.max_simulations;
    std::ifstream in(args.trace, std::ios::binary);
    if (!in) throw peakmem::StepFileError(args.trace + ": cannot read the file");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::optional<peakmem::RecordedStep> recorded;
    peakmem::StepFile step;
    try {
      recorded = peakmem::ParseRecordedStepFile(args.trace, text);
      if (!recorded) step = peakmem::ParseStepFile(args.trace, text);
    } catch (const peakmem::StepFileError& e) {
      throw peakmem::StepFileError(std::string(e.what()) +
                                   " (plan --recompute reads a step file, as peakmem.export_step writes it)");
    }
    if (recorded) {
      // A recording is one run of the step: selective checkpointing changes
      // the operators the step runs, so each candidate plan is recorded
      // again, which needs the model.
      throw peakmem::StepFileError(
          args.trace + ": a recorded eager step cannot be planned from its file (each recomputation plan changes "
                       "what the step runs, and the file holds one run): plan it in Python with "
                       "peakmem.estimate_step(..., frontend='eager', recompute=BUDGET), and write the planned "
                       "step's file with peakmem.export_step(..., frontend='eager', recompute=BUDGET)");
    }
    const peakmem::StepRecomputation plan =
        SimulatingStepFile(args.trace, [&] { return peakmem::PlanStepRecomputation(step, options); });
    const peakmem::RecomputeSearchResult& r = plan.search;
    std::string summary = fmt::format("peakmem plan: step peak {} -> {} bytes", r.peak_before, r.peak_after);
    if (r.peak_before > 0) {
      summary += fmt::format(" ({:.1f}% lower)", 100.0 * static_cast<double>(r.peak_before - r.peak_after) /
                                                     static_cast<double>(r.peak_before));
    }
    summary += fmt::format("; recomputed {} values ({}), added FLOPs {}; {} simulations{}\n", plan.names.size(),
                           fmt::join(plan.names, ", "), r.added_flops, r.simulations,
                           r.simulation_limit_reached ? " (simulation limit reached)" : "");
    if (options.budget) {
      summary += fmt::format("  budget {} bytes: {}\n", *options.budget,
                             r.peak_after <= *options.budget ? "fits" : "does not fit");
    }
    for (std::size_t i = 0; i < r.chosen.size(); ++i) {
      const peakmem::RecomputeCandidate& c = plan.pool[r.chosen[i]];
      summary += fmt::format("  {:<14} peak {} bytes, +{} FLOPs\n", c.name, r.peaks[i], c.flops);
    }
    std::cerr << summary;
    const std::string out = peakmem::WriteRecomputedStep(args.trace, text, plan.traces);
    return WriteOutput(args.output, [&](const peakmem::ReportSink& sink) { sink(out); });
  });
}

// Writes the planned trace (to --output, else stdout) and a summary of the
// search to stderr.
int RunPlan(const PlanArgs& args) {
  if (args.recompute) return RunRecomputePlan(args);
  return Guarded(args.trace, [&] {
    if (!args.budget.empty()) throw std::invalid_argument("plan: --budget applies with --recompute");
    if (args.model != "runtime") {
      throw std::invalid_argument("plan: only the runtime model judges plans (it predicts what PyTorch allocates)");
    }
    std::optional<std::string_view> conf;
    if (!args.alloc_conf.empty()) conf = args.alloc_conf;
    peakmem::PlanOptions options;
    options.allocator = peakmem::MakeAllocatorOptions(args.allocator, conf, "");
    peakmem::ParsedTrace parsed = peakmem::LoadTrace(args.trace);
    options.runtime = RuntimeOptionsFrom(args.convention, args.no_scratch, args.torch_threads, args.device);
    options.time_budget_seconds = args.time_budget;
    options.max_simulations = args.max_simulations;
    const peakmem::PlanResult plan = peakmem::PlanTrace(parsed, options);
    const std::string text = peakmem::PrintPlan(parsed, plan);
    std::string summary = fmt::format("peakmem plan: peak {} -> {} bytes", plan.original_peak_bytes,
                                      plan.planned_peak_bytes);
    if (plan.original_peak_bytes > 0) {
      summary += fmt::format(" ({:.1f}% lower)", 100.0 * static_cast<double>(plan.original_peak_bytes - plan.planned_peak_bytes) /
                                                     static_cast<double>(plan.original_peak_bytes));
    }
    summary += fmt::format("; {} simulations in {:.3f} s{}\n", plan.simulations, plan.seconds,
                           plan.time_budget_reached ? " (time budget reached)" : "");
    for (const peakmem::PlanCandidate& c : plan.baselines) {
      summary += fmt::format("  {:<14} {} bytes{}\n", c.name, c.peak_bytes, c.name == plan.start ? "  (search started here)" : "");
    }
    summary += fmt::format("  lower bound    {} bytes (no order peaks below it; the plan is {} above)\n",
                           plan.lower_bound_bytes, plan.planned_peak_bytes - plan.lower_bound_bytes);
    if (plan.priced) {
      summary += fmt::format("  {}: allocated peak {} -> {} bytes, reserved peak {} -> {} bytes\n", args.allocator,
                             plan.original_allocator.allocated_bytes_peak, plan.planned_allocator.allocated_bytes_peak,
                             plan.original_allocator.reserved_bytes_peak, plan.planned_allocator.reserved_bytes_peak);
    }
    for (const auto& [reason, count] : plan.pinned_reasons) {
      summary += fmt::format("  pinned: {} x {}\n", count, reason);
    }
    if (!plan.unchanged_reason.empty()) summary += "  order unchanged: " + plan.unchanged_reason + "\n";
    std::cerr << summary;
    return WriteOutput(args.output, [&](const peakmem::ReportSink& sink) { sink(text); });
  });
}

CLI::App* AddPlan(CLI::App& app, PlanArgs& args) {
  CLI::App* plan = app.add_subcommand(
      "plan",
      "Reorder a printed trace for a lower peak: statements move within their data dependences "
      "(in-place, random, collective and unknown ops never move across others), each value is "
      "freed after its last use, and every candidate order is judged by the runtime model. "
      "Writes the planned trace; the search's summary goes to stderr. With --recompute, on a step "
      "file (peakmem.export_step): saved tensors made by views and pointwise ops are recomputed in "
      "the backward instead, chosen greedily by the step's simulated peak (the most peak drop per "
      "added FLOP each round); when they do not meet --budget, regions too (a saved tensor and "
      "its storage's other saved views, with the statements back to what the backward has: "
      "matmuls and softmax included; named NAME+); writes the step file with both traces rewritten.");
  plan->add_option("trace", args.trace, "Path of the printed trace (with --recompute: of the step file)")->required();
  plan->add_flag("--recompute", args.recompute,
                 "Recompute saved tensors in the backward instead of reordering (the input is a step file)");
  plan->add_option("--budget", args.budget,
                   "--recompute: bytes the step should fit in (a size such as 80GiB): the search stops as "
                   "soon as it fits, recomputing regions when views and pointwise ops do not get there "
                   "(default: as low as views and pointwise ops go)");
  AddModelOptions(plan, &args.model, &args.convention, &args.no_scratch, &args.torch_threads, &args.device);
  plan->add_option("--time-budget", args.time_budget, "Seconds the search may take")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  plan->add_option("--max-simulations", args.max_simulations,
                   "Simulations the search may run (what makes a plan the same on every machine; "
                   "--recompute's default is 5000)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 40))
      ->capture_default_str();
  plan->add_option("--allocator", args.allocator,
                   "Also price the trace as given and the plan with this allocator model: "
                   "'cuda-caching' adds allocated and reserved peaks to the summary (the search "
                   "lowers requested bytes)")
      ->check(CLI::IsMember(peakmem::AllocatorModelNames()))
      ->capture_default_str();
  plan->add_option("--alloc-conf", args.alloc_conf,
                   "cuda-caching: settings in PYTORCH_CUDA_ALLOC_CONF's syntax (default: that variable's)");
  plan->add_option("-o,--output", args.output, "Write the planned trace to this file, not stdout");
  return plan;
}

struct StepArgs {
  std::string file;
  std::string format = "text";
  int steps = 0;  // 0: the file's
  bool zero_grad = false, keep_grad = false;  // neither: the file's
  std::string budget;  // empty: a GPU model's memory (the file's or --device's), else none
  std::string output;
  std::string allocator;  // empty: cuda-caching on a GPU model, else requested
  std::string alloc_conf;  // empty: PYTORCH_CUDA_ALLOC_CONF's
  std::string device_memory;
  std::string device;  // empty: the file's (execution_context.h)
  std::string context;  // empty: a GPU model's CUDA context (execution_context.h's catalog), else 0
};

// The budget's verdict on a step file's target device (the file's, or
// --device): report/budget_verdict.h's terms, as peakmem.estimate_step
// takes them (step/budget.py).
struct StepPricing {
  peakmem::AllocatorOptions allocator;
  std::optional<std::int64_t> budget;
  std::int64_t context_bytes = 0;
};

StepPricing PriceStep(const StepArgs& args, const std::string& device) {
  std::optional<std::int64_t> budget, context, capacity;
  if (!args.budget.empty()) budget = BudgetBytes(args.budget);
  if (!args.context.empty()) context = SizeOption("--context-bytes", args.context);
  if (!args.device_memory.empty()) capacity = SizeOption("--device-memory", args.device_memory);
  const peakmem::BudgetTerms terms = peakmem::ResolveBudgetTerms(device, budget, context, args.allocator, capacity);
  std::optional<std::string_view> conf;
  if (!args.alloc_conf.empty()) conf = args.alloc_conf;
  const std::string memory = terms.capacity ? std::to_string(*terms.capacity) + "B" : "";
  return {peakmem::MakeAllocatorOptions(terms.allocator, conf, memory), terms.budget, terms.context_bytes};
}

// `peakmem step`'s formats: its own text and JSON summaries, and every
// writer's other format, rendering the whole step's Report.
std::vector<std::string> StepFormats() {
  std::vector<std::string> out = {"text", "json"};
  for (const std::string& name : peakmem::WriterNames()) {
    if (name != "text" && name != "json") out.push_back(name);
  }
  return out;
}

// A step file's text (either kind: traced or recorded).
std::string ReadStepFileText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw peakmem::StepFileError(path + ": cannot read the file");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

int RunStep(const StepArgs& args) {
  return Guarded(args.file, [&] {
    const bool summary = args.format == "text" || args.format == "json";
    peakmem::TrainingStepReportOptions report;
    report.name = args.file;
    const std::string text = ReadStepFileText(args.file);
    peakmem::TrainingStepResult result;
    StepPricing pricing;
    if (std::optional<peakmem::RecordedStep> recorded = peakmem::ParseRecordedStepFile(args.file, text)) {
      if (!args.device.empty()) {
        throw peakmem::StepFileError(args.file + ": a recorded step's kernels were chosen when it was recorded "
                                     "(--device does not apply): estimate it again with "
                                     "peakmem.estimate_step(..., device='" + args.device + "')");
      }
      if (args.steps > 0 || args.zero_grad || args.keep_grad) {
        throw peakmem::StepFileError(args.file + ": a recorded step's iterations and zero_grad were fixed when it "
                                     "was recorded (--steps, --zero-grad and --keep-grad do not apply): record it "
                                     "again with peakmem.export_step(..., frontend='eager')");
      }
      report.optimizer = recorded->optimizer;
      pricing = PriceStep(args, recorded->device);
      result = SimulatingStepFile(args.file, [&] {
        return peakmem::SimulateRecordedStep(*recorded, !summary, pricing.allocator);
      });
    } else {
      peakmem::StepFile step = peakmem::ParseStepFile(args.file, text);
      if (args.steps > 0) step.spec.steps = args.steps;
      if (args.zero_grad) step.spec.zero_grad = true;
      if (args.keep_grad) step.spec.zero_grad = false;
      if (!args.device.empty()) step.spec.device = args.device;
      report.optimizer = step.optimizer;
      pricing = PriceStep(args, step.spec.device);
      result = SimulatingStepFile(args.file, [&] {
        return peakmem::SimulateTrainingStep(step.forward, step.backward,
                                             step.optimizer_first ? &*step.optimizer_first : nullptr,
                                             step.optimizer_later ? &*step.optimizer_later : nullptr, step.spec,
                                             !summary, pricing.allocator);
      });
    }
    report.budget = pricing.budget;
    report.context_bytes = pricing.context_bytes;
    if (!summary) {  // --format took only registered names
      const peakmem::ReportWriter& writer = *peakmem::FindWriter(args.format);
      return WriteOutput(args.output, [&](const peakmem::ReportSink& sink) { writer.Write(result.step, {}, sink); });
    }
    const std::string out = args.format == "json" ? peakmem::TrainingStepToJson(result, report)
                                                  : peakmem::TrainingStepToText(result, report);
    return WriteOutput(args.output, [&](const peakmem::ReportSink& sink) { sink(out); });
  });
}

CLI::App* AddStep(CLI::App& app, StepArgs& args) {
  CLI::App* step = app.add_subcommand(
      "step",
      "Simulate a whole training step from a step file (peakmem.export_step): forward, backward, "
      "gradient accumulation and the optimizer, joined with every tensor's identity. Prints the "
      "peak, the phase that holds it, and the bytes at the peak by category and by module.");
  step->add_option("step_file", args.file, "Path of the step file (JSON, docs/step-file.md)")->required();
  step->add_option("-f,--format", args.format,
                   "Output format: 'text' or 'json' (the step's summary), or any analyze format "
                   "('html', 'snapshot', 'chrome-trace', ...) of the whole step as one program: every "
                   "phase's statements in the order the step runs them, by the step's categories")
      ->check(CLI::IsMember(StepFormats()))
      ->capture_default_str();
  step->add_option("--allocator", args.allocator,
                   "Allocator the step is priced with: 'requested', or 'cuda-caching' (PyTorch's CUDA "
                   "caching allocator over the whole step's allocations: allocated and reserved bytes; "
                   "the default on a GPU model, whose verdict is its reserved bytes)")
      ->check(CLI::IsMember(peakmem::AllocatorModelNames()));
  step->add_option("--alloc-conf", args.alloc_conf,
                   "cuda-caching: settings in PYTORCH_CUDA_ALLOC_CONF's syntax (default: that variable's)");
  step->add_option("--device-memory", args.device_memory,
                   "cuda-caching: the memory the device can hand out (e.g. 80GiB): whether the step fits, "
                   "or where it runs out");
  step->add_option("--steps", args.steps, "Steps to run (default: the file's)")->check(CLI::Range(1, 1 << 20));
  CLI::Option* zero = step->add_flag("--zero-grad", args.zero_grad, "zero_grad(set_to_none=True) after each step");
  step->add_flag("--keep-grad", args.keep_grad, "Keep .grad between steps (accumulate)")->excludes(zero);
  step->add_option("--budget", args.budget,
                   "Bytes the step must fit in (a size such as 80GiB; default: a GPU model's memory)");
  step->add_option("--context-bytes", args.context,
                   "What the card holds outside the caching allocator, counted against the budget (a size "
                   "such as 600MiB; default: the GPU model's CUDA context, 0 on the CPU)");
  step->add_option("--device", args.device,
                   "Whose kernels run the traced step's op scratch: cpu, or a GPU model (cuda: a Hopper GPU, "
                   "cuda:h100, cuda:a100, cuda:l4, ...: the names ParseTargetDevice's error lists), whose memory "
                   "and CUDA context judge the budget (default: the file's, else each tensor's own device)")
      ->check(DeviceName());
  step->add_option("-o,--output", args.output, "Write the report to this file, not stdout");
  return step;
}

// Levenshtein distance (small words: the quadratic table is fine).
}  // namespace

int main(int argc, char** argv) {
  TuneMallocForOneShot();
  CLI::App app{
      "peakmem: predicts the memory a PyTorch training step will take before it runs (the\n"
      "peak, what stays held, the live bytes after every op, what holds the peak), from a step\n"
      "file (`peakmem step`; written by peakmem.export_step for an eager or Thunder step) or\n"
      "a Lightning Thunder trace (`peakmem analyze`). Python: peakmem.estimate_step."};
  app.require_subcommand(1);
  std::string format_names;  // "text|json|..."
  for (const peakmem::ReportWriter* writer : peakmem::AllWriters()) {
    format_names += (format_names.empty() ? "" : "|") + std::string(writer->name());
  }
  app.footer(
      "Usage: peakmem analyze TRACE [--model runtime|thunder] [--format " + format_names + "]\n"
      "                         [--convention auto|forward|backward|plain] [--no-scratch] [--torch-threads N]\n"
      "                         [--allocator requested|cuda-caching] [--alloc-conf CONF]\n"
      "                         [--device-memory SIZE] [--at peak|STEP] [--output FILE]\n"
      "       peakmem diff A B [--model runtime|thunder] [--format text|json] [--output FILE]\n"
      "       peakmem plan TRACE [--time-budget SECONDS] [--output PLANNED.trace]\n"
      "       peakmem plan STEP.json --recompute [--budget SIZE] [--max-simulations N] [--output PLANNED.json]\n"
      "       peakmem step STEP.json [--format text|json|html|snapshot|...] [--steps N] [--budget SIZE]\n"
      "                              [--allocator cuda-caching] [--device-memory SIZE] [--output FILE]\n"
      "Run 'peakmem COMMAND --help' (analyze, diff, plan, step) for the options.\n"
      "Exit codes: 0 success; 1 bad input (the message gives file:line:col, the line and a "
      "caret); 2 bad usage.");
  AnalyzeArgs analyze_args;
  DiffArgs diff_args;
  CLI::App* analyze = AddAnalyze(app, analyze_args);
  CLI::App* diff = AddDiff(app, diff_args);
  PlanArgs plan_args;
  CLI::App* plan = AddPlan(app, plan_args);
  StepArgs step_args;
  CLI::App* step = AddStep(app, step_args);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // The suggestion first: it is the line a user reads (CLI11's own
    // message and its "Run with --help" follow).
    if (e.get_exit_code() != 0) peakmem_cli::SuggestSpelling(app, argc, argv);
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  if (analyze->parsed()) return RunAnalyze(analyze_args);
  if (diff->parsed()) return RunDiff(diff_args);
  if (plan->parsed()) {
    for (const char* name : {"--time-budget", "--allocator", "--alloc-conf", "--convention", "--model",
                             "--no-scratch", "--torch-threads"}) {
      if (plan->get_option(name)->count() > 0) plan_args.reorder_options_given.push_back(name);
    }
    plan_args.max_simulations_given = plan->get_option("--max-simulations")->count() > 0;
    return RunPlan(plan_args);
  }
  if (step->parsed()) return RunStep(step_args);
  return kExitUsage;
}
