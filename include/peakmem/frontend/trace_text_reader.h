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
//
// A big trace (at least two chunks of TextReadOptions::min_chunk_bytes) is
// read on several threads, one chunk of its body each, and the chunks are
// joined; the result, and any error, is exactly that of one pass (see
// src/frontend/text_chunks.cc for how that is guaranteed).
//
// The reader lives in src/frontend/: text_lines.h (physical and logical
// lines, the line scan), text_reader.{h,cc} (statements and comments),
// text_expressions.cc (Python expressions and assignment targets),
// text_chunks.{h,cc} (the parallel chunked read and join), and this file's
// functions in trace_text_reader.cc. Output types that the text leaves out
// are inferred by the shared pass in type_inference.h.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "peakmem/frontend/read_options.h"
#include "peakmem/ir/parsed_trace.h"
#include "peakmem/ir/source.h"

namespace peakmem {

ParsedTrace ReadTraceText(std::string name, std::string text);
ParsedTrace ReadTraceText(std::shared_ptr<const SourceFile> source);
ParsedTrace ReadTraceText(std::shared_ptr<const SourceFile> source, const TextReadOptions& options);
// For tests: reads with chunks beginning at the given byte offsets (any
// offsets: where one is not the start of a statement line the chunks are not
// joined there, and the result is still exactly that of one pass). Of
// `options`, only fusion_subsymbols_only applies.
ParsedTrace ReadTraceTextInChunks(std::shared_ptr<const SourceFile> source,
                                  const std::vector<std::size_t>& begins,
                                  const TextReadOptions& options = {});

// Reads a file into a SourceFile; throws TraceError (line 0) if unreadable.
std::shared_ptr<const SourceFile> LoadSourceFile(const std::string& path);

}  // namespace peakmem
