// Exact search of a window of a schedule.
//
// The orders of a few consecutive statements of one segment (k <= 16),
// searched exhaustively by dynamic programming over the subsets already run:
// the memory live after a set of statements does not depend on the order
// they ran in, so the lowest peak reachable from each subset is found once
// (2^k states). Memory is counted as the order heuristics count it
// (StorageUse: what each statement allocates, a storage freed when its last
// reader has run); the planner keeps the window's new order only when the
// exact simulator agrees that the trace's peak dropped. On a program of
// fresh allocations without kernel scratch (a tree of concatenations, say)
// the two counts agree, and a window spanning the whole program finds the
// optimal order.
#pragma once

#include <cstddef>
#include <vector>

#include "peakmem/planning/dependence_graph.h"
#include "peakmem/planning/schedule_heuristics.h"

namespace peakmem {

inline constexpr std::size_t kMaxWindow = 16;

// Reorders order[begin, begin + size) (nodes of one segment, size <=
// kMaxWindow) for the lowest peak inside the window. `position`: each
// node's position in `order`. Returns whether the order changed (`position`
// is then stale).
bool SearchWindow(const DependenceGraph& graph, const StorageUse& use,
                  const std::vector<std::vector<NodeId>>& readers_of, std::vector<NodeId>& order,
                  const std::vector<std::size_t>& position, std::size_t begin, std::size_t size);

// Per storage (allocating node): the nodes that read it (StorageUse::reads inverted).
std::vector<std::vector<NodeId>> ReadersOf(const DependenceGraph& graph, const StorageUse& use);

}  // namespace peakmem
