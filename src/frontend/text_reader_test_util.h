// Helpers shared by the text reader's tests (trace_text_reader_test.cc,
// trace_text_comments_test.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "peakmem/ir/trace.h"
#include "test_util.h"

namespace peakmem::text_reader_test {

inline std::vector<std::string> Names(const Trace& trace, const std::vector<ValueId>& ids) {
  std::vector<std::string> names;
  for (ValueId id : ids) names.emplace_back(trace.value(id).name);
  return names;
}

inline std::vector<StatementKind> Kinds(const Trace& trace) {
  std::vector<StatementKind> kinds;
  for (const Statement& s : trace.statements) kinds.push_back(s.kind);
  return kinds;
}

// The byte size of the current definition of `name`; -1 when it is not a
// tensor or does not exist.
inline std::int64_t BytesOf(const Trace& trace, const std::string& name) {
  const Value* v = testing_util::FindValue(trace, name);
  if (v == nullptr || !IsTensorKind(v->type->kind)) return -1;
  return static_cast<std::int64_t>(v->type->bytes);
}

inline std::string ReplaceAll(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = text.find(from); at != std::string::npos;
       at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

}  // namespace peakmem::text_reader_test
