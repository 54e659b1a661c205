#include "peakmem/trace_builder.h"

namespace peakmem {

TraceBuilder::TraceBuilder(std::shared_ptr<const SourceFile> source) : source_(std::move(source)) {
  trace_.source_name = source_->name();
}

ValueId TraceBuilder::Define(std::string_view name, SourceLocation at) {
  const auto id = static_cast<ValueId>(trace_.values.size());
  auto [it, inserted] = live_.try_emplace(std::string(name), id);
  if (!inserted) {
    Fail(at, "'" + std::string(name) + "' is already defined at line " +
                 std::to_string(trace_.value(it->second).defined_at.line));
  }
  Value v;
  v.name = it->first;
  v.defined_at = at;
  trace_.values.push_back(std::move(v));
  if (!deleted_.empty()) {
    auto del = deleted_.find(name);
    if (del != deleted_.end()) deleted_.erase(del);
  }
  return id;
}

ValueId TraceBuilder::Lookup(std::string_view name) const {
  auto it = live_.find(name);
  return it == live_.end() ? kNoValue : it->second;
}

ValueId TraceBuilder::LookupForUse(std::string_view name, SourceLocation at) const {
  const ValueId id = Lookup(name);
  if (id != kNoValue) return id;
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
    auto del = deleted_.find(key);
    if (del != deleted_.end()) {
      Fail(at, "'" + key + "' is deleted twice (first at line " + std::to_string(del->second) +
                   ")");
    }
    Fail(at, "'del' of unknown name '" + key + "'");
  }
  const ValueId id = it->second;
  auto node = live_.extract(it);
  deleted_.insert_or_assign(std::move(node.key()), del_line);
  return id;
}

void TraceBuilder::SetType(ValueId id, std::string_view type_text, SourceLocation type_at) {
  TypeStringError error;
  std::optional<ValueType> type = ParseTypeString(type_text, &error);
  if (!type) {
    Fail({type_at.line, type_at.column + static_cast<int>(error.offset)}, error.message);
  }
  trace_.value(id).type = std::move(*type);
}

}  // namespace peakmem
