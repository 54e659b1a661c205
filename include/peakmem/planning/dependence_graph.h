// The orders a trace's statements may run in.
//
// A planner moves statements; this graph says which moves keep the program
// computing the same values. Nodes are the trace's statements other than
// `del` (the planner places frees itself, schedule.h). Edges are data
// dependences: a statement that reads a value comes after the statement that
// defines it (values are SSA: a name defined again after `del` is a new
// value). Statements whose effect the op registry does not declare pure are
// pinned: in-place ops, ops that return an input they may have written
// (`copy_`), ops with no tensor output (bookkeeping, checks), fusion regions
// (which may hold any of those), ops peakmem does not know, collection
// clears and the return. A pinned statement splits the trace into segments:
// nothing moves across it. Calls of random ops keep their order among
// themselves (each draw depends on the generator's state), and so do
// collectives (every rank must issue them alike).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "peakmem/ir/trace.h"

namespace peakmem {

using NodeId = std::uint32_t;

struct DependenceGraph {
  // Node -> its statement's index in the trace (ascending: the trace order).
  std::vector<std::uint32_t> statement;
  // Data and ordering dependences, both directions, without duplicates.
  std::vector<std::vector<NodeId>> preds;
  std::vector<std::vector<NodeId>> succs;
  // Node -> its segment (ascending): nodes only move within their segment;
  // a pinned node is a segment of its own.
  std::vector<std::uint32_t> segment;
  std::vector<bool> pinned;
  // Per node: the values it defines then the values it reads (Thunder's
  // flat_proxy_outs then flat_proxy_args), each once: what a free after the
  // node's last use follows.
  std::vector<std::vector<ValueId>> touches;
  // Per value: the trace frees it with `del` (so it may be freed after its
  // last use wherever that lands). Values the trace never deletes (returned
  // ones, or any a trace keeps) are never deleted by a plan either.
  std::vector<bool> deleted_by_trace;
  // Per value: the node defining it (kNoNode for the signature's parameters).
  std::vector<NodeId> definer;
  // Per node: bytes of the fresh tensors it allocates (its outputs, for an op
  // the registry says allocates; 0 for views and pinned bookkeeping), and the
  // node whose storage each of its outputs uses (itself, or a view's base's
  // allocator): what the order heuristics weigh. The exact simulator, not
  // these, judges every plan.
  std::vector<std::int64_t> alloc_bytes;
  std::vector<NodeId> storage_of;  // per value: the allocating node (kNoNode: a parameter's)
  // Per node: its tensor outputs all hold at most one element (XLA's list
  // scheduler runs such nodes first).
  std::vector<bool> scalar_output;
  NodeId return_node = 0xFFFFFFFFu;  // the `return` (nothing is freed after it)
  // How many statements are pinned, and the first one's reason, for reports.
  std::size_t pinned_count = 0;
  std::string first_pin_reason;

  std::size_t size() const { return statement.size(); }
};

inline constexpr NodeId kNoNode = 0xFFFFFFFFu;

// Why `statement` may not move (nullptr: it may, within its data dependences).
const char* PinReason(const Trace& trace, const Statement& statement);

DependenceGraph BuildDependenceGraph(const Trace& trace);

// Whether `order` (a permutation of the graph's nodes) respects every
// dependence and keeps each segment's nodes between its neighbours'.
bool IsValidOrder(const DependenceGraph& graph, const std::vector<NodeId>& order);

}  // namespace peakmem
