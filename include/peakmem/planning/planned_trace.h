// A trace run in another order: its statements, and its printed text.
//
// The planner's schedule is an order of the dependence graph's nodes (the
// trace's statements other than `del`). The trace it makes runs them in that
// order and frees each value the original trace deletes right after its last
// use in the new order (as Thunder's del_last_used places frees: after the
// last statement that defines or reads it; a parameter nothing reads, before
// the first statement). Values the original never deletes are never deleted.
#pragma once

#include <string>
#include <vector>

#include "peakmem/ir/parsed_trace.h"
#include "peakmem/planning/dependence_graph.h"

namespace peakmem {

// Where each value the trace deletes is freed in `order`: per position, the
// values freed after the node at that position, in first-touched order;
// `before_first`: the deleted parameters no node touches.
struct FreePlacement {
  std::vector<std::vector<ValueId>> after;  // per position in the order
  std::vector<ValueId> before_first;
};
FreePlacement PlaceFrees(const DependenceGraph& graph, const std::vector<NodeId>& order);

// Builds trace statements for `order` into `out` from `original` (the
// trace's statements before planning, indexed as graph.statement says):
// each node's statement, then one `del` statement per freed value (a `del
// a, b` frees as `del a` then `del b` do). `single_dels[v]` must hold a
// one-value span for every value the trace deletes (the trace's arena keeps
// them, so that re-materializing allocates nothing there). `node_at`, when
// given, receives the node of each statement made (kNoNode for a `del`).
void MaterializeOrder(const DependenceGraph& graph, const std::vector<Statement>& original,
                      const std::vector<ArenaSpan<ValueId>>& single_dels, const std::vector<NodeId>& order,
                      SegmentedVector<Statement>* out, std::vector<NodeId>* node_at = nullptr);

// The printed trace run in `order`: the original's header (everything before
// its first statement: imports, decorators, the signature and its type
// comments) and each statement's lines in the new order: its own (its line
// and what is printed under it, up to a blank line or the next statement),
// the `del`s PlaceFrees puts after it, then its trailing lines (a blank line
// and the source comments before the next statement other than a `del`),
// so that the trace's own order and frees print it as it was. Needs the
// printed source (ParsedTrace::source_is_printed_trace); throws
// std::invalid_argument otherwise.
std::string PrintPlannedTrace(const ParsedTrace& parsed, const std::vector<Statement>& original,
                              const DependenceGraph& graph, const std::vector<NodeId>& order,
                              const std::string& provenance);

// A printed trace read without its frees (no `del` statements; for a
// backward, no collection clears either) printed with them placed by
// Thunder's del_last_used: walking backwards, after the first statement that
// names a value not yet seen and not returned, one `del` of those values
// (its outputs' then its arguments' order); with `clear_collections` (how
// Thunder frees a backward's), each collection among them is cleared first
// (the last one first), spelled as the trace spells its clears. Throws
// std::invalid_argument for a trace not read from printed text.
std::string PrintWithLastUseFrees(const ParsedTrace& parsed, bool clear_collections);

}  // namespace peakmem
