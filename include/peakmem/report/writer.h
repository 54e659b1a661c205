// Report writers: every output format of a Report, in one registry that the
// CLI (`peakmem analyze --format NAME`) and the Python extension share.
//
// A writer turns a finished Report into bytes, handed to a ReportSink piece
// by piece (about a megabyte at a time), so a 10^6-step report is never held
// whole. Adding a format is one file in src/report/writers/ defining a
// ReportWriter, plus one line in the registry's list (src/report/writer.cc).
//
//   text          summary, breakdown and per-step table (the default)
//   json          the report as one JSON object
//   annotated     the trace's statements, each with the live bytes after it
//   chrome-trace  Chrome trace-event JSON (Perfetto, chrome://tracing)
//   snapshot      the pickle torch.cuda.memory._dump_snapshot() writes
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "peakmem/report/attribution.h"
#include "peakmem/report/report.h"

namespace peakmem {

struct WriterOptions {
  // Default 2: JSON writers indent nested values by this many spaces
  // (-1: everything on one line).
  int indent = 2;
  // Default none: the text and json writers add what is alive at this
  // moment, by category and by op (attribution.h); the run must keep the
  // allocation event log (ReportOptionsFor does).
  std::optional<AttributionMoment> at;
  // The text writer's layout (report.h).
  TextOptions text;
};

class ReportWriter {
 public:
  virtual ~ReportWriter() = default;
  // The name `--format` takes ("text", "snapshot", ...).
  virtual std::string_view name() const = 0;
  // One line for help texts.
  virtual std::string_view description() const = 0;
  // Whether Write reads Report::alloc_log (the run must set
  // ReportOptions::alloc_log; Write throws std::invalid_argument without it).
  virtual bool needs_alloc_log() const { return false; }
  // Whether Write reads Report::alloc_log when there (it shows more with it):
  // a run for this writer should keep it.
  virtual bool uses_alloc_log() const { return needs_alloc_log(); }
  // How many of the storages alive at the peak the output shows (0: all):
  // a run for this writer need not list more (ReportOptions::live_at_peak_limit).
  virtual std::size_t live_at_peak_shown() const { return 0; }
  // Renders `report` to `sink`. Binary formats (snapshot) hand bytes, not text.
  virtual void Write(const Report& report, const WriterOptions& options,
                     const ReportSink& sink) const = 0;
};

// Every registered writer, in a fixed order ("text" first).
const std::vector<const ReportWriter*>& AllWriters();
// The writer named `name`, or nullptr.
const ReportWriter* FindWriter(std::string_view name);
// The registered names in AllWriters' order.
std::vector<std::string> WriterNames();
// `base` with what a run must record for `writer` writing with `writing`:
// alloc_log (and the returned tensors) turned on when the writer uses it or
// an attribution is asked for, live_at_peak_limit lowered to what it shows.
ReportOptions ReportOptionsFor(const ReportWriter& writer, ReportOptions base = {},
                               const WriterOptions& writing = {});
// The writer's output as one string (tests, Python; big reports should be
// streamed through Write instead).
std::string WriteToString(const ReportWriter& writer, const Report& report,
                          const WriterOptions& options = {});
// The log a writer that needs one reads: report.alloc_log, or
// std::invalid_argument naming the writer and the model that ran.
const AllocLog& RequireAllocLog(const Report& report, std::string_view writer);

}  // namespace peakmem
