#include "peakmem/ir/trace.h"

#include <algorithm>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include <charconv>

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

bool IsStatementSymbol(std::string_view symbol) {
  for (std::string_view s :
       {kDelSymbol, kReturnSymbol, kUnpackSymbol, kAssignSymbol, kClearSymbol, kLegacyClearSymbol}) {
    if (symbol == s) return true;
  }
  return false;
}

std::string_view Trace::SymbolName(const Statement& s) const {
  switch (s.kind) {
    case StatementKind::kDel: return kDelSymbol;
    case StatementKind::kReturn: return kReturnSymbol;
    case StatementKind::kUnpack: return kUnpackSymbol;
    case StatementKind::kAssign: return kAssignSymbol;
    case StatementKind::kCall:
    case StatementKind::kClear:
      return SymbolOf(s);
  }
  return CalleeOf(s);
}

NumberKind ClassifyNumber(std::string_view t) {
  if (t.empty()) return NumberKind::kNone;
  if (t == "True" || t == "False") return NumberKind::kBool;
  if (t == "inf" || t == "-inf" || t == "nan") return NumberKind::kFloat;
  // float('inf'), -float('inf'), float("nan"): Python's float of a string.
  std::string_view unsigned_t = t;
  if (!unsigned_t.empty() && (unsigned_t[0] == '-' || unsigned_t[0] == '+'))
    unsigned_t.remove_prefix(1);
  if (unsigned_t.size() > 8 && unsigned_t.substr(0, 6) == "float(" && unsigned_t.back() == ')' &&
      (unsigned_t[6] == '\'' || unsigned_t[6] == '"')) {
    return NumberKind::kFloat;
  }
  const char c = t[0];
  if (!((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.')) return NumberKind::kNone;
  if (t.back() == 'j') return NumberKind::kComplex;
  if (t.find_first_of(".eE") != std::string_view::npos || t.find("inf") != std::string_view::npos ||
      t.find("nan") != std::string_view::npos) {
    return NumberKind::kFloat;
  }
  return NumberKind::kInt;
}

void Expr::SetConstant(std::string_view constant_text) {
  kind = Kind::kConstant;
  text = constant_text;
  number = ClassifyNumber(text);
  has_int = false;
  int_value = 0;
  if (number == NumberKind::kInt) {
    const char* begin = text.data();
    const char* end = begin + text.size();
    auto [ptr, ec] = std::from_chars(begin, end, int_value);
    has_int = ec == std::errc() && ptr == end;
    if (!has_int) int_value = 0;
  }
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
  FlatArgs(statement, &out);
  return out;
}

void FlatArgs(const Statement& statement, std::vector<ValueId>* out_ptr) {
  std::vector<ValueId>& out = *out_ptr;
  out.clear();
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
      out.assign(statement.deleted.begin(), statement.deleted.end());
      break;
    case StatementKind::kReturn:
      FlattenValues(*statement.returned, &out);
      break;
  }
}

std::vector<ValueId> FlatOutputs(const Statement& statement) {
  std::vector<ValueId> out;
  FlatOutputs(statement, &out);
  return out;
}

void FlatOutputs(const Statement& statement, std::vector<ValueId>* out) {
  out->clear();
  if (statement.kind == StatementKind::kCall || statement.kind == StatementKind::kUnpack ||
      statement.kind == StatementKind::kAssign) {
    FlattenValues(statement.outputs, out);
  }
}

const ValueType* Trace::InternType(ValueType type) {
  if (!type.text.empty()) {
    auto it = types_by_text_.find(type.text);
    if (it != types_by_text_.end()) return it->second;
  }
  const ValueType* stored = &types_.emplace_back(std::move(type));
  if (!stored->text.empty()) types_by_text_.emplace(stored->text, stored);
  return stored;
}

ExprList Trace::SaveExprs(std::span<const Expr> items,
                          std::span<const std::string_view> keywords) {
  static_assert(std::is_trivially_copyable_v<Expr> && std::is_trivially_destructible_v<Expr>);
  if (items.empty()) return {};
  CheckArraySize(items.size());
  // The keyword names follow the items (ExprList::keywords).
  static_assert(alignof(std::string_view) <= alignof(Expr) && sizeof(Expr) % alignof(std::string_view) == 0);
  void* room = strings_.Allocate(items.size_bytes() + keywords.size_bytes(), alignof(Expr));
  Expr* data = static_cast<Expr*>(room);
  std::uninitialized_copy(items.begin(), items.end(), data);
  std::uninitialized_copy(keywords.begin(), keywords.end(),
                          reinterpret_cast<std::string_view*>(data + items.size()));
  return ExprList(data, items.size(), keywords.size());
}

void Trace::CheckArraySize(std::size_t n) {
  if (n > UINT32_MAX) throw std::length_error("a list of over 2^32 items");
}

void Trace::AdoptStorage(Trace&& other) {
  adopted_strings_.push_back(std::move(other.strings_));
  adopted_types_.push_back(std::move(other.types_));
  for (StringArena& a : other.adopted_strings_) adopted_strings_.push_back(std::move(a));
  for (auto& t : other.adopted_types_) adopted_types_.push_back(std::move(t));
  other.types_by_text_.clear();
}

namespace {

void FormatExpr(const Trace& trace, const Expr& e, std::string* out) {
  auto items = [&](const char* open, const char* close, bool tuple) {
    *out += open;
    for (std::size_t i = 0; i < e.items.size(); ++i) {
      if (i) *out += ", ";
      FormatExpr(trace, e.items[i], out);
    }
    if (tuple && e.items.size() == 1) *out += ",";
    *out += close;
  };
  switch (e.kind) {
    case Expr::Kind::kValue: *out += trace.value(e.value).name; return;
    case Expr::Kind::kConstant: *out += e.text; return;
    case Expr::Kind::kTuple: items("(", ")", true); return;
    case Expr::Kind::kList: items("[", "]", false); return;
    case Expr::Kind::kSet: items("{", "}", false); return;
    case Expr::Kind::kDict:
      *out += "{";
      for (std::size_t i = 0; i + 1 < e.items.size(); i += 2) {
        if (i) *out += ", ";
        FormatExpr(trace, e.items[i], out);
        *out += ": ";
        FormatExpr(trace, e.items[i + 1], out);
      }
      *out += "}";
      return;
    case Expr::Kind::kCall: {
      *out += e.text;
      *out += "(";
      const std::size_t positional = e.items.size() - e.keywords().size();
      for (std::size_t i = 0; i < e.items.size(); ++i) {
        if (i) *out += ", ";
        if (i >= positional) {
          *out += e.keywords()[i - positional];
          *out += "=";
        }
        FormatExpr(trace, e.items[i], out);
      }
      *out += ")";
      return;
    }
  }
}

void FormatPattern(const Trace& trace, const Pattern& p, std::string* out, bool top) {
  switch (p.kind) {
    case Pattern::Kind::kValue: *out += trace.value(p.value).name; return;
    case Pattern::Kind::kIgnore: *out += "_"; return;
    case Pattern::Kind::kTuple:
    case Pattern::Kind::kList: {
      const bool list = p.kind == Pattern::Kind::kList;
      if (!top || list) *out += list ? "[" : "(";
      for (std::size_t i = 0; i < p.items.size(); ++i) {
        if (i) *out += ", ";
        FormatPattern(trace, p.items[i], out, false);
      }
      if (p.kind == Pattern::Kind::kTuple && p.items.size() == 1) *out += ",";
      if (!top || list) *out += list ? "]" : ")";
      return;
    }
  }
}

}  // namespace

std::string FormatStatement(const Trace& trace, const Statement& s) {
  std::string out;
  auto targets = [&] {
    if (s.outputs.kind == Pattern::Kind::kTuple && s.outputs.items.empty()) return;
    FormatPattern(trace, s.outputs, &out, true);
    out += " = ";
  };
  switch (s.kind) {
    case StatementKind::kCall: {
      targets();
      out += trace.CalleeOf(s);
      out += "(";
      bool first = true;
      for (const Expr& a : s.args) {
        if (!first) out += ", ";
        first = false;
        FormatExpr(trace, a, &out);
      }
      for (const auto& [name, e] : s.kwargs) {
        if (!first) out += ", ";
        first = false;
        out += name;
        out += "=";
        FormatExpr(trace, e, &out);
      }
      out += ")";
      break;
    }
    case StatementKind::kUnpack:
      if (s.outputs.items.empty()) {
        out = "# ";
        out += trace.value(s.source).name;
        out += " (empty sequence)";
        break;
      }
      targets();
      out += trace.value(s.source).name;
      break;
    case StatementKind::kAssign:
      targets();
      out += trace.value(s.source).name;
      break;
    case StatementKind::kDel:
      out = "del ";
      for (std::size_t i = 0; i < s.deleted.size(); ++i) {
        if (i) out += ", ";
        out += trace.value(s.deleted[i]).name;
      }
      break;
    case StatementKind::kClear:
      out = trace.CalleeOf(s);
      out += "(";
      out += trace.value(s.source).name;
      out += ")";
      break;
    case StatementKind::kReturn:
      out = "return ";
      FormatExpr(trace, *s.returned, &out);
      break;
  }
  return out;
}

std::vector<const Pattern*> CollectionContents(const Trace& trace) {
  std::vector<const Pattern*> contents;
  CollectionContents(trace, &contents);
  return contents;
}

void CollectionContents(const Trace& trace, std::vector<const Pattern*>* out) {
  std::vector<const Pattern*>& contents = *out;
  contents.assign(trace.values.size(), nullptr);
  auto note = [&](const Statement& s) {
    if (s.kind == StatementKind::kUnpack && s.source != kNoValue &&
        contents[s.source] == nullptr) {
      contents[s.source] = &s.outputs;
    }
  };
  if (trace.unpacks_listed) {
    for (std::uint32_t index : trace.unpacks) note(trace.statements[index]);
  } else {
    for (const Statement& s : trace.statements) note(s);
  }
}

std::span<const SubSymbolCall> Trace::SubSymbolCallsOf(const Statement& s) const {
  if (s.subsymbols.empty() || subsymbol_calls.empty()) return {};
  const auto by_line = [](const SubSymbolCall& c, std::uint32_t line) { return c.subsymbol < line; };
  const auto first = std::lower_bound(subsymbol_calls.begin(), subsymbol_calls.end(),
                                      s.subsymbols.begin, by_line);
  const auto last = std::lower_bound(first, subsymbol_calls.end(),
                                     s.subsymbols.begin + s.subsymbols.count, by_line);
  return {first, last};
}

namespace {

std::string DebugLoc(SourceLocation at) {
  return std::to_string(at.line) + ":" + std::to_string(at.column);
}

void DebugExpr(const Trace& trace, const Expr& e, std::ostringstream& out) {
  out << "{k" << static_cast<int>(e.kind) << " n" << static_cast<int>(e.number) << " " << DebugLoc(e.at);
  if (e.kind == Expr::Kind::kValue) out << " v" << e.value << "=" << trace.value(e.value).name;
  if (!e.text.empty()) out << " '" << e.text << "'";
  if (e.has_int) out << " i" << e.int_value;
  for (std::string_view kw : e.keywords()) out << " kw=" << kw;
  for (const Expr& item : e.items) DebugExpr(trace, item, out);
  out << "}";
}

void DebugPattern(const Trace& trace, const Pattern& p, std::ostringstream& out) {
  out << "[k" << static_cast<int>(p.kind) << " " << DebugLoc(p.at);
  if (p.kind == Pattern::Kind::kValue) out << " v" << p.value << "=" << trace.value(p.value).name;
  for (const Pattern& item : p.items) DebugPattern(trace, item, out);
  out << "]";
}

}  // namespace

std::string DebugString(const Trace& trace) {
  std::ostringstream out;
  out << "function " << trace.function_name << "\n";
  for (const std::string& d : trace.decorators) out << "decorator " << d << "\n";
  for (const Parameter& p : trace.params) {
    out << "param k" << static_cast<int>(p.kind) << " v" << p.value;
    if (p.default_value) DebugExpr(trace, *p.default_value, out);
    out << "\n";
  }
  for (std::size_t i = 0; i < trace.values.size(); ++i) {
    const Value& v = trace.values[i];
    out << "value " << i << " " << v.name << " " << DebugLoc(v.defined_at) << " kind"
        << static_cast<int>(v.type->kind) << " '" << v.type->text << "' c"
        << static_cast<int>(v.container) << "\n";
  }
  for (const Statement& s : trace.statements) {
    out << "stmt k" << static_cast<int>(s.kind) << " " << DebugLoc(s.at) << " line" << s.source_line
        << " @" << s.text_offset << " '" << trace.CalleeOf(s) << "' '" << trace.SymbolOf(s) << "' '" << trace.SymbolIdOf(s)
        << "' legacy" << s.legacy_clear << " src" << s.source;
    if (s.call_symbol != kNoCallSymbol) {
      const CallSymbol& c = trace.call_symbols[s.call_symbol];
      out << " cs(" << c.callee << "," << c.symbol << "," << c.symbol_id << ")";
    }
    out << " out";
    DebugPattern(trace, s.outputs, out);
    for (const Expr& e : s.args) DebugExpr(trace, e, out);
    for (const auto& [key, e] : s.kwargs) {
      out << " " << key << "=";
      DebugExpr(trace, e, out);
    }
    for (ValueId id : s.deleted) out << " del" << id;
    if (s.kind == StatementKind::kReturn) DebugExpr(trace, *s.returned, out);
    for (const SubSymbol& sub : trace.SubSymbolsOf(s)) {
      out << "\n  sub " << sub.line << " d" << sub.depth << " " << sub.text;
    }
    for (const SubSymbolCall& call : trace.SubSymbolCallsOf(s)) {
      out << "\n  subcall " << call.subsymbol - s.subsymbols.begin << " " << call.out << " = "
          << call.callee << " '" << (call.out_type ? call.out_type->text : "-") << "'";
      for (const Expr& e : call.args) DebugExpr(trace, e, out);
    }
    out << "\n  = " << FormatStatement(trace, s) << "\n";
  }
  out << "unpacks";
  for (std::uint32_t u : trace.unpacks) out << " " << u;
  out << " listed" << trace.unpacks_listed << "\n";
  return out.str();
}

}  // namespace peakmem
