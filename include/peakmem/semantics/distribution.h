// Which rank of how many a trace's memory is for.
//
// A distributed Thunder trace is one rank's program: its shapes are that
// rank's (FSDP's shards, DDP's replicas), or DTensor types give a global
// shape, a mesh and placements from which the rank's shard follows
// (ir/dtensor_layout.h). The world size is said by the trace where a
// collective's shapes or a DTensor's mesh say it: an all-gather's result is
// its input times the world size along the gathered dimension (dim 0 unless
// its fourth argument names one), a reduce-scatter's input its result times
// the world size; a mesh holds the product of its shape. An all-reduce or a
// broadcast keeps the shape and says nothing.
#pragma once

#include <string>
#include <vector>

#include "peakmem/ir/trace.h"

namespace peakmem {

struct Distribution {
  bool distributed = false;  // the trace has a collective or a DTensor value
  int rank = 0;              // the rank the trace was read for
  int world_size = 0;        // 0: the trace does not say and none was given
  // Where the world size comes from: "the all-gather at line 12", "the
  // DTensor mesh of 'x' (line 3)", "given"; empty when unknown.
  std::string world_size_from;
  // Statements that say another size than the first (collectives over
  // process groups of different sizes): reported, the first kept.
  std::vector<std::string> disagreements;
  // The collective ops the trace calls, each once, in the order first called.
  std::vector<std::string> collective_ops;
};

// The trace's distribution, read for `rank`; `world_size` (0: unknown) is
// what the user says. Throws TraceError (through `source`) when the trace
// says another world size than the one given, naming the line, and
// std::invalid_argument when the rank is not below the world size.
Distribution DistributionOf(const Trace& trace, const SourceFile& source, int rank, int world_size);

}  // namespace peakmem
