#include "peakmem/frontend/trace_text_reader.h"

#include "peakmem/semantics/fusion.h"
#include "peakmem/semantics/op_registry.h"
#include "peakmem/ir/trace_builder.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <array>
#include <cstdint>
#include <fstream>
#include <latch>
#include <sstream>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <unordered_set>

namespace peakmem {
namespace {

constexpr int kMaxNesting = 200;  // brackets or patterns; deeper input is rejected

// Character classes, by table: the reader looks at every byte of traces of
// hundreds of megabytes, and a table lookup beats a chain of comparisons.
enum CharClass : std::uint8_t {
  kIdentStart = 1,  // a-z A-Z _
  kIdentChar = 2,   // identifier start or digit
  kSpace = 4,       // ' ' '\t' '\r'
  kScanStop = 8,    // what ScanLine acts on: # ' " ( ) [ ] { } =
};
constexpr std::array<std::uint8_t, 256> MakeCharClasses() {
  std::array<std::uint8_t, 256> t{};
  for (int c = 'a'; c <= 'z'; ++c) t[c] |= kIdentStart | kIdentChar;
  for (int c = 'A'; c <= 'Z'; ++c) t[c] |= kIdentStart | kIdentChar;
  for (int c = '0'; c <= '9'; ++c) t[c] |= kIdentChar;
  t['_'] |= kIdentStart | kIdentChar;
  for (char c : {' ', '\t', '\r'}) t[static_cast<unsigned char>(c)] |= kSpace;
  for (char c : {'#', '\'', '"', '(', ')', '[', ']', '{', '}', '='}) {
    t[static_cast<unsigned char>(c)] |= kScanStop;
  }
  return t;
}
constexpr std::array<std::uint8_t, 256> kCharClasses = MakeCharClasses();
inline bool Is(char c, CharClass cls) { return kCharClasses[static_cast<unsigned char>(c)] & cls; }

bool IsIdentStart(char c) { return Is(c, kIdentStart); }
bool IsIdentChar(char c) { return Is(c, kIdentChar); }
bool IsSpace(char c) { return Is(c, kSpace); }

int IndentOf(std::string_view line) {
  int n = 0;
  while (n < static_cast<int>(line.size()) && (line[n] == ' ' || line[n] == '\t')) ++n;
  return n;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// A statement may span several physical lines (backslash continuation or an
// open bracket). LogicalLine joins them and remembers where each piece came
// from so that offsets map back to line:column. `text` views the source for
// a one-line statement (the common case: no copy) or the joined pieces saved
// in the trace's arena, so views taken from it outlive the line.
struct LogicalLine {
  struct Piece {
    std::size_t offset;  // in text
    int line;
    int column;  // 1-based column of text[offset] in its line
  };
  std::string_view text;
  std::vector<Piece> pieces;

  SourceLocation At(std::size_t offset) const {
    if (pieces.size() == 1) {
      return {pieces[0].line, pieces[0].column + static_cast<int>(offset - pieces[0].offset)};
    }
    // Pieces are in offset order: the last one starting at or before `offset`.
    auto it = std::upper_bound(pieces.begin(), pieces.end(), offset,
                               [](std::size_t o, const Piece& p) { return o < p.offset; });
    const Piece& best = it == pieces.begin() ? pieces.front() : *(it - 1);
    return {best.line, best.column + static_cast<int>(offset - best.offset)};
  }
};

// Scans a line for the bracket depth at its end and the start of a trailing
// comment, skipping string literals. Returns false on an unterminated string.
struct LineScan {
  int depth_change = 0;
  std::size_t comment = std::string_view::npos;
  bool unterminated_string = false;
  // The statement's assignment: the first `=` outside brackets that is not
  // part of `==`, `!=`, `<=`, `>=` (npos: none).
  std::size_t assign = std::string_view::npos;
};

LineScan ScanLine(std::string_view s) {
  LineScan scan;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (!Is(s[i], kScanStop)) continue;
    const char c = s[i];
    if (c == '#') {
      scan.comment = i;
      return scan;
    }
    if (c == '\'' || c == '"') {
      std::size_t j = i + 1;
      while (j < s.size() && s[j] != c) j += (s[j] == '\\') ? 2 : 1;
      if (j >= s.size()) {
        scan.unterminated_string = true;
        return scan;
      }
      i = j;
    } else if (c == '(' || c == '[' || c == '{') {
      ++scan.depth_change;
    } else if (c == ')' || c == ']' || c == '}') {
      --scan.depth_change;
    } else if (c == '=' && scan.depth_change == 0 && scan.assign == std::string_view::npos) {
      const bool compare = (i + 1 < s.size() && s[i + 1] == '=') ||
                           (i > 0 && (s[i - 1] == '=' || s[i - 1] == '!' || s[i - 1] == '<' ||
                                      s[i - 1] == '>'));
      if (!compare) scan.assign = i;
    }
  }
  return scan;
}

// The source's lines in order, found as they are read (no line index: on a
// big trace building one costs more than a tenth of the read).
class LineCursor {
 public:
  explicit LineCursor(std::string_view text) : text_(text) {}
  // Starts at `offset` (a line start), after `lines_before` lines.
  LineCursor(std::string_view text, std::size_t offset, int lines_before)
      : text_(text), next_(offset), number_(lines_before) {}
  // The next line (without its line break and a trailing '\r'), its number
  // and the offset it starts at; false after the last one. Like
  // SourceFile::Line: a final line break does not start another line.
  bool Next(std::string_view* line) {
    if (next_ >= text_.size()) return false;
    begin_ = next_;
    const auto* nl = static_cast<const char*>(
        std::memchr(text_.data() + begin_, '\n', text_.size() - begin_));
    std::size_t end = nl == nullptr ? text_.size() : static_cast<std::size_t>(nl - text_.data());
    next_ = nl == nullptr ? text_.size() : end + 1;
    if (end > begin_ && text_[end - 1] == '\r') --end;
    *line = last_ = text_.substr(begin_, end - begin_);
    ++number_;
    return true;
  }
  int number() const { return number_; }       // of the last line returned (0: none yet)
  std::size_t next() const { return next_; }    // where the next line starts
  std::size_t begin() const { return begin_; }  // its offset
  std::string_view last() const { return last_; }

 private:
  std::string_view text_;
  std::size_t next_ = 0;
  std::size_t begin_ = 0;
  int number_ = 0;
  std::string_view last_;
};

// Where a reader of one chunk of a trace read in parallel starts and stops
// (see ReadInChunks).
struct ChunkRange {
  std::size_t begin = 0;  // a line start inside the body, at a statement
  std::size_t end = 0;    // the next chunk's begin, or the text's size
  int lines_before = 0;   // lines before `begin`
  int body_indent = 0;
  std::size_t newlines = 0;  // in [begin, end), for reserving
};

class TextReader {
 public:
  explicit TextReader(std::shared_ptr<const SourceFile> source)
      : source_(source),
        builder_(std::move(source)),
        trace_(builder_.trace()),
        lines_(source_->text()) {}
  // A reader of one chunk (not the first) of a trace read in parallel.
  TextReader(std::shared_ptr<const SourceFile> source, const ChunkRange& range)
      : source_(source),
        builder_(std::move(source), TraceBuilder::Chunk{}),
        trace_(builder_.trace()),
        state_(State::kBody),
        body_indent_(range.body_indent),
        lines_(source_->text(), range.begin, range.lines_before),
        stop_(range.end) {}

  // The whole text in one pass.
  Trace Read();
  // See TextReadOptions::fusion_subsymbols_only.
  void KeepFusionSubSymbolsOnly(bool only) { fusion_subsymbols_only_ = only; }

  // ---- reading in chunks (see ReadInChunks)
  // Room for the statements of `newlines` lines, and for the names of
  // `named_newlines` lines (a first reader's table gets the names of every
  // chunk but the last).
  void Reserve(std::size_t newlines, std::size_t named_newlines);
  void Reserve(std::size_t newlines) { Reserve(newlines, newlines); }
  // Reads lines up to the stop offset (or the end), then ends the last op.
  void ReadLines();
  // The end-of-input checks (ending the last op), then TakeTrace.
  Trace Finish();
  void CheckEnd();
  // The trace, read.
  Trace TakeTrace();
  void StopAt(std::size_t offset) { stop_ = offset; }
  // Where ReadLines stopped (the first line not read) and whether it stopped
  // at a clean statement boundary in the body.
  std::size_t stopped_at() const { return lines_.next(); }
  bool in_body() const { return state_ == State::kBody && body_indent_ >= 0; }
  int body_indent() const { return body_indent_; }
  bool returned() const { return returned_; }
  // Appends a chunk read after this reader's text (TraceBuilder::AppendChunk).
  bool Append(TextReader&& chunk, bool more_follow);
  // The names the preamble imports (callees' module prefixes).
  const std::vector<std::string>& imports() const { return imported_; }
  void SetImports(std::vector<std::string> imports) { imported_ = std::move(imports); }
  // Continues in one pass where `chunk` (the last one appended) stopped.
  void ResumeAfter(const TextReader& chunk);

 private:
  // ---- errors
  [[noreturn]] void Fail(SourceLocation at, const std::string& message) const {
    ThrowAt(*source_, at, message);
  }
  [[noreturn]] void FailAt(std::size_t offset, const std::string& message) const {
    Fail(line_->At(offset), message);
  }

  // ---- values (see TraceBuilder)
  ValueId Define(std::string_view name, SourceLocation at) { return builder_.Define(name, at); }
  void SetType(ValueId id, std::string_view type_text, SourceLocation type_at) {
    builder_.SetType(id, type_text, type_at);
  }

  // ---- lines
  void ReadPreambleLine(int line_no, std::string_view line);
  void ReadSignature(int line_no, std::string_view line);
  void ReadBodyComment(int line_no, int indent, std::string_view line);
  void ReadSubSymbol(int line_no, int indent, std::string_view line);
  int GatherLogicalLine(int first_line, std::string_view first);
  void ReadStatement();

 public:
  // Ends the op call whose subsymbols were being read.
  void FinishCall();

 private:
  // The output types FinishCall infers for an op call; false, changing
  // nothing, when they depend on types a chunk does not know yet.
  bool InferOutputTypes(Statement& s);

  // ---- tokens within the current logical line
  void SkipSpaces() {
    while (pos_ < end_ && IsSpace(text()[pos_])) ++pos_;
  }
  bool AtEnd() {
    SkipSpaces();
    return pos_ >= end_;
  }
  char Peek() {
    SkipSpaces();
    return pos_ < end_ ? text()[pos_] : '\0';
  }
  bool Accept(char c) {
    if (Peek() == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void Expect(char c, const char* what) {
    if (!Accept(c)) {
      if (pos_ >= end_) FailAt(pos_, std::string("expected ") + what + ", got end of line");
      FailAt(pos_, std::string("expected ") + what);
    }
  }
  std::string_view Identifier() {
    SkipSpaces();
    const std::size_t start = pos_;
    if (pos_ >= end_ || !IsIdentStart(text()[pos_])) return {};
    const char* const data = text().data();
    std::size_t pos = pos_ + 1;
    while (pos < end_ && IsIdentChar(data[pos])) ++pos;
    pos_ = pos;
    return text().substr(start, pos_ - start);
  }
  std::string_view DottedName() {
    std::size_t start = pos_;
    SkipSpaces();
    start = pos_;
    if (Identifier().empty()) return {};
    while (pos_ + 1 < end_ && text()[pos_] == '.' && IsIdentStart(text()[pos_ + 1])) {
      ++pos_;
      Identifier();
    }
    return text().substr(start, pos_ - start);
  }
  std::string_view text() const { return line_->text; }

  Expr ParseExpression(int depth);
  Expr ParsePrimary(int depth);
  // Parses the arguments of `call` up to its ')' into call->items, after
  // `first` when given (the called expression, for `<call>`).
  void ParseCallArguments(Expr* call, int depth, const Expr* first);
  Expr ParseSequence(char close, Expr::Kind kind, int depth);
  ExprList TakeItems(std::size_t base, std::size_t keyword_base);
  Pattern ParsePatternList(bool* is_sequence);
  Pattern ParsePatternItem(int depth);
  void ReadTrailingComment(std::size_t comment_start);

  std::string_view SymbolOf(std::string_view callee) const;

  std::shared_ptr<const SourceFile> source_;
  TraceBuilder builder_;
  std::vector<std::string> imported_;  // module and class names the preamble imports
  Trace& trace_;

  enum class State { kPreamble, kBody, kDone } state_ = State::kPreamble;
  int body_indent_ = -1;
  bool returned_ = false;
  int last_code_line_ = 0;
  // The op call that subsymbol lines attach to, and the open subsymbol nodes.
  Statement* open_call_ = nullptr;
  std::uint32_t open_call_index_ = 0;  // its index in trace_.statements
  std::vector<int> subsymbol_stack_;  // indentation of the open subsymbol lines
  bool fusion_subsymbols_only_ = false;

  const LogicalLine* line_ = nullptr;
  LogicalLine current_;
  LineCursor lines_;
  std::size_t stop_ = std::string_view::npos;  // ReadLines reads no line starting here or after
  std::size_t statement_offset_ = 0;  // where the statement being read starts (its text)
  std::size_t statement_text_length_ = 0;  // up to the end of its first line
  // Statement::text_length for a text of `size` bytes.
  static std::uint16_t TextLength(std::size_t size) {
    return size <= UINT16_MAX ? static_cast<std::uint16_t>(size) : 0;
  }
  std::string joined_;  // the pieces of a statement spanning several lines
  std::vector<Expr> expr_stack_;  // items of the lists being parsed (see TakeItems)
  std::vector<std::string_view> keyword_stack_;  // their keyword names (calls)
  std::vector<KeywordArg> kwargs_;  // a statement's keyword arguments (reused)
  std::vector<Pattern> pattern_stack_;  // items of the targets being parsed (see TakePatterns)
  std::vector<ValueId> deleted_;        // the values a `del` unbinds (reused)
  // The patterns on pattern_stack_ from `base` on, saved in the trace, and popped.
  ArenaSpan<Pattern> TakePatterns(std::size_t base) {
    const ArenaSpan<Pattern> items =
        trace_.SaveArray(std::span<const Pattern>(pattern_stack_).subspan(base));
    pattern_stack_.resize(base);
    return items;
  }
  LineScan scan_;       // the scan of current_ when GatherLogicalLine made one
  bool have_scan_ = false;
  absl::flat_hash_map<std::string_view, std::uint32_t, StringHash> callees_;  // callee -> call_symbol
  std::size_t pos_ = 0;
  std::size_t end_ = 0;
};

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
  std::string_view body = Trim(line.substr(indent + 1));
  while (!subsymbol_stack_.empty() && subsymbol_stack_.back() >= indent) {
    subsymbol_stack_.pop_back();
  }
  if (subsymbol_stack_.size() >= static_cast<std::size_t>(kMaxNesting)) {
    Fail({line_no, indent + 1}, "subsymbols nested too deeply");
  }
  if (open_call_->subsymbols.empty()) {
    open_call_->subsymbols.begin = static_cast<std::uint32_t>(trace_.subsymbols.size());
  }
  trace_.subsymbols.push_back(
      SubSymbol{body, line_no, static_cast<int>(subsymbol_stack_.size())});
  ++open_call_->subsymbols.count;
  subsymbol_stack_.push_back(indent);
}

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

// Ops that return their inputs print no types for their outputs
// (`(t74,) = update_aliases((t73,))`): the output has the input's type.
//
// Thunder's fallback gradients (`half_vjp(((x,), {}), t40)`) print none
// either: their outputs are the gradients of the forward inputs listed in
// the first argument, one per tensor input, each with that input's type.
//
// Returns false, changing nothing, if it would read the type of a value for
// which `pending` is true (a chunk read in parallel does not know it yet).
template <typename Pending>
bool InferAliasTypes(Trace* trace, const Statement& s, const Pending& pending) {
  auto any_pending = [&](const std::vector<ValueId>& ids) {
    return std::any_of(ids.begin(), ids.end(), pending);
  };
  const std::string_view symbol = trace->SymbolOf(s);
  if (symbol.size() > 4 && symbol.compare(symbol.size() - 4, 4, "_vjp") == 0 &&
      !s.args.empty()) {
    std::vector<ValueId> inputs;
    FlattenValues(s.args[0], &inputs);
    if (any_pending(inputs)) return false;
    std::erase_if(inputs, [&](ValueId v) { return !IsTensorKind(trace->value(v).type->kind); });
    const std::vector<ValueId> outputs = FlatOutputs(s);
    if (inputs.size() == outputs.size()) {
      for (std::size_t i = 0; i < outputs.size(); ++i) {
        Value& out = trace->value(outputs[i]);
        if (out.type->kind == ValueKind::kUnknown) out.type = trace->value(inputs[i]).type;
      }
    }
    return true;
  }
  const OpInfo* op = FindOp(symbol);
  if (op == nullptr || op->effect != OpEffect::kReturnsInput) return true;
  // Which arguments count depends on which are values (a name a chunk took
  // for a value may turn out to be a constant): a pending one puts it off.
  std::vector<ValueId> args = FlatArgs(s);
  if (any_pending(args)) return false;
  const std::vector<ValueId> outputs = FlatOutputs(s);
  std::vector<ValueId> sources;
  if (op->returned_arg < 0) {
    sources = std::move(args);
  } else if (static_cast<std::size_t>(op->returned_arg) < s.args.size() &&
             s.args[op->returned_arg].kind == Expr::Kind::kValue) {
    sources.push_back(s.args[op->returned_arg].value);
  }
  if (sources.size() != outputs.size()) return true;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    Value& out = trace->value(outputs[i]);
    if (out.type->kind == ValueKind::kUnknown) out.type = trace->value(sources[i]).type;
  }
  return true;
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
  if (!InferAliasTypes(&trace_, call, [this](ValueId id) { return builder_.TypePending(id); })) {
    return false;
  }
  for (ValueId id : FlatOutputs(call)) {
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
    e.SetConstant(text().substr(start, pos_ - start));
    if (e.text == "-" || e.text == "+") FailAt(start, "expected an expression");
  } else if (IsIdentStart(c)) {
    const std::string_view name = DottedName();
    // Dotted names (dtypes.float32) and Python's keyword constants are never
    // trace values: no lookup. A callee (`torch_slice_prim_impl(`) is looked
    // up without the used-after-del check: it is a global function, and a
    // miss there would make the builder enter its deleted names (see
    // TraceBuilder::EnterDeletedNames) on every such call.
    const bool dotted = name.find('.') != std::string_view::npos;
    const bool keyword = name == "None" || name == "True" || name == "False";
    const ValueId id = dotted || keyword ? kNoValue
                       : Peek() == '('   ? builder_.LookupCallee(name)
                                         : builder_.LookupForUse(name, line_->At(start));
    if (id != kNoValue) {
      e.kind = Expr::Kind::kValue;
      e.value = id;
    } else {
      e.SetConstant(name);
    }
  } else {
    FailAt(start, "unexpected character '" + EscapeForMessage(std::string_view(&c, 1)) + "'");
  }
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
    } else if (Peek() == '[') {
      ++pos_;
      Expr sub;
      sub.kind = Expr::Kind::kCall;
      sub.text = "<subscript>";
      sub.at = e.at;
      const std::size_t base = expr_stack_.size();
      expr_stack_.push_back(e);
      while (!Accept(']')) {
        if (AtEnd()) FailAt(pos_, "expected ']', got end of line");
        if (Accept(':') || Accept(',')) continue;
        expr_stack_.push_back(ParseExpression(depth + 1));
      }
      sub.items = TakeItems(base, keyword_stack_.size());
      e = sub;
    } else {
      break;
    }
  }
  return e;
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

  auto keyword = [&](std::string_view kw) {
    return text().compare(0, kw.size(), kw) == 0 &&
           (end_ == kw.size() || IsSpace(text()[kw.size()]) || text()[kw.size()] == '(');
  };

  if (keyword("del")) {
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
    return;
  }

  if (keyword("return")) {
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
    return;
  }

  const std::size_t assign = scan.assign;
  // Right-hand side first: it can only use names defined before this line.
  pos_ = assign == std::string::npos ? 0 : assign + 1;
  SkipSpaces();
  const std::size_t rhs_at = pos_;
  if (pos_ >= end_) FailAt(pos_, "expected an expression after '='");
  Expr rhs = ParseExpression(0);
  if (!AtEnd()) FailAt(pos_, "unexpected text after the expression");

  if (rhs.kind == Expr::Kind::kCall && rhs.text != "<call>" && rhs.text != "<subscript>") {
    const std::string_view callee = rhs.text;
    const std::size_t dot = callee.rfind('.');
    const std::string_view last = dot == std::string::npos ? callee : callee.substr(dot + 1);
    if ((last == "clear_mutable_collection" || last == "clear_collection") &&
        assign == std::string::npos) {
      s.kind = StatementKind::kClear;
      s.call_symbol = builder_.InternCallSymbol(callee, last, last);
      s.legacy_clear = last == "clear_collection";
      if (rhs.items.size() != 1 || rhs.items[0].kind != Expr::Kind::kValue) {
        Fail(rhs.at, std::string(last) + " expects one collection name");
      }
      s.source = rhs.items[0].value;
      builder_.RequireBound(s.source);
        return;
    }
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
    pos_ = 0;
    end_ = assign;
    bool is_sequence = false;
    s.outputs = ParsePatternList(&is_sequence);
    if (s.kind == StatementKind::kAssign && is_sequence) s.kind = StatementKind::kUnpack;
    if (s.kind == StatementKind::kUnpack) {
      trace_.unpacks.push_back(static_cast<std::uint32_t>(trace_.statements.size() - 1));
    }
    end_ = code_end;
  } else {
    s.outputs.kind = Pattern::Kind::kTuple;
    s.outputs.at = start;
  }

  if (scan.comment != std::string_view::npos) ReadTrailingComment(scan.comment);
  if (trace_.statements.back().kind == StatementKind::kCall) {
    open_call_ = &trace_.statements.back();
    open_call_index_ = static_cast<std::uint32_t>(trace_.statements.size() - 1);
  }
}

std::size_t CountNewlines(std::string_view text) {
  std::size_t newlines = 0;
  const char* const end = text.data() + text.size();
  for (const char* p = text.data();
       (p = static_cast<const char*>(std::memchr(p, '\n', end - p))) != nullptr; ++p) {
    ++newlines;
  }
  return newlines;
}

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

// ---------------------------------------------------------------- chunks
//
// A big trace is read on several threads, one chunk of its body each. The
// first reader reads the preamble, the signature and the body up to the
// second chunk; every other chunk starts at a statement line and reads up to
// the next chunk with a chunk builder (TraceBuilder::Chunk), which takes the
// names the chunk uses before binding them for values bound earlier and
// records that assumption. The chunks are then appended in order, each only
// if it ended exactly where the next begins (a statement spanning the
// boundary makes it a continuation line, not a statement) and every
// assumption it made holds; from the first chunk that cannot be appended
// on, the first reader reads the rest itself. So the result, and any error,
// is exactly that of one pass.

// Where the body starts (the first line after `def` that is neither blank
// nor a comment in column 1) and its indentation, and where the `def` line
// starts (`def_begin`, if given); false if the signature is not in the first
// megabyte or the body is not indented.
bool FindBody(std::string_view text, std::size_t* body_begin, int* indent,
              std::size_t* def_begin = nullptr) {
  LineCursor lines(text);
  std::string_view line;
  bool after_def = false;
  while (lines.begin() < (std::size_t{1} << 20) && lines.Next(&line)) {
    if (!after_def) {
      after_def = line.substr(0, 4) == "def ";
      if (after_def && def_begin != nullptr) *def_begin = lines.begin();
      continue;
    }
    const std::string_view t = Trim(line);
    if (t.empty() || (IndentOf(line) == 0 && t[0] == '#')) continue;
    *indent = IndentOf(line);
    *body_begin = lines.begin();
    return *indent > 0;
  }
  return false;
}

// Chunk ranges that begin at `begins` (the first is 0).
std::vector<ChunkRange> RangesFrom(const std::vector<std::size_t>& begins, std::size_t size,
                                   int indent) {
  std::vector<ChunkRange> ranges(begins.size());
  for (std::size_t k = 0; k < begins.size(); ++k) {
    ranges[k].begin = begins[k];
    ranges[k].end = k + 1 < begins.size() ? begins[k + 1] : size;
    ranges[k].body_indent = indent;
  }
  return ranges;
}

// Whether a line of the body that ends the op call before it starts at
// `offset`: a statement or a comment at exactly the body's indentation. (A
// blank line or a deeper comment would still belong to that call.)
bool StartsBodyLine(std::string_view text, std::size_t offset, int indent) {
  if (offset >= text.size() || (offset > 0 && text[offset - 1] != '\n')) return false;
  const std::string_view rest = text.substr(offset, static_cast<std::size_t>(indent) + 1);
  return rest.size() == static_cast<std::size_t>(indent) + 1 && IndentOf(rest) == indent &&
         !IsSpace(rest.back()) && rest.back() != '\n';
}

// The start of the last line that is not empty.
std::size_t LastLineStart(std::string_view text) {
  std::size_t end = text.size();
  while (end > 0 && (text[end - 1] == '\n' || text[end - 1] == '\r')) --end;
  const std::size_t nl = text.rfind('\n', end == 0 ? 0 : end - 1);
  return nl == std::string_view::npos || end == 0 ? 0 : nl + 1;
}

constexpr std::size_t kReturnCostPerByte = 7;

// Where the chunks begin: after the signature, at lines that start a
// statement at the body's indentation, near equal shares of the text. At
// most `want` chunks of at least `min_bytes`; none (one pass) if the
// signature or the body's indentation is not where it is expected.
std::vector<ChunkRange> PlanChunks(std::string_view text, int want, std::size_t min_bytes) {
  std::size_t body_begin = 0;
  int indent = 0;
  if (!FindBody(text, &body_begin, &indent)) return {};
  // The final `return` of a forward trace returns every tensor saved for
  // the backward: a line of megabytes that names hundreds of thousands of
  // values, most bound in earlier chunks. Reading it costs several times
  // what other lines cost per byte, so the last chunk is made shorter by
  // that much. The factor also carries what the last chunk costs the join
  // (every name the line takes from earlier chunks is checked there):
  // measured on the 10^6-statement llama trace, with 5 the last chunk's
  // reader finished ~45 ms after the first one (of ~600 ms), with 10 ~50 ms
  // before it; 7 balances them within the machine's noise (~+-25 ms).
  const std::size_t end = text.size();
  const std::size_t last_line = LastLineStart(text);
  std::size_t return_extra = 0;
  if (StartsBodyLine(text, last_line, indent) && last_line > body_begin &&
      text.compare(last_line + static_cast<std::size_t>(indent), 7, "return ") == 0) {
    return_extra = (end - last_line) * (kReturnCostPerByte - 1);
  }
  const std::size_t body_bytes = end - body_begin;
  const auto chunks =
      static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(std::max(want, 1)),
                                             body_bytes / std::max<std::size_t>(min_bytes, 1)));
  if (chunks < 2) return {};
  std::vector<std::size_t> begins{0};
  const std::size_t share = (body_bytes + return_extra) / static_cast<std::size_t>(chunks);
  for (int k = 1; k < chunks; ++k) {
    std::size_t at = std::min(body_begin + share * static_cast<std::size_t>(k), last_line);
    // The first statement line at or after `at` (within 1 MB).
    const std::size_t limit = std::min(end, at + (std::size_t{1} << 20));
    while (at < limit) {
      if (at > 0 && text[at - 1] != '\n') {
        const auto* nl = static_cast<const char*>(std::memchr(text.data() + at, '\n', limit - at));
        if (nl == nullptr) break;
        at = static_cast<std::size_t>(nl - text.data()) + 1;
        continue;
      }
      const std::size_t ident = at + static_cast<std::size_t>(indent);
      if (ident < text.size() && IsIdentStart(text[ident]) &&
          IndentOf(text.substr(at, static_cast<std::size_t>(indent) + 1)) == indent) {
        if (at > begins.back()) begins.push_back(at);
        break;
      }
      ++at;  // look for the next line start
    }
  }
  if (begins.size() < 2) return {};
  return RangesFrom(begins, end, indent);
}

// Frees `readers` on a detached thread (or here, when no thread can be
// started). They own nothing another thread uses: the source they view is
// shared and reference-counted.
void ReleaseInBackground(std::vector<std::unique_ptr<TextReader>> readers) {
  auto owned = std::make_unique<std::vector<std::unique_ptr<TextReader>>>(std::move(readers));
  try {
    std::thread([held = std::move(owned)]() mutable { held.reset(); }).detach();
  } catch (const std::system_error&) {
    // No thread: the lambda, and the readers with it, were freed here.
  }
}

// Sets *joined to the number of chunks joined before the first reader read
// on alone (1 if none could be).
Trace ReadInChunks(const std::shared_ptr<const SourceFile>& source, std::vector<ChunkRange> ranges,
                   int* joined, bool fusion_subsymbols_only = false) {
  const std::string_view text = source->text();
  const std::size_t n = ranges.size();
  TextReader first(source);
  first.KeepFusionSubSymbolsOnly(fusion_subsymbols_only);
  std::vector<std::unique_ptr<TextReader>> chunks(n);
  std::vector<char> ok(n, 0);
  std::latch counted(static_cast<std::ptrdiff_t>(n));
  // Each thread counts its chunk's lines; once all have, each knows its
  // first line's number.
  auto count = [&](std::size_t k) {
    ranges[k].newlines =
        CountNewlines(text.substr(ranges[k].begin, ranges[k].end - ranges[k].begin));
    counted.arrive_and_wait();
    for (std::size_t j = 0; j < k; ++j)
      ranges[k].lines_before += static_cast<int>(ranges[j].newlines);
  };
  // The imports first: the chunks need them (for op symbols). They come
  // before the `def` line; the signature after it, which can be long (one
  // parameter per weight), is read by this thread while the chunks are.
  std::size_t body_begin = 0;
  std::size_t def_begin = 0;
  int indent = 0;
  if (FindBody(text, &body_begin, &indent, &def_begin) && body_begin <= ranges[1].begin) {
    first.StopAt(def_begin);
    first.ReadLines();
  }
  const std::vector<std::string> imports = first.imports();
  {
    std::vector<std::jthread> threads;
    std::size_t started = 1;
    try {
      threads.reserve(n - 1);
      for (std::size_t k = 1; k < n; ++k, ++started) {
        threads.emplace_back([&, k] {
          count(k);
          if (!StartsBodyLine(text, ranges[k].begin, ranges[k].body_indent)) return;
          try {
            chunks[k] = std::make_unique<TextReader>(source, ranges[k]);
            TextReader& reader = *chunks[k];
            reader.KeepFusionSubSymbolsOnly(fusion_subsymbols_only);
            reader.SetImports(imports);
            reader.Reserve(ranges[k].newlines);
            reader.ReadLines();
            if (k + 1 == n) {
              reader.CheckEnd();
            } else if (reader.stopped_at() == ranges[k].end &&
                       StartsBodyLine(text, ranges[k].end, ranges[k].body_indent)) {
              reader.FinishCall();  // as the next chunk's first line would
            } else {
              return;  // a statement ran past the next chunk's start, or it starts no statement
            }
            ok[k] = 1;
          } catch (...) {
            // Read again in one pass, which gives the error (if it is one).
          }
        });
      }
    } catch (const std::system_error&) {
      // No more threads: the chunks not started are read in one pass.
      counted.count_down(static_cast<std::ptrdiff_t>(n - started));
    }
    count(0);
    std::size_t total = 0;
    for (const ChunkRange& r : ranges) total += r.newlines;
    // Every chunk's values and subsymbols are copied into this reader's trace;
    // the names of every chunk but the last into its name table.
    first.Reserve(total, total - ranges[n - 1].newlines);
    first.StopAt(ranges[1].begin);
    first.ReadLines();  // an error here is the error of one pass
  }                     // joins the threads

  // Append the chunks in order while each one fits.
  const TextReader* last = &first;
  bool appended_all = first.stopped_at() == ranges[1].begin && first.in_body() &&
                      first.body_indent() == ranges[1].body_indent && !first.returned() &&
                      StartsBodyLine(text, ranges[1].begin, ranges[1].body_indent);
  if (appended_all) first.FinishCall();  // as the second chunk's first line would
  for (std::size_t k = 1; k < n && appended_all; ++k) {
    appended_all = ok[k] && last->stopped_at() == ranges[k].begin && !last->returned() &&
                   first.Append(std::move(*chunks[k]), k + 1 < n);
    if (appended_all) {
      last = chunks[k].get();
      ++*joined;
    }
  }
  if (appended_all) {
    // The joined chunks' readers hold only what was moved out of them (and
    // their name tables): ~20 ms to free at 10^6 statements, done on a
    // thread of its own rather than before the trace can be analysed.
    ReleaseInBackground(std::move(chunks));
    return first.TakeTrace();
  }
  // The rest, from the first chunk not joined, in one pass.
  if (last != &first) first.ResumeAfter(*last);
  first.StopAt(std::string_view::npos);
  first.ReadLines();
  return first.Finish();
}

}  // namespace

ParsedTrace ReadTraceText(std::shared_ptr<const SourceFile> source,
                          const TextReadOptions& options) {
  ParsedTrace parsed;
  int threads = options.threads;
  std::size_t min_chunk_bytes = options.min_chunk_bytes;
  if (threads <= 0) {
    // Knobs for tests and tuning: PEAKMEM_READ_THREADS=4
    // PEAKMEM_READ_MIN_CHUNK_BYTES=1 splits even a tiny trace in four.
    threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    if (const char* env = std::getenv("PEAKMEM_READ_THREADS")) threads = std::atoi(env);
    if (const char* env = std::getenv("PEAKMEM_READ_MIN_CHUNK_BYTES")) {
      min_chunk_bytes = static_cast<std::size_t>(std::strtoull(env, nullptr, 10));
    }
  }
  std::vector<ChunkRange> ranges;
  if (threads > 1) ranges = PlanChunks(source->text(), threads, min_chunk_bytes);
  if (ranges.size() > 1) {
    parsed.trace = ReadInChunks(source, std::move(ranges), &parsed.chunks_joined,
                                options.fusion_subsymbols_only);
  } else {
    TextReader reader(source);
    reader.KeepFusionSubSymbolsOnly(options.fusion_subsymbols_only);
    parsed.trace = reader.Read();
  }
  parsed.source = std::move(source);
  return parsed;
}
ParsedTrace ReadTraceText(std::string name, std::string text) {
  return ReadTraceText(std::make_shared<const SourceFile>(std::move(name), std::move(text)));
}

ParsedTrace ReadTraceText(std::shared_ptr<const SourceFile> source) {
  return ReadTraceText(std::move(source), TextReadOptions{});
}

ParsedTrace ReadTraceTextInChunks(std::shared_ptr<const SourceFile> source,
                                  const std::vector<std::size_t>& begins,
                                  const TextReadOptions& options) {
  ParsedTrace parsed;
  std::size_t body_begin = 0;
  int indent = 0;
  std::vector<std::size_t> all{0};
  for (std::size_t b : begins) {
    if (b > all.back() && b < source->text().size()) all.push_back(b);
  }
  if (all.size() > 1 && FindBody(source->text(), &body_begin, &indent)) {
    parsed.trace = ReadInChunks(source, RangesFrom(all, source->text().size(), indent),
                                &parsed.chunks_joined, options.fusion_subsymbols_only);
  } else {
    TextReader reader(source);
    reader.KeepFusionSubSymbolsOnly(options.fusion_subsymbols_only);
    parsed.trace = reader.Read();
  }
  parsed.source = std::move(source);
  return parsed;
}

std::shared_ptr<const SourceFile> LoadSourceFile(const std::string& path) {
  return SourceFile::Map(path);
}

}  // namespace peakmem
