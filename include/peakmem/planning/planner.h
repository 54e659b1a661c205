// The memory planner: a statement order with a lower peak, searched with the
// exact simulator.
//
// Candidates are orders of the dependence graph (dependence_graph.h), each
// run as a whole trace through the runtime model (frees placed after last
// use, planned_trace.h), so every candidate's peak is the number PyTorch
// would measure for it. The search starts from the trace's order and from
// the orders Inductor's and XLA's schedulers pick (schedule_heuristics.h),
// keeps the lowest, then improves around the peak: the few statements
// around it are reordered by an exact search over their orders
// (window_search.h), and each statement near the peak is tried at its
// latest legal position (a producer moved next to its first consumer) and
// at its earliest (a consumer pulled up, so that what it reads for the last
// time is freed sooner); a move is kept only when the simulated peak drops.
// Deterministic: the same trace and options give the same plan, unless the
// time budget ends the search first.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "peakmem/allocators/allocator_choice.h"
#include "peakmem/ir/parsed_trace.h"
#include "peakmem/models/runtime_model.h"
#include "peakmem/planning/dependence_graph.h"

namespace peakmem {

struct PlanOptions {
  RuntimeOptions runtime;  // how the trace is called and simulated
  // Default 1 s: the search stops when this much time has passed.
  double time_budget_seconds = 1.0;
  // Default 20,000: the search stops after this many simulations (what makes
  // a plan the same on every machine when the time budget is not reached).
  std::size_t max_simulations = 20000;
  // Default 48: statements on each side of the peak tried by the local search.
  std::size_t window = 48;
  // Default 12 (at most kMaxWindow, 16): statements around the peak whose
  // orders are searched exhaustively (window_search.h).
  std::size_t exact_window = 12;
  // Default requested bytes. Another allocator model (cuda-caching) prices
  // the trace as given and the plan (allocated and reserved bytes, in
  // PlanResult); the search itself lowers the requested peak.
  AllocatorOptions allocator;
};

struct PlanCandidate {
  std::string name;  // "trace order", "inductor lpmf", ...
  std::int64_t peak_bytes = 0;
};

struct PlanResult {
  std::vector<NodeId> order;  // the plan: every node once
  DependenceGraph graph;
  std::int64_t original_peak_bytes = 0;  // the trace as given (its own frees)
  std::int64_t planned_peak_bytes = 0;
  std::int64_t planned_final_bytes = 0;
  // The trace order and each heuristic, simulated (frees after last use).
  std::vector<PlanCandidate> baselines;
  // The best baseline (the lowest peak; ties: the first listed).
  std::string start;
  std::size_t simulations = 0;
  std::size_t moves_kept = 0;
  double seconds = 0;
  bool time_budget_reached = false;
  // Why the plan is the trace's own order, when it is (nothing can move, or
  // nothing found lowers the peak).
  std::string unchanged_reason;
  // No order can peak below this: the largest of the plan's final bytes and,
  // over every statement, the storages it reads (those the trace allocates,
  // and the parameters it reads directly) plus what it allocates.
  std::int64_t lower_bound_bytes = 0;
  // Statements that may not move, by reason (PinReason), in first-seen order.
  std::vector<std::pair<std::string, std::size_t>> pinned_reasons;
  // With PlanOptions::allocator other than requested bytes: the allocator's
  // counters for the trace as given and for the plan.
  bool priced = false;
  CudaAllocatorStats original_allocator;
  CudaAllocatorStats planned_allocator;
  // The statements the trace had (graph.statement indexes them).
  std::vector<Statement> original_statements;
};

// Plans `parsed` (its statements are left as they were). Throws TraceError
// for a trace the runtime model cannot simulate.
PlanResult PlanTrace(ParsedTrace& parsed, const PlanOptions& options = {});

// The plan as trace text (planned_trace.h's PrintPlannedTrace), with a
// provenance comment giving the peaks.
std::string PrintPlan(const ParsedTrace& parsed, const PlanResult& plan);

// The statement order the plan runs, as indices into the original trace's
// statements, with the values freed after each (and those freed before the
// first): what a front end that rebuilds its own trace (a live TraceCtx)
// needs.
struct PlanSteps {
  std::vector<std::uint32_t> statements;
  std::vector<std::vector<ValueId>> frees_after;
  std::vector<ValueId> frees_before_first;
};
PlanSteps StepsOf(const PlanResult& plan);

}  // namespace peakmem
