// peakmem._core's analyses of one trace (peakmem/analyze.h), and the
// options every binding reads.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "live_reader.h"
#include "peakmem/analyze.h"

namespace peakmem_python {

peakmem::RuntimeOptions Options(const std::string& convention, bool scratch, int torch_threads,
                                const std::string& device) {
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
  std::string error;
  const std::optional<peakmem::ExecutionContext> context = peakmem::ParseTargetDevice(device, &error);
  if (!context) throw std::invalid_argument(error);
  options.context = *context;
  return options;
}

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

peakmem::ReportOptions WithEvents(bool events) {
  peakmem::ReportOptions options;
  options.alloc_log = events;
  options.returned_tensors = events;
  return options;
}

peakmem::TextReadOptions RankRead(int rank, int world_size, const std::string& dtensor_layout) {
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
      "target_device",
      [](const std::string& text) {
        std::string error;
        const std::optional<peakmem::ExecutionContext> c = peakmem::ParseTargetDevice(text, &error);
        if (!c) throw std::invalid_argument(error);
        const peakmem::CublasWorkspaces w = peakmem::CublasWorkspaceBytes(*c);
        nb::dict out;
        out["name"] = c->name;
        out["kind"] = !c->target ? "auto" : *c->target == peakmem::KernelDevice::kCuda ? "cuda" : "cpu";
        out["cuda_arch"] = c->cuda_arch;
        out["sm_count"] = c->sm_count;
        out["cublas_workspace_bytes"] = w.cublas;
        out["cublas_lt_workspace_bytes"] = w.cublas_lt;
        out["total_memory_bytes"] = c->total_memory_bytes;
        out["context_bytes"] = c->context_bytes;
        out["description"] = c->description;
        return out;
      },
      nb::arg("device"),
      "A target device (peakmem/semantics/execution_context.h) as a dict: name, kind ('auto', 'cpu' or "
      "'cuda'), cuda_arch, sm_count, the cuBLAS and cuBLASLt workspaces' bytes a CUDA target keeps from its "
      "first matrix product, and a GPU model's total_memory_bytes, context_bytes and description (0 and '' "
      "off a GPU model). ValueError for a name it does not know.");

  m.def(
      "gpu_catalog",
      [] {
        nb::list out;
        for (const peakmem::GpuModel* g = peakmem::GpuCatalogBegin(); g != peakmem::GpuCatalogEnd(); ++g) {
          nb::dict d;
          d["name"] = std::string(g->name);
          d["description"] = std::string(g->description);
          d["cuda_arch"] = g->arch;
          d["sm_count"] = g->sm_count;
          d["total_memory_bytes"] = g->total_memory_bytes;
          d["context_bytes"] = g->context_bytes;
          d["context_measured"] = g->context_measured;
          d["source"] = std::string(g->source);
          out.append(d);
        }
        return out;
      },
      "The GPU models a target device may name (semantics/execution_context.h's GpuCatalog), each a dict: "
      "name, description, cuda_arch, sm_count, total_memory_bytes (torch's total_memory), context_bytes "
      "(the CUDA context outside the allocator), context_measured and source.");

  m.def(
      "analyze_text",
      [](const std::string& text, const std::string& name, const std::string& model,
         const std::string& convention, bool scratch, const std::string& allocator,
         const std::optional<std::string>& alloc_conf,
         const std::optional<std::string>& device_memory, bool events, int rank, int world_size, int torch_threads,
         const std::string& dtensor_layout, const std::string& device) {
        const peakmem::RuntimeOptions options = Options(convention, scratch, torch_threads, device);
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
      nb::arg("torch_threads") = 0, nb::arg("dtensor_layout") = "", nb::arg("device") = "auto",
      "Analyse printed trace text (or peakmem's JSON export).");

  m.def(
      "analyze_live",
      [](nb::handle trace, const std::string& model, const std::string& convention, bool scratch,
         const std::string& allocator, const std::optional<std::string>& alloc_conf,
         const std::optional<std::string>& device_memory, bool steps,
         const std::vector<ArgumentSpec>& argument_tensors, bool returned_tensors, bool events,
         int rank, int world_size, int torch_threads, const std::string& dtensor_layout,
         const std::string& device) {
        peakmem::RuntimeOptions options = Options(convention, scratch, torch_threads, device);
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
      nb::arg("world_size") = 0, nb::arg("torch_threads") = 0, nb::arg("dtensor_layout") = "", nb::arg("device") = "auto",
      "Analyse a live Thunder TraceCtx (read in C++). steps=False skips the per-step table; "
      "argument_tensors: (name, external, storage_group, storage_bytes, strides) per argument "
      "tensor whose identity the caller knows (peakmem.step); returned_tensors: fill "
      "Report.returned_tensors; events: keep the allocation event stream (WithEvents).");

  m.def(
      "analyze_file",
      [](const std::string& path, const std::string& model, const std::string& convention,
         bool scratch, const std::string& allocator, const std::optional<std::string>& alloc_conf,
         const std::optional<std::string>& device_memory, bool events, int rank, int world_size, int torch_threads,
         const std::string& dtensor_layout, const std::string& device) {
        const peakmem::RuntimeOptions options = Options(convention, scratch, torch_threads, device);
        const peakmem::AllocatorOptions priced = Allocator(allocator, alloc_conf, device_memory);
        nb::gil_scoped_release release;
        return PyReport(peakmem::Analyze(peakmem::LoadTrace(path, RankRead(rank, world_size, dtensor_layout)),
                                         model, options, WithEvents(events), priced));
      },
      nb::arg("path"), nb::arg("model") = "runtime", nb::arg("convention") = "auto",
      nb::arg("scratch") = true, nb::arg("allocator") = "requested",
      nb::arg("alloc_conf") = nb::none(), nb::arg("device_memory") = nb::none(),
      nb::arg("events") = false, nb::arg("rank") = 0, nb::arg("world_size") = 0,
      nb::arg("torch_threads") = 0, nb::arg("dtensor_layout") = "", nb::arg("device") = "auto",
      "Analyse a trace file (text or JSON). rank: the rank DTensor types are read for; dtensor_layout: "
      "the layout of those that print none.");
}

}  // namespace peakmem_python
