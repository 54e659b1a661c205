// Thunder's get_alloc_memory on a live TraceCtx, and breakdowns as Python
// dicts.
#pragma once

#include <nanobind/nanobind.h>

#include "peakmem/report/report.h"

namespace peakmem_python {

// thunder.examine.memory_calculation.get_alloc_memory(trace): (peak,
// breakdown dict). The live reader (lean) builds the IR and the thunder
// model computes it; a trace the model rejects raises its TraceError.
nanobind::object ThunderAllocMemory(nanobind::handle trace);

// The breakdown as a dict, key -> bytes, in order. Keys are ASCII almost
// always and are then made without UTF-8 decoding; other keys are decoded
// with `errors` (nullptr: strict).
nanobind::object BreakdownDict(const peakmem::OrderedBreakdown& breakdown, const char* errors);

}  // namespace peakmem_python
