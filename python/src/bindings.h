// What the files of peakmem._core's bindings share: the Report as Python
// holds it and the options every analysis reads. Each file binds one layer
// of the engine (report_bindings.cc the Report and its rows,
// analyze_bindings.cc the analyses, planning_bindings.cc the planner,
// step_bindings.cc the training step, recompute_bindings.cc the
// recomputation search); core_module.cc makes the module.
#pragma once

#include <nanobind/nanobind.h>

#include <optional>
#include <string>

#include "peakmem/allocators/allocator_choice.h"
#include "peakmem/allocators/nccl_buffers.h"
#include "peakmem/frontend/read_options.h"
#include "peakmem/models/runtime_model.h"
#include "peakmem/report/report.h"

namespace peakmem_python {

namespace nb = nanobind;

// The Report as Python holds it. Its per-statement and per-tensor tables
// become Python objects on first read and are kept: a report never changes,
// so every later read returns the same list (or dict) at no cost, and
// `report.steps[i]` in a loop is O(1) per read instead of converting every
// row each time.
struct PyReport : peakmem::Report {
  explicit PyReport(peakmem::Report r) : peakmem::Report(std::move(r)) {}
  nb::object statements_list;         // list[Step]; null until first read
  nb::object breakdown_dict;     // dict[str, int]; null until first read
  nb::object live_at_peak_list;  // list[LiveTensor]; null until first read
  nb::object allocator_dict;     // dict (or None); null until first read
};

// allocators/nccl_buffers.h's estimate as a dict: the JSON report's nccl_estimate.
nb::object NcclToDict(const peakmem::NcclEstimate& e);

// torch_threads: torch.get_num_threads() of the process the trace runs in
// (0: this machine's CPUs), RuntimeOptions::cpu_threads.
peakmem::RuntimeOptions Options(const std::string& convention, bool scratch, int torch_threads,
                                const std::string& device = "auto");

// peakmem.analyze's allocator=, alloc_conf= (None: PYTORCH_CUDA_ALLOC_CONF's)
// and device_memory= (None: unbounded).
peakmem::AllocatorOptions Allocator(const std::string& allocator, const std::optional<std::string>& alloc_conf,
                                    const std::optional<std::string>& device_memory);

// What a run keeps for the writers and attribution when `events`: the
// allocation event stream and the returned tensors (their category).
peakmem::ReportOptions WithEvents(bool events);

// Reading for rank `rank` (DTensor types' shards, ir/dtensor_layout.h;
// `dtensor_layout` for those that print none).
peakmem::TextReadOptions RankRead(int rank, int world_size, const std::string& dtensor_layout = "");

// A dict from (key, value) pairs, each value converted by nanobind: how a
// binding returns a result that Python reads by key, in one call rather than
// a statement per field.
inline void PutFields(nb::dict&) {}
template <class Value, class... Rest>
void PutFields(nb::dict& d, const char* key, const Value& value, const Rest&... rest) {
  d[key] = nb::cast(value);
  PutFields(d, rest...);
}
template <class... KeysAndValues>
nb::dict DictOf(const KeysAndValues&... keys_and_values) {
  static_assert(sizeof...(keys_and_values) % 2 == 0, "DictOf takes key, value pairs");
  nb::dict d;
  PutFields(d, keys_and_values...);
  return d;
}

void BindReport(nb::module_& m);   // report_bindings.cc
void BindAnalyze(nb::module_& m);  // analyze_bindings.cc
void BindPlan(nb::module_& m);     // planning_bindings.cc
void BindStep(nb::module_& m);     // step_bindings.cc
void BindRecompute(nb::module_& m);  // recompute_bindings.cc

}  // namespace peakmem_python
