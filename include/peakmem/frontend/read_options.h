// How front ends may read: the options a caller passes through the front-end
// registry (frontend.h) to whichever reader takes the input.
#pragma once

#include <cstddef>
#include <string>

namespace peakmem {

// How the text reader may use threads. A big trace's body is read in
// chunks, one per thread, which are then joined; the result (and any error)
// is exactly that of reading it in one pass (see text_chunks.cc).
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
  // The rank DTensor types are read for (ir/dtensor_layout.h), and the
  // world size the user gives (0: as the trace says; semantics/distribution.h).
  int rank = 0;
  int world_size = 0;
  // The mesh and placements of DTensor types that print none (older
  // printers: `DTensor cuda:0 f32[16, 16]`), written as the current printer
  // writes them after the shape: " mesh=DeviceMesh((4,), 'cuda',
  // stride=(1,)), placements=(Shard(dim=0),)". Empty: such a type is an error.
  std::string dtensor_layout;
};

// Options for every front end; each reads the part that applies to it.
struct ReadOptions {
  TextReadOptions text;  // the printed-trace reader
};

}  // namespace peakmem
