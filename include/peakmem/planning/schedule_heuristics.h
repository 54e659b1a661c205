// The orders other systems pick, on peakmem's dependence graph.
//
// Inductor's reorder_for_peak_memory (torch/_inductor/memory.py) scores the
// compiled order and three list schedules with an idealised liveness count
// and keeps the best: LPMF (least peak memory first), BFS and DFS. They are
// re-implemented here from that file, on the same graph the planner searches,
// so that the planner starts from them and a benchmark can compare against
// them; each order is then judged by the exact simulator, not by the
// heuristics' own count. XLA's default memory scheduler
// (xla/service/hlo_memory_scheduler.cc) does the same with three: a list
// scheduler, a DFS and the plain post order; they are here too. Every order keeps segments (pinned statements) in
// place and respects every dependence (IsValidOrder).
#pragma once

#include <vector>

#include "peakmem/planning/dependence_graph.h"

namespace peakmem {

// The trace's own order.
std::vector<NodeId> TraceOrder(const DependenceGraph& graph);

// Inductor's topological_sort_lpmf: among the ready nodes, the one that fits
// under the peak so far (then the smallest net allocation: its outputs minus
// the buffers it frees, then the trace order).
std::vector<NodeId> LeastPeakMemoryFirstOrder(const DependenceGraph& graph);

// Inductor's topological_sort_bfs: ready nodes first-in first-out, by the
// position of their last-scheduled predecessor, then the trace order.
std::vector<NodeId> BreadthFirstOrder(const DependenceGraph& graph);

// Inductor's topological_sort_dfs: nodes taken by ascending size (what they
// allocate plus the storages they read), each after its predecessors,
// visited the same way (a post-order depth-first walk).
std::vector<NodeId> DepthFirstOrder(const DependenceGraph& graph);

// XLA's ListScheduler: among the ready nodes, the one whose run frees the
// most bytes net of what it allocates (then the most users; a node with
// only scalar outputs first), ties to the node made ready last.
std::vector<NodeId> XlaListOrder(const DependenceGraph& graph);

// XLA's DFSMemoryScheduler: a post-order walk from the sinks, visiting
// predecessors with more transitive extra users first, then more transitive
// bytes, then the trace order.
std::vector<NodeId> XlaDepthFirstOrder(const DependenceGraph& graph);

// XLA's PostOrderMemoryScheduler: the plain post order from the sinks,
// predecessors in the order the statement reads them.
std::vector<NodeId> XlaPostOrder(const DependenceGraph& graph);

// The storages a node reads, other than its own (allocating node ids), and
// for each storage how many nodes read it: the liveness the heuristics count.
struct StorageUse {
  std::vector<std::vector<NodeId>> reads;   // per node
  std::vector<std::uint32_t> readers;       // per allocating node
  std::vector<bool> freeable;               // per allocating node: every value in it is deleted
};
StorageUse ComputeStorageUse(const DependenceGraph& graph);

}  // namespace peakmem
