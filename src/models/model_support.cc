#include "peakmem/models/model_support.h"

#include "peakmem/semantics/op_registry.h"

namespace peakmem {

void ModelErrors::Fail(SourceLocation at, const std::string& message) const {
  if (parsed_.source) ThrowAt(*parsed_.source, at, message);
  throw TraceError(parsed_.trace.source_name, at, message, "");
}

OpLookup::OpLookup(const Trace& trace) {
  ops_.reserve(trace.call_symbols.size());
  for (const CallSymbol& c : trace.call_symbols) ops_.push_back(FindCallOp(c.callee, c.symbol));
}

void UnknownOps::Note(const Trace& trace, const Statement& statement, const OpInfo* op) {
  if (op != nullptr) return;
  const std::string_view name = trace.SymbolName(statement);
  auto [it, inserted] = ops_.try_emplace(std::string(name), Seen{statement.source_line, 0});
  ++it->second.calls;
}

void UnknownOps::AppendDiagnostics(std::vector<std::string>* out, const std::string& consequence,
                                   int peak_line) const {
  for (const auto& [name, seen] : ops_) {
    std::string affects;
    if (peak_line >= 0) {
      affects = seen.first_line <= peak_line
                    ? "; the peak (at line " + std::to_string(peak_line) +
                          ") may be off by what it allocates inside or if its output is a view"
                    : "; the peak (at line " + std::to_string(peak_line) +
                          ") comes before it: only the live bytes after it and the final bytes may "
                          "be off";
    }
    out->push_back("op '" + name + "' (first at line " + std::to_string(seen.first_line) + ", " +
                   std::to_string(seen.calls) + (seen.calls == 1 ? " call" : " calls") +
                   ") is not in peakmem's op registry; " + consequence + affects);
  }
}

}  // namespace peakmem
