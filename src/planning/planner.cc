#include "peakmem/planning/planner.h"

#include <algorithm>
#include <chrono>
#include <fmt/format.h>

#include "peakmem/analyze.h"
#include "peakmem/planning/planned_trace.h"
#include "peakmem/planning/schedule_heuristics.h"
#include "peakmem/planning/window_search.h"

namespace peakmem {
namespace {

using Clock = std::chrono::steady_clock;

// Runs orders of one trace through the runtime model, in place: the trace's
// statements are replaced by each order's, and put back by Restore.
class OrderSimulator {
 public:
  OrderSimulator(ParsedTrace& parsed, const DependenceGraph& graph, const std::vector<Statement>& original,
                 const RuntimeOptions& options)
      : parsed_(parsed), graph_(graph), original_(original), options_(options) {
    report_.steps = report_.breakdown = report_.live_at_peak = false;
    report_.second_thread = false;
    single_dels_.resize(graph.deleted_by_trace.size());
    for (ValueId v = 0; v < graph.deleted_by_trace.size(); ++v) {
      if (graph.deleted_by_trace[v]) single_dels_[v] = parsed.trace.SaveArray(std::span<const ValueId>(&v, 1));
    }
  }

  struct Result {
    std::int64_t peak = 0;
    std::int64_t final = 0;
    std::size_t peak_position = 0;  // the position (in the order) of the node at or before the peak
  };

  Result Run(const std::vector<NodeId>& order) {
    MaterializeOrder(graph_, original_, single_dels_, order, &parsed_.trace.statements, &node_at_);
    ListUnpacks();
    ++runs_;
    const Report report = simulator_.Analyze(parsed_, "runtime", options_, report_);
    Result r;
    r.peak = report.peak_bytes;
    r.final = report.final_bytes;
    NodeId at = kNoNode;
    for (int step = std::min<int>(report.peak_step, static_cast<int>(node_at_.size()) - 1); step >= 0; --step) {
      if (node_at_[step] != kNoNode) {
        at = node_at_[step];
        break;
      }
    }
    if (at != kNoNode) {
      r.peak_position = static_cast<std::size_t>(std::find(order.begin(), order.end(), at) - order.begin());
    }
    return r;
  }

  // The trace as it was given.
  Report RunOriginal() {
    Restore();
    ++runs_;
    return simulator_.Analyze(parsed_, "runtime", options_, report_);
  }

  // The allocator's counters for `order` (nullptr: the trace as given).
  CudaAllocatorStats Price(const std::vector<NodeId>* order, const AllocatorOptions& allocator) {
    if (order == nullptr) {
      Restore();
    } else {
      MaterializeOrder(graph_, original_, single_dels_, *order, &parsed_.trace.statements, &node_at_);
      ListUnpacks();
    }
    const Report report = simulator_.Analyze(parsed_, "runtime", options_, report_, allocator);
    return report.allocator ? report.allocator->stats : CudaAllocatorStats{};
  }

  void Restore() {
    parsed_.trace.statements = SegmentedVector<Statement>();
    parsed_.trace.statements.reserve(original_.size());
    for (const Statement& s : original_) parsed_.trace.statements.push_back(s);
    ListUnpacks();
  }

  std::size_t runs() const { return runs_; }

 private:
  void ListUnpacks() {
    Trace& t = parsed_.trace;
    t.unpacks.clear();
    for (std::size_t i = 0; i < t.statements.size(); ++i) {
      if (t.statements[i].kind == StatementKind::kUnpack) t.unpacks.push_back(static_cast<std::uint32_t>(i));
    }
    t.unpacks_listed = true;
  }

  ParsedTrace& parsed_;
  const DependenceGraph& graph_;
  const std::vector<Statement>& original_;
  const RuntimeOptions& options_;
  ReportOptions report_;
  Simulator simulator_;
  std::vector<ArenaSpan<ValueId>> single_dels_;
  std::vector<NodeId> node_at_;
  std::size_t runs_ = 0;
};

// Moves the node at position `from` to position `to`, shifting those between.
void Move(std::vector<NodeId>& order, std::size_t from, std::size_t to) {
  if (to < from) {
    std::rotate(order.begin() + static_cast<std::ptrdiff_t>(to), order.begin() + static_cast<std::ptrdiff_t>(from),
                order.begin() + static_cast<std::ptrdiff_t>(from) + 1);
  } else if (to > from) {
    std::rotate(order.begin() + static_cast<std::ptrdiff_t>(from), order.begin() + static_cast<std::ptrdiff_t>(from) + 1,
                order.begin() + static_cast<std::ptrdiff_t>(to) + 1);
  }
}

}  // namespace

PlanResult PlanTrace(ParsedTrace& parsed, const PlanOptions& options) {
  const Clock::time_point started = Clock::now();
  PlanResult plan;
  plan.graph = BuildDependenceGraph(parsed.trace);
  const DependenceGraph& g = plan.graph;
  plan.original_statements.reserve(parsed.trace.statements.size());
  for (const Statement& s : parsed.trace.statements) plan.original_statements.push_back(s);
  OrderSimulator sim(parsed, g, plan.original_statements, options.runtime);
  plan.original_peak_bytes = sim.RunOriginal().peak_bytes;

  struct Named {
    const char* name;
    std::vector<NodeId> order;
  };
  std::vector<Named> starts;
  starts.push_back({"trace order", TraceOrder(g)});
  starts.push_back({"inductor lpmf", LeastPeakMemoryFirstOrder(g)});
  starts.push_back({"inductor bfs", BreadthFirstOrder(g)});
  starts.push_back({"inductor dfs", DepthFirstOrder(g)});
  starts.push_back({"xla list", XlaListOrder(g)});
  starts.push_back({"xla dfs", XlaDepthFirstOrder(g)});
  starts.push_back({"xla post order", XlaPostOrder(g)});
  std::vector<NodeId> best;
  OrderSimulator::Result best_run;
  for (Named& s : starts) {
    const OrderSimulator::Result r = sim.Run(s.order);
    plan.baselines.push_back({s.name, r.peak});
    if (best.empty() || r.peak < best_run.peak) {
      best = std::move(s.order);
      best_run = r;
      plan.start = s.name;
    }
  }

  auto out_of_budget = [&] {
    if (sim.runs() >= options.max_simulations) return true;
    const double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
    return elapsed >= options.time_budget_seconds;
  };
  const StorageUse use = ComputeStorageUse(g);
  const std::vector<std::vector<NodeId>> readers_of = ReadersOf(g, use);
  const std::size_t n = best.size();
  // Whether any segment holds two statements (else no order but the trace's exists).
  bool movable = false;
  for (std::size_t i = 1; i < g.size() && !movable; ++i) movable = g.segment[i] == g.segment[i - 1];
  std::vector<std::size_t> pos(n);
  std::vector<std::size_t> segment_first, segment_last;
  while (movable && !plan.time_budget_reached) {
    for (std::size_t i = 0; i < n; ++i) pos[best[i]] = i;
    const std::uint32_t segments = g.segment.empty() ? 0 : g.segment.back() + 1;
    segment_first.assign(segments, n);
    segment_last.assign(segments, 0);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t s = g.segment[best[i]];
      segment_first[s] = std::min(segment_first[s], i);
      segment_last[s] = std::max(segment_last[s], i);
    }
    // The nodes near the peak, the largest allocations first.
    const std::size_t p = best_run.peak_position;
    const std::size_t lo = p > options.window ? p - options.window : 0;
    const std::size_t hi = std::min(n, p + options.window + 1);
    std::vector<NodeId> near;
    for (std::size_t i = lo; i < hi; ++i) {
      if (!g.pinned[best[i]]) near.push_back(best[i]);
    }
    std::stable_sort(near.begin(), near.end(),
                     [&](NodeId a, NodeId b) { return g.alloc_bytes[a] > g.alloc_bytes[b]; });
    bool improved = false;
    // Whether the time or simulation budget is spent (noted in the plan).
    auto spent = [&] {
      if (out_of_budget()) plan.time_budget_reached = true;
      return plan.time_budget_reached;
    };
    // Simulates `candidate` and keeps it when its peak is lower.
    auto keep_if_lower = [&](std::vector<NodeId> candidate) {
      const OrderSimulator::Result r = sim.Run(candidate);
      if (r.peak >= best_run.peak) return false;
      best = std::move(candidate);
      best_run = r;
      ++plan.moves_kept;
      return improved = true;
    };
    // An exact search of the statements around the peak (window_search.h):
    // the window centred on it, ending at it, starting at it.
    const std::uint32_t peak_segment = g.segment[best[p]];
    const std::size_t seg_begin = segment_first[peak_segment], seg_end = segment_last[peak_segment] + 1;
    const std::size_t k = std::min({options.exact_window, kMaxWindow, seg_end - seg_begin});
    if (k >= 2) {
      for (std::size_t offset : {k / 2, k - 1, std::size_t{0}}) {
        std::size_t begin = p >= seg_begin + offset ? p - offset : seg_begin;
        begin = std::min(begin, seg_end - k);
        if (spent()) break;
        std::vector<NodeId> candidate = best;
        if (SearchWindow(g, use, readers_of, candidate, pos, begin, k) && keep_if_lower(std::move(candidate))) break;
      }
    }
    // Single statements near the peak, at their latest and earliest places.
    for (NodeId u : near) {
      if (improved || plan.time_budget_reached) break;
      std::size_t latest = segment_last[g.segment[u]];
      for (NodeId s : g.succs[u]) latest = std::min(latest, pos[s] - 1);
      std::size_t earliest = segment_first[g.segment[u]];
      for (NodeId q : g.preds[u]) earliest = std::max(earliest, pos[q] + 1);
      for (std::size_t target : {latest, earliest}) {
        if (target == pos[u]) continue;
        if (spent()) break;
        std::vector<NodeId> candidate = best;
        Move(candidate, pos[u], target);
        if (keep_if_lower(std::move(candidate))) break;
      }
    }
    if (!improved) break;
  }

  if (best_run.peak >= plan.original_peak_bytes) {
    best = TraceOrder(g);
    best_run = sim.Run(best);
    if (!movable) {
      plan.unchanged_reason = g.pinned_count > 0
                                  ? fmt::format("no statement can move: {} of {} are pinned (the first: {})",
                                                g.pinned_count, g.size(), g.first_pin_reason)
                                  : "the trace has fewer than two statements to order";
    } else {
      plan.unchanged_reason =
          fmt::format("no order found with a lower peak than the trace's ({} simulations)", sim.runs());
    }
  }
  if (options.allocator.model != AllocatorModel::kRequested) {
    plan.priced = true;
    plan.original_allocator = sim.Price(nullptr, options.allocator);
    plan.planned_allocator = sim.Price(&best, options.allocator);
  }
  plan.lower_bound_bytes = best_run.final;
  for (NodeId v = 0; v < g.size(); ++v) {
    std::int64_t working = g.alloc_bytes[v];
    for (NodeId b : use.reads[v]) working += g.alloc_bytes[b];
    // Parameters are storages of their own unless the caller says otherwise
    // (RuntimeOptions::argument_tensors: shared or held outside, costing nothing).
    for (ValueId x : g.touches[v]) {
      if (options.runtime.argument_tensors.empty() && x < g.definer.size() && g.definer[x] == kNoNode) {
        working += static_cast<std::int64_t>(parsed.trace.value(x).type->bytes);
      }
    }
    plan.lower_bound_bytes = std::max(plan.lower_bound_bytes, working);
  }
  for (NodeId v = 0; v < g.size(); ++v) {
    if (!g.pinned[v]) continue;
    const std::string reason = PinReason(parsed.trace, plan.original_statements[g.statement[v]]);
    auto it = std::find_if(plan.pinned_reasons.begin(), plan.pinned_reasons.end(),
                           [&](const auto& r) { return r.first == reason; });
    if (it == plan.pinned_reasons.end()) {
      plan.pinned_reasons.emplace_back(reason, 1);
    } else {
      ++it->second;
    }
  }
  plan.order = std::move(best);
  plan.planned_peak_bytes = best_run.peak;
  plan.planned_final_bytes = best_run.final;
  plan.simulations = sim.runs();
  sim.Restore();
  plan.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return plan;
}

std::string PrintPlan(const ParsedTrace& parsed, const PlanResult& plan) {
  std::string provenance = fmt::format("Planned by peakmem: peak {} -> {} bytes", plan.original_peak_bytes,
                                       plan.planned_peak_bytes);
  if (!plan.unchanged_reason.empty()) provenance += " (order unchanged: " + plan.unchanged_reason + ")";
  return PrintPlannedTrace(parsed, plan.original_statements, plan.graph, plan.order, provenance);
}

PlanSteps StepsOf(const PlanResult& plan) {
  PlanSteps steps;
  const FreePlacement frees = PlaceFrees(plan.graph, plan.order);
  for (NodeId n : plan.order) steps.statements.push_back(plan.graph.statement[n]);
  steps.frees_after = frees.after;
  steps.frees_before_first = frees.before_first;
  return steps;
}

}  // namespace peakmem
