#include "peakmem/planning/planned_trace.h"

#include <stdexcept>

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

std::string PrintPlannedTrace(const ParsedTrace& parsed, const std::vector<Statement>& original,
                              const DependenceGraph& g, const std::vector<NodeId>& order,
                              const std::string& provenance) {
  if (!parsed.source_is_printed_trace || parsed.source == nullptr) {
    throw std::invalid_argument("a planned trace is printed from a printed trace's own lines; " +
                                (parsed.source ? parsed.source->name() : std::string("this trace")) +
                                " was not read from one");
  }
  const SourceFile& src = *parsed.source;
  const Trace& trace = parsed.trace;
  const int line_count = src.line_count();
  if (original.empty() || order.empty()) return std::string(src.text());
  // Each statement's lines: from its own to the next statement's (or the end).
  auto block = [&](std::size_t index) {
    const int first = original[index].source_line;
    const int end = index + 1 < original.size() ? original[index + 1].source_line : line_count + 1;
    return std::pair<int, int>{first, std::max(first + 1, end)};
  };
  std::string text;
  if (!provenance.empty()) text += "# " + provenance + "\n";
  for (int line = 1; line < original.front().source_line; ++line) {
    text += src.Line(line);
    text += '\n';
  }
  auto indentation = [&](std::size_t index) {
    const std::string_view line = src.Line(original[index].source_line);
    return std::string(line.substr(0, line.find_first_not_of(' ')));
  };
  auto print_del = [&](const std::vector<ValueId>& values, const std::string& indent) {
    if (values.empty()) return;
    text += indent + "del ";
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (i > 0) text += ", ";
      text += trace.value(values[i]).name;
    }
    text += '\n';
  };
  const FreePlacement frees = PlaceFrees(g, order);
  print_del(frees.before_first, indentation(g.statement[order[0]]));
  for (std::size_t pos = 0; pos < order.size(); ++pos) {
    const std::size_t index = g.statement[order[pos]];
    const auto [first, end] = block(index);
    for (int line = first; line < end && line <= line_count; ++line) {
      text += src.Line(line);
      text += '\n';
    }
    print_del(frees.after[pos], indentation(index));
  }
  return text;
}

}  // namespace peakmem
