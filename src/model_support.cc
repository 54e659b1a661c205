#include "peakmem/model_support.h"

#include "peakmem/op_registry.h"

namespace peakmem {

void ModelErrors::Fail(SourceLocation at, const std::string& message) const {
  if (parsed_.source) ThrowAt(*parsed_.source, at, message);
  throw TraceError(parsed_.trace.source_name, at, message, "");
}

Step MakeStep(const ParsedTrace& parsed, std::size_t index, std::int64_t delta,
              std::int64_t live) {
  const Statement& s = parsed.trace.statements[index];
  Step step;
  step.index = static_cast<int>(index);
  step.line = s.source_line;
  step.op = s.SymbolName();
  if (!parsed.source_is_printed_trace) {
    step.source = FormatStatement(parsed.trace, s);
  } else if (parsed.source) {
    std::string_view text = parsed.source->Line(s.source_line);
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
    step.source = std::string(text);
  }
  step.delta_bytes = delta;
  step.live_bytes = live;
  step.peak_bytes = live;
  return step;
}

void UnknownOps::Note(const Statement& statement) {
  const std::string name = statement.SymbolName();
  if (FindOp(name) != nullptr) return;
  auto [it, inserted] = ops_.try_emplace(name, Seen{statement.source_line, 0});
  ++it->second.calls;
}

void UnknownOps::AppendDiagnostics(std::vector<std::string>* out,
                                   const std::string& consequence) const {
  for (const auto& [name, seen] : ops_) {
    out->push_back("op '" + name + "' (first at line " + std::to_string(seen.first_line) + ", " +
                   std::to_string(seen.calls) + (seen.calls == 1 ? " call" : " calls") +
                   ") is not in peakmem's op registry; " + consequence);
  }
}

}  // namespace peakmem
