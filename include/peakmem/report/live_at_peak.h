// The storages alive at the peak, from the stream's storage table: those
// allocated by the peak moment and not freed by then, largest first.
#pragma once

#include <cstddef>
#include <vector>

#include "peakmem/ir/trace.h"
#include "peakmem/report/report.h"
#include "peakmem/sim/alloc_events.h"
#include "peakmem/sim/requested_bytes.h"

namespace peakmem {

// Ties keep allocation order. `limit` (0: all) keeps only the largest that
// many (the same ones, in the same order, as the full list starts with);
// `total` gets how many were alive.
std::vector<LiveTensor> LiveAtPeak(const Trace& trace, const std::vector<StorageRecord>& storages,
                                   const PeakMoment& peak, std::size_t limit, std::size_t* total);

}  // namespace peakmem
