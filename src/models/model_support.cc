#include "peakmem/models/model_support.h"

#include "peakmem/semantics/op_registry.h"

namespace peakmem {

void ModelErrors::Fail(SourceLocation at, const std::string& message) const {
  if (parsed_.source) ThrowAt(*parsed_.source, at, message);
  throw TraceError(parsed_.trace.source_name, at, message, "");
}

StepMaker::StepMaker(const ParsedTrace& parsed, Report* report)
    : parsed_(parsed), report_(report) {
  if (parsed.source_is_printed_trace) report->backing = parsed.source;
}

std::string_view StepMaker::Op(const Statement& s) {
  if (s.call_symbol != kNoCallSymbol) {
    if (by_call_symbol_.size() <= s.call_symbol) by_call_symbol_.resize(s.call_symbol + 1);
    std::string_view& kept = by_call_symbol_[s.call_symbol];
    if (kept.data() == nullptr) kept = report_->strings->Save(parsed_.trace.SymbolOf(s));
    if (kept.data() != nullptr) return kept;
  }
  const std::string_view name = parsed_.trace.SymbolName(s);
  auto [it, inserted] = ops_.try_emplace(name);
  if (inserted) it->second = report_->strings->Save(name);
  return it->second;
}

void StepMaker::Warm() {
  Statement s;
  for (std::size_t c = 0; c < parsed_.trace.call_symbols.size(); ++c) {
    s.call_symbol = static_cast<std::uint32_t>(c);
    for (StatementKind kind : {StatementKind::kCall, StatementKind::kClear}) {
      s.kind = kind;
      Op(s);
    }
  }
  s.call_symbol = kNoCallSymbol;
  for (StatementKind kind : {StatementKind::kCall, StatementKind::kUnpack, StatementKind::kAssign,
                             StatementKind::kDel, StatementKind::kClear, StatementKind::kReturn}) {
    s.kind = kind;
    Op(s);
  }
}

Step StepMaker::Make(std::size_t index, std::int64_t delta, std::int64_t live) {
  const Statement& s = parsed_.trace.statements[index];
  Step step;
  step.index = static_cast<int>(index);
  step.line = s.source_line;
  step.op = Op(s);
  if (!parsed_.source_is_printed_trace) {
    step.source = report_->strings->Save(FormatStatement(parsed_.trace, s));
  } else if (parsed_.source) {
    if (s.text_offset != kNoOffset && s.text_length != 0) {
      step.source = parsed_.source->text().substr(s.text_offset, s.text_length);
    } else {
      std::string_view text = s.text_offset != kNoOffset ? parsed_.source->LineAt(s.text_offset)
                                                         : parsed_.source->Line(s.source_line);
      while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
      step.source = text;
    }
  }
  step.delta_bytes = delta;
  step.live_bytes = live;
  step.peak_bytes = live;
  return step;
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
