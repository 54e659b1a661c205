#include "peakmem/trace.h"

namespace peakmem {

const char* ContainerKindName(ContainerKind kind) {
  switch (kind) {
    case ContainerKind::kUnknown: return "unknown";
    case ContainerKind::kList: return "list";
    case ContainerKind::kTuple: return "tuple";
    case ContainerKind::kDict: return "dict";
    case ContainerKind::kSet: return "set";
  }
  return "?";
}

const char* StatementKindName(StatementKind kind) {
  switch (kind) {
    case StatementKind::kCall: return "call";
    case StatementKind::kUnpack: return "unpack";
    case StatementKind::kAssign: return "assign";
    case StatementKind::kDel: return "del";
    case StatementKind::kClear: return "clear";
    case StatementKind::kReturn: return "return";
  }
  return "?";
}

std::string Statement::SymbolName() const {
  switch (kind) {
    case StatementKind::kDel: return "python_del";
    case StatementKind::kReturn: return "python_return";
    case StatementKind::kUnpack: return "unpack_sequence";
    case StatementKind::kAssign: return "assign";
    case StatementKind::kCall:
    case StatementKind::kClear:
      return symbol;
  }
  return callee;
}

void FlattenValues(const Expr& expr, std::vector<ValueId>* out) {
  if (expr.kind == Expr::Kind::kValue) {
    out->push_back(expr.value);
    return;
  }
  for (const Expr& item : expr.items) FlattenValues(item, out);
}

void FlattenValues(const Pattern& pattern, std::vector<ValueId>* out) {
  if (pattern.kind == Pattern::Kind::kValue) {
    out->push_back(pattern.value);
    return;
  }
  for (const Pattern& item : pattern.items) FlattenValues(item, out);
}

std::vector<ValueId> FlatArgs(const Statement& statement) {
  std::vector<ValueId> out;
  switch (statement.kind) {
    case StatementKind::kCall:
      for (const Expr& e : statement.args) FlattenValues(e, &out);
      for (const auto& [name, e] : statement.kwargs) FlattenValues(e, &out);
      break;
    case StatementKind::kClear:
    case StatementKind::kUnpack:
    case StatementKind::kAssign:
      out.push_back(statement.source);
      break;
    case StatementKind::kDel:
      out = statement.deleted;
      break;
    case StatementKind::kReturn:
      FlattenValues(statement.returned, &out);
      break;
  }
  return out;
}

std::vector<ValueId> FlatOutputs(const Statement& statement) {
  std::vector<ValueId> out;
  if (statement.kind == StatementKind::kCall || statement.kind == StatementKind::kUnpack ||
      statement.kind == StatementKind::kAssign) {
    FlattenValues(statement.outputs, &out);
  }
  return out;
}

std::vector<const Pattern*> CollectionContents(const Trace& trace) {
  std::vector<const Pattern*> contents(trace.values.size(), nullptr);
  for (const Statement& s : trace.statements) {
    if (s.kind == StatementKind::kUnpack && s.source != kNoValue &&
        contents[s.source] == nullptr) {
      contents[s.source] = &s.outputs;
    }
  }
  return contents;
}

}  // namespace peakmem
