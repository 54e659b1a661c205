// A trace as a front end hands it to the models: the trace IR plus the
// source it was read from. Every front end (printed text, JSON export, live
// TraceCtx) produces one.
#pragma once

#include <memory>

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
  // The rank it was read for (DTensor types' shards) and the world size the
  // reader was told (0: none); see semantics/distribution.h.
  int rank = 0;
  int world_size = 0;
};

}  // namespace peakmem
