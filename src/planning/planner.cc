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

// The search of PlanTrace (planner.h), one method a phase.
class Search {
 public:
  Search(ParsedTrace& parsed, const PlanOptions& options, PlanResult& plan, OrderSimulator& sim,
         Clock::time_point started)
      : parsed_(parsed), options_(options), plan_(plan), g_(plan.graph), sim_(sim), started_(started),
        use_(ComputeStorageUse(g_)), readers_of_(ReadersOf(g_, use_)) {}

  // The trace order and each heuristic simulated; the lowest kept.
  void StartFromBaselines() {
    const std::pair<const char*, std::vector<NodeId> (*)(const DependenceGraph&)> starts[] = {
        {"trace order", TraceOrder},         {"inductor lpmf", LeastPeakMemoryFirstOrder},
        {"inductor bfs", BreadthFirstOrder}, {"inductor dfs", DepthFirstOrder},
        {"xla list", XlaListOrder},          {"xla dfs", XlaDepthFirstOrder},
        {"xla post order", XlaPostOrder}};
    for (const auto& [name, make] : starts) {
      std::vector<NodeId> order = make(g_);
      const OrderSimulator::Result r = sim_.Run(order);
      plan_.baselines.push_back({name, r.peak});
      if (best_.empty() || r.peak < best_run_.peak) {
        best_ = std::move(order);
        best_run_ = r;
        plan_.start = name;
      }
    }
  }

  // Whether any segment holds two statements (else no order but the trace's exists).
  bool Movable() const {
    for (std::size_t i = 1; i < g_.size(); ++i) {
      if (g_.segment[i] == g_.segment[i - 1]) return true;
    }
    return false;
  }

  // Rounds of moves around the peak until none lowers it or the budget is spent.
  void ImproveAroundPeak() {
    while (!plan_.time_budget_reached) {
      Locate();
      improved_ = false;
      SearchWindows();
      if (!improved_) MoveSingleStatements();
      if (!improved_) return;
    }
  }

  // The trace's own order when nothing beat it, with the reason; then the
  // report's figures.
  void Finish(bool movable) {
    if (best_run_.peak >= plan_.original_peak_bytes) {
      best_ = TraceOrder(g_);
      best_run_ = sim_.Run(best_);
      plan_.unchanged_reason =
          movable ? fmt::format("no order found with a lower peak than the trace's ({} simulations)", sim_.runs())
          : g_.pinned_count > 0 ? fmt::format("no statement can move: {} of {} are pinned (the first: {})",
                                              g_.pinned_count, g_.size(), g_.first_pin_reason)
                                : "the trace has fewer than two statements to order";
    }
    if (options_.allocator.model != AllocatorModel::kRequested) {
      plan_.priced = true;
      plan_.original_allocator = sim_.Price(nullptr, options_.allocator);
      plan_.planned_allocator = sim_.Price(&best_, options_.allocator);
    }
    plan_.lower_bound_bytes = LowerBound();
    CountPinned();
    plan_.order = std::move(best_);
    plan_.planned_peak_bytes = best_run_.peak;
    plan_.planned_final_bytes = best_run_.final;
    plan_.simulations = sim_.runs();
  }

 private:
  // Each node's position and each segment's span in the best order.
  void Locate() {
    const std::size_t n = best_.size();
    pos_.resize(n);
    for (std::size_t i = 0; i < n; ++i) pos_[best_[i]] = i;
    const std::uint32_t segments = g_.segment.empty() ? 0 : g_.segment.back() + 1;
    segment_first_.assign(segments, n);
    segment_last_.assign(segments, 0);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t s = g_.segment[best_[i]];
      segment_first_[s] = std::min(segment_first_[s], i);
      segment_last_[s] = std::max(segment_last_[s], i);
    }
  }

  // Whether the time or simulation budget is spent (noted in the plan).
  bool Spent() {
    const double elapsed = std::chrono::duration<double>(Clock::now() - started_).count();
    if (sim_.runs() >= options_.max_simulations || elapsed >= options_.time_budget_seconds) {
      plan_.time_budget_reached = true;
    }
    return plan_.time_budget_reached;
  }

  // Simulates `candidate` and keeps it when its peak is lower.
  bool KeepIfLower(std::vector<NodeId> candidate) {
    const OrderSimulator::Result r = sim_.Run(candidate);
    if (r.peak >= best_run_.peak) return false;
    best_ = std::move(candidate);
    best_run_ = r;
    ++plan_.moves_kept;
    return improved_ = true;
  }

  // An exact search of the statements around the peak (window_search.h):
  // the window centred on it, ending at it, starting at it.
  void SearchWindows() {
    const std::size_t p = best_run_.peak_position;
    const std::uint32_t segment = g_.segment[best_[p]];
    const std::size_t begin_of = segment_first_[segment], end_of = segment_last_[segment] + 1;
    const std::size_t k = std::min({options_.exact_window, kMaxWindow, end_of - begin_of});
    if (k < 2) return;
    for (std::size_t offset : {k / 2, k - 1, std::size_t{0}}) {
      const std::size_t begin = std::min(p >= begin_of + offset ? p - offset : begin_of, end_of - k);
      if (Spent()) return;
      std::vector<NodeId> candidate = best_;
      if (SearchWindow(g_, use_, readers_of_, candidate, pos_, begin, k) && KeepIfLower(std::move(candidate))) return;
    }
  }

  // Single statements near the peak (the largest allocations first), each
  // at its latest place (next to its first consumer) and its earliest.
  void MoveSingleStatements() {
    const std::size_t p = best_run_.peak_position;
    const std::size_t lo = p > options_.window ? p - options_.window : 0;
    const std::size_t hi = std::min(best_.size(), p + options_.window + 1);
    std::vector<NodeId> near;
    for (std::size_t i = lo; i < hi; ++i) {
      if (!g_.pinned[best_[i]]) near.push_back(best_[i]);
    }
    std::stable_sort(near.begin(), near.end(),
                     [&](NodeId a, NodeId b) { return g_.alloc_bytes[a] > g_.alloc_bytes[b]; });
    for (NodeId u : near) {
      std::size_t latest = segment_last_[g_.segment[u]];
      for (NodeId s : g_.succs[u]) latest = std::min(latest, pos_[s] - 1);
      std::size_t earliest = segment_first_[g_.segment[u]];
      for (NodeId q : g_.preds[u]) earliest = std::max(earliest, pos_[q] + 1);
      for (std::size_t target : {latest, earliest}) {
        if (target == pos_[u]) continue;
        if (Spent()) return;
        std::vector<NodeId> candidate = best_;
        Move(candidate, pos_[u], target);
        if (KeepIfLower(std::move(candidate))) return;
      }
    }
  }

  // PlanResult::lower_bound_bytes.
  std::int64_t LowerBound() const {
    std::int64_t bound = best_run_.final;
    for (NodeId v = 0; v < g_.size(); ++v) {
      std::int64_t working = g_.alloc_bytes[v];
      for (NodeId b : use_.reads[v]) working += g_.alloc_bytes[b];
      // Parameters are storages of their own unless the caller says otherwise
      // (RuntimeOptions::argument_tensors: shared or held outside, costing nothing).
      for (ValueId x : g_.touches[v]) {
        if (options_.runtime.argument_tensors.empty() && x < g_.definer.size() && g_.definer[x] == kNoNode) {
          working += static_cast<std::int64_t>(parsed_.trace.value(x).type->bytes);
        }
      }
      bound = std::max(bound, working);
    }
    return bound;
  }

  // PlanResult::pinned_reasons.
  void CountPinned() {
    for (NodeId v = 0; v < g_.size(); ++v) {
      if (!g_.pinned[v]) continue;
      const std::string reason = PinReason(parsed_.trace, plan_.original_statements[g_.statement[v]]);
      auto it = std::find_if(plan_.pinned_reasons.begin(), plan_.pinned_reasons.end(),
                             [&](const auto& r) { return r.first == reason; });
      if (it == plan_.pinned_reasons.end()) {
        plan_.pinned_reasons.emplace_back(reason, 1);
      } else {
        ++it->second;
      }
    }
  }

  ParsedTrace& parsed_;
  const PlanOptions& options_;
  PlanResult& plan_;
  const DependenceGraph& g_;
  OrderSimulator& sim_;
  const Clock::time_point started_;
  const StorageUse use_;
  const std::vector<std::vector<NodeId>> readers_of_;
  std::vector<NodeId> best_;
  OrderSimulator::Result best_run_;
  bool improved_ = false;
  std::vector<std::size_t> pos_, segment_first_, segment_last_;
};

}  // namespace

PlanResult PlanTrace(ParsedTrace& parsed, const PlanOptions& options) {
  const Clock::time_point started = Clock::now();
  PlanResult plan;
  plan.graph = BuildDependenceGraph(parsed.trace);
  plan.original_statements.reserve(parsed.trace.statements.size());
  for (const Statement& s : parsed.trace.statements) plan.original_statements.push_back(s);
  OrderSimulator sim(parsed, plan.graph, plan.original_statements, options.runtime);
  plan.original_peak_bytes = sim.RunOriginal().peak_bytes;
  Search search(parsed, options, plan, sim, started);
  search.StartFromBaselines();
  const bool movable = search.Movable();
  if (movable) search.ImproveAroundPeak();
  search.Finish(movable);
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
