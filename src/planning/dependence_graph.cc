#include "peakmem/planning/dependence_graph.h"

#include <algorithm>

#include "peakmem/semantics/op_registry.h"

namespace peakmem {

const char* PinReason(const Trace& trace, const Statement& statement) {
  switch (statement.kind) {
    case StatementKind::kUnpack:
    case StatementKind::kAssign:
      return nullptr;
    case StatementKind::kDel:
      return nullptr;  // not a node: the planner places frees
    case StatementKind::kClear:
      return "a collection clear (it changes what the collection holds)";
    case StatementKind::kReturn:
      return "the return";
    case StatementKind::kCall:
      break;
  }
  const OpInfo* op = FindCallOp(trace.CalleeOf(statement), trace.SymbolOf(statement));
  if (op == nullptr) return "an op peakmem does not know (its effects are unknown)";
  switch (op->effect) {
    case OpEffect::kAllocates:
    case OpEffect::kViewOfInput:
    case OpEffect::kMaybeView:
      return nullptr;
    case OpEffect::kReturnsInput:
      return "an op that returns an input it may have written (copy_, update_aliases, wait)";
    case OpEffect::kInPlace:
      return "an in-place op";
    case OpEffect::kNoOutput:
      return "an op without tensor outputs (bookkeeping or a check)";
    case OpEffect::kFusion:
      return "a fusion region (it may hold in-place or random ops)";
  }
  return "an op of unknown effect";
}

namespace {

void AddEdge(DependenceGraph& g, NodeId from, NodeId to) {
  if (from == to) return;
  std::vector<NodeId>& p = g.preds[to];
  if (std::find(p.begin(), p.end(), from) != p.end()) return;
  p.push_back(from);
  g.succs[from].push_back(to);
}

void AddOnce(std::vector<ValueId>& list, ValueId v) {
  if (v == kNoValue) return;
  if (std::find(list.begin(), list.end(), v) == list.end()) list.push_back(v);
}

// A node's outputs: their definer, what the node allocates, whose storage
// each lives in (its own for an allocating op's tensors, else its first
// tensor argument's or the unpacked collection's), and whether they are
// all scalars.
void NoteOutputs(const Trace& trace, const Statement& s, const OpInfo* op, NodeId node,
                 const std::vector<ValueId>& outs, const std::vector<ValueId>& args, DependenceGraph& g) {
  const std::size_t n_values = trace.values.size();
  const bool allocates = op != nullptr && (op->effect == OpEffect::kAllocates || op->effect == OpEffect::kFusion);
  NodeId base_storage = kNoNode;
  for (ValueId v : args) {
    if (v < n_values && IsTensorKind(trace.value(v).type->kind)) {
      base_storage = g.storage_of[v];
      break;
    }
  }
  if (s.kind == StatementKind::kUnpack || s.kind == StatementKind::kAssign) {
    base_storage = s.source < n_values ? g.storage_of[s.source] : kNoNode;
  }
  std::int64_t bytes = 0;
  bool scalar = false, larger = false;
  for (ValueId v : outs) {
    if (v >= n_values) continue;
    g.definer[v] = node;
    const ValueType& t = *trace.value(v).type;
    if (!IsTensorKind(t.kind)) {
      g.storage_of[v] = base_storage;
      continue;
    }
    (t.numel <= 1 ? scalar : larger) = true;
    if (allocates) {
      bytes += static_cast<std::int64_t>(t.bytes);
      g.storage_of[v] = node;
    } else {
      g.storage_of[v] = base_storage;
    }
  }
  g.alloc_bytes.push_back(bytes);
  g.scalar_output.push_back(scalar && !larger);
}

}  // namespace

DependenceGraph BuildDependenceGraph(const Trace& trace) {
  DependenceGraph g;
  const std::size_t n_values = trace.values.size();
  g.deleted_by_trace.assign(n_values, false);
  g.definer.assign(n_values, kNoNode);
  g.storage_of.assign(n_values, kNoNode);
  std::uint32_t segment = 0;
  bool segment_open = false;
  NodeId last_random = kNoNode;
  NodeId last_collective = kNoNode;
  std::vector<ValueId> outs, args;
  for (std::size_t i = 0; i < trace.statements.size(); ++i) {
    const Statement& s = trace.statements[i];
    if (s.kind == StatementKind::kDel) {
      for (ValueId v : s.deleted) {
        if (v < n_values) g.deleted_by_trace[v] = true;
      }
      continue;
    }
    const NodeId node = static_cast<NodeId>(g.statement.size());
    g.statement.push_back(static_cast<std::uint32_t>(i));
    g.preds.emplace_back();
    g.succs.emplace_back();
    if (s.kind == StatementKind::kReturn) g.return_node = node;
    const char* pin = PinReason(trace, s);
    g.pinned.push_back(pin != nullptr);
    if (pin != nullptr) {
      if (g.pinned_count++ == 0) g.first_pin_reason = pin;
      if (segment_open) ++segment;
      g.segment.push_back(segment++);
      segment_open = false;
    } else {
      g.segment.push_back(segment);
      segment_open = true;
    }
    FlatOutputs(s, &outs);
    FlatArgs(s, &args);
    std::vector<ValueId>& touches = g.touches.emplace_back();
    for (ValueId v : outs) AddOnce(touches, v);
    for (ValueId v : args) AddOnce(touches, v);
    for (ValueId v : args) {
      if (v < n_values && g.definer[v] != kNoNode) AddEdge(g, g.definer[v], node);
    }
    const OpInfo* op = s.kind == StatementKind::kCall ? FindCallOp(trace.CalleeOf(s), trace.SymbolOf(s)) : nullptr;
    NoteOutputs(trace, s, op, node, outs, args, g);
    if (op != nullptr && op->random) {
      if (last_random != kNoNode) AddEdge(g, last_random, node);
      last_random = node;
    }
    if (op != nullptr && op->collective) {
      if (last_collective != kNoNode) AddEdge(g, last_collective, node);
      last_collective = node;
    }
  }
  return g;
}

bool IsValidOrder(const DependenceGraph& g, const std::vector<NodeId>& order) {
  if (order.size() != g.size()) return false;
  std::vector<std::uint32_t> pos(g.size(), 0xFFFFFFFFu);
  for (std::uint32_t i = 0; i < order.size(); ++i) {
    if (order[i] >= g.size() || pos[order[i]] != 0xFFFFFFFFu) return false;
    pos[order[i]] = i;
  }
  for (NodeId v = 0; v < g.size(); ++v) {
    for (NodeId p : g.preds[v]) {
      if (pos[p] >= pos[v]) return false;
    }
  }
  for (std::uint32_t i = 1; i < order.size(); ++i) {
    if (g.segment[order[i - 1]] > g.segment[order[i]]) return false;
  }
  return true;
}

}  // namespace peakmem
