#include "peakmem/planning/planned_trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "peakmem/planning/schedule_heuristics.h"

namespace peakmem {

FreePlacement PlaceFrees(const DependenceGraph& g, const std::vector<NodeId>& order) {
  FreePlacement frees;
  frees.after.resize(order.size());
  const std::size_t n_values = g.deleted_by_trace.size();
  constexpr std::uint32_t kUnseen = 0xFFFFFFFFu;
  std::vector<std::uint32_t> last(n_values, kUnseen);
  for (std::uint32_t pos = 0; pos < order.size(); ++pos) {
    for (ValueId v : g.touches[order[pos]]) {
      if (v < n_values) last[v] = pos;
    }
  }
  // In first-touched order within a position (Thunder's outs then args).
  for (std::uint32_t pos = 0; pos < order.size(); ++pos) {
    if (order[pos] == g.return_node) continue;  // the frame's exit frees what is left
    for (ValueId v : g.touches[order[pos]]) {
      if (v < n_values && g.deleted_by_trace[v] && last[v] == pos) frees.after[pos].push_back(v);
    }
  }
  for (ValueId v = 0; v < n_values; ++v) {
    if (g.deleted_by_trace[v] && last[v] == kUnseen) frees.before_first.push_back(v);
  }
  return frees;
}

void MaterializeOrder(const DependenceGraph& g, const std::vector<Statement>& original,
                      const std::vector<ArenaSpan<ValueId>>& single_dels, const std::vector<NodeId>& order,
                      SegmentedVector<Statement>* out, std::vector<NodeId>* node_at) {
  const FreePlacement frees = PlaceFrees(g, order);
  *out = SegmentedVector<Statement>();
  if (node_at != nullptr) node_at->clear();
  auto add_del = [&](ValueId v, const Statement& near) {
    Statement& d = out->emplace_back();
    d.kind = StatementKind::kDel;
    d.deleted = single_dels[v];
    d.at = near.at;
    d.source_line = near.source_line;
    if (node_at != nullptr) node_at->push_back(kNoNode);
  };
  std::size_t total = order.size();
  for (const auto& f : frees.after) total += f.size();
  out->reserve(total + frees.before_first.size());
  if (!order.empty()) {
    for (ValueId v : frees.before_first) add_del(v, original[g.statement[order[0]]]);
  }
  for (std::size_t pos = 0; pos < order.size(); ++pos) {
    const Statement& s = original[g.statement[order[pos]]];
    out->push_back(s);
    if (node_at != nullptr) node_at->push_back(order[pos]);
    for (ValueId v : frees.after[pos]) add_del(v, s);
  }
}

namespace {

bool IsBlank(std::string_view line) { return line.find_first_not_of(" \t\r") == std::string_view::npos; }

// Prints `order`'s statements from the printed source with `frees` placed.
// A statement's lines are its own (its line and what is printed under it:
// subsymbols, an unpack's type comments, up to a blank line or the next
// statement), then the frees after it, then its trailing lines (the blank
// line and source comments before the next statement that is not a `del`;
// `del` lines themselves are left out): with the trace's own order and its
// own frees this prints the trace as it was.
std::string PrintOrder(const ParsedTrace& parsed, const std::vector<Statement>& original, const DependenceGraph& g,
                       const std::vector<NodeId>& order, const FreePlacement& frees, const std::string& provenance,
                       std::string_view clear_callee) {
  if (!parsed.source_is_printed_trace || parsed.source == nullptr) {
    throw std::invalid_argument("a planned trace is printed from a printed trace's own lines; " +
                                (parsed.source ? parsed.source->name() : std::string("this trace")) +
                                " was not read from one");
  }
  const SourceFile& src = *parsed.source;
  const Trace& trace = parsed.trace;
  const int line_count = src.line_count();
  if (original.empty() || order.empty()) return std::string(src.text());
  std::string text;
  auto line = [&](int l) {
    text += src.Line(l);
    text += '\n';
  };
  if (!provenance.empty()) text += "# " + provenance + "\n";
  for (int l = 1; l < original.front().source_line; ++l) line(l);
  auto indentation = [&](std::size_t index) {
    const std::string_view first = src.Line(original[index].source_line);
    return std::string(first.substr(0, first.find_first_not_of(' ')));
  };
  auto print_frees = [&](const std::vector<ValueId>& values, const std::string& indent) {
    if (values.empty()) return;
    if (!clear_callee.empty()) {  // Thunder's backward: each collection cleared, the last freed first
      for (auto v = values.rbegin(); v != values.rend(); ++v) {
        if (trace.value(*v).type->kind != ValueKind::kCollection) continue;
        text += fmt::format("{}{}({})\n", indent, clear_callee, trace.value(*v).name);
      }
    }
    text += indent + "del ";
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (i > 0) text += ", ";
      text += trace.value(values[i]).name;
    }
    text += '\n';
  };
  print_frees(frees.before_first, indentation(g.statement[order[0]]));
  for (std::size_t pos = 0; pos < order.size(); ++pos) {
    std::size_t index = g.statement[order[pos]];
    const int first = original[index].source_line;
    int l = first;
    const auto next_line = [&](std::size_t i) {
      return i + 1 < original.size() ? original[i + 1].source_line : line_count + 1;
    };
    for (int end = std::max(first + 1, next_line(index)); l < end && l <= line_count; ++l) {
      if (l > first && IsBlank(src.Line(l))) break;
      line(l);
    }
    print_frees(frees.after[pos], indentation(index));
    // The trailing lines, past any `del` statements that follow.
    while (true) {
      for (int end = std::max(first + 1, next_line(index)); l < end && l <= line_count; ++l) line(l);
      if (index + 1 >= original.size() || original[index + 1].kind != StatementKind::kDel) break;
      ++index;
      l = original[index].source_line + 1;
    }
  }
  return text;
}

}  // namespace

std::string PrintPlannedTrace(const ParsedTrace& parsed, const std::vector<Statement>& original,
                              const DependenceGraph& g, const std::vector<NodeId>& order,
                              const std::string& provenance) {
  return PrintOrder(parsed, original, g, order, PlaceFrees(g, order), provenance, "");
}

std::string PrintWithLastUseFrees(const ParsedTrace& parsed, bool clear_collections) {
  const Trace& trace = parsed.trace;
  DependenceGraph g = BuildDependenceGraph(trace);
  // del_last_used's rule: a value is freed after the last statement naming
  // it unless the trace returns it; a parameter no statement names is left.
  std::vector<bool> freed(trace.values.size(), false);
  std::vector<ValueId> returned;
  for (NodeId n = 0; n < g.size(); ++n) {
    if (n == g.return_node) continue;
    for (ValueId v : g.touches[n]) freed[v] = true;
  }
  if (g.return_node != kNoNode) {
    const Statement& ret = trace.statements[g.statement[g.return_node]];
    FlattenValues(*ret.returned, &returned);
  }
  for (ValueId v : returned) freed[v] = false;
  g.deleted_by_trace = std::move(freed);
  std::vector<Statement> original(trace.statements.begin(), trace.statements.end());
  std::string clear_callee;
  if (clear_collections) {
    clear_callee = kClearSymbol;
    for (const Statement& s : original) {
      if (s.kind == StatementKind::kClear && s.legacy_clear) clear_callee = kLegacyClearSymbol;
    }
  }
  const std::vector<NodeId> order = TraceOrder(g);
  return PrintOrder(parsed, original, g, order, PlaceFrees(g, order), "", clear_callee);
}

}  // namespace peakmem
