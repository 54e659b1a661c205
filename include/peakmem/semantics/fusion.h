// Output sizes of fusion regions (nvFusionN, TorchCompileN).
//
// A fusion region allocates only its outputs, not its intermediates. nvFuser
// may return an output whose broadcast dimensions have stride 0: in the bundled
// example (tests/data/nvfusion_broadcast_fw.md) `t15 = prims.add(t13, t5)` of shape [2, 3, 4],
// both inputs broadcast from [1, 1, 4], comes back backed by 4 floats. This
// file replays the region's subsymbol calls (Trace::SubSymbolCallsOf, which
// the readers parse from the printed lines) to find, for each output, the
// dimensions that are broadcast in every input of its defining elementwise
// op, and sizes the output without them.
#pragma once

#include <cstdint>
#include <string_view>

#include "peakmem/ir/trace.h"

namespace peakmem {

// Whether a model reads the subsymbols of a call to `symbol`: nvFuser
// regions (FusionOutputBytes). (TextReadOptions::fusion_subsymbols_only
// keeps only these.)
bool UsesSubSymbols(std::string_view symbol);

// Bytes the fusion `s` allocates for output `out` (dense when the
// subsymbols do not show broadcast dimensions, or for non-nvFuser regions).
std::int64_t FusionOutputBytes(const Trace& trace, const Statement& s, ValueId out);

}  // namespace peakmem
