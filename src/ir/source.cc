#include "peakmem/ir/source.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <cstring>

namespace peakmem {
namespace {

// Non-printable bytes in the echoed line would garble a terminal; show them
// as '?' so the caret still lines up byte for byte.
std::string Printable(std::string_view line) {
  std::string out(line);
  for (char& c : out) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 && c != '\t') c = '?';
    if (u >= 0x80) c = '?';
  }
  constexpr std::size_t kMaxEcho = 200;
  if (out.size() > kMaxEcho) out = out.substr(0, kMaxEcho) + "...";
  return out;
}

std::string Render(const std::string& file, SourceLocation loc, const std::string& message,
                   const std::string& line_text) {
  std::string out = file + ":" + std::to_string(loc.line) + ":" + std::to_string(loc.column) +
                    ": " + message;
  if (loc.line > 0) {
    const std::string shown = Printable(line_text);
    out += "\n" + shown + "\n";
    // The caret sits under the column; tabs are kept so that it aligns.
    // A column past the echoed (shortened) line gets its caret at the echo's end.
    const std::size_t col = std::min<std::size_t>(std::max(1, loc.column), shown.size() + 1);
    std::string pad;
    for (std::size_t i = 0; i + 1 < col && i < shown.size(); ++i) {
      pad += shown[i] == '\t' ? '\t' : ' ';
    }
    if (col - 1 > shown.size()) pad.append(col - 1 - shown.size(), ' ');
    out += pad + "^";
  }
  return out;
}

}  // namespace

SourceFile::SourceFile(std::string name, std::string text)
    : name_(std::move(name)), owned_(std::move(text)) {
  owned_.reserve(owned_.size() + kReadablePadding);  // see kReadablePadding
  text_ = owned_;
}

SourceFile::SourceFile(std::string name, const char* mapped, std::size_t size,
                       std::size_t mapping_size)
    : name_(std::move(name)),
      mapping_(const_cast<char*>(mapped)),
      mapping_size_(mapping_size),
      text_(mapped, size) {}

SourceFile::~SourceFile() {
  if (mapping_ != nullptr) munmap(mapping_, mapping_size_);
}

std::shared_ptr<const SourceFile> SourceFile::Map(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw TraceError(path, {0, 0}, "cannot open file", "");
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    // Not a regular file (a pipe, a directory): read it the plain way.
    std::ifstream in(path, std::ios::binary);
    if (!in) throw TraceError(path, {0, 0}, "cannot open file", "");
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) throw TraceError(path, {0, 0}, "cannot read file", "");
    return std::make_shared<const SourceFile>(path, std::move(text).str());
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size == 0) {
    close(fd);
    return std::make_shared<const SourceFile>(path, std::string());
  }
  // The file is mapped over a zeroed anonymous region kReadablePadding bytes
  // longer, so the bytes after the text can be read even when the file ends
  // exactly at a page boundary (past the file's last page, a plain file
  // mapping would fault). The pages are mapped as they are first read (16
  // at a time): a big trace is read in chunks, so each reading thread maps
  // its own (MAP_POPULATE mapped all 257 MB of a 10^6-statement trace on
  // one thread, ~25 ms before any reading could start).
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t total = (size + kReadablePadding + page - 1) / page * page;
  void* region = mmap(nullptr, total, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED) {
    close(fd);
    throw TraceError(path, {0, 0}, "cannot read file", "");
  }
  void* mapped = mmap(region, size, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
  close(fd);
  if (mapped == MAP_FAILED) {
    munmap(region, total);
    throw TraceError(path, {0, 0}, "cannot read file", "");
  }
  madvise(mapped, size, MADV_SEQUENTIAL);
  return std::shared_ptr<const SourceFile>(
      new SourceFile(path, static_cast<const char*>(mapped), size, total));
}

void SourceFile::IndexLines() const {
  line_starts_.push_back(0);
  const char* const begin = text_.data();
  const char* const end = begin + text_.size();
  for (const char* p = begin; p < end;) {
    const auto* nl = static_cast<const char*>(std::memchr(p, '\n', end - p));
    if (nl == nullptr || nl + 1 >= end) break;
    line_starts_.push_back(static_cast<std::size_t>(nl + 1 - begin));
    p = nl + 1;
  }
}

std::string_view SourceFile::LineAt(std::size_t offset) const {
  if (offset > text_.size()) return {};
  std::size_t end = text_.find('\n', offset);
  if (end == std::string_view::npos) end = text_.size();
  if (end > offset && text_[end - 1] == '\r') --end;
  return text_.substr(offset, end - offset);
}

std::string_view SourceFile::Line(int line) const {
  if (line < 1 || line > line_count()) return {};
  const std::size_t begin = line_starts_[line - 1];
  // The line ends where the next one starts (minus its '\n'); the last
  // line ends at the first '\n' or the end of the text.
  std::size_t end = line < line_count() ? line_starts_[line] - 1 : text_.find('\n', begin);
  if (end == std::string::npos) end = text_.size();
  if (end > begin && text_[end - 1] == '\r') --end;
  return text_.substr(begin, end - begin);
}

std::string EscapeForMessage(std::string_view text) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

SourceLocation SourceFile::LocationOf(std::size_t offset) const {
  EnsureIndex();
  offset = std::min(offset, text_.size());
  const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
  const auto line = static_cast<int>(it - line_starts_.begin());  // >= 1: line_starts_[0] == 0
  return {line, static_cast<int>(offset - line_starts_[line - 1]) + 1};
}

TraceError::TraceError(std::string file, SourceLocation location, std::string message,
                       std::string line_text)
    : std::runtime_error(Render(file, location, message, line_text)),
      file_(std::move(file)),
      location_(location),
      message_(std::move(message)),
      line_text_(std::move(line_text)) {}

void ThrowAt(const SourceFile& source, SourceLocation location, const std::string& message) {
  throw TraceError(source.name(), location, message, std::string(source.Line(location.line)));
}

}  // namespace peakmem
