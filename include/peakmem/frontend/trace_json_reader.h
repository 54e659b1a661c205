// Reader for peakmem's JSON trace form (docs/trace-json.md).
//
// The JSON form is what the Python adapter exports from a live Thunder
// TraceCtx: it carries every output's type (including multi-output ops and
// fusions that the printed text leaves untyped) and each collection's
// container kind (list/tuple/dict/set), which the printed text never says.
// An output whose type is omitted gets one from the shared inference pass
// (type_inference.h), as in the printed text.
// Parsed with simdjson's On-Demand API, which also gives the byte position
// of every value, so errors point at the offending JSON token.
#pragma once

#include <memory>
#include <string_view>

#include "peakmem/ir/parsed_trace.h"
#include "peakmem/ir/source.h"

namespace peakmem {

// True when the text looks like JSON (its first non-blank character is '{').
bool LooksLikeJson(std::string_view text);

// `rank`: the rank DTensor types are read for (ir/dtensor_layout.h);
// `dtensor_layout`: the layout of DTensor types that print none
// (TextReadOptions::dtensor_layout).
ParsedTrace ReadTraceJson(std::shared_ptr<const SourceFile> source, int rank = 0,
                          std::string_view dtensor_layout = {});

}  // namespace peakmem
