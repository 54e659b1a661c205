// The text reader's parallel read: a big trace's body in chunks, one per
// thread, then joined. Internal to src/frontend/.
//
// A big trace is read on several threads, one chunk of its body each. The
// first reader reads the preamble, the signature and the body up to the
// second chunk; every other chunk starts at a statement line and reads up to
// the next chunk with a chunk builder (TraceBuilder::Chunk), which takes the
// names the chunk uses before binding them for values bound earlier and
// records that assumption. The chunks are then appended in order, each only
// if it ended exactly where the next begins (a statement spanning the
// boundary makes it a continuation line, not a statement) and every
// assumption it made holds; from the first chunk that cannot be appended
// on, the first reader reads the rest itself. So the result, and any error,
// is exactly that of one pass.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

#include "peakmem/ir/source.h"
#include "peakmem/ir/trace.h"
#include "text_reader.h"

namespace peakmem::text {

// Where the body starts (the first line after `def` that is neither blank
// nor a comment in column 1) and its indentation, and where the `def` line
// starts (`def_begin`, if given); false if the signature is not in the first
// megabyte or the body is not indented.
bool FindBody(std::string_view text, std::size_t* body_begin, int* indent,
              std::size_t* def_begin = nullptr);

// Chunk ranges that begin at `begins` (the first is 0).
std::vector<ChunkRange> RangesFrom(const std::vector<std::size_t>& begins, std::size_t size,
                                   int indent);

// Where the chunks begin: after the signature, at lines that start a
// statement at the body's indentation, near equal shares of the text. At
// most `want` chunks of at least `min_bytes`; none (one pass) if the
// signature or the body's indentation is not where it is expected.
std::vector<ChunkRange> PlanChunks(std::string_view text, int want, std::size_t min_bytes);

// Reads the trace in the chunks `ranges` (at least two) and joins them; the
// result, and any error, is exactly that of one pass. Sets *joined to the
// number of chunks joined before the first reader read on alone (1 if none
// could be).
Trace ReadInChunks(const std::shared_ptr<const SourceFile>& source, std::vector<ChunkRange> ranges,
                   int* joined, bool fusion_subsymbols_only = false);

}  // namespace peakmem::text
