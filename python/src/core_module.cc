// peakmem._core: the nanobind extension. A thin skin over peakmem/analyze.h;
// the Python package (python/peakmem) re-exports what users should see.
#include <nanobind/nanobind.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstring>

#include "live_reader.h"
#include "peakmem/analyze.h"
#include "peakmem/planning/planner.h"
#include "peakmem/planning/recompute_search.h"
#include "peakmem/frontend/trace_json_writer.h"
#include "peakmem/allocators/nccl_buffers.h"
#include "peakmem/models/recorded_step.h"
#include "peakmem/models/training_step.h"
#include "peakmem/report/allocator_summary.h"
#include "peakmem/report/attribution.h"
#include "peakmem/report/nccl_summary.h"
#include "peakmem/report/writer.h"
#include "peakmem/semantics/aten_ops.h"
#include "peakmem/semantics/op_registry.h"
#include "thunder_drop_in.h"

namespace nb = nanobind;

namespace {

// allocators/nccl_buffers.h's estimate as a dict: the JSON report's nccl_estimate.
nb::object NcclToDict(const peakmem::NcclEstimate& e) {
  return nb::module_::import_("json").attr("loads")(peakmem::NcclSummaryJson(e).dump());
}


// Raises peakmem._errors.TraceError(file, line, column, message, line_text, rendered).
void RaiseTraceError(const peakmem::TraceError& e) {
  nb::object cls = nb::module_::import_("peakmem._errors").attr("TraceError");
  nb::object err = cls(e.what(), e.file(), e.location().line, e.location().column, e.message(),
                       e.line_text());
  PyErr_SetObject(cls.ptr(), err.ptr());
}

// torch_threads: torch.get_num_threads() of the process the trace runs in
// (0: this machine's CPUs), RuntimeOptions::cpu_threads.
peakmem::RuntimeOptions Options(const std::string& convention, bool scratch, int torch_threads) {
  peakmem::RuntimeOptions options;
  if (!peakmem::ParseCallingConvention(convention, &options.convention)) {
    throw std::invalid_argument("unknown calling convention '" + convention +
                                "'; expected auto, forward, backward or plain");
  }
  options.model_scratch = scratch;
  if (torch_threads < 0) {
    throw std::invalid_argument("torch_threads must be >= 0, got " + std::to_string(torch_threads));
  }
  options.cpu_threads = torch_threads;
  return options;
}

// peakmem.analyze's allocator=, alloc_conf= (None: PYTORCH_CUDA_ALLOC_CONF's)
// and device_memory= (None: unbounded).
peakmem::AllocatorOptions Allocator(const std::string& allocator,
                                    const std::optional<std::string>& alloc_conf,
                                    const std::optional<std::string>& device_memory) {
  std::optional<std::string_view> conf;
  if (alloc_conf) conf = *alloc_conf;
  return peakmem::MakeAllocatorOptions(allocator, conf, device_memory.value_or(""), "alloc_conf",
                                       "device_memory");
}

// RuntimeOptions::argument_tensors from Python: (name, external,
// storage_group, storage_bytes, strides).
using ArgumentSpec = std::tuple<std::string, bool, int, std::int64_t, std::vector<std::int64_t>>;

// Thunder's dict: key -> bytes, in order.
nb::object Breakdown(const peakmem::Report& r) {
  return peakmem_python::BreakdownDict(r.breakdown, "replace");
}

// A report row as Python sees it: it owns its text, so it stays valid after
// the Report it came from is gone (peakmem::Step views the report's memory).
struct PyStep {
  int index;
  int line;
  std::string op;
  std::string source;
  std::int64_t delta_bytes, live_bytes, peak_bytes;
};

std::vector<PyStep> Steps(const peakmem::Report& r) {
  std::vector<PyStep> out;
  out.reserve(r.steps.size());
  for (const peakmem::Step& s : r.steps) {
    out.push_back({s.index, s.line, std::string(s.op), std::string(s.source), s.delta_bytes,
                   s.live_bytes, s.peak_bytes});
  }
  return out;
}

// The Report as Python holds it. Its per-statement and per-tensor tables
// become Python objects on first read and are kept: a report never changes,
// so every later read returns the same list (or dict) at no cost, and
// `report.steps[i]` in a loop is O(1) per read instead of converting every
// row each time.
struct PyReport : peakmem::Report {
  explicit PyReport(peakmem::Report r) : peakmem::Report(std::move(r)) {}
  nb::object steps_list;         // list[Step]; null until first read
  nb::object breakdown_dict;     // dict[str, int]; null until first read
  nb::object live_at_peak_list;  // list[LiveTensor]; null until first read
  nb::object allocator_dict;     // dict (or None); null until first read
};

template <typename T, typename Make>
T Cached(nb::object& slot, Make&& make) {
  if (!slot.is_valid()) slot = make();
  return nb::borrow<T>(slot);
}

// The classes a Report is seen through.
// The rows of a report's tables.
void BindRows(nb::module_& m) {
  nb::class_<PyStep>(m, "Step", "One statement of the trace and the live bytes after it.")
      .def_ro("index", &PyStep::index)
      .def_ro("line", &PyStep::line)
      .def_ro("op", &PyStep::op)
      .def_ro("source", &PyStep::source)
      .def_ro("delta_bytes", &PyStep::delta_bytes)
      .def_ro("live_bytes", &PyStep::live_bytes)
      .def_ro("peak_bytes", &PyStep::peak_bytes)
      .def("__repr__", [](const PyStep& s) {
        return "Step(index=" + std::to_string(s.index) + ", op='" + s.op +
               "', delta_bytes=" + std::to_string(s.delta_bytes) +
               ", live_bytes=" + std::to_string(s.live_bytes) + ")";
      });

  nb::class_<peakmem::LiveTensor>(m, "LiveTensor", "A storage alive at the peak.")
      .def_ro("name", &peakmem::LiveTensor::name)
      .def_ro("bytes", &peakmem::LiveTensor::bytes)
      .def_ro("made_by", &peakmem::LiveTensor::made_by)
      .def_ro("line", &peakmem::LiveTensor::line)
      .def_ro("role", &peakmem::LiveTensor::role)
      .def("__repr__", [](const peakmem::LiveTensor& t) {
        return "LiveTensor(name='" + t.name + "', bytes=" + std::to_string(t.bytes) + ", made_by='" +
               t.made_by + "', role='" + t.role + "')";
      });

  nb::class_<peakmem::ReportPhase>(m, "ReportPhase",
                                   "A phase of a program of several traces (a training step's forward, "
                                   "backward, optimizer): statements [first, end) of its iteration.")
      .def_ro("name", &peakmem::ReportPhase::name)
      .def_ro("iteration", &peakmem::ReportPhase::iteration)
      .def_ro("first", &peakmem::ReportPhase::first)
      .def_ro("end", &peakmem::ReportPhase::end)
      .def("__repr__", [](const peakmem::ReportPhase& p) {
        return "ReportPhase(name='" + p.name + "', iteration=" + std::to_string(p.iteration) +
               ", first=" + std::to_string(p.first) + ", end=" + std::to_string(p.end) + ")";
      });
}

// Report.write: one of the registered writers' output (bytes for binary formats).
nb::object WriteReport(const PyReport& r, const std::string& format, int indent,
                       const std::optional<std::string>& at) {
  const peakmem::ReportWriter* writer = peakmem::FindWriter(format);
  if (writer == nullptr) {
    std::string names;
    for (const std::string& n : peakmem::WriterNames()) names += (names.empty() ? "" : ", ") + n;
    throw std::invalid_argument("unknown format '" + format + "'; formats: " + names);
  }
  peakmem::WriterOptions options;
  options.indent = indent;
  if (at) {
    peakmem::AttributionMoment moment;
    std::string problem;
    if (!peakmem::ParseAttributionMoment(*at, &moment, &problem)) throw std::invalid_argument(problem);
    options.at = moment;
  }
  std::string out;
  {
    nb::gil_scoped_release release;
    out = peakmem::WriteToString(*writer, r, options);
  }
  if (format == "snapshot") return nb::bytes(out.data(), out.size());
  return nb::str(out.data(), out.size());
}

// A Report's renderings (every writer's format) and what the views read.
void BindRenderings(nb::class_<PyReport>& report) {
  report
      .def("to_json", [](const PyReport& r, int indent) { return peakmem::ReportToJson(r, indent); },
           nb::arg("indent") = 2)
      .def("to_text", [](const PyReport& r) { return peakmem::ReportToText(r); })
      .def("write", &WriteReport, nb::arg("format"), nb::arg("indent") = 2, nb::arg("at") = nb::none(),
           "The report in one of the CLI's --format formats ('text', 'json', 'html', 'annotated', "
           "'chrome-trace': str; 'snapshot': bytes). `at`: 'peak' or a step, for text and json: "
           "what is alive then (as --at). Formats that read the allocation events need a report "
           "made with them (peakmem.analyze keeps them).")
      .def_prop_ro(
          "has_events", [](const PyReport& r) { return r.alloc_log != nullptr; },
          "Whether the report keeps the allocation event stream (what html, snapshot, "
          "chrome-trace, attribution and live_by_category read)")
      .def(
          "live_by_category",
          [](const PyReport& r) {
            const auto live = peakmem::LiveByCategory(r);
            const auto names = peakmem::CategoryNames(r);
            nb::dict out;
            for (std::size_t c = 0; c < names.size(); ++c) {
              std::vector<std::int64_t> series;
              series.reserve(live.size());
              for (const auto& point : live) series.push_back(point[c]);
              out[nb::str(names[c].data(), names[c].size())] =
                  nb::cast(series);
            }
            return out;
          },
          "dict: category -> live bytes at every point ([0] the arguments alone, [i + 1] after "
          "statement i), categories as in the html report")
      .def(
          "storage_categories",
          [](const PyReport& r) {
            std::vector<std::string> out;
            const auto names = peakmem::CategoryNames(r);
            for (const std::uint8_t c : peakmem::StorageCategories(r)) {
              out.emplace_back(names[c]);
            }
            return out;
          },
          "The category of each storage of the run, by storage id (the ids returned_tensors "
          "gives)")
      .def(
          "live_by_group",
          [](const PyReport& r, const std::vector<std::uint32_t>& groups, std::size_t count) {
            return peakmem::LiveByGroup(r, groups, count);
          },
          nb::arg("groups"), nb::arg("count"),
          "The live bytes of any grouping of the storages: groups[s] is storage s's group "
          "(< count); returns a list per group of the bytes live at every point");
}

// (Every Report attribute's binding in one place: as long as the class.)
void BindReport(nb::module_& m) {
  BindRows(m);
  auto report = nb::class_<PyReport>(m, "Report", "The result of analysing a trace with one model.");
  BindRenderings(report);
  report.def_ro("model", &PyReport::model)
      .def_ro("trace_name", &PyReport::trace_name)
      .def_ro("phases", &PyReport::phases,
              "A training step's phases in the order it runs them (empty for a trace)")
      .def_ro("peak_bytes", &PyReport::peak_bytes)
      .def_ro("final_bytes", &PyReport::final_bytes)
      .def_ro("peak_step", &PyReport::peak_step)
      .def_prop_ro(
          "tensor_peak_bytes",
          [](const PyReport& r) -> nb::object {
            if (r.tensor_peak_bytes < 0) return nb::none();
            return nb::int_(r.tensor_peak_bytes);
          },
          "Runtime model: the peak without op scratch memory (None for the thunder model)")
      .def_ro("convention", &PyReport::convention)
      .def_prop_ro(
          "distributed",
          [](const PyReport& r) -> nb::object {
            const peakmem::Distribution& d = r.distribution;
            if (!d.distributed) return nb::none();
            nb::dict out;
            out["rank"] = d.rank;
            out["world_size"] = d.world_size > 0 ? nb::object(nb::int_(d.world_size)) : nb::none();
            out["world_size_from"] = d.world_size_from;
            return out;
          },
          "For a trace with a collective or a DTensor value: {'rank', 'world_size' (None when "
          "the trace does not say), 'world_size_from'}; None otherwise")
      .def_prop_ro(
          "nccl_estimate",
          [](const PyReport& r) -> nb::object {
            if (!r.nccl) return nb::none();
            return NcclToDict(*r.nccl);
          },
          "For a distributed trace of known world size with collectives: NCCL's own device buffers, "
          "an estimate apart from every other figure (allocators/nccl_buffers.h; docs/nccl-buffers.md), "
          "with the defaults (16 channels, 8 GPUs a node); peakmem.nccl_estimate takes other options")
      .def_prop_ro(
          "live_at_peak",
          [](PyReport& r) {
            return Cached<nb::typed<nb::list, peakmem::LiveTensor>>(
                r.live_at_peak_list, [&] { return nb::cast(r.live_at_peak, nb::rv_policy::copy); });
          },
          "The storages alive at the peak, largest first (made once, then the same list)")
      .def_prop_ro(
          "breakdown",
          [](PyReport& r) {
            return Cached<nb::typed<nb::dict, nb::str, std::int64_t>>(
                r.breakdown_dict, [&] { return Breakdown(r); });
          },
          "Ordered dict: key -> bytes (Thunder's keys; made once, then the same dict)")
      .def_prop_ro(
          "steps",
          [](PyReport& r) {
            return Cached<nb::typed<nb::list, PyStep>>(r.steps_list,
                                                       [&] { return nb::cast(Steps(r)); });
          },
          "One Step per statement (empty when steps were not asked for; made once, then the "
          "same list)")
      .def_prop_ro(
          "allocator",
          [](PyReport& r) {
            return Cached<nb::object>(r.allocator_dict, [&]() -> nb::object {
              if (r.allocator == nullptr) return nb::none();
              return nb::module_::import_("json").attr("loads")(
                  peakmem::AllocatorSummaryJson(r).dump());
            });
          },
          "The allocator model's figures (allocator='cuda-caching'): allocated and reserved "
          "bytes at the peak and the end, segments, whether it fits device_memory, and where it "
          "runs out; None for requested bytes")
      .def_prop_ro(
          "returned_tensors",
          [](const PyReport& r) {
            nb::list out;
            for (const peakmem::ReturnedTensor& t : r.returned_tensors) {
              out.append(nb::make_tuple(t.name, t.storage, t.storage_bytes, t.strides,
                                        peakmem::StorageRoleName(t.role)));
            }
            return out;
          },
          "(name, storage, storage_bytes, strides, role) of each tensor the trace returns "
          "(runtime model, when asked for: returned_tensors=True)")
      .def_ro("diagnostics", &PyReport::diagnostics)
      .def("__repr__", [](const PyReport& r) {
        return "Report(model='" + r.model + "', peak_bytes=" + std::to_string(r.peak_bytes) +
               ", final_bytes=" + std::to_string(r.final_bytes) + ")";
      });
}

// What a run keeps for the writers and attribution when `events`: the
// allocation event stream and the returned tensors (their category).
peakmem::ReportOptions WithEvents(bool events) {
  peakmem::ReportOptions options;
  options.alloc_log = events;
  options.returned_tensors = events;
  return options;
}

// Reading for rank `rank` (DTensor types' shards, ir/dtensor_layout.h;
// `dtensor_layout` for those that print none).
peakmem::TextReadOptions RankRead(int rank, int world_size, const std::string& dtensor_layout = "") {
  if (rank < 0) throw std::invalid_argument("rank must be >= 0, got " + std::to_string(rank));
  if (world_size < 0)
    throw std::invalid_argument("world_size must be >= 0, got " + std::to_string(world_size));
  peakmem::TextReadOptions options;
  options.rank = rank;
  options.world_size = world_size;
  options.dtensor_layout = dtensor_layout;
  return options;
}

// The analyze_* functions peakmem.analyze calls (python/peakmem/api.py).
void BindAnalyze(nb::module_& m) {
  m.def(
      "analyze_text",
      [](const std::string& text, const std::string& name, const std::string& model,
         const std::string& convention, bool scratch, const std::string& allocator,
         const std::optional<std::string>& alloc_conf,
         const std::optional<std::string>& device_memory, bool events, int rank, int world_size, int torch_threads,
         const std::string& dtensor_layout) {
        const peakmem::RuntimeOptions options = Options(convention, scratch, torch_threads);
        const peakmem::AllocatorOptions priced = Allocator(allocator, alloc_conf, device_memory);
        nb::gil_scoped_release release;
        return PyReport(
            peakmem::Analyze(peakmem::ParseTrace(name, text, RankRead(rank, world_size, dtensor_layout)), model,
                             options, WithEvents(events), priced));
      },
      nb::arg("text"), nb::arg("name") = "<string>", nb::arg("model") = "runtime",
      nb::arg("convention") = "auto", nb::arg("scratch") = true, nb::arg("allocator") = "requested",
      nb::arg("alloc_conf") = nb::none(), nb::arg("device_memory") = nb::none(),
      nb::arg("events") = false, nb::arg("rank") = 0, nb::arg("world_size") = 0,
      nb::arg("torch_threads") = 0, nb::arg("dtensor_layout") = "",
      "Analyse printed trace text (or peakmem's JSON export).");

  m.def(
      "analyze_live",
      [](nb::handle trace, const std::string& model, const std::string& convention, bool scratch,
         const std::string& allocator, const std::optional<std::string>& alloc_conf,
         const std::optional<std::string>& device_memory, bool steps,
         const std::vector<ArgumentSpec>& argument_tensors, bool returned_tensors, bool events,
         int rank, int world_size, int torch_threads, const std::string& dtensor_layout) {
        peakmem::RuntimeOptions options = Options(convention, scratch, torch_threads);
        for (const ArgumentSpec& a : argument_tensors) {
          options.argument_tensors.push_back({std::get<0>(a), std::get<1>(a), std::get<2>(a),
                                              std::get<3>(a), std::get<4>(a)});
        }
        const peakmem::AllocatorOptions priced = Allocator(allocator, alloc_conf, device_memory);
        peakmem::ReportOptions report_options = WithEvents(events);
        report_options.steps = steps;
        report_options.returned_tensors = returned_tensors || events;
        // The thunder model without steps needs only the lean form.
        peakmem_python::LiveReadOptions read_options;
        read_options.lean = model == "thunder" && !steps;
        read_options.rank = RankRead(rank, world_size).rank;  // checks both
        read_options.dtensor_layout = dtensor_layout;
        peakmem::ParsedTrace parsed = peakmem_python::ReadLiveTrace(trace, read_options);
        parsed.rank = rank;
        parsed.world_size = world_size;
        nb::gil_scoped_release release;
        return PyReport(peakmem::Analyze(parsed, model, options, report_options, priced));
      },
      nb::arg("trace"), nb::arg("model") = "runtime", nb::arg("convention") = "auto",
      nb::arg("scratch") = true, nb::arg("allocator") = "requested",
      nb::arg("alloc_conf") = nb::none(), nb::arg("device_memory") = nb::none(),
      nb::arg("steps") = true, nb::arg("argument_tensors") = std::vector<ArgumentSpec>{},
      nb::arg("returned_tensors") = false, nb::arg("events") = false, nb::arg("rank") = 0,
      nb::arg("world_size") = 0, nb::arg("torch_threads") = 0, nb::arg("dtensor_layout") = "",
      "Analyse a live Thunder TraceCtx (read in C++). steps=False skips the per-step table; "
      "argument_tensors: (name, external, storage_group, storage_bytes, strides) per argument "
      "tensor whose identity the caller knows (peakmem.step); returned_tensors: fill "
      "Report.returned_tensors; events: keep the allocation event stream (WithEvents).");

  m.def(
      "analyze_file",
      [](const std::string& path, const std::string& model, const std::string& convention,
         bool scratch, const std::string& allocator, const std::optional<std::string>& alloc_conf,
         const std::optional<std::string>& device_memory, bool events, int rank, int world_size, int torch_threads,
         const std::string& dtensor_layout) {
        const peakmem::RuntimeOptions options = Options(convention, scratch, torch_threads);
        const peakmem::AllocatorOptions priced = Allocator(allocator, alloc_conf, device_memory);
        nb::gil_scoped_release release;
        return PyReport(peakmem::Analyze(peakmem::LoadTrace(path, RankRead(rank, world_size, dtensor_layout)),
                                         model, options, WithEvents(events), priced));
      },
      nb::arg("path"), nb::arg("model") = "runtime", nb::arg("convention") = "auto",
      nb::arg("scratch") = true, nb::arg("allocator") = "requested",
      nb::arg("alloc_conf") = nb::none(), nb::arg("device_memory") = nb::none(),
      nb::arg("events") = false, nb::arg("rank") = 0, nb::arg("world_size") = 0,
      nb::arg("torch_threads") = 0, nb::arg("dtensor_layout") = "",
      "Analyse a trace file (text or JSON). rank: the rank DTensor types are read for; dtensor_layout: "
      "the layout of those that print none.");
}

// The planner (peakmem/planning/planner.h) for peakmem.plan
// (python/peakmem/planning.py): on printed text (the result carries the
// planned text) or a live TraceCtx (the result says which statement runs
// where, as bound-symbol indices, and which names are freed after each: the
// Python side rebuilds the TraceCtx from them).
nb::dict PlanToDict(const peakmem::ParsedTrace& parsed, const peakmem::PlanResult& plan, bool live) {
  nb::dict d;
  d["original_peak_bytes"] = plan.original_peak_bytes;
  d["planned_peak_bytes"] = plan.planned_peak_bytes;
  d["planned_final_bytes"] = plan.planned_final_bytes;
  nb::list baselines;
  for (const peakmem::PlanCandidate& c : plan.baselines) baselines.append(nb::make_tuple(c.name, c.peak_bytes));
  d["baselines"] = baselines;
  d["start"] = plan.start;
  d["simulations"] = plan.simulations;
  d["moves_kept"] = plan.moves_kept;
  d["seconds"] = plan.seconds;
  d["time_budget_reached"] = plan.time_budget_reached;
  d["unchanged_reason"] = plan.unchanged_reason;
  d["pinned"] = plan.graph.pinned_count;
  d["statements"] = plan.graph.size();
  d["lower_bound_bytes"] = plan.lower_bound_bytes;
  nb::list pinned_reasons;
  for (const auto& [reason, count] : plan.pinned_reasons) pinned_reasons.append(nb::make_tuple(reason, count));
  d["pinned_reasons"] = pinned_reasons;
  if (plan.priced) {
    d["allocated_peak_bytes"] =
        nb::make_tuple(plan.original_allocator.allocated_bytes_peak, plan.planned_allocator.allocated_bytes_peak);
    d["reserved_peak_bytes"] =
        nb::make_tuple(plan.original_allocator.reserved_bytes_peak, plan.planned_allocator.reserved_bytes_peak);
  }
  const peakmem::PlanSteps steps = peakmem::StepsOf(plan);
  auto names = [&](const std::vector<peakmem::ValueId>& values) {
    nb::list out;
    for (peakmem::ValueId v : values) out.append(std::string(parsed.trace.value(v).name));
    return out;
  };
  nb::list order, frees;
  for (std::size_t i = 0; i < steps.statements.size(); ++i) {
    const peakmem::Statement& s = plan.original_statements[steps.statements[i]];
    // Live traces: source_line is the bound symbol's 1-based index.
    order.append(live ? s.source_line - 1 : static_cast<int>(steps.statements[i]));
    frees.append(names(steps.frees_after[i]));
  }
  d["order"] = order;
  d["frees_after"] = frees;
  d["frees_before_first"] = names(steps.frees_before_first);
  if (!live) d["text"] = peakmem::PrintPlan(parsed, plan);
  return d;
}

// peakmem.plan's options, the planner's run (without the GIL) and its dict.
nb::dict RunPlan(peakmem::ParsedTrace parsed, bool live, const std::string& convention, bool scratch,
                 int torch_threads, double time_budget, std::size_t max_simulations, const std::string& allocator,
                 const std::optional<std::string>& alloc_conf) {
  peakmem::PlanOptions options;
  options.runtime = Options(convention, scratch, torch_threads);
  options.allocator = Allocator(allocator, alloc_conf, std::nullopt);
  options.time_budget_seconds = time_budget;
  options.max_simulations = max_simulations;
  peakmem::PlanResult plan;
  {
    nb::gil_scoped_release release;
    plan = peakmem::PlanTrace(parsed, options);
  }
  return PlanToDict(parsed, plan, live);
}

void BindPlan(nb::module_& m) {
  m.def(
      "plan_text",
      [](const std::string& text, const std::string& name, const std::string& convention, bool scratch,
         int torch_threads, double time_budget, std::size_t max_simulations, const std::string& allocator,
         const std::optional<std::string>& alloc_conf) {
        return RunPlan(peakmem::ParseTrace(name, text), false, convention, scratch, torch_threads, time_budget,
                       max_simulations, allocator, alloc_conf);
      },
      nb::arg("text"), nb::arg("name") = "<string>", nb::arg("convention") = "auto", nb::arg("scratch") = true,
      nb::arg("torch_threads") = 0, nb::arg("time_budget") = 1.0, nb::arg("max_simulations") = 20000,
      nb::arg("allocator") = "requested", nb::arg("alloc_conf") = nb::none(),
      "Plan printed trace text for a lower peak (peakmem/planning/planner.h).");
  m.def(
      "plan_live",
      [](nb::handle trace, const std::string& convention, bool scratch, int torch_threads, double time_budget,
         std::size_t max_simulations, const std::string& allocator, const std::optional<std::string>& alloc_conf) {
        return RunPlan(peakmem_python::ReadLiveTrace(trace, {}), true, convention, scratch, torch_threads,
                       time_budget, max_simulations, allocator, alloc_conf);
      },
      nb::arg("trace"), nb::arg("convention") = "auto", nb::arg("scratch") = true, nb::arg("torch_threads") = 0,
      nb::arg("time_budget") = 1.0, nb::arg("max_simulations") = 20000, nb::arg("allocator") = "requested",
      nb::arg("alloc_conf") = nb::none(),
      "Plan a live Thunder TraceCtx for a lower peak: the order as bound-symbol indices.");
}

// A trace given as printed text or as a live TraceCtx.
// A live TraceCtx or printed text, read for `rank` of `world_size` (0: as
// the trace says): the DTensor shards that rank holds.
peakmem::ParsedTrace AnyTrace(nb::handle trace, const std::string& name, int rank = 0, int world_size = 0) {
  const peakmem::TextReadOptions text_options = RankRead(rank, world_size);
  peakmem::ParsedTrace parsed;
  if (nb::isinstance<nb::str>(trace)) {
    parsed = peakmem::ParseTrace(name, nb::cast<std::string>(trace), text_options);
  } else {
    peakmem_python::LiveReadOptions options;
    options.rank = text_options.rank;
    parsed = peakmem_python::ReadLiveTrace(trace, options);
  }
  parsed.rank = rank;
  parsed.world_size = world_size;
  return parsed;
}

template <typename T>
T Field(const nb::dict& spec, const char* key, T fallback) {
  return spec.contains(key) ? nb::cast<T>(spec[key]) : fallback;
}

// TrainingStepSpec from peakmem.step's dict (its keys are the struct's fields).
// simulate_step's spec keys: TrainingStepSpec's fields, the rank the
// traces are read as, and what Python keeps beside them (a recomputation's
// choice, which the simulation does not read).
constexpr std::string_view kStepSpecKeys[] = {
    "saved",      "outputs",         "flat_args",         "grads",         "cotangents",       "cotangent_bytes",
    "parameter_bytes", "input_bytes", "trainable_bytes",  "optimizer_state", "optimizer_name", "steps",
    "zero_grad",  "torch_threads",   "value_modules",     "optimizer_modules", "held",          "input_storages",
    "rank",       "world_size",      "recomputation"};

peakmem::TrainingStepSpec StepSpec(const nb::dict& d) {
  for (const auto& [key, value] : d) {
    const std::string name = nb::cast<std::string>(key);
    if (std::find(std::begin(kStepSpecKeys), std::end(kStepSpecKeys), name) == std::end(kStepSpecKeys)) {
      throw std::invalid_argument("the step spec has an unknown key '" + name + "'");
    }
  }
  using Names = std::vector<std::string>;
  using NameMap = std::map<std::string, std::string>;
  peakmem::TrainingStepSpec spec;
  spec.saved = Field(d, "saved", Names{});
  spec.outputs = Field(d, "outputs", Names{});
  spec.flat_args = Field(d, "flat_args", Names{});
  spec.grads = Field(d, "grads", Names{});
  spec.cotangents = Field(d, "cotangents", Names{});
  spec.cotangent_bytes = Field<std::int64_t>(d, "cotangent_bytes", 0);
  spec.parameter_bytes = Field<std::int64_t>(d, "parameter_bytes", 0);
  spec.input_bytes = Field<std::int64_t>(d, "input_bytes", 0);
  spec.trainable_bytes = Field<std::int64_t>(d, "trainable_bytes", -1);
  spec.optimizer_state = Field(d, "optimizer_state", Names{});
  spec.optimizer_name = Field(d, "optimizer_name", std::string());
  spec.steps = Field(d, "steps", 1);
  spec.zero_grad = Field(d, "zero_grad", true);
  spec.cpu_threads = Field(d, "torch_threads", 0);
  for (const auto& [k, v] : Field(d, "value_modules", NameMap{})) spec.value_modules.emplace(k, v);
  for (const auto& [k, v] : Field(d, "optimizer_modules", NameMap{})) spec.optimizer_modules.emplace(k, v);
  using Held = std::vector<std::tuple<std::string, std::int64_t, bool>>;
  for (const auto& [module, bytes, trainable] : Field(d, "held", Held{})) spec.held.push_back({module, bytes, trainable});
  spec.input_storages = Field(d, "input_storages", std::vector<std::int64_t>{});
  return spec;
}

nb::dict StepToDict(peakmem::TrainingStepResult r) {
  nb::dict d;
  d["peak_bytes"] = r.peak_bytes;
  d["final_bytes"] = r.final_bytes;
  d["phase_at_peak"] = r.phase_at_peak;
  d["step_at_peak"] = r.step_at_peak;
  nb::dict categories, modules;
  for (const auto& [k, v] : r.by_category) categories[k.c_str()] = v;
  for (const auto& [k, v] : r.by_module) modules[k.c_str()] = v;
  d["by_category"] = categories;
  d["by_module"] = modules;
  nb::list phases;
  for (const peakmem::TrainingStepPhase& p : r.phases) {
    phases.append(nb::make_tuple(p.phase, p.step, p.program, p.around, p.first, p.end));
  }
  d["phases"] = phases;
  d["grad_bytes"] = r.grad_bytes;
  d["step"] = PyReport(std::move(r.step));
  d["forward"] = PyReport(std::move(r.forward));
  d["backward"] = PyReport(std::move(r.backward));
  d["optimizer_first"] = r.optimizer_first ? nb::cast(PyReport(std::move(*r.optimizer_first))) : nb::none();
  d["optimizer_later"] = r.optimizer_later ? nb::cast(PyReport(std::move(*r.optimizer_later))) : nb::none();
  return d;
}

// A recorded step from Python lists (python/peakmem/eager_step.py writes
// them): storages (bytes, name, category, module, device, scratch),
// statements (op, source, events), phases (name, iteration, first, end).
peakmem::RecordedStep MakeRecordedStep(
    const std::vector<std::tuple<std::int64_t, std::string, int, std::string, std::string, bool>>& storages,
    const std::vector<std::int64_t>& held,
    const std::vector<std::tuple<std::string, std::string, std::vector<std::int64_t>>>& statements,
    const std::vector<std::tuple<std::string, int, std::int32_t, std::int32_t>>& phases,
    const std::vector<std::string>& diagnostics) {
  peakmem::RecordedStep step;
  step.diagnostics = diagnostics;
  step.storages.reserve(storages.size());
  for (const auto& [bytes, name, category, module, device, scratch] : storages) {
    if (category < 0 || category > 255) throw std::invalid_argument("a recorded storage's category is out of range");
    step.storages.push_back({bytes, name, static_cast<std::uint8_t>(category), module, device, scratch});
  }
  step.held = held;
  step.statements.reserve(statements.size());
  for (const auto& [op, source, events] : statements) step.statements.push_back({op, source, events});
  for (const auto& [name, iteration, first, end] : phases) step.phases.push_back({name, iteration, first, end});
  return step;
}

// One (name, value) of aten_scratch's arguments.
peakmem::AtenArgument AtenArgumentOf(const nb::tuple& item, const std::string& op) {
  peakmem::AtenArgument a;
  a.name = nb::cast<std::string>(item[0]);
  nb::handle v = item[1];
  if (nb::isinstance<nb::bool_>(v)) {
    a.kind = peakmem::AtenArgument::Kind::kNumber;
    a.number = peakmem::NumberKind::kBool;
    a.integer = nb::cast<bool>(v);
  } else if (nb::isinstance<nb::int_>(v)) {
    a.kind = peakmem::AtenArgument::Kind::kNumber;
    a.number = peakmem::NumberKind::kInt;
    a.integer = nb::cast<std::int64_t>(v);
  } else if (nb::isinstance<nb::float_>(v)) {
    a.kind = peakmem::AtenArgument::Kind::kNumber;
    a.number = peakmem::NumberKind::kFloat;
  } else if (PyComplex_Check(v.ptr())) {
    a.kind = peakmem::AtenArgument::Kind::kNumber;
    a.number = peakmem::NumberKind::kComplex;
  } else if (nb::isinstance<nb::list>(v)) {
    a.kind = peakmem::AtenArgument::Kind::kInts;
    a.ints = nb::cast<std::vector<std::int64_t>>(v);
  } else if (nb::isinstance<nb::str>(v)) {  // a dtype, by its short name
    a.dtype = peakmem::FindDType(nb::cast<std::string>(v));
  } else if (nb::isinstance<nb::tuple>(v)) {
    const nb::tuple t = nb::cast<nb::tuple>(v);
    const auto dtype = nb::cast<std::string>(t[1]);
    const auto shape = nb::cast<std::vector<std::int64_t>>(t[2]);
    const auto strides = nb::cast<std::vector<std::int64_t>>(t[3]);
    peakmem::TypeStringError error;
    std::optional<peakmem::ValueType> type =
        peakmem::MakeTensorType("cpu", dtype, peakmem::Dims(shape.begin(), shape.end()), false, &error);
    if (!type) throw std::invalid_argument(op + ": argument " + a.name + ": " + error.message);
    a.kind = peakmem::AtenArgument::Kind::kTensor;
    a.type = std::move(*type);
    a.strides = peakmem::Dims(strides.begin(), strides.end());
    a.wrapped = nb::cast<bool>(t[4]);
    if (a.wrapped) {
      const std::string_view d = a.type.dtype->short_name;
      a.number = d == "b8" ? peakmem::NumberKind::kBool
                 : d[0] == 'c' ? peakmem::NumberKind::kComplex
                 : d[0] == 'f' || d == "bf16" ? peakmem::NumberKind::kFloat
                                              : peakmem::NumberKind::kInt;
    }
  }
  return a;
}

void BindStep(nb::module_& m) {
  m.def(
      "simulate_recorded_step",
      [](const std::vector<std::tuple<std::int64_t, std::string, int, std::string, std::string, bool>>& storages,
         const std::vector<std::int64_t>& held,
         const std::vector<std::tuple<std::string, std::string, std::vector<std::int64_t>>>& statements,
         const std::vector<std::tuple<std::string, int, std::int32_t, std::int32_t>>& phases,
         const std::vector<std::string>& diagnostics, bool events, const std::string& allocator,
         const std::optional<std::string>& alloc_conf, const std::optional<std::string>& device_memory) {
        const peakmem::AllocatorOptions priced = Allocator(allocator, alloc_conf, device_memory);
        const peakmem::RecordedStep step = MakeRecordedStep(storages, held, statements, phases, diagnostics);
        peakmem::TrainingStepResult result;
        {
          nb::gil_scoped_release release;
          result = peakmem::SimulateRecordedStep(step, events, priced);
        }
        return StepToDict(std::move(result));
      },
      nb::arg("storages"), nb::arg("held"), nb::arg("statements"), nb::arg("phases"),
      nb::arg("diagnostics") = std::vector<std::string>(), nb::arg("events") = false,
      nb::arg("allocator") = "requested", nb::arg("alloc_conf") = nb::none(), nb::arg("device_memory") = nb::none(),
      "A step recorded as it ran (peakmem/models/recorded_step.h), as simulate_step's dict.");

  m.def(
      "aten_scratch",
      [](const std::string& name, const nb::list& arguments, int threads) {
        std::vector<peakmem::AtenArgument> args;
        args.reserve(arguments.size());
        for (nb::handle item : arguments) args.push_back(AtenArgumentOf(nb::cast<nb::tuple>(item), name));
        std::string why_not;
        const peakmem::ScratchEstimate s = peakmem::EstimateAtenScratch(name, args, threads, &why_not);
        return nb::make_tuple(s.before_outputs, s.with_outputs, why_not, peakmem::FindAtenOp(name) != nullptr);
      },
      nb::arg("name"), nb::arg("arguments"), nb::arg("threads"),
      "The registry's scratch of one ATen call on the CPU (peakmem/semantics/aten_ops.h). arguments: "
      "(name, value) in schema order, value a bool, int, float or complex, a list of ints, "
      "('tensor', dtype short name, shape, strides, wrapped), or None for anything else. Returns "
      "(before_outputs, with_outputs, why_not, known): why_not is non-empty when the op's rule does not "
      "cover the call (nothing is counted for it); known is whether the registry has the op at all.");

  m.def(
      "simulate_step",
      [](nb::handle forward, nb::handle backward, const std::optional<std::string>& optimizer_first,
         const std::optional<std::string>& optimizer_later, const nb::dict& spec_dict, bool events,
         const std::string& allocator, const std::optional<std::string>& alloc_conf,
         const std::optional<std::string>& device_memory) {
        const peakmem::AllocatorOptions priced = Allocator(allocator, alloc_conf, device_memory);
        const peakmem::TrainingStepSpec spec = StepSpec(spec_dict);
        // DTensor values are read for the rank the step runs as.
        const int rank = Field(spec_dict, "rank", 0), world_size = Field(spec_dict, "world_size", 0);
        const peakmem::ParsedTrace fw = AnyTrace(forward, "<forward>", rank, world_size);
        const peakmem::ParsedTrace bw = AnyTrace(backward, "<backward>", rank, world_size);
        const std::string opt_name = "<torch.optim." + spec.optimizer_name + ".step>";
        std::optional<peakmem::ParsedTrace> first, later;
        if (optimizer_first) first = peakmem::ParseTrace(opt_name, *optimizer_first);
        if (optimizer_later) later = peakmem::ParseTrace(opt_name, *optimizer_later);
        peakmem::TrainingStepResult result;
        {
          nb::gil_scoped_release release;
          result = peakmem::SimulateTrainingStep(fw, bw, first ? &*first : nullptr, later ? &*later : nullptr,
                                                 spec, events, priced);
        }
        return StepToDict(std::move(result));
      },
      nb::arg("forward"), nb::arg("backward"), nb::arg("optimizer_first") = nb::none(),
      nb::arg("optimizer_later") = nb::none(), nb::arg("spec") = nb::dict(), nb::arg("events") = false,
      nb::arg("allocator") = "requested", nb::arg("alloc_conf") = nb::none(), nb::arg("device_memory") = nb::none(),
      "One training step (peakmem/models/training_step.h): the forward and backward as live "
      "TraceCtx or printed text, the optimizer's step() programs as text, the spec as a dict of "
      "TrainingStepSpec's fields (held: (module, bytes, trainable) tuples). The result's 'step' is "
      "the whole step's Report (its stream priced with `allocator`, as analyze prices a trace's).");
}

}  // namespace

void BindRecompute(nb::module_& m);  // recompute_bindings.cc

NB_MODULE(_core, m) {
  m.doc() = "peakmem's C++ engine";
  BindRecompute(m);

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const peakmem::TraceError& e) {
      RaiseTraceError(e);
    }
  });

  BindReport(m);
  BindAnalyze(m);
  BindPlan(m);
  BindStep(m);

  m.def("available_models", &peakmem::AvailableModels);

  m.def(
      "nccl_estimate",
      [](int world_size, const std::vector<std::string>& collectives, int channels, int gpus_per_node,
         bool nvls, int communicators, std::int64_t simple_bytes, std::int64_t ll_bytes, std::int64_t ll128_bytes,
         bool cumem) {
        peakmem::NcclOptions o;
        o.world_size = world_size;
        o.collectives = collectives;
        o.channels = channels;
        o.gpus_per_node = gpus_per_node;
        o.nvls = nvls;
        o.communicators = communicators;
        o.simple_bytes = simple_bytes;
        o.ll_bytes = ll_bytes;
        o.ll128_bytes = ll128_bytes;
        o.cumem = cumem;
        return NcclToDict(peakmem::EstimateNcclBuffers(o));
      },
      nb::arg("world_size"), nb::arg("collectives"), nb::arg("channels") = 16, nb::arg("gpus_per_node") = 8,
      nb::arg("nvls") = false, nb::arg("communicators") = 1, nb::arg("simple_bytes") = std::int64_t{4} << 20,
      nb::arg("ll_bytes") = std::int64_t{512} << 10, nb::arg("ll128_bytes") = 4915200, nb::arg("cumem") = true,
      "NCCL's own device buffers for one rank (allocators/nccl_buffers.h): an estimate, apart from "
      "PyTorch's allocator. collectives: 'all_reduce', 'all_gather', 'reduce_scatter', 'broadcast'.");
  m.def("nccl_collective_of", &peakmem::NcclCollectiveOf,
        "The NCCL collective a trace op runs ('' for none)");

  m.def(
      "op_rule",
      [](const std::string& symbol) -> std::optional<std::string> {
        const peakmem::OpInfo* op = peakmem::FindOp(symbol);
        if (op == nullptr) return std::nullopt;
        return peakmem::DescribeOp(*op);
      },
      nb::arg("symbol"),
      "The op registry's rule for a Thunder symbol name in words, or None when peakmem does not "
      "know the op.");

  m.def(
      "op_int64_indices_argument",
      [](const std::string& symbol) -> int {
        const peakmem::OpInfo* op = peakmem::FindOp(symbol);
        return op == nullptr ? -1 : op->int64_indices_argument;
      },
      nb::arg("symbol"),
      "The positional argument of the op that is the int64 indices tensor ATen made where Thunder "
      "types it like the pooled input (OpInfo::int64_indices_argument), or -1 for none (unknown "
      "ops included).");

  m.def(
      "op_recompute_cost",
      [](const std::string& symbol) -> std::string {
        const peakmem::OpInfo* op = peakmem::FindOp(symbol);
        switch (op == nullptr ? peakmem::RecomputeCost::kNotRecomputed : peakmem::RecomputeCostOf(*op)) {
          case peakmem::RecomputeCost::kView: return "view";
          case peakmem::RecomputeCost::kPerElement: return "per-element";
          case peakmem::RecomputeCost::kAlias: return "returns-input";
          case peakmem::RecomputeCost::kRowwise: return "rowwise";
          case peakmem::RecomputeCost::kContraction: return "contraction";
          default: return "";
        }
      },
      nb::arg("symbol"),
      "What recomputing the op's output costs (semantics/op_registry.h RecomputeCostOf): 'view', "
      "'per-element' (the cheap kinds), 'returns-input', 'rowwise', 'contraction', or '' when it is not "
      "recomputed (unknown ops included).");

  m.def(
      "op_recompute_flops",
      [](const std::string& symbol, std::int64_t output_elements, std::int64_t first_operand_last_dim) {
        const peakmem::OpInfo* op = peakmem::FindOp(symbol);
        const peakmem::RecomputeCost cost =
            op == nullptr ? peakmem::RecomputeCost::kNotRecomputed : peakmem::RecomputeCostOf(*op);
        return peakmem::RecomputeFlops(cost, output_elements, first_operand_last_dim);
      },
      nb::arg("symbol"), nb::arg("output_elements"), nb::arg("first_operand_last_dim"),
      "The FLOPs recomputing the op's outputs adds (semantics/op_registry.h RecomputeFlops).");

  m.def(
      "recompute_search",
      [](const std::vector<std::int64_t>& flops,
         const std::function<std::int64_t(const std::vector<std::size_t>&)>& simulate,
         std::optional<std::int64_t> budget, std::size_t max_simulations,
         std::optional<std::function<bool()>> should_stop, const std::vector<int>& expensive) {
        peakmem::RecomputeSearchOptions options;
        options.budget = budget;
        options.max_simulations = max_simulations;
        const peakmem::RecomputeSearchResult r =
            peakmem::SearchRecomputation(flops, simulate, options, should_stop.value_or(std::function<bool()>()),
                                      std::vector<bool>(expensive.begin(), expensive.end()));
        nb::dict d;
        d["chosen"] = r.chosen;
        d["peaks"] = r.peaks;
        d["peak_before"] = r.peak_before;
        d["peak_after"] = r.peak_after;
        d["added_flops"] = r.added_flops;
        d["simulations"] = r.simulations;
        d["simulation_limit_reached"] = r.simulation_limit_reached;
        d["stopped"] = r.stopped;
        d["expensive_tier"] = r.expensive_tier;
        return d;
      },
      nb::arg("flops"), nb::arg("simulate"), nb::arg("budget").none(), nb::arg("max_simulations"),
      nb::arg("should_stop").none(), nb::arg("expensive") = std::vector<int>(),
      "The greedy recomputation search (planning/recompute_search.h): `flops` per candidate, "
      "`simulate(chosen)` the step's peak with those candidate indices recomputed (first with none), "
      "`should_stop()` (or None) asked before each later simulation, `expensive` which candidates are of "
      "the expensive tier. Returns a dict: chosen (in the "
      "order chosen), peaks (after each), peak_before, peak_after, added_flops, simulations, "
      "simulation_limit_reached, stopped, expensive_tier.");

  m.def(
      "parse_byte_size",
      [](const std::string& text) {
        std::int64_t bytes = 0;
        std::string error;
        if (!peakmem::ParseByteSize(text, &bytes, &error)) throw std::invalid_argument(error);
        return bytes;
      },
      nb::arg("text"), "A size as users write it ('80GiB', '512 MiB', '1.5GB', '4096') in bytes.");

  m.def("thunder_alloc_memory", &peakmem_python::ThunderAllocMemory, nb::arg("trace"),
        "Thunder's get_alloc_memory on a live TraceCtx: (peak, breakdown dict), from the live "
        "reader's IR and the thunder model.");

  m.def(
      "trace_to_json",
      [](nb::handle trace) {
        peakmem_python::LiveReadOptions read_options;
        read_options.exact = true;
        const peakmem::ParsedTrace parsed = peakmem_python::ReadLiveTrace(trace, read_options);
        nb::gil_scoped_release release;
        return peakmem::TraceToJson(parsed.trace);
      },
      nb::arg("trace"), "A live Thunder TraceCtx in peakmem's JSON trace form (docs/trace-json.md).");
}
