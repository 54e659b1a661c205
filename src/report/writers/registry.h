// The writers the registry (src/report/writer.cc) lists, one per file in
// this folder, and what several of them share. Internal to the library.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "peakmem/report/human_bytes.h"
#include "peakmem/report/writer.h"

namespace peakmem::writers {

const ReportWriter& TextWriter();
const ReportWriter& JsonWriter();
const ReportWriter& AnnotatedWriter();
const ReportWriter& ChromeTraceWriter();
const ReportWriter& SnapshotWriter();
const ReportWriter& HtmlWriter();

// Writers build their output in a buffer handed to the sink whenever it
// passes this size.
inline constexpr std::size_t kFlushBytes = std::size_t{1} << 20;

inline void AppendInt(std::int64_t value, std::string* out) {
  char digits[24];
  const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, value);
  (void)ec;
  out->append(digits, end);
}

// Appends `text` as a JSON string (valid JSON for any bytes: invalid UTF-8
// becomes U+FFFD).
void AppendJsonString(std::string_view text, std::string* out);

// Hands `out` to `sink` and empties it once it holds kFlushBytes or more.
inline void FlushIfFull(std::string* out, const ReportSink& sink) {
  if (out->size() >= kFlushBytes) {
    sink(*out);
    out->clear();
  }
}

}  // namespace peakmem::writers
