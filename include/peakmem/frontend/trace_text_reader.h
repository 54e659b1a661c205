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
// trace_text_reader.cc, "chunks", for how that is guaranteed).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "peakmem/ir/source.h"
#include "peakmem/ir/trace.h"

namespace peakmem {

// The trace plus the source it was read from (kept for error messages that
// later stages raise about it).
struct ParsedTrace {
  std::shared_ptr<const SourceFile> source;
  Trace trace;
  // Whether `source` is the printed trace itself (its lines are the
  // statements) or another form (JSON), whose statements reports re-print.
  bool source_is_printed_trace = true;
  // How many chunks of the text were read on parallel threads and joined
  // (1: read in one pass; see TextReadOptions).
  int chunks_joined = 1;
};

// How the text reader may use threads. A big trace's body is read in
// chunks, one per thread, which are then joined; the result (and any error)
// is exactly that of reading it in one pass (see trace_text_reader.cc).
struct TextReadOptions {
  // Chunks read at once: 0 for one per hardware thread, 1 for one pass.
  // With 0, the environment variables PEAKMEM_READ_THREADS and
  // PEAKMEM_READ_MIN_CHUNK_BYTES, when set, replace both settings (the test
  // suite runs again with every trace split in chunks).
  int threads = 0;
  // No chunk is smaller than this (a small trace is read in one pass).
  std::size_t min_chunk_bytes = std::size_t{8} << 20;
  // Keep the subsymbol lines of fusion regions only (UsesSubSymbols in
  // fusion.h: the only ones a model reads), dropping each op's once its
  // output types are inferred from them. The CLI sets it: a 10^6-statement
  // trace of torch ops has ~1.27 M subsymbol lines (~30 MB, and copied once
  // more when chunks are joined) that no report uses.
  bool fusion_subsymbols_only = false;
};

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
