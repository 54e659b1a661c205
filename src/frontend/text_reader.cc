#include "text_reader.h"

#include <algorithm>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "peakmem/frontend/type_inference.h"
#include "peakmem/semantics/fusion.h"

namespace peakmem::text {
namespace {

// Finds `name: "type"` in a subsymbol's trailing comment.
// (In print order: a node, then its children, then its next sibling.)
bool FindSubSymbolType(std::span<const SubSymbol> nodes, std::string_view name,
                       const SubSymbol** where, std::size_t* type_offset) {
  for (const SubSymbol& node : nodes) {
    // Looks for `# {name}: "` without building the needle.
    const std::string_view text = node.text;
    if (!text.empty() && text.back() == '"') {
      for (std::size_t at = text.find(name); at != std::string_view::npos;
           at = text.find(name, at + 1)) {
        const std::size_t after = at + name.size();
        if (at >= 2 && text.compare(at - 2, 2, "# ") == 0 && text.compare(after, 3, ": \"") == 0) {
          *where = &node;
          *type_offset = after + 3;
          return true;
        }
      }
    }
  }
  return false;
}

}  // namespace

// Thunder prints a callee as `{module}.{symbol name}`; the symbol name may
// itself hold dots (`torch.torch.ops.aten.embedding_backward` is module
// `torch`, symbol `torch.ops.aten.embedding_backward`). Strip the longest
// imported prefix; without one, keep the last dotted component.
std::string_view TextReader::SymbolOf(std::string_view callee) const {
  std::size_t best = 0;
  for (const std::string& prefix : imported_) {
    if (prefix.size() > best && callee.size() > prefix.size() + 1 &&
        callee.compare(0, prefix.size(), prefix) == 0 && callee[prefix.size()] == '.') {
      best = prefix.size();
    }
  }
  if (best > 0) return callee.substr(best + 1);
  const std::size_t dot = callee.rfind('.');
  return dot == std::string_view::npos ? callee : callee.substr(dot + 1);
}

// ---------------------------------------------------------------- lines

void TextReader::ReadPreambleLine(int line_no, std::string_view line) {
  const std::string_view t = Trim(line);
  if (t.empty() || t[0] == '#') return;  // `# Constructed by ...` and other comments
  if (IndentOf(line) > 0) Fail({line_no, IndentOf(line) + 1}, "unexpected indentation before 'def'");
  if (t.substr(0, 7) == "import ") {
    // `import torch.nn.functional` makes `torch.nn.functional.` a module
    // prefix of callees; `import a as b` makes `b.` one.
    std::string_view rest = Trim(t.substr(7));
    const std::size_t as = rest.find(" as ");
    imported_.emplace_back(as == std::string_view::npos ? rest : Trim(rest.substr(as + 4)));
    return;
  }
  if (t.substr(0, 5) == "from ") {
    // `from torch import Tensor` makes `Tensor.` a prefix.
    const std::size_t import = t.find(" import ");
    if (import != std::string_view::npos) {
      std::string_view names = t.substr(import + 8);
      while (!names.empty()) {
        const std::size_t comma = names.find(',');
        std::string_view name = Trim(names.substr(0, comma));
        const std::size_t as = name.find(" as ");
        if (as != std::string_view::npos) name = Trim(name.substr(as + 4));
        if (!name.empty()) imported_.emplace_back(name);
        if (comma == std::string_view::npos) break;
        names.remove_prefix(comma + 1);
      }
    }
    return;
  }
  if (t[0] == '@') {
    trace_.decorators.emplace_back(t.substr(1));
    return;
  }
  if (t.substr(0, 4) == "def ") {
    ReadSignature(line_no, line);
    return;
  }
  Fail({line_no, 1}, "expected 'def', 'import', a decorator or a comment before the function body");
}

void TextReader::ReadSignature(int line_no, std::string_view line) {
  current_.text = line;
  current_.pieces.assign(1, {0, line_no, 1});
  line_ = &current_;
  pos_ = 4;
  end_ = current_.text.size();
  const std::string_view name = Identifier();
  if (name.empty()) FailAt(pos_, "expected a function name after 'def'");
  trace_.function_name = std::string(name);
  Expect('(', "'(' after the function name");
  bool seen_varargs = false;
  while (!Accept(')')) {
    Parameter p;
    std::size_t name_at = 0;
    if (Accept('*')) {
      if (Accept('*')) {
        p.kind = Parameter::Kind::kVarKwargs;
      } else if (Peek() == ',' || Peek() == ')') {
        // keyword-only marker `*`
        Accept(',');
        continue;
      } else {
        p.kind = Parameter::Kind::kVarArgs;
        seen_varargs = true;
      }
    }
    SkipSpaces();
    name_at = pos_;
    const std::string_view param = Identifier();
    if (param.empty()) FailAt(pos_, "expected a parameter name");
    p.value = Define(param, current_.At(name_at));
    if (Accept('=')) p.default_value = ParseExpression(0);
    trace_.params.push_back(std::move(p));
    if (!Accept(',')) {
      Expect(')', "',' or ')' in the parameter list");
      break;
    }
  }
  (void)seen_varargs;
  Expect(':', "':' after the parameter list");
  SkipSpaces();
  if (pos_ < end_ && text()[pos_] != '#') FailAt(pos_, "unexpected text after the signature");
  state_ = State::kBody;
}

void TextReader::ReadBodyComment(int line_no, int indent, std::string_view line) {
  open_call_ = nullptr;
  subsymbol_stack_.clear();
  const std::string_view c = Trim(line.substr(indent + 1));  // after '#'
  const int col0 = static_cast<int>(c.data() - line.data()) + 1;  // column of c[0]
  // `# name: "type"`
  std::size_t n = 0;
  while (n < c.size() && IsIdentChar(c[n])) ++n;
  if (n > 0 && IsIdentStart(c[0])) {
    const std::string_view name = c.substr(0, n);
    std::string_view rest = c.substr(n);
    if (rest.size() >= 4 && rest.substr(0, 3) == ": \"" && rest.back() == '"') {
      // (A type for a name the trace never binds is a plain comment.)
      const std::string_view type = rest.substr(3, rest.size() - 4);
      builder_.SetTypeOfName(name, type, {line_no, col0 + static_cast<int>(n) + 3});
      return;
    }
    if (rest == " (empty sequence)") {
      const ValueId id = builder_.LookupLive(name);
      if (id == kNoValue) Fail({line_no, col0}, "unknown name '" + std::string(name) + "'");
      Statement s;
      s.kind = StatementKind::kUnpack;
      s.at = {line_no, col0};
      s.source_line = line_no;
      s.text_offset = lines_.begin() + static_cast<std::size_t>(indent);
      s.text_length = TextLength(line.size() - static_cast<std::size_t>(indent));
      s.source = id;
      s.outputs.kind = Pattern::Kind::kTuple;
      s.outputs.at = s.at;
      trace_.unpacks.push_back(static_cast<std::uint32_t>(trace_.statements.size()));
      trace_.statements.push_back(std::move(s));
      return;
    }
  }
  // `# _ (unused)`, `# None`, header and source-location comments: nothing to model.
}

void TextReader::ReadSubSymbol(int line_no, int indent, std::string_view line) {
  if (open_call_ == nullptr) return;  // an indented comment with no op above it
  while (!subsymbol_stack_.empty() && subsymbol_stack_.back() >= indent) {
    subsymbol_stack_.pop_back();
  }
  if (subsymbol_stack_.size() >= static_cast<std::size_t>(kMaxNesting)) {
    Fail({line_no, indent + 1}, "subsymbols nested too deeply");
  }
  const int depth = static_cast<int>(subsymbol_stack_.size());
  subsymbol_stack_.push_back(indent);
  if (open_call_lines_ == SubSymbolLines::kUndecided) open_call_lines_ = LinesKeptFor(*open_call_);
  if (open_call_lines_ == SubSymbolLines::kDropped) return;
  const std::string_view body = Trim(line.substr(indent + 1));
  if (open_call_->subsymbols.empty()) {
    open_call_->subsymbols.begin = static_cast<std::uint32_t>(trace_.subsymbols.size());
  }
  trace_.subsymbols.push_back(SubSymbol{body, line_no, depth});
  ++open_call_->subsymbols.count;
  if (open_call_lines_ == SubSymbolLines::kParsed) {
    ReadSubSymbolCall(static_cast<std::uint32_t>(trace_.subsymbols.size() - 1),
                      {line_no, static_cast<int>(body.data() - line.data()) + 1});
  }
}

TextReader::SubSymbolLines TextReader::LinesKeptFor(const Statement& call) {
  if (UsesSubSymbols(trace_.SymbolOf(call))) return SubSymbolLines::kParsed;
  if (!fusion_subsymbols_only_) return SubSymbolLines::kKept;
  // Only an untyped output is ever typed from the lines (InferOutputTypes).
  FlatOutputs(call, &call_outputs_);
  return std::any_of(call_outputs_.begin(), call_outputs_.end(),
                     [this](ValueId id) { return trace_.value(id).type->kind == ValueKind::kUnknown; })
             ? SubSymbolLines::kKept
             : SubSymbolLines::kDropped;
}

void TextReader::ReadSubSymbolCall(std::uint32_t index, SourceLocation at) {
  const std::string_view body = trace_.subsymbols[index].text;
  const LineScan scan = ScanLine(body);
  if (scan.unterminated_string || scan.depth_change != 0 || scan.assign == std::string_view::npos) {
    return;
  }
  // The statement being read, if any, is ended: its line and position are
  // kept for the line after this one all the same.
  const LogicalLine* const statement_line = line_;
  const std::size_t statement_pos = pos_;
  const std::size_t statement_end = end_;
  subsymbol_line_.text = body;
  subsymbol_line_.pieces.assign(1, {0, at.line, at.column});
  line_ = &subsymbol_line_;
  SubSymbolCall call;
  call.subsymbol = index;
  pos_ = 0;
  end_ = scan.assign;
  call.out = Identifier();
  bool is_call = !call.out.empty() && AtEnd();
  if (is_call) {
    pos_ = scan.assign + 1;
    end_ = scan.comment == std::string_view::npos ? body.size() : scan.comment;
    const std::size_t base = expr_stack_.size();
    const std::size_t keyword_base = keyword_stack_.size();
    resolve_names_ = false;
    try {
      const Expr rhs = ParseExpression(0);
      is_call = AtEnd() && rhs.kind == Expr::Kind::kCall && rhs.text != "<call>" &&
                rhs.text != "<subscript>";
      call.callee = rhs.text;
      call.args = rhs.items;
    } catch (const TraceError&) {
      // A subsymbol line is a comment Thunder prints for information; one
      // that is not Python peakmem reads leaves its region's outputs dense
      // (FusionOutputBytes), as an unprinted one does.
      expr_stack_.resize(base);
      keyword_stack_.resize(keyword_base);
      is_call = false;
    }
    resolve_names_ = true;
  }
  if (is_call && scan.comment != std::string_view::npos) {
    // `# t15: "cuda:0 f32[2, 3, 4]"`: the output's type.
    pos_ = scan.comment + 1;
    end_ = body.size();
    if (Identifier() == call.out && Accept(':') && Peek() == '"' && pos_ + 1 < end_ &&
        body.back() == '"') {
      call.out_type = builder_.TypeOrNull(body.substr(pos_ + 1, end_ - pos_ - 2), &trace_);
    }
  }
  if (is_call) trace_.subsymbol_calls.push_back(call);
  line_ = statement_line;
  pos_ = statement_pos;
  end_ = statement_end;
}

void TextReader::FinishCall() {
  if (open_call_ != nullptr && !InferOutputTypes(*open_call_)) {
    // A chunk: the types come from values bound before it. The statement
    // is finished when the chunk is appended; until then its outputs'
    // types are pending too.
    builder_.DeferFinishCall(open_call_index_);
    for (ValueId id : FlatOutputs(*open_call_)) builder_.MarkPending(id);
  } else if (open_call_ != nullptr && fusion_subsymbols_only_ && !open_call_->subsymbols.empty() &&
             !UsesSubSymbols(trace_.SymbolOf(*open_call_))) {
    // Its output types are known: no model reads these lines again. They
    // are the last ones read.
    trace_.subsymbols.resize(open_call_->subsymbols.begin);
    open_call_->subsymbols = {};
  }
  open_call_ = nullptr;
  subsymbol_stack_.clear();
}

bool TextReader::InferOutputTypes(Statement& call) {
  FlatOutputs(call, &call_outputs_);
  if (std::none_of(call_outputs_.begin(), call_outputs_.end(), [this](ValueId id) {
        return trace_.value(id).type->kind == ValueKind::kUnknown;
      })) {
    return true;  // inference sets only untyped outputs
  }
  if (!InferAliasTypes(&trace_, call,
                       [this](ValueId id) { return builder_.TypePending(id); })) {
    return false;
  }
  for (ValueId id : call_outputs_) {
    Value& v = trace_.value(id);
    if (v.type->kind != ValueKind::kUnknown) continue;
    const SubSymbol* where = nullptr;
    std::size_t offset = 0;
    if (FindSubSymbolType(trace_.SubSymbolsOf(call), v.name, &where, &offset)) {
      const std::string_view type = where->text.substr(offset, where->text.size() - offset - 1);
      // The subsymbol's text views its line in the source: its column is
      // its distance from the line's start.
      const std::string_view all = source_->text();
      std::size_t text_at = static_cast<std::size_t>(where->text.data() - all.data());
      const std::size_t line_start = all.rfind('\n', text_at == 0 ? 0 : text_at - 1);
      text_at -= line_start == std::string_view::npos || text_at == 0 ? 0 : line_start + 1;
      SetType(id, type, {where->line, static_cast<int>(text_at + offset) + 1});
    }
  }
  return true;
}

int TextReader::GatherLogicalLine(int first_line, std::string_view first) {
  current_.pieces.clear();
  joined_.clear();
  int depth = 0;
  int line_no = first_line;
  for (;; ++line_no) {
    std::string_view raw = first;
    if (line_no > first_line) {
      const std::string_view previous = lines_.last();
      if (!lines_.Next(&raw)) {
        Fail({line_no - 1, static_cast<int>(previous.size()) + 1},
             "unexpected end of input inside a statement");
      }
    }
    const int indent = line_no == first_line ? body_indent_ : IndentOf(raw);
    std::string_view piece = raw.substr(std::min<std::size_t>(indent, raw.size()));
    while (!piece.empty() && IsSpace(piece.back())) piece.remove_suffix(1);
    const LineScan scan = ScanLine(piece);
    if (scan.unterminated_string) Fail({line_no, indent + 1}, "unterminated string literal");
    bool backslash = false;
    if (scan.comment == std::string_view::npos && !piece.empty() && piece.back() == '\\') {
      backslash = true;
      piece.remove_suffix(1);
    }
    depth += scan.depth_change;
    if (depth < 0) Fail({line_no, indent + 1}, "unbalanced closing bracket");
    if (depth > kMaxNesting) Fail({line_no, indent + 1}, "brackets nested too deeply");
    if (line_no == first_line && !backslash && depth == 0) {
      current_.text = piece;  // one physical line: view the source itself
      current_.pieces.push_back({0, line_no, indent + 1});
      scan_ = scan;  // ReadStatement need not scan it again
      have_scan_ = true;
      return line_no;
    }
    if (!joined_.empty()) joined_ += ' ';
    current_.pieces.push_back({joined_.size(), line_no, indent + 1});
    joined_ += piece;
    if (!backslash && depth == 0) break;
    if (scan.comment != std::string_view::npos && depth > 0) {
      // A comment inside an open bracket ends the physical line; keep only the code.
      joined_.resize(current_.pieces.back().offset + scan.comment);
    }
  }
  current_.text = trace_.Save(joined_);
  return line_no;
}

// ---------------------------------------------------------------- statements

void TextReader::ReadTrailingComment(std::size_t comment_start) {
  // `# name: "type"` after an op: the type of that output.
  pos_ = comment_start + 1;
  end_ = text().size();
  const std::string_view name = Identifier();
  if (name.empty() || Peek() != ':') return;
  ++pos_;
  SkipSpaces();
  if (pos_ >= end_ || text()[pos_] != '"' || text().back() != '"' || pos_ + 1 >= end_) return;
  const std::size_t type_start = pos_ + 1;
  const std::string_view type =
      text().substr(type_start, text().size() - 1 - type_start);
  // Nearly always the comment types the one output the line just bound:
  // that value is the name's live one, so no name lookup is needed.
  const Pattern& outputs = trace_.statements.back().outputs;
  if (outputs.kind == Pattern::Kind::kValue && outputs.value != kNoValue &&
      trace_.value(outputs.value).name == name) {
    builder_.SetType(outputs.value, type, line_->At(type_start));
    return;
  }
  builder_.SetTypeOfName(name, type, line_->At(type_start));
}

void TextReader::ReadStatement() {
  line_ = &current_;
  const LineScan scan = have_scan_ ? scan_ : ScanLine(text());
  have_scan_ = false;
  std::size_t code_end = scan.comment == std::string_view::npos ? text().size() : scan.comment;
  while (code_end > 0 && IsSpace(text()[code_end - 1])) --code_end;
  pos_ = 0;
  end_ = code_end;

  // Built in place (a Statement is a couple of hundred bytes). If the line
  // is malformed the read fails as a whole, so a half-built one never
  // escapes.
  Statement& s = trace_.statements.emplace_back();
  s.at = line_->At(0);
  s.source_line = s.at.line;
  s.text_offset = statement_offset_;
  s.text_length = TextLength(statement_text_length_);
  const SourceLocation start = s.at;

  if (returned_) Fail(start, "statement after 'return'");
  if (StartsWithKeyword("del")) return ReadDel(s, start);
  if (StartsWithKeyword("return")) return ReadReturn(s);

  const std::size_t assign = scan.assign;
  // Right-hand side first: it can only use names defined before this line.
  pos_ = assign == std::string::npos ? 0 : assign + 1;
  SkipSpaces();
  const std::size_t rhs_at = pos_;
  if (pos_ >= end_) FailAt(pos_, "expected an expression after '='");
  Expr rhs = ParseExpression(0);
  if (!AtEnd()) FailAt(pos_, "unexpected text after the expression");

  if (rhs.kind == Expr::Kind::kCall && rhs.text != "<call>" && rhs.text != "<subscript>") {
    if (ReadClear(s, rhs, assign)) return;
    ReadCall(s, rhs);
  } else if (rhs.kind == Expr::Kind::kValue && assign != std::string::npos) {
    s.source = rhs.value;
    builder_.RequireBound(s.source);
    s.kind = StatementKind::kAssign;  // refined below once the targets are read
  } else {
    Fail(line_->At(rhs_at), assign == std::string::npos
                                ? "expected a statement: an op call, 'del' or 'return'"
                                : "expected an op call or a name after '='");
  }

  if (assign != std::string::npos) {
    ReadTargets(s, assign, code_end);
  } else {
    s.outputs.kind = Pattern::Kind::kTuple;
    s.outputs.at = start;
  }

  if (scan.comment != std::string_view::npos) ReadTrailingComment(scan.comment);
  if (trace_.statements.back().kind == StatementKind::kCall) {
    open_call_ = &trace_.statements.back();
    open_call_index_ = static_cast<std::uint32_t>(trace_.statements.size() - 1);
    open_call_lines_ = SubSymbolLines::kUndecided;
  }
}

void TextReader::ReadDel(Statement& s, SourceLocation start) {
  s.kind = StatementKind::kDel;
  pos_ = 3;
  deleted_.clear();
  while (!AtEnd()) {
    const std::size_t at = pos_;
    const std::string_view name = Identifier();
    if (name.empty()) FailAt(at, "expected a name after 'del'");
    deleted_.push_back(builder_.Delete(name, line_->At(at), start.line));
    if (!Accept(',') && !AtEnd()) FailAt(pos_, "expected ',' between names in 'del'");
  }
  if (deleted_.empty()) FailAt(pos_, "expected a name after 'del'");
  s.deleted = trace_.SaveArray(deleted_);
}

void TextReader::ReadReturn(Statement& s) {
  s.kind = StatementKind::kReturn;
  pos_ = 6;
  if (AtEnd()) {
    Expr none;
    none.SetConstant("None");
    s.returned = std::move(none);
  } else {
    Expr first = ParseExpression(0);
    if (Accept(',')) {
      // `return a, b` is a tuple
      Expr tuple;
      tuple.kind = Expr::Kind::kTuple;
      tuple.at = first.at;
      const std::size_t base = expr_stack_.size();
      expr_stack_.push_back(first);
      while (!AtEnd()) {
        expr_stack_.push_back(ParseExpression(0));
        if (!Accept(',') && !AtEnd()) FailAt(pos_, "expected ',' or end of line");
      }
      tuple.items = TakeItems(base, keyword_stack_.size());
      s.returned = tuple;
    } else {
      s.returned = std::move(first);
    }
  }
  if (!AtEnd()) FailAt(pos_, "unexpected text after the returned value");
  returned_ = true;
}

bool TextReader::ReadClear(Statement& s, const Expr& rhs, std::size_t assign) {
  const std::string_view callee = rhs.text;
  const std::size_t dot = callee.rfind('.');
  const std::string_view last = dot == std::string::npos ? callee : callee.substr(dot + 1);
  if ((last != kClearSymbol && last != kLegacyClearSymbol) ||
      assign != std::string::npos) {
    return false;
  }
  s.kind = StatementKind::kClear;
  s.call_symbol = builder_.InternCallSymbol(callee, last, last);
  s.legacy_clear = last == kLegacyClearSymbol;
  if (rhs.items.size() != 1 || rhs.items[0].kind != Expr::Kind::kValue) {
    Fail(rhs.at, std::string(last) + " expects one collection name");
  }
  s.source = rhs.items[0].value;
  builder_.RequireBound(s.source);
  return true;
}

void TextReader::ReadCall(Statement& s, const Expr& rhs) {
  const std::string_view callee = rhs.text;
  s.kind = StatementKind::kCall;
  // The symbol and id follow from the callee alone: work them out once
  // per distinct callee.
  auto known = callees_.find(callee);
  if (known != callees_.end()) {
    s.call_symbol = known->second;
  } else {
    const std::string_view symbol = SymbolOf(callee);
    // Executor ops' ids are their names; prims' ids are enum values and
    // ltorch's are qualified ("torch.reshape"): neither is a plain name.
    const bool qualified_id =
        callee.rfind("prims.", 0) == 0 || callee.rfind("ltorch.", 0) == 0;
    s.call_symbol =
        builder_.InternCallSymbol(callee, symbol, qualified_id ? std::string_view() : symbol);
    callees_.emplace(trace_.CalleeOf(s), s.call_symbol);  // the interned view
  }
  const std::size_t positional = rhs.items.size() - rhs.items.keyword_count();
  s.args = rhs.items.first(positional);
  if (positional != rhs.items.size()) {
    kwargs_.clear();
    for (std::size_t i = positional; i < rhs.items.size(); ++i) {
      kwargs_.emplace_back(rhs.keywords()[i - positional], rhs.items[i]);
    }
    s.kwargs = trace_.SaveKeywordArgs(kwargs_);
  }
}

void TextReader::ReadTargets(Statement& s, std::size_t assign, std::size_t code_end) {
  pos_ = 0;
  end_ = assign;
  bool is_sequence = false;
  s.outputs = ParsePatternList(&is_sequence);
  if (s.kind == StatementKind::kAssign && is_sequence) s.kind = StatementKind::kUnpack;
  if (s.kind == StatementKind::kUnpack) {
    trace_.unpacks.push_back(static_cast<std::uint32_t>(trace_.statements.size() - 1));
  }
  end_ = code_end;
}

// ---------------------------------------------------------------- reading

void TextReader::Reserve(std::size_t newlines, std::size_t named_newlines) {
  // Room for every statement and value up front: a printed trace has at
  // least two lines per statement in practice (the op and its comments), and
  // growing these vectors would copy them and briefly hold both copies.
  // Capacity that is never written costs address space, not memory.
  trace_.statements.reserve(newlines / 2 + 16);
  trace_.values.reserve(newlines / 2 + 16);
  // Every line could be a subsymbol line (most lines of a fused trace are):
  // doubling a vector of 10^6 of them would copy it and fault in twice its
  // final size.
  trace_.subsymbols.reserve(newlines + 1);
  // And the name table: growing it rehashes every name bound so far, again
  // and again (~5% of a read). Real traces bind about one name per five
  // lines (the op line, its type and subsymbol comments, `del`s); where they
  // bind more the table still grows, and where fewer it is at most one size
  // step larger than it would have grown to.
  builder_.ReserveNames(named_newlines / 5);
}

Trace TextReader::Read() {
  Reserve(CountNewlines(source_->text()));
  ReadLines();
  return Finish();
}

void TextReader::ReadLines() {
  std::string_view line;
  while (lines_.next() < stop_ && lines_.Next(&line)) {
    int line_no = lines_.number();
    if (state_ == State::kPreamble) {
      ReadPreambleLine(line_no, line);
      continue;
    }
    const std::string_view trimmed = Trim(line);
    if (trimmed.empty()) continue;
    const int indent = IndentOf(line);
    if (indent == 0) {
      if (trimmed[0] == '#') continue;  // a comment after the body
      Fail({line_no, 1}, returned_ ? "unexpected text after the function body"
                                   : "expected an indented statement in the function body");
    }
    if (body_indent_ < 0) body_indent_ = indent;
    if (trimmed[0] == '#') {
      if (indent > body_indent_) {
        ReadSubSymbol(line_no, indent, line);
      } else if (indent == body_indent_) {
        FinishCall();
        ReadBodyComment(line_no, indent, line);
      } else {
        Fail({line_no, indent + 1}, "comment indented less than the function body");
      }
      continue;
    }
    if (indent != body_indent_) {
      Fail({line_no, indent + 1}, indent > body_indent_ ? "unexpected indentation"
                                                         : "unindent does not match the function body");
    }
    FinishCall();
    // The statement's text: its first line after the indentation.
    statement_offset_ = lines_.begin() + static_cast<std::size_t>(indent);
    statement_text_length_ = line.size() - static_cast<std::size_t>(indent);
    line_no = GatherLogicalLine(line_no, line);
    ReadStatement();
    last_code_line_ = line_no;
  }
}

Trace TextReader::Finish() {
  CheckEnd();
  return TakeTrace();
}

void TextReader::CheckEnd() {
  FinishCall();
  const int lines = lines_.number();
  if (state_ == State::kPreamble) {
    Fail({std::max(1, lines), 1}, lines == 0 || source_->text().empty()
                                      ? "empty trace: expected 'def name(...):'"
                                      : "no 'def' line: expected 'def name(...):'");
  }
  if (!returned_) {
    const int at = std::max(1, last_code_line_);
    Fail({at, 1}, "the trace ends without a 'return' (truncated?)");
  }
}

Trace TextReader::TakeTrace() {
  trace_.unpacks_listed = true;
  return std::move(trace_);
}


bool TextReader::Append(TextReader&& chunk, bool more_follow) {
  const bool appended =
      builder_.AppendChunk(std::move(chunk.builder_), more_follow, [this](std::uint32_t i) {
        InferOutputTypes(trace_.statements[i]);  // this reader is no chunk: nothing is pending
      });
  // The last statement so far (for "ends without a 'return'"): the chunk's,
  // unless it holds none (only comments).
  if (appended) last_code_line_ = std::max(last_code_line_, chunk.last_code_line_);
  return appended;
}

void TextReader::ResumeAfter(const TextReader& chunk) {
  lines_ = chunk.lines_;
  returned_ = chunk.returned_;
  open_call_ = nullptr;
  subsymbol_stack_.clear();
  stop_ = std::string_view::npos;
}

}  // namespace peakmem::text
