// Reader for the printed text of a Thunder execution trace.
//
// Accepts every form Thunder prints (old and new): an optional
// `# Constructed by ...` line, imports, decorators, `def name(params):`
// (or a trace that starts at `def`), argument type comments
// `# a: "cuda:0 f32[4]"`, `# _ (unused)`, unpacks `C0, C1, = x` including the
// backslash-continued form, per-element type comments after unpacks,
// `# C1 (empty sequence)`, type comments on op lines, subsymbol comment lines
// at any deeper indentation, header and source-location comments, `del`,
// `clear_mutable_collection(x)` / `clear_collection(x)`, and `return`.
//
// An op output without a type comment takes its type from the subsymbol line
// that defines it; if none does, its kind stays kUnknown and a model that
// needs its size reports an error at the output.
//
// Malformed input throws TraceError (file:line:col, line, caret).
#pragma once

#include <memory>
#include <string>

#include "peakmem/source.h"
#include "peakmem/trace.h"

namespace peakmem {

// The trace plus the source it was read from (kept for error messages that
// later stages raise about it).
struct ParsedTrace {
  std::shared_ptr<const SourceFile> source;
  Trace trace;
  // Whether `source` is the printed trace itself (its lines are the
  // statements) or another form (JSON), whose statements reports re-print.
  bool source_is_printed_trace = true;
};

ParsedTrace ReadTraceText(std::string name, std::string text);
ParsedTrace ReadTraceText(std::shared_ptr<const SourceFile> source);

// Reads a file into a SourceFile; throws TraceError (line 0) if unreadable.
std::shared_ptr<const SourceFile> LoadSourceFile(const std::string& path);

}  // namespace peakmem
