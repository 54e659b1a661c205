// The reader of a printed Thunder trace's text, one pass over a range of
// its lines (the whole text, or one chunk of its body read in parallel: see
// text_chunks.h). Internal to src/frontend/; its members are defined in
// text_reader.cc (lines and statements) and text_expressions.cc (Python
// expressions and assignment targets). The token helpers are inline here:
// they run for every byte of a statement.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "peakmem/ir/source.h"
#include "peakmem/ir/string_hash.h"
#include "peakmem/ir/trace.h"
#include "peakmem/ir/trace_builder.h"
#include "text_lines.h"

namespace peakmem::text {

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

  // A reader of fusion regions' subsymbol lines only (ReadSubSymbolCall)
  // into `into`, another reader's trace (the JSON reader's): it binds no
  // names and reads no statements.
  TextReader(std::shared_ptr<const SourceFile> source, Trace* into)
      : source_(source), builder_(std::move(source)), trace_(*into), lines_(std::string_view()) {}

  // The whole text in one pass.
  Trace Read();
  // Parses trace's subsymbols[index], a line of a fusion region starting at
  // `at`, with this reader's expression parser, and appends it to
  // Trace::subsymbol_calls when it is a call with one output (see
  // SubSymbolCall); other lines, and lines that do not parse, stay text
  // only. Calls must come in the order of their lines.
  void ReadSubSymbolCall(std::uint32_t index, SourceLocation at);
  // See TextReadOptions::fusion_subsymbols_only.
  void KeepFusionSubSymbolsOnly(bool only) { fusion_subsymbols_only_ = only; }
  // See TextReadOptions::rank.
  void SetRank(int rank) { builder_.SetRank(rank); }
  void SetDTensorLayout(std::string layout) { builder_.SetDTensorLayout(std::move(layout)); }

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

  // ---- lines (text_reader.cc)
  void ReadPreambleLine(int line_no, std::string_view line);
  void ReadSignature(int line_no, std::string_view line);
  void ReadBodyComment(int line_no, int indent, std::string_view line);
  void ReadSubSymbol(int line_no, int indent, std::string_view line);
  int GatherLogicalLine(int first_line, std::string_view first);
  // ---- statements (text_reader.cc): ReadStatement reads current_ into a
  // new Statement `s` starting at `start`; the others read its parts.
  void ReadStatement();
  void ReadDel(Statement& s, SourceLocation start);
  void ReadReturn(Statement& s);
  void ReadCall(Statement& s, const Expr& rhs);
  // Reads `clear_mutable_collection(x)` / `clear_collection(x)` when `rhs`
  // is one; false when it is another call.
  bool ReadClear(Statement& s, const Expr& rhs, std::size_t assign);
  void ReadTargets(Statement& s, std::size_t assign, std::size_t code_end);

 public:
  // Ends the op call whose subsymbols were being read.
  void FinishCall();

 private:
  // The output types FinishCall infers for an op call; false, changing
  // nothing, when they depend on types a chunk does not know yet. A call
  // whose outputs all have types (nearly every one: the type comment on its
  // line) has nothing to infer, and is not looked up.
  bool InferOutputTypes(Statement& s);

  // ---- tokens within the current logical line
  // Whether the statement starts with keyword `kw` (then a space, '(' or
  // its end).
  bool StartsWithKeyword(std::string_view kw) {
    return text().compare(0, kw.size(), kw) == 0 &&
           (end_ == kw.size() || IsSpace(text()[kw.size()]) || text()[kw.size()] == '(');
  }
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
  // A name or a dotted name (`dtypes.float32`); *dotted says which.
  std::string_view DottedName(bool* dotted) {
    SkipSpaces();
    const std::size_t start = pos_;
    *dotted = false;
    if (Identifier().empty()) return {};
    while (pos_ + 1 < end_ && text()[pos_] == '.' && IsIdentStart(text()[pos_ + 1])) {
      ++pos_;
      Identifier();
      *dotted = true;
    }
    return text().substr(start, pos_ - start);
  }
  std::string_view text() const { return line_->text; }

  // ---- expressions and targets (text_expressions.cc)
  Expr ParseExpression(int depth);
  Expr ParsePrimary(int depth);
  // A primary's first part (a literal, a name or a bracketed sequence),
  // then its calls and subscripts.
  Expr ParseAtom(int depth);
  void ParseNumber(Expr* e, std::size_t start, char c);
  void ParseName(Expr* e, std::size_t start);
  Expr ParseSubscript(Expr e, int depth);
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
  // What becomes of the open call's subsymbol lines, decided at its first:
  // a fusion region's are kept and parsed (ReadSubSymbolCall); with
  // fusion_subsymbols_only, those of a call whose outputs all have types
  // are dropped as they are read (no model reads them, nor type inference);
  // others are kept.
  enum class SubSymbolLines : std::uint8_t { kUndecided, kKept, kParsed, kDropped };
  SubSymbolLines open_call_lines_ = SubSymbolLines::kUndecided;
  SubSymbolLines LinesKeptFor(const Statement& call);
  // False while a subsymbol line is parsed: its names are the region's and
  // stay text (ParseName).
  bool resolve_names_ = true;
  LogicalLine subsymbol_line_;  // the subsymbol line being parsed

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
  std::vector<ValueId> call_outputs_;   // InferOutputTypes' call's outputs (reused)
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

}  // namespace peakmem::text
