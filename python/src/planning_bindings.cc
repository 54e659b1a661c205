// peakmem._core's planner (peakmem/planning/planner.h) for peakmem.plan.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "live_reader.h"
#include "peakmem/frontend/frontend.h"
#include "peakmem/planning/planner.h"

namespace peakmem_python {
namespace {

// The planner (peakmem/planning/planner.h) for peakmem.plan
// (python/peakmem/planning.py): on printed text (the result carries the
// planned text) or a live TraceCtx (the result says which statement runs
// where, as bound-symbol indices, and which names are freed after each: the
// Python side rebuilds the TraceCtx from them).
nb::dict PlanToDict(const peakmem::ParsedTrace& parsed, const peakmem::PlanResult& plan, bool live) {
  nb::list baselines;
  for (const peakmem::PlanCandidate& c : plan.baselines) baselines.append(nb::make_tuple(c.name, c.peak_bytes));
  nb::list pinned_reasons;
  for (const auto& [reason, count] : plan.pinned_reasons) pinned_reasons.append(nb::make_tuple(reason, count));
  nb::dict d = DictOf("original_peak_bytes", plan.original_peak_bytes, "planned_peak_bytes", plan.planned_peak_bytes,
                      "planned_final_bytes", plan.planned_final_bytes, "lower_bound_bytes", plan.lower_bound_bytes,
                      "baselines", baselines, "start", plan.start, "unchanged_reason", plan.unchanged_reason,
                      "simulations", plan.simulations, "moves_kept", plan.moves_kept, "seconds", plan.seconds,
                      "time_budget_reached", plan.time_budget_reached, "statements", plan.graph.size(),
                      "pinned", plan.graph.pinned_count, "pinned_reasons", pinned_reasons);
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

}  // namespace

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

}  // namespace peakmem_python
