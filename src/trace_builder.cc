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
  Value v;
  v.name = Keep(name);
  v.defined_at = at;
  // The key views the kept name, which lives as long as the trace.
  auto [it, inserted] = names_.try_emplace(v.name, NameEntry{id, kLive});
  if (!inserted) {
    NameEntry& entry = it->second;
    if (entry.deleted_at == kLive) {
      Fail(at, "'" + std::string(name) + "' is already defined at line " +
                   std::to_string(trace_.value(entry.value).defined_at.line));
    }
    entry = NameEntry{id, kLive};  // bound again after its `del`
  }
  trace_.values.push_back(std::move(v));
  return id;
}

ValueId TraceBuilder::Lookup(std::string_view name) const {
  auto it = names_.find(name);
  if (it == names_.end() || it->second.deleted_at != kLive) return kNoValue;
  return it->second.value;
}

ValueId TraceBuilder::LookupForUse(std::string_view name, SourceLocation at) const {
  auto it = names_.find(name);
  if (it == names_.end()) return kNoValue;
  if (it->second.deleted_at != kLive) {
    Fail(at, "'" + std::string(name) + "' is used after 'del' at line " +
                 std::to_string(it->second.deleted_at));
  }
  return it->second.value;
}

ValueId TraceBuilder::Delete(std::string_view name, SourceLocation at, int del_line) {
  auto it = names_.find(name);
  if (it == names_.end()) Fail(at, "'del' of unknown name '" + std::string(name) + "'");
  NameEntry& entry = it->second;
  if (entry.deleted_at != kLive) {
    Fail(at, "'" + std::string(name) + "' is deleted twice (first at line " +
                 std::to_string(entry.deleted_at) + ")");
  }
  entry.deleted_at = del_line;
  return entry.value;
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
