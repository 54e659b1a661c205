// peakmem._core's Report (report/report.h) and the rows of its tables.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "peakmem/report/allocator_summary.h"
#include "peakmem/report/attribution.h"
#include "peakmem/report/nccl_summary.h"
#include "peakmem/report/writer.h"
#include "thunder_drop_in.h"

namespace peakmem_python {

nb::object NcclToDict(const peakmem::NcclEstimate& e) {
  return nb::module_::import_("json").attr("loads")(peakmem::NcclSummaryJson(e).dump());
}

namespace {

// Thunder's dict: key -> bytes, in order.
nb::object Breakdown(const peakmem::Report& r) {
  return peakmem_python::BreakdownDict(r.breakdown, "replace");
}

// A report row as Python sees it: it owns its text, so it stays valid after
// the Report it came from is gone (peakmem::Step views the report's memory).
struct PyStatement {
  int index;
  int line;
  std::string op;
  std::string source;
  std::int64_t delta_bytes, live_bytes, peak_bytes;
};

std::vector<PyStatement> StatementRows(const peakmem::Report& r) {
  std::vector<PyStatement> out;
  out.reserve(r.steps.size());
  for (const peakmem::Step& s : r.steps) {
    out.push_back({s.index, s.line, std::string(s.op), std::string(s.source), s.delta_bytes,
                   s.live_bytes, s.peak_bytes});
  }
  return out;
}


template <typename T, typename Make>
T Cached(nb::object& slot, Make&& make) {
  if (!slot.is_valid()) slot = make();
  return nb::borrow<T>(slot);
}

// The report's Statement rows, as one list made on first read.
nb::typed<nb::list, PyStatement> Statements(PyReport& r) {
  return Cached<nb::typed<nb::list, PyStatement>>(r.statements_list, [&] { return nb::cast(StatementRows(r)); });
}

// A DeprecationWarning at the user's line (python/peakmem/_deprecation.py):
// `old` is spelled `new` now.
void Deprecated(const char* old, const char* now) {
  nb::module_::import_("peakmem._deprecation").attr("deprecated")(old, now);
}

// The classes a Report is seen through.
// The rows of a report's tables.
void BindRows(nb::module_& m) {
  nb::class_<PyStatement>(m, "Statement", "One statement of the trace and the live bytes after it.")
      .def_ro("index", &PyStatement::index)
      .def_ro("line", &PyStatement::line)
      .def_ro("op", &PyStatement::op)
      .def_ro("source", &PyStatement::source)
      .def_ro("delta_bytes", &PyStatement::delta_bytes)
      .def_ro("live_bytes", &PyStatement::live_bytes)
      .def_ro("peak_bytes", &PyStatement::peak_bytes)
      .def("__repr__", [](const PyStatement& s) {
        return "Statement(index=" + std::to_string(s.index) + ", op='" + s.op +
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
}  // namespace

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
      .def_ro("peak_statement", &PyReport::peak_step, "The index of the statement at the peak")
      .def_prop_ro(
          "peak_step",
          [](const PyReport& r) {
            Deprecated("Report.peak_step", "Report.peak_statement");
            return r.peak_step;
          },
          "Deprecated spelling of peak_statement")
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
          "statements", [](PyReport& r) { return Statements(r); },
          "One Statement row per statement (empty when they were not asked for; made once, then the "
          "same list)")
      .def_prop_ro(
          "steps",
          [](PyReport& r) {
            Deprecated("Report.steps", "Report.statements");
            return Statements(r);
          },
          "Deprecated spelling of statements")
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

}  // namespace peakmem_python
