#include "peakmem/frontend/trace_json_writer.h"

#include <nlohmann/json.hpp>

#include <string_view>

namespace peakmem {
namespace {

class JsonWriter {
 public:
  explicit JsonWriter(const Trace& trace) : trace_(trace) {}

  std::string Write();

 private:
  // A JSON string, escaped as json.dumps(ensure_ascii=True) escapes it.
  void String(std::string_view text) {
    out_ += nlohmann::json(text).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  }
  void Key(std::string_view key) {
    String(key);
    out_ += ": ";
  }
  void Definition(ValueId id);
  void Target(const Pattern& p);
  void Targets(std::span<const Pattern> items);
  void Expression(const Expr& e);
  void Expressions(std::span<const Expr> items);
  void Parameters();
  void Statement(const peakmem::Statement& s);
  void Call(const peakmem::Statement& s);
  void SubSymbols(std::span<const SubSymbol> nodes);

  const Trace& trace_;
  std::string out_;
};

void JsonWriter::Definition(ValueId id) {
  const Value& v = trace_.value(id);
  out_ += '{';
  Key("name");
  String(v.name);
  if (!v.type->text.empty()) {
    out_ += ", ";
    Key("type");
    String(v.type->text);
  }
  std::string_view container;
  switch (v.container) {
    case ContainerKind::kList: container = "list"; break;
    case ContainerKind::kTuple: container = "tuple"; break;
    case ContainerKind::kDict: container = "dict"; break;
    case ContainerKind::kSet: container = "set"; break;
    default: break;
  }
  if (!container.empty()) {
    out_ += ", ";
    Key("container");
    String(container);
  }
  out_ += '}';
}

void JsonWriter::Targets(std::span<const Pattern> items) {
  out_ += '[';
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out_ += ", ";
    Target(items[i]);
  }
  out_ += ']';
}

void JsonWriter::Target(const Pattern& p) {
  switch (p.kind) {
    case Pattern::Kind::kValue: return Definition(p.value);
    case Pattern::Kind::kIgnore: return String("_");
    case Pattern::Kind::kTuple: return Targets(p.items);
    case Pattern::Kind::kList:
      out_ += '{';
      Key("list");
      Targets(p.items);
      out_ += '}';
      return;
  }
}

void JsonWriter::Expressions(std::span<const Expr> items) {
  out_ += '[';
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out_ += ", ";
    Expression(items[i]);
  }
  out_ += ']';
}

void JsonWriter::Expression(const Expr& e) {
  out_ += '{';
  switch (e.kind) {
    case Expr::Kind::kValue:
      Key("ref");
      String(trace_.value(e.value).name);
      break;
    case Expr::Kind::kConstant:
      Key("const");
      String(e.text);
      break;
    case Expr::Kind::kTuple:
    case Expr::Kind::kList:
    case Expr::Kind::kSet:
      Key(e.kind == Expr::Kind::kTuple ? "tuple" : e.kind == Expr::Kind::kList ? "list" : "set");
      Expressions(e.items);
      break;
    case Expr::Kind::kDict:
      Key("dict");
      out_ += '[';
      for (std::size_t i = 0; i + 1 < e.items.size(); i += 2) {
        if (i > 0) out_ += ", ";
        Expressions(std::span<const Expr>(e.items).subspan(i, 2));
      }
      out_ += ']';
      break;
    case Expr::Kind::kCall:
      Key("call");
      String(e.text);
      out_ += ", ";
      Key("args");
      Expressions(e.items);
      break;
  }
  out_ += '}';
}

void JsonWriter::Parameters() {
  out_ += '[';
  for (std::size_t i = 0; i < trace_.params.size(); ++i) {
    const Parameter& p = trace_.params[i];
    if (i > 0) out_ += ", ";
    out_ += '{';
    Key("kind");
    switch (p.kind) {
      case Parameter::Kind::kPositional: String("positional"); break;
      case Parameter::Kind::kKeyword: String("keyword"); break;
      case Parameter::Kind::kVarArgs: String("varargs"); break;
      case Parameter::Kind::kVarKwargs: String("varkwargs"); break;
    }
    out_ += ", ";
    Key("value");
    Definition(p.value);
    if (p.default_value) {
      out_ += ", ";
      Key("default");
      Expression(*p.default_value);
    }
    out_ += '}';
  }
  out_ += ']';
}

void JsonWriter::SubSymbols(std::span<const SubSymbol> nodes) {
  // A node's children are the nodes after it that are deeper (trace.h).
  out_ += '[';
  bool first = true;
  for (std::size_t i = 0; i < nodes.size();) {
    std::size_t end = i + 1;
    while (end < nodes.size() && nodes[end].depth > nodes[i].depth) ++end;
    if (!first) out_ += ", ";
    first = false;
    out_ += '{';
    Key("text");
    String(nodes[i].text);
    if (end > i + 1) {
      out_ += ", ";
      Key("children");
      SubSymbols(nodes.subspan(i + 1, end - i - 1));
    }
    out_ += '}';
    i = end;
  }
  out_ += ']';
}

void JsonWriter::Call(const peakmem::Statement& s) {
  Key("callee");
  String(trace_.CalleeOf(s));
  out_ += ", ";
  Key("symbol");
  String(trace_.SymbolName(s));
  out_ += ", ";
  Key("id");
  const std::string_view id = trace_.SymbolIdOf(s);
  if (id.empty()) {
    out_ += "null";
  } else {
    String(id);
  }
  out_ += ", ";
  Key("args");
  Expressions(s.args);
  if (!s.kwargs.empty()) {
    out_ += ", ";
    Key("kwargs");
    out_ += '[';
    for (std::size_t i = 0; i < s.kwargs.size(); ++i) {
      if (i > 0) out_ += ", ";
      out_ += '[';
      String(s.kwargs[i].first);
      out_ += ", ";
      Expression(s.kwargs[i].second);
      out_ += ']';
    }
    out_ += ']';
  }
  out_ += ", ";
  Key("outputs");
  Target(s.outputs);
  const std::span<const SubSymbol> subsymbols = trace_.SubSymbolsOf(s);
  if (!subsymbols.empty()) {
    out_ += ", ";
    Key("subsymbols");
    SubSymbols(subsymbols);
  }
}

void JsonWriter::Statement(const peakmem::Statement& s) {
  out_ += '{';
  Key("kind");
  auto source = [&] {
    out_ += ", ";
    Key("source");
    String(trace_.value(s.source).name);
  };
  switch (s.kind) {
    case StatementKind::kCall:
      String("call");
      out_ += ", ";
      Call(s);
      break;
    case StatementKind::kUnpack:
    case StatementKind::kAssign:
      String(s.kind == StatementKind::kUnpack ? "unpack" : "assign");
      source();
      out_ += ", ";
      Key("outputs");
      Target(s.outputs);
      break;
    case StatementKind::kDel:
      String("del");
      out_ += ", ";
      Key("names");
      out_ += '[';
      for (std::size_t i = 0; i < s.deleted.size(); ++i) {
        if (i > 0) out_ += ", ";
        String(trace_.value(s.deleted[i]).name);
      }
      out_ += ']';
      break;
    case StatementKind::kClear:
      String("clear");
      source();
      if (s.legacy_clear) out_ += ", \"legacy\": true";
      break;
    case StatementKind::kReturn:
      String("return");
      out_ += ", ";
      Key("value");
      Expression(*s.returned);
      break;
  }
  out_ += '}';
}

std::string JsonWriter::Write() {
  out_ += "{\"format\": \"peakmem.trace\", \"version\": 1, ";
  Key("function");
  String(trace_.function_name);
  out_ += ", ";
  Key("params");
  Parameters();
  out_ += ", \"statements\": [\n";
  bool first = true;
  for (const peakmem::Statement& s : trace_.statements) {
    if (!first) out_ += ",\n";
    first = false;
    Statement(s);
  }
  out_ += "\n]}\n";
  return std::move(out_);
}

}  // namespace

std::string TraceToJson(const Trace& trace) { return JsonWriter(trace).Write(); }

}  // namespace peakmem
