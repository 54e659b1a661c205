#include "peakmem/frontend/trace_json_reader.h"

#include <simdjson.h>

#include "peakmem/frontend/type_inference.h"
#include "peakmem/ir/trace_builder.h"
#include "peakmem/semantics/fusion.h"
#include "text_reader.h"

namespace peakmem {
namespace {

namespace od = simdjson::ondemand;

constexpr int kMaxDepth = 200;

class JsonReader {
 public:
  explicit JsonReader(std::shared_ptr<const SourceFile> source)
      : source_(source),
        builder_(std::move(source)),
        // The text is parsed where it lies (the source guarantees simdjson's
        // padding after it): no copy, and strings read raw stay views into
        // the source (TraceBuilder::Keep copies nothing).
        input_(source_->text().data(), source_->text().size(),
               source_->text().size() + SourceFile::kReadablePadding) {
    static_assert(SourceFile::kReadablePadding >= simdjson::SIMDJSON_PADDING);
    base_ = source_->text().data();
  }

  Trace Read();
  void SetRank(int rank) { builder_.SetRank(rank); }
  void SetDTensorLayout(std::string layout) { builder_.SetDTensorLayout(std::move(layout)); }

 private:
  [[noreturn]] void Fail(SourceLocation at, const std::string& message) const {
    builder_.Fail(at, message);
  }
  SourceLocation At(const char* p) const {
    return source_->LocationOf(static_cast<std::size_t>(p - base_));
  }
  SourceLocation At(od::value& v) {
    const char* p = nullptr;
    if (v.current_location().get(p) != simdjson::SUCCESS) return last_;
    last_ = At(p);
    return last_;
  }

  std::string_view String(od::value& v, const char* what);
  // The array `v` is, or an error saying `message` at v.
  od::array Array(od::value& v, const char* message);
  SourceLocation PreflightErrorLocation(simdjson::error_code code) const;
  SourceLocation EndOfInput() const;
  void ReadParams(od::array params);
  void ReadParam(od::object param, SourceLocation at);
  struct PendingDefinition {
    std::string name;
    std::string type;
    SourceLocation type_at;
    ContainerKind container = ContainerKind::kUnknown;
  };
  void TakeDefinitionField(PendingDefinition* def, std::string_view key, od::value value);
  ValueId FinishDefinition(const PendingDefinition& def, SourceLocation at);
  Pattern ReadPattern(od::value v, int depth);
  Expr ReadExpr(od::value v, int depth);
  std::vector<Expr> ReadExprList(od::value v, int depth);
  void ReadStatements(od::array statements);
  // One statement's fields, as read; FinishStatement checks and completes them.
  struct PendingStatement {
    Statement s;
    std::string_view callee, symbol, symbol_id;  // interned into call_symbols at the end
    bool have_kind = false;
    bool have_outputs = false;
  };
  void ReadStatement(od::object object, SourceLocation at);
  void TakeStatementField(PendingStatement* p, std::string_view key, od::value value);
  ArenaSpan<KeywordArg> ReadKeywordArgs(od::value value);
  ArenaSpan<ValueId> ReadDeletedNames(od::value value, SourceLocation statement_at);
  void FinishStatement(PendingStatement* p, SourceLocation at);
  // Appends the nodes to the trace's flat subsymbol list, in print order.
  void ReadSubSymbols(od::value v, int depth);
  // A fusion region's subsymbol texts are printed lines: the text reader's
  // parser reads them (Trace::subsymbol_calls).
  void ReadSubSymbolCalls(const Statement& s);

  std::shared_ptr<const SourceFile> source_;
  TraceBuilder builder_;
  simdjson::padded_string_view input_;
  const char* base_ = nullptr;
  SourceLocation last_{1, 1};
  SourceLocation last_statement_{1, 1};
  bool returned_ = false;
};

od::array JsonReader::Array(od::value& v, const char* message) {
  const SourceLocation at = At(v);
  od::array items;
  if (v.get_array().get(items) != simdjson::SUCCESS) Fail(at, message);
  return items;
}

std::string_view JsonReader::String(od::value& v, const char* what) {
  const SourceLocation at = At(v);
  std::string_view s;
  if (v.get_string().get(s) != simdjson::SUCCESS) {
    Fail(at, std::string("expected a string for ") + what);
  }
  return s;
}

ContainerKind ParseContainer(std::string_view s) {
  if (s == "list") return ContainerKind::kList;
  if (s == "tuple") return ContainerKind::kTuple;
  if (s == "dict") return ContainerKind::kDict;
  if (s == "set") return ContainerKind::kSet;
  return ContainerKind::kUnknown;
}

// {"name": ..., "type": ..., "container": ...}, gathered field by field
// (On-Demand objects can be iterated only once).
void JsonReader::TakeDefinitionField(PendingDefinition* def, std::string_view key,
                                     od::value value) {
  if (key == "name") {
    def->name = std::string(String(value, "'name'"));
  } else if (key == "type") {
    def->type_at = At(value);
    def->type_at.column += 1;  // inside the opening quote
    def->type = std::string(String(value, "'type'"));
  } else if (key == "container") {
    const SourceLocation c_at = At(value);
    def->container = ParseContainer(String(value, "'container'"));
    if (def->container == ContainerKind::kUnknown) {
      Fail(c_at, "'container' must be one of list, tuple, dict, set");
    }
  } else {
    Fail(At(value), "unknown key '" + std::string(key) + "' in a value definition");
  }
}

ValueId JsonReader::FinishDefinition(const PendingDefinition& def, SourceLocation at) {
  if (def.name.empty()) Fail(at, "a value definition needs a 'name'");
  const ValueId id = builder_.Define(def.name, at);
  if (!def.type.empty()) builder_.SetType(id, def.type, def.type_at);
  builder_.trace().value(id).container = def.container;
  return id;
}

void JsonReader::ReadParam(od::object param, SourceLocation at) {
  Parameter p;
  std::string kind = "positional";
  bool defined = false;
  for (auto field : param) {
    std::string_view key = field.unescaped_key();
    od::value value = field.value();
    if (key == "kind") {
      kind = std::string(String(value, "'kind'"));
      if (kind == "varargs") {
        p.kind = Parameter::Kind::kVarArgs;
      } else if (kind == "varkwargs") {
        p.kind = Parameter::Kind::kVarKwargs;
      } else if (kind != "positional" && kind != "keyword") {
        Fail(At(value), "parameter 'kind' must be positional, keyword, varargs or varkwargs");
      }
    } else if (key == "value") {
      const SourceLocation def_at = At(value);
      od::object def;
      if (value.get_object().get(def) != simdjson::SUCCESS) {
        Fail(def_at, "expected a value definition object");
      }
      PendingDefinition pending;
      for (auto def_field : def) {
        std::string_view def_key = def_field.unescaped_key();
        TakeDefinitionField(&pending, def_key, def_field.value());
      }
      p.value = FinishDefinition(pending, def_at);
      defined = true;
    } else if (key == "default") {
      p.default_value = ReadExpr(value, 1);
    } else {
      Fail(At(value), "unknown key '" + std::string(key) + "' in a parameter");
    }
  }
  if (!defined) Fail(at, "a parameter needs a 'value'");
  builder_.trace().params.push_back(std::move(p));
}

void JsonReader::ReadParams(od::array params) {
  for (auto item : params) {
    od::value v = item.value();
    const SourceLocation at = At(v);
    od::object param;
    if (v.get_object().get(param) != simdjson::SUCCESS) Fail(at, "expected a parameter object");
    ReadParam(param, at);
  }
}

// A JSON array is a tuple target, {"list": [...]} a list target,
// {"name": ...} a definition, "_" an ignored literal.
Pattern JsonReader::ReadPattern(od::value v, int depth) {
  Pattern p;
  p.at = At(v);
  if (depth > kMaxDepth) Fail(p.at, "assignment target nested too deeply");
  od::json_type type;
  if (v.type().get(type) != simdjson::SUCCESS) Fail(p.at, "invalid JSON value");
  switch (type) {
    case od::json_type::string: {
      if (String(v, "a target") != "_") Fail(p.at, "a string target must be \"_\"");
      p.kind = Pattern::Kind::kIgnore;
      return p;
    }
    case od::json_type::array: {
      p.kind = Pattern::Kind::kTuple;
      std::vector<Pattern> items;
      for (auto item : v.get_array()) items.push_back(ReadPattern(item.value(), depth + 1));
      p.items = builder_.trace().SaveArray(items);
      return p;
    }
    case od::json_type::object: {
      od::object object = v.get_object();
      PendingDefinition pending;
      bool first = true;
      for (auto field : object) {
        std::string_view key = field.unescaped_key();
        if (first && key == "list") {
          p.kind = Pattern::Kind::kList;
          od::value list_value = field.value();
          od::array items;
          if (list_value.get_array().get(items) != simdjson::SUCCESS) {
            Fail(p.at, "'list' target needs an array");
          }
          std::vector<Pattern> targets;
          for (auto item : items) targets.push_back(ReadPattern(item.value(), depth + 1));
          p.items = builder_.trace().SaveArray(targets);
        } else if (p.kind == Pattern::Kind::kList) {
          Fail(p.at, "a 'list' target has no other keys");
        } else {
          TakeDefinitionField(&pending, key, field.value());
        }
        first = false;
      }
      if (first) Fail(p.at, "empty object as an assignment target");
      if (p.kind != Pattern::Kind::kList) {
        p.kind = Pattern::Kind::kValue;
        p.value = FinishDefinition(pending, p.at);
      }
      return p;
    }
    default:
      Fail(p.at, "expected an assignment target: a definition, an array, {\"list\": ...} or \"_\"");
  }
}

std::vector<Expr> JsonReader::ReadExprList(od::value v, int depth) {
  std::vector<Expr> out;
  for (auto item : Array(v, "expected an array of expressions")) out.push_back(ReadExpr(item.value(), depth + 1));
  return out;
}

// {"ref": name} | {"const": text} | {"tuple"|"list"|"set": [...]} |
// {"dict": [[key, value], ...]} | {"call": callee, "args": [...]}
Expr JsonReader::ReadExpr(od::value v, int depth) {
  Expr e;
  e.at = At(v);
  if (depth > kMaxDepth) Fail(e.at, "expression nested too deeply");
  od::object object;
  if (v.get_object().get(object) != simdjson::SUCCESS) {
    Fail(e.at, "expected an expression object ({\"ref\": ...}, {\"const\": ...}, ...)");
  }
  for (auto field : object) {
    std::string_view key = field.unescaped_key();
    od::value value = field.value();
    if (key == "ref") {
      const SourceLocation at = At(value);
      const std::string_view name = String(value, "'ref'");
      e.kind = Expr::Kind::kValue;
      e.value = builder_.LookupForUse(name, at);
      if (e.value == kNoValue) Fail(at, "unknown name '" + std::string(name) + "'");
    } else if (key == "const") {
      std::string_view raw;
      od::json_type const_type;
      if (value.type().get(const_type) != simdjson::SUCCESS) Fail(At(value), "invalid JSON value");
      if (const_type == od::json_type::string) {
        raw = String(value, "'const'");
      } else if (const_type != od::json_type::number) {
        Fail(At(value), "'const' must be a string or a number");
      } else {
        raw = value.raw_json_token();
        while (!raw.empty() && (raw.back() == ' ' || raw.back() == '\n' || raw.back() == '\r' ||
                                raw.back() == '\t')) {
          raw.remove_suffix(1);
        }
      }
      e.SetConstant(builder_.Keep(raw));
    } else if (key == "tuple" || key == "list" || key == "set") {
      e.kind = key == "tuple" ? Expr::Kind::kTuple
               : key == "list" ? Expr::Kind::kList
                               : Expr::Kind::kSet;
      e.items = builder_.trace().SaveExprs(ReadExprList(value, depth));
    } else if (key == "dict") {
      e.kind = Expr::Kind::kDict;
      const SourceLocation dict_at = At(value);
      od::array pairs;
      if (value.get_array().get(pairs) != simdjson::SUCCESS) {
        Fail(dict_at, "'dict' needs an array of [key, value] pairs");
      }
      std::vector<Expr> items;
      for (auto pair_item : pairs) {
        std::vector<Expr> pair = ReadExprList(pair_item.value(), depth + 1);
        if (pair.size() != 2) Fail(dict_at, "'dict' needs an array of [key, value] pairs");
        items.push_back(pair[0]);
        items.push_back(pair[1]);
      }
      e.items = builder_.trace().SaveExprs(items);
    } else if (key == "call") {
      e.kind = Expr::Kind::kCall;
      e.text = builder_.Intern(String(value, "'call'"));
    } else if (key == "args") {
      e.items = builder_.trace().SaveExprs(ReadExprList(value, depth));
    } else {
      Fail(At(value), "unknown key '" + std::string(key) + "' in an expression");
    }
  }
  return e;
}

void JsonReader::ReadSubSymbols(od::value v, int depth) {
  const SourceLocation at = At(v);
  if (depth > kMaxDepth) Fail(at, "subsymbols nested too deeply");
  std::vector<SubSymbol>& out = builder_.trace().subsymbols;
  for (auto item : Array(v, "'subsymbols' must be an array")) {
    od::value node_value = item.value();
    const SourceLocation node_at = At(node_value);
    od::object node;
    if (node_value.get_object().get(node) != simdjson::SUCCESS) {
      Fail(node_at, "a subsymbol must be an object");
    }
    // The node goes in before its children (print order).
    const std::size_t index = out.size();
    out.push_back(SubSymbol{{}, node_at.line, depth});
    for (auto field : node) {
      std::string_view key = field.unescaped_key();
      od::value value = field.value();
      if (key == "text") {
        out[index].text = builder_.Keep(String(value, "'text'"));
      } else if (key == "children") {
        ReadSubSymbols(value, depth + 1);
      } else {
        Fail(At(value), "unknown key '" + std::string(key) + "' in a subsymbol");
      }
    }
  }
}

StatementKind ParseStatementKind(std::string_view kind, bool* ok) {
  *ok = true;
  if (kind == "call") return StatementKind::kCall;
  if (kind == "unpack") return StatementKind::kUnpack;
  if (kind == "assign") return StatementKind::kAssign;
  if (kind == "del") return StatementKind::kDel;
  if (kind == "clear") return StatementKind::kClear;
  if (kind == "return") return StatementKind::kReturn;
  *ok = false;
  return StatementKind::kCall;
}

void JsonReader::ReadStatement(od::object object, SourceLocation at) {
  PendingStatement p;
  p.s.at = at;
  p.s.source_line = at.line;
  if (returned_) Fail(at, "statement after 'return'");
  for (auto field : object) {
    std::string_view key = field.unescaped_key();
    od::value value = field.value();
    if (!p.have_kind) {
      if (key != "kind") Fail(At(value), "'kind' must be the first key of a statement");
      const SourceLocation kind_at = At(value);
      bool ok = false;
      p.s.kind = ParseStatementKind(String(value, "'kind'"), &ok);
      if (!ok) Fail(kind_at, "statement 'kind' must be call, unpack, assign, del, clear or return");
      p.have_kind = true;
      continue;
    }
    TakeStatementField(&p, key, value);
  }
  if (!p.have_kind) Fail(at, "a statement needs a 'kind'");
  FinishStatement(&p, at);
}

void JsonReader::TakeStatementField(PendingStatement* p, std::string_view key, od::value value) {
  Statement& s = p->s;
  if (key == "callee") {
    p->callee = builder_.Intern(String(value, "'callee'"));
  } else if (key == "symbol") {
    p->symbol = builder_.Intern(String(value, "'symbol'"));
  } else if (key == "id") {
    if (!value.is_null()) p->symbol_id = builder_.Intern(String(value, "'id'"));
  } else if (key == "legacy") {
    bool legacy = false;
    if (value.get_bool().get(legacy) != simdjson::SUCCESS) Fail(At(value), "'legacy' must be a bool");
    s.legacy_clear = legacy;
  } else if (p->have_outputs && (key == "args" || key == "kwargs")) {
    Fail(At(value), "'outputs' must come after 'args' and 'kwargs'");
  } else if (key == "args") {
    s.args = builder_.trace().SaveExprs(ReadExprList(value, 0));
  } else if (key == "kwargs") {
    s.kwargs = ReadKeywordArgs(value);
  } else if (key == "source") {
    const SourceLocation src_at = At(value);
    const std::string_view name = String(value, "'source'");
    s.source = builder_.LookupForUse(name, src_at);
    if (s.source == kNoValue) Fail(src_at, "unknown name '" + std::string(name) + "'");
  } else if (key == "names") {
    s.deleted = ReadDeletedNames(value, s.at);
  } else if (key == "value") {
    s.returned = ReadExpr(value, 0);
  } else if (key == "outputs") {
    // Python binds the targets after evaluating the call, so "outputs"
    // must follow "args"/"kwargs" (checked above).
    p->have_outputs = true;
    s.outputs = ReadPattern(value, 0);
  } else if (key == "subsymbols") {
    s.subsymbols.begin = static_cast<std::uint32_t>(builder_.trace().subsymbols.size());
    ReadSubSymbols(value, 0);
    s.subsymbols.count =
        static_cast<std::uint32_t>(builder_.trace().subsymbols.size() - s.subsymbols.begin);
  } else if (key == "line") {
    std::int64_t line = 0;
    if (value.get_int64().get(line) != simdjson::SUCCESS) Fail(At(value), "'line' must be an integer");
    (void)line;  // informational: the line in the printed trace
  } else {
    Fail(At(value), "unknown key '" + std::string(key) + "' in a statement");
  }
}

// [[name, expression], ...]
ArenaSpan<KeywordArg> JsonReader::ReadKeywordArgs(od::value value) {
  std::vector<KeywordArg> kwargs;
  for (auto pair_item : Array(value, "'kwargs' must be an array")) {
    od::value pair_value = pair_item.value();
    const SourceLocation pair_at = At(pair_value);
    std::string_view name;
    int n = 0;
    for (auto part : Array(pair_value, "a keyword argument must be [name, expression]")) {
      od::value part_value = part.value();
      if (n == 0) name = builder_.Intern(String(part_value, "a keyword name"));
      if (n == 1) kwargs.emplace_back(name, ReadExpr(part_value, 1));
      if (n >= 2) Fail(pair_at, "a keyword argument must be [name, expression]");
      ++n;
    }
    if (n != 2) Fail(pair_at, "a keyword argument must be [name, expression]");
  }
  return builder_.trace().SaveKeywordArgs(kwargs);
}

// A del's "names": each name is deleted from the frame here.
ArenaSpan<ValueId> JsonReader::ReadDeletedNames(od::value value, SourceLocation statement_at) {
  std::vector<ValueId> deleted;
  for (auto item : Array(value, "'names' must be an array")) {
    od::value name_value = item.value();
    const SourceLocation name_at = At(name_value);
    deleted.push_back(builder_.Delete(String(name_value, "a name"), name_at, statement_at.line));
  }
  return builder_.trace().SaveArray(deleted);
}

// Checks what each kind of statement needs, fills in the defaults (a call's
// symbol from its callee, a clear's names) and appends the statement.
void JsonReader::FinishStatement(PendingStatement* p, SourceLocation at) {
  Statement& s = p->s;
  std::string_view& callee = p->callee;
  std::string_view& symbol = p->symbol;
  std::string_view& symbol_id = p->symbol_id;
  switch (s.kind) {
    case StatementKind::kCall:
      if (callee.empty()) Fail(at, "a call needs a 'callee'");
      if (symbol.empty()) {
        const std::size_t dot = callee.rfind('.');
        symbol = dot == std::string::npos ? callee : callee.substr(dot + 1);
      }
      if (!p->have_outputs) s.outputs.kind = Pattern::Kind::kTuple;
      s.call_symbol = builder_.InternCallSymbol(callee, symbol, symbol_id);
      if (!s.subsymbols.empty() && UsesSubSymbols(symbol)) ReadSubSymbolCalls(s);
      break;
    case StatementKind::kClear:
      if (s.source == kNoValue) Fail(at, "a clear needs a 'source'");
      if (callee.empty()) callee = s.legacy_clear ? kLegacyClearSymbol : kClearSymbol;
      if (symbol.empty()) symbol = s.legacy_clear ? kLegacyClearSymbol : kClearSymbol;
      if (symbol_id.empty()) symbol_id = symbol;
      s.call_symbol = builder_.InternCallSymbol(callee, symbol, symbol_id);
      break;
    case StatementKind::kUnpack:
    case StatementKind::kAssign:
      if (s.source == kNoValue) Fail(at, "an unpack needs a 'source'");
      if (!p->have_outputs) Fail(at, "an unpack needs 'outputs'");
      break;
    case StatementKind::kDel:
      if (s.deleted.empty()) Fail(at, "a del needs 'names'");
      break;
    case StatementKind::kReturn:
      returned_ = true;
      break;
  }
  Trace& trace = builder_.trace();
  if (s.kind == StatementKind::kUnpack) {
    trace.unpacks.push_back(static_cast<std::uint32_t>(trace.statements.size()));
  }
  trace.statements.push_back(std::move(s));
}

void JsonReader::ReadSubSymbolCalls(const Statement& s) {
  Trace& trace = builder_.trace();
  text::TextReader lines(source_, &trace);
  lines.SetRank(builder_.rank());
  lines.SetDTensorLayout(builder_.dtensor_layout());
  for (std::uint32_t i = s.subsymbols.begin; i < s.subsymbols.begin + s.subsymbols.count; ++i) {
    // (A node's location is its object's: the text has no columns of its own.)
    lines.ReadSubSymbolCall(i, {trace.subsymbols[i].line, 1});
  }
}

void JsonReader::ReadStatements(od::array statements) {
  for (auto item : statements) {
    od::value v = item.value();
    const SourceLocation at = At(v);
    last_statement_ = at;
    od::object object;
    if (v.get_object().get(object) != simdjson::SUCCESS) Fail(at, "expected a statement object");
    ReadStatement(object, at);
  }
}

SourceLocation JsonReader::PreflightErrorLocation(simdjson::error_code code) const {
  const std::string_view text = source_->text();
  if (code == simdjson::UTF8_ERROR) {
    // The first byte that does not start or continue a valid UTF-8 sequence.
    std::size_t i = 0;
    while (i < text.size()) {
      const auto c = static_cast<unsigned char>(text[i]);
      std::size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
      if (n == 0 || i + n > text.size()) break;
      bool ok = true;
      for (std::size_t k = 1; k < n; ++k) ok = ok && (static_cast<unsigned char>(text[i + k]) >> 6) == 2;
      if (!ok) break;
      i += n;
    }
    return source_->LocationOf(i);
  }
  if (code == simdjson::UNCLOSED_STRING) {
    // The opening quote of the string that never closes.
    std::size_t open = std::string::npos;
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (open == std::string::npos) {
        if (text[i] == '"') open = i;
      } else if (text[i] == '\\') {
        ++i;
      } else if (text[i] == '"') {
        open = std::string::npos;
      }
    }
    if (open != std::string::npos) return source_->LocationOf(open);
  }
  if (code == simdjson::EMPTY) return {1, 1};
  return EndOfInput();
}

SourceLocation JsonReader::EndOfInput() const {
  // Just past the last byte that is not white space: where the document stops.
  const std::string_view text = source_->text();
  std::size_t end = text.size();
  while (end > 0 && (text[end - 1] == ' ' || text[end - 1] == '\n' || text[end - 1] == '\r' ||
                     text[end - 1] == '\t')) {
    --end;
  }
  return source_->LocationOf(end);
}

Trace JsonReader::Read() {
  od::parser parser;
  od::document doc;
  // Errors found before any value is read (bad UTF-8, an unclosed string,
  // empty input) leave no document to ask for a position: find it ourselves.
  if (const simdjson::error_code code = parser.iterate(input_).get(doc); code) {
    Fail(PreflightErrorLocation(code),
         std::string("invalid JSON: ") + simdjson::error_message(code));
  }
  try {
    od::object root;
    if (const simdjson::error_code code = doc.get_object().get(root); code) {
      if (code == simdjson::INCORRECT_TYPE) Fail({1, 1}, "expected a JSON object");
      Fail(EndOfInput(), std::string("invalid JSON: ") + simdjson::error_message(code));
    }
    bool have_format = false;
    bool have_statements = false;
    for (auto field : root) {
      std::string_view key = field.unescaped_key();
      od::value value = field.value();
      const SourceLocation at = At(value);
      if (key == "peakmem_step" || key == "peakmem_recorded_step") {
        Fail({1, 1}, "this is a training step's file, not a trace: run `peakmem step FILE` (docs/step-file.md)");
      }
      if (key == "format") {
        if (String(value, "'format'") != "peakmem.trace") {
          Fail(at, "'format' must be \"peakmem.trace\"");
        }
        have_format = true;
      } else if (key == "version") {
        std::int64_t version = 0;
        if (value.get_int64().get(version) != simdjson::SUCCESS || version != 1) {
          Fail(at, "unsupported 'version': this peakmem reads version 1");
        }
      } else if (key == "function") {
        builder_.trace().function_name = std::string(String(value, "'function'"));
      } else if (key == "params") {
        if (have_statements) Fail(at, "'params' must come before 'statements'");
        od::array params;
        if (value.get_array().get(params) != simdjson::SUCCESS) Fail(at, "'params' must be an array");
        ReadParams(params);
      } else if (key == "statements") {
        od::array statements;
        if (value.get_array().get(statements) != simdjson::SUCCESS) {
          Fail(at, "'statements' must be an array");
        }
        ReadStatements(statements);
        have_statements = true;
      }
      // Other top-level keys (e.g. "producer") are metadata; On-Demand skips them.
    }
    if (!have_format) Fail({1, 1}, "missing \"format\": \"peakmem.trace\"");
    if (!have_statements) Fail({1, 1}, "missing 'statements'");
    if (!returned_) Fail(last_statement_, "the trace ends without a 'return' statement");
  } catch (const simdjson::simdjson_error& e) {
    const char* p = nullptr;
    SourceLocation at = last_;
    if (doc.current_location().get(p) == simdjson::SUCCESS) at = At(p);
    Fail(at, std::string("invalid JSON: ") + simdjson::error_message(e.error()));
  }
  builder_.trace().unpacks_listed = true;
  return std::move(builder_.trace());
}

}  // namespace

bool LooksLikeJson(std::string_view text) {
  for (char c : text) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    return c == '{';
  }
  return false;
}

ParsedTrace ReadTraceJson(std::shared_ptr<const SourceFile> source, int rank, std::string_view dtensor_layout) {
  JsonReader reader(source);
  reader.SetRank(rank);
  reader.SetDTensorLayout(std::string(dtensor_layout));
  ParsedTrace parsed;
  parsed.trace = reader.Read();
  // The format lets an output's type be omitted ("Omitted when unknown",
  // docs/trace-json.md); the export writes every proxy's. Where one is
  // missing, the same inference as for printed traces applies.
  InferAliasTypes(&parsed.trace);
  parsed.source = std::move(source);
  parsed.source_is_printed_trace = false;
  return parsed;
}

}  // namespace peakmem
