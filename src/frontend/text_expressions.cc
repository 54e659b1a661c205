// The text reader's parser of Python expressions (arguments, literals,
// calls, subscripts) and assignment targets, within one logical line
// (TextReader's pos_/end_). What a printed Thunder trace holds, no more: no
// operators, lambdas or comprehensions.
#include <string>
#include <string_view>
#include <utility>

#include "text_reader.h"

namespace peakmem::text {

// ---------------------------------------------------------------- expressions

// Items are parsed onto expr_stack_ (a call's keyword names onto
// keyword_stack_) and copied into the trace's arena when the list ends
// (nested lists push above and pop before the outer one ends).
ExprList TextReader::TakeItems(std::size_t base, std::size_t keyword_base) {
  const ExprList list = trace_.SaveExprs(
      std::span<const Expr>(expr_stack_).subspan(base),
      std::span<const std::string_view>(keyword_stack_).subspan(keyword_base));
  expr_stack_.resize(base);
  keyword_stack_.resize(keyword_base);
  return list;
}

Expr TextReader::ParseSequence(char close, Expr::Kind kind, int depth) {
  Expr e;
  e.kind = kind;
  e.at = line_->At(pos_ - 1);
  bool saw_comma = false;
  const std::size_t base = expr_stack_.size();
  while (!Accept(close)) {
    if (AtEnd()) FailAt(pos_, std::string("expected '") + close + "', got end of line");
    expr_stack_.push_back(ParseExpression(depth + 1));
    if (kind == Expr::Kind::kDict || (kind == Expr::Kind::kSet && Peek() == ':')) {
      if (expr_stack_.size() - base == 1 && kind == Expr::Kind::kSet) e.kind = Expr::Kind::kDict;
      Expect(':', "':' in a dict literal");
      expr_stack_.push_back(ParseExpression(depth + 1));
    }
    if (Accept(',')) {
      saw_comma = true;
      continue;
    }
    Expect(close, close == ')' ? "',' or ')'" : close == ']' ? "',' or ']'" : "',' or '}'");
    break;
  }
  // `(x)` is a parenthesised expression, not a tuple.
  if (kind == Expr::Kind::kTuple && expr_stack_.size() - base == 1 && !saw_comma) {
    Expr inner = std::move(expr_stack_.back());
    expr_stack_.pop_back();
    return inner;
  }
  e.items = TakeItems(base, keyword_stack_.size());
  if (e.kind == Expr::Kind::kSet && e.items.empty()) e.kind = Expr::Kind::kDict;  // `{}`
  return e;
}

void TextReader::ParseCallArguments(Expr* call, int depth, const Expr* first) {
  bool keywords_started = false;
  const std::size_t base = expr_stack_.size();
  const std::size_t keyword_base = keyword_stack_.size();
  if (first != nullptr) expr_stack_.push_back(*first);
  while (!Accept(')')) {
    if (AtEnd()) FailAt(pos_, "expected ')', got end of line");
    SkipSpaces();
    // keyword argument `name=value`
    const std::size_t save = pos_;
    const std::string_view key = Identifier();
    if (!key.empty() && Peek() == '=' && !(pos_ + 1 < end_ && text()[pos_ + 1] == '=')) {
      ++pos_;
      keyword_stack_.push_back(key);
      expr_stack_.push_back(ParseExpression(depth + 1));
      keywords_started = true;
    } else {
      pos_ = save;
      if (Accept('*')) Accept('*');  // *args / **kwargs splats: the values still count
      if (keywords_started) FailAt(pos_, "positional argument after keyword argument");
      expr_stack_.push_back(ParseExpression(depth + 1));
    }
    if (!Accept(',')) {
      Expect(')', "',' or ')'");
      break;
    }
  }
  call->items = TakeItems(base, keyword_base);
}

Expr TextReader::ParsePrimary(int depth) {
  SkipSpaces();
  const std::size_t start = pos_;
  Expr e = ParseAtom(depth);
  // Postfix: calls and subscripts.
  for (;;) {
    if (Peek() == '(') {
      ++pos_;
      Expr call;
      call.kind = Expr::Kind::kCall;
      call.at = e.at;
      const bool named = e.kind == Expr::Kind::kConstant;
      call.text = named ? e.text : "<call>";
      ParseCallArguments(&call, depth, named ? nullptr : &e);
      e = call;
      // `float('inf')`, `-float('inf')` (Thunder prints infinities so): the
      // number itself, as a live trace gives it.
      if (named && (call.text == "float" || call.text == "-float" || call.text == "+float") &&
          call.items.size() == 1 && call.keywords().empty() &&
          call.items[0].kind == Expr::Kind::kConstant && !call.items[0].text.empty() &&
          (call.items[0].text[0] == '\'' || call.items[0].text[0] == '"')) {
        const SourceLocation at = e.at;
        e = Expr();
        e.SetConstant(text().substr(start, pos_ - start));
        e.at = at;
      }
    } else if (Peek() == '[') {
      ++pos_;
      e = ParseSubscript(std::move(e), depth);
    } else {
      break;
    }
  }
  return e;
}

Expr TextReader::ParseAtom(int depth) {
  if (depth > kMaxNesting) FailAt(pos_, "expression nested too deeply");
  SkipSpaces();
  if (pos_ >= end_) FailAt(pos_, "expected an expression, got end of line");
  const std::size_t start = pos_;
  const char c = text()[pos_];
  Expr e;
  e.at = line_->At(start);
  if (c == '(') {
    ++pos_;
    e = ParseSequence(')', Expr::Kind::kTuple, depth);
  } else if (c == '[') {
    ++pos_;
    e = ParseSequence(']', Expr::Kind::kList, depth);
  } else if (c == '{') {
    ++pos_;
    e = ParseSequence('}', Expr::Kind::kSet, depth);
  } else if (c == '\'' || c == '"') {
    std::size_t j = pos_ + 1;
    while (j < end_ && text()[j] != c) j += (text()[j] == '\\') ? 2 : 1;
    if (j >= end_) FailAt(pos_, "unterminated string literal");
    pos_ = j + 1;
    e.SetConstant(text().substr(start, pos_ - start));
  } else if ((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.') {
    ParseNumber(&e, start, c);
  } else if (IsIdentStart(c)) {
    ParseName(&e, start);
  } else {
    FailAt(start, "unexpected character '" + EscapeForMessage(std::string_view(&c, 1)) + "'");
  }
  return e;
}

// A number (`2`, `-1.5e-3`, `-inf`) or `...`, starting with `c` at `start`.
void TextReader::ParseNumber(Expr* e, std::size_t start, char c) {
  if (c == '.' && text().compare(pos_, 3, "...") == 0) {
    pos_ += 3;
  } else {
    ++pos_;
    if (c == '-' || c == '+') {
      SkipSpaces();
      if (pos_ < end_ && IsIdentStart(text()[pos_])) {
        Identifier();  // -inf
      }
    }
    while (pos_ < end_ && (IsIdentChar(text()[pos_]) || text()[pos_] == '.' ||
                           ((text()[pos_] == '-' || text()[pos_] == '+') &&
                            (text()[pos_ - 1] == 'e' || text()[pos_ - 1] == 'E')))) {
      ++pos_;
    }
  }
  e->SetConstant(text().substr(start, pos_ - start));
  if (e->text == "-" || e->text == "+") FailAt(start, "expected an expression");
}

// A name or dotted name at `start`: a trace value, or a constant (every
// name when !resolve_names_).
void TextReader::ParseName(Expr* e, std::size_t start) {
  bool dotted = false;
  const std::string_view name = DottedName(&dotted);
  if (!resolve_names_) {
    e->SetConstant(name);
    return;
  }
  // Dotted names (dtypes.float32) and Python's keyword constants are never
  // trace values: no lookup. A callee (`torch_slice_prim_impl(`) is looked
  // up without the used-after-del check: it is a global function, and a
  // miss there would make the builder enter its deleted names (see
  // TraceBuilder::EnterDeletedNames) on every such call.
  const bool keyword = name == "None" || name == "True" || name == "False";
  const ValueId id = dotted || keyword ? kNoValue
                     : Peek() == '('   ? builder_.LookupCallee(name)
                                       : builder_.LookupForUse(name, line_->At(start));
  if (id != kNoValue) {
    e->kind = Expr::Kind::kValue;
    e->value = id;
  } else {
    e->SetConstant(name);
  }
}

// `e[...]`, after its '[': a `<subscript>` call of `e` and the indices.
Expr TextReader::ParseSubscript(Expr e, int depth) {
  Expr sub;
  sub.kind = Expr::Kind::kCall;
  sub.text = "<subscript>";
  sub.at = e.at;
  const std::size_t base = expr_stack_.size();
  expr_stack_.push_back(std::move(e));
  while (!Accept(']')) {
    if (AtEnd()) FailAt(pos_, "expected ']', got end of line");
    if (Accept(':') || Accept(',')) continue;
    expr_stack_.push_back(ParseExpression(depth + 1));
  }
  sub.items = TakeItems(base, keyword_stack_.size());
  return sub;
}

Expr TextReader::ParseExpression(int depth) { return ParsePrimary(depth); }

// ---------------------------------------------------------------- patterns

// Targets are read after the right-hand side, so names are defined in order.
Pattern TextReader::ParsePatternItem(int depth) {
  if (depth > kMaxNesting) FailAt(pos_, "assignment target nested too deeply");
  SkipSpaces();
  Pattern p;
  p.at = line_->At(pos_);
  if (Accept('(') || Accept('[')) {
    const char close = text()[pos_ - 1] == '(' ? ')' : ']';
    p.kind = close == ')' ? Pattern::Kind::kTuple : Pattern::Kind::kList;
    const std::size_t base = pattern_stack_.size();
    while (!Accept(close)) {
      if (AtEnd()) FailAt(pos_, std::string("expected '") + close + "', got end of line");
      const Pattern item = ParsePatternItem(depth + 1);
      pattern_stack_.push_back(item);
      if (!Accept(',')) {
        Expect(close, close == ')' ? "',' or ')'" : "',' or ']'");
        break;
      }
    }
    p.items = TakePatterns(base);
    return p;
  }
  const std::size_t at = pos_;
  const std::string_view name = Identifier();
  if (name.empty()) FailAt(at, "expected a name to assign to");
  if (name == "_") {
    p.kind = Pattern::Kind::kIgnore;
  } else {
    p.kind = Pattern::Kind::kValue;
    p.value = Define(name, line_->At(at));
  }
  return p;
}

// `a`, `a, b,`, `(a, b)`, `[a]`: a bare single name is not a sequence.
Pattern TextReader::ParsePatternList(bool* is_sequence) {
  SkipSpaces();
  Pattern list;
  list.kind = Pattern::Kind::kTuple;
  list.at = line_->At(pos_);
  *is_sequence = false;
  const std::size_t base = pattern_stack_.size();
  while (!AtEnd()) {
    const Pattern item = ParsePatternItem(1);
    pattern_stack_.push_back(item);
    if (Accept(',')) {
      *is_sequence = true;
      continue;
    }
    if (!AtEnd()) FailAt(pos_, "expected ',' or '=' after an assignment target");
  }
  const std::size_t count = pattern_stack_.size() - base;
  if (count == 0) FailAt(pos_, "expected a name to assign to");
  if (!*is_sequence && count == 1) {
    const Pattern only = pattern_stack_.back();
    pattern_stack_.pop_back();
    *is_sequence = only.kind == Pattern::Kind::kTuple || only.kind == Pattern::Kind::kList;
    return only;
  }
  list.items = TakePatterns(base);
  return list;
}

}  // namespace peakmem::text
