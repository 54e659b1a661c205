// Writer for peakmem's JSON trace form (docs/trace-json.md): the inverse of
// trace_json_reader.h. The Python package's `to_json_export` writes a live
// TraceCtx, read by the live reader, with it.
#pragma once

#include <string>

#include "peakmem/ir/trace.h"

namespace peakmem {

// `trace` in the JSON form, one statement per line, spaced and escaped as
// Python's json.dumps writes it (", " and ": " separators, non-ASCII as
// \uXXXX). Reading the result back gives the same trace, except for what the
// form does not carry: source locations, decorators, and the names of a
// nested call's keyword arguments (their values are kept, in order).
// A value's "type" is its type's printed form, omitted where it has none.
std::string TraceToJson(const Trace& trace);

}  // namespace peakmem
