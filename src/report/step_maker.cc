#include "peakmem/report/step_maker.h"

namespace peakmem {

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

}  // namespace peakmem
