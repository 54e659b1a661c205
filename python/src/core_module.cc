// peakmem._core: the nanobind extension. A thin skin over peakmem/analyze.h;
// the Python package (python/peakmem) re-exports what users should see.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "live_reader.h"
#include "peakmem/analyze.h"
#include "peakmem/frontend/trace_json_writer.h"
#include "peakmem/allocators/nccl_buffers.h"
#include "peakmem/report/attribution.h"
#include "peakmem/report/budget_verdict.h"
#include "peakmem/report/human_bytes.h"
#include "peakmem/semantics/op_registry.h"
#include "thunder_drop_in.h"

namespace nb = nanobind;

namespace {

// Raises peakmem._errors.TraceError(file, line, column, message, line_text, rendered).
void RaiseTraceError(const peakmem::TraceError& e) {
  nb::object cls = nb::module_::import_("peakmem._errors").attr("TraceError");
  nb::object err = cls(e.what(), e.file(), e.location().line, e.location().column, e.message(),
                       e.line_text());
  PyErr_SetObject(cls.ptr(), err.ptr());
}

// A size parser (allocator_choice.h's ParseByteSize, ParseSizeWithUnit)
// as a Python function: the bytes, or ValueError with the parser's reason.
auto SizeParser(bool (*parse)(std::string_view, std::int64_t*, std::string*)) {
  return [parse](const std::string& text) {
    std::int64_t bytes = 0;
    std::string error;
    if (!parse(text, &bytes, &error)) throw std::invalid_argument(error);
    return bytes;
  };
}

}  // namespace

// The module: each layer's bindings, then the module-level functions, one
// m.def each (as long as their list).
NB_MODULE(_core, m) {
  m.doc() = "peakmem's C++ engine";

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const peakmem::TraceError& e) {
      RaiseTraceError(e);
    }
  });

  peakmem_python::BindReport(m);
  peakmem_python::BindAnalyze(m);
  peakmem_python::BindPlan(m);
  peakmem_python::BindStep(m);
  peakmem_python::BindRecompute(m);

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
        return peakmem_python::NcclToDict(peakmem::EstimateNcclBuffers(o));
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

  m.def("human_bytes", &peakmem::HumanBytes, nb::arg("bytes"),
        "A byte count in binary units as the reports print it beside the bytes: '512 B', '59.6 KiB', "
        "'1.2 MiB', '3.45 GiB'.");

  m.def("parse_size_with_unit", SizeParser(&peakmem::ParseSizeWithUnit), nb::arg("text"),
      "A size a person types ('80GiB', '512 MiB') in bytes; ValueError for a bare number ('48': which unit?) "
      "or anything parse_byte_size refuses.");

  m.def(
      "judge_budget",
      [](std::int64_t budget, std::int64_t requested_peak, std::optional<std::int64_t> reserved_peak,
         bool out_of_memory, std::int64_t context_bytes) {
        std::optional<peakmem::AllocatorPeak> allocator;
        if (reserved_peak) allocator = peakmem::AllocatorPeak{*reserved_peak, out_of_memory};
        const peakmem::BudgetVerdict v = peakmem::JudgeBudget(budget, requested_peak, allocator, context_bytes);
        // The JSON outputs' encoding of it, and the text outputs' line.
        nb::dict out = nb::cast<nb::dict>(nb::module_::import_("json").attr("loads")(peakmem::BudgetVerdictJson(v).dump()));
        out["text"] = peakmem::BudgetVerdictText(v);
        return out;
      },
      nb::arg("budget"), nb::arg("requested_peak"), nb::arg("reserved_peak") = nb::none(),
      nb::arg("out_of_memory") = false, nb::arg("context_bytes") = 0,
      "Whether a step fits its budget (report/budget_verdict.h): the caching allocator's reserved peak "
      "(where it ran: reserved_peak, out_of_memory) or the requested peak, plus context_bytes. A dict: budget, "
      "fits, headroom_bytes (None where the allocator ran out), budget_basis, context_bytes, counted_bytes and "
      "text (the line every text output prints).");

  m.def(
      "budget_terms",
      [](const std::string& device, std::optional<std::int64_t> budget, std::optional<std::int64_t> context_bytes,
         const std::string& allocator, std::optional<std::int64_t> device_memory, std::int64_t nccl_bytes) {
        const peakmem::BudgetTerms t =
            peakmem::ResolveBudgetTerms(device, budget, context_bytes, allocator, device_memory, nccl_bytes);
        nb::dict out;
        out["budget"] = t.budget ? nb::cast(*t.budget) : nb::none();
        out["context_bytes"] = t.context_bytes;
        out["allocator"] = t.allocator;
        out["capacity"] = t.capacity ? nb::cast(*t.capacity) : nb::none();
        return out;
      },
      nb::arg("device"), nb::arg("budget") = nb::none(), nb::arg("context_bytes") = nb::none(),
      nb::arg("allocator") = "", nb::arg("device_memory") = nb::none(), nb::arg("nccl_bytes") = 0,
      "What a step is judged with (report/budget_verdict.h's ResolveBudgetTerms): the caller's budget, "
      "context_bytes, allocator ('' for the device's) and device_memory completed by the target device's "
      "defaults (a GPU model's memory, CUDA context and the caching allocator); a dict: budget, "
      "context_bytes, allocator, capacity (the allocator's device memory; None for none).");

  {
    nb::list categories;
    for (std::string_view c : peakmem::kStepCategories) categories.append(std::string(c));
    m.attr("STEP_CATEGORIES") = nb::tuple(categories);
  }

  m.def("parse_byte_size", SizeParser(&peakmem::ParseByteSize), nb::arg("text"),
        "A size as users write it ('80GiB', '512 MiB', '1.5GB', '4096') in bytes.");

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
