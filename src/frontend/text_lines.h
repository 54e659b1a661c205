// The text reader's lines: character classes, physical lines in order
// (LineCursor), statements spanning several lines (LogicalLine) and the scan
// of a line for brackets, strings, its comment and its assignment
// (ScanLine). Internal to src/frontend/; everything here is inline because
// the reader calls it for every byte or line of traces of hundreds of
// megabytes.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "peakmem/ir/source.h"

namespace peakmem::text {

inline constexpr int kMaxNesting = 200;  // brackets or patterns; deeper input is rejected

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
inline constexpr std::array<std::uint8_t, 256> kCharClasses = MakeCharClasses();
inline bool Is(char c, CharClass cls) { return kCharClasses[static_cast<unsigned char>(c)] & cls; }

inline bool IsIdentStart(char c) { return Is(c, kIdentStart); }
inline bool IsIdentChar(char c) { return Is(c, kIdentChar); }
inline bool IsSpace(char c) { return Is(c, kSpace); }

inline int IndentOf(std::string_view line) {
  int n = 0;
  while (n < static_cast<int>(line.size()) && (line[n] == ' ' || line[n] == '\t')) ++n;
  return n;
}

inline std::string_view Trim(std::string_view s) {
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

inline LineScan ScanLine(std::string_view s) {
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

// The line breaks in `text`.
inline std::size_t CountNewlines(std::string_view text) {
  std::size_t newlines = 0;
  const char* const end = text.data() + text.size();
  for (const char* p = text.data();
       (p = static_cast<const char*>(std::memchr(p, '\n', end - p))) != nullptr; ++p) {
    ++newlines;
  }
  return newlines;
}

}  // namespace peakmem::text
