// Source text and locations for error messages.
//
// Every error peakmem reports about its input names a place in that input:
// `file:line:col: message`, then the offending line and a caret under the
// column (ninja's habit). SourceFile keeps the whole text and an index of line
// starts so that a location can be turned back into its line cheaply.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace peakmem {

// A 1-based line and column inside a named input. Column counts bytes.
struct SourceLocation {
  int line = 0;
  int column = 0;
};

class SourceFile {
 public:
  SourceFile(std::string name, std::string text);
  // Maps the file read-only (it is never written) instead of copying it: a
  // 10^6-statement trace is 250 MB. Throws TraceError (line 0) if it cannot.
  static std::shared_ptr<const SourceFile> Map(const std::string& path);
  ~SourceFile();
  SourceFile(const SourceFile&) = delete;
  SourceFile& operator=(const SourceFile&) = delete;

  const std::string& name() const { return name_; }
  std::string_view text() const { return text_; }
  // At least this many bytes after the end of text() can be read (their
  // values are unspecified): what parsers that read in wide blocks need
  // (simdjson asks for 64), so they can parse the text where it lies
  // instead of copying it into a padded buffer.
  static constexpr std::size_t kReadablePadding = 64;
  // The line index is built on first use (errors, Line, LocationOf): a
  // successful read walks the text line by line and needs none.
  int line_count() const {
    EnsureIndex();
    return static_cast<int>(line_starts_.size());
  }
  // The text of a 1-based line, without its line break.
  std::string_view Line(int line) const;
  // The line and column of a byte offset into text().
  SourceLocation LocationOf(std::size_t offset) const;
  // The line that starts at byte `offset` (without its line break).
  std::string_view LineAt(std::size_t offset) const;

 private:
  SourceFile(std::string name, const char* mapped, std::size_t size, std::size_t mapping_size);
  void EnsureIndex() const { std::call_once(indexed_, [this] { IndexLines(); }); }
  void IndexLines() const;

  std::string name_;
  std::string owned_;        // the text, when given as a string
  void* mapping_ = nullptr;  // the mapped file, when mapped
  std::size_t mapping_size_ = 0;
  std::string_view text_;    // owned_ or the mapping
  mutable std::once_flag indexed_;
  mutable std::vector<std::size_t> line_starts_;
};

// An error in the input: a location, a message, and the offending line.
// what() is the full three-line rendering:
//   file:line:col: message
//   <the line>
//   <spaces>^
class TraceError : public std::runtime_error {
 public:
  TraceError(std::string file, SourceLocation location, std::string message,
             std::string line_text);

  const std::string& file() const { return file_; }
  SourceLocation location() const { return location_; }
  const std::string& message() const { return message_; }
  const std::string& line_text() const { return line_text_; }

 private:
  std::string file_;
  SourceLocation location_;
  std::string message_;
  std::string line_text_;
};

// `text` with every byte that is not printable ASCII written as \xHH, for
// quoting input in messages (a NUL or an escape byte must not reach them raw).
std::string EscapeForMessage(std::string_view text);

// Builds a TraceError pointing at `location` in `source`.
[[noreturn]] void ThrowAt(const SourceFile& source, SourceLocation location,
                          const std::string& message);

}  // namespace peakmem
