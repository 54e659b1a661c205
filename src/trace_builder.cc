#include "peakmem/trace_builder.h"

namespace peakmem {

TraceBuilder::TraceBuilder(std::shared_ptr<const SourceFile> source) : source_(std::move(source)) {
  trace_.source_name = source_->name();
  trace_.backing = source_;
}

std::string_view TraceBuilder::Keep(std::string_view text) {
  const std::string_view source = source_->text();
  const std::less_equal<const char*> le;
  if (le(source.data(), text.data()) && le(text.data() + text.size(), source.data() + source.size())) {
    return text;
  }
  return trace_.Save(text);
}

std::string_view TraceBuilder::Intern(std::string_view text) {
  auto it = interned_.find(text);
  if (it != interned_.end()) return it->second;
  const std::string_view kept = Keep(text);
  interned_.emplace(kept, kept);
  return kept;
}

void TraceBuilder::SetCallSymbol(Statement* s, std::string_view callee, std::string_view symbol,
                                 std::string_view symbol_id) {
  auto it = call_symbols_.find(std::make_tuple(callee, symbol, symbol_id));
  if (it == call_symbols_.end()) {
    const CallSymbol kept{Intern(callee), Intern(symbol), Intern(symbol_id)};
    const auto index = static_cast<std::uint32_t>(trace_.call_symbols.size());
    trace_.call_symbols.push_back(kept);
    it = call_symbols_.emplace(std::make_tuple(kept.callee, kept.symbol, kept.symbol_id), index)
             .first;
  }
  const CallSymbol& kept = trace_.call_symbols[it->second];
  s->callee = kept.callee;
  s->symbol = kept.symbol;
  s->symbol_id = kept.symbol_id;
  s->call_symbol = it->second;
}

ValueId TraceBuilder::Define(std::string_view name, SourceLocation at) {
  const auto id = static_cast<ValueId>(trace_.values.size());
  auto [it, inserted] = live_.try_emplace(name, id);
  if (!inserted) {
    Fail(at, "'" + std::string(name) + "' is already defined at line " +
                 std::to_string(trace_.value(it->second).defined_at.line));
  }
  Value v;
  v.name = Keep(name);
  // The key must outlive the caller's view too.
  if (v.name.data() != name.data()) {
    live_.erase(it);
    live_.emplace(v.name, id);
  }
  v.defined_at = at;
  trace_.values.push_back(std::move(v));
  // A name deleted before and defined again stays in deleted_: lookups try
  // the live names first, so the old entry only matters once it is deleted
  // again (which overwrites it).
  return id;
}

ValueId TraceBuilder::Lookup(std::string_view name) const {
  auto it = live_.find(name);
  return it == live_.end() ? kNoValue : it->second;
}

ValueId TraceBuilder::LookupForUse(std::string_view name, SourceLocation at) const {
  const ValueId id = Lookup(name);
  if (id != kNoValue) return id;
  EnterDeletedNames();
  auto del = deleted_.find(name);
  if (del != deleted_.end()) {
    Fail(at, "'" + std::string(name) + "' is used after 'del' at line " +
                 std::to_string(del->second));
  }
  return kNoValue;
}

ValueId TraceBuilder::Delete(std::string_view name, SourceLocation at, int del_line) {
  auto it = live_.find(name);
  if (it == live_.end()) {
    const std::string key(name);
    EnterDeletedNames();
    auto del = deleted_.find(name);
    if (del != deleted_.end()) {
      Fail(at, "'" + key + "' is deleted twice (first at line " + std::to_string(del->second) +
                   ")");
    }
    Fail(at, "'del' of unknown name '" + key + "'");
  }
  const ValueId id = it->second;
  live_.erase(it);
  deleted_log_.emplace_back(id, del_line);
  return id;
}

void TraceBuilder::EnterDeletedNames() const {
  // In order, so a name deleted again (after being defined again) keeps its
  // latest del, as entering each at its del would.
  for (const auto& [id, line] : deleted_log_) {
    deleted_.insert_or_assign(trace_.value(id).name, line);
  }
  deleted_log_.clear();
}

void TraceBuilder::SetType(ValueId id, std::string_view type_text, SourceLocation type_at) {
  if (const ValueType* known = trace_.FindType(type_text)) {
    trace_.value(id).type = known;
    return;
  }
  TypeStringError error;
  std::optional<ValueType> type = ParseTypeString(type_text, &error);
  if (!type) {
    Fail({type_at.line, type_at.column + static_cast<int>(error.offset)}, error.message);
  }
  trace_.value(id).type = trace_.InternType(std::move(*type));
}

}  // namespace peakmem
