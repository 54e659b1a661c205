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

std::string UntypedUnpackMessage(const Trace& trace, const Statement& unpack) {
  std::vector<bool> unpacked(trace.values.size(), false);  // collections: their contents are what is unknown
  for (const Statement& st : trace.statements)
    if (st.kind == StatementKind::kUnpack) unpacked[st.source] = true;
  std::string names;
  for (ValueId v = 0; v < trace.values.size(); ++v) {
    const Value& value = trace.values[v];
    if (value.type->kind != ValueKind::kUnknown || unpacked[v] || value.name == "_" ||
        value.defined_at.line < unpack.at.line) {
      continue;
    }
    names += (names.empty() ? "" : ", ") + std::string(value.name);
  }
  return "cannot unpack '" + std::string(trace.values[unpack.source].name) + "' into " +
         std::to_string(unpack.outputs.items.size()) +
         " targets: the trace never says what it holds (no type comments on what is unpacked from "
         "it, as an older Thunder printer writes a backward), so the sizes of " +
         (names.empty() ? std::string("its elements") : names) +
         " are unknown. Print the trace with a newer Thunder, or export the live TraceCtx "
         "(peakmem.to_json_export), which carries every type";
}

const Statement* FirstUnpackOf(const Trace& trace, ValueId collection) {
  for (const Statement& st : trace.statements) {
    if (st.kind == StatementKind::kUnpack && st.source == collection) return &st;
  }
  return nullptr;
}

}  // namespace peakmem
