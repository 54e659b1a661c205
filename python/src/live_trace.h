// Reads a live Thunder TraceCtx into peakmem's IR, in C++.
//
// The walk touches only what the models need: each bound symbol's symbol
// (id, name, module), arguments, keyword arguments and output, and each
// proxy's name and, where it is defined, its type (TensorProxy `_shape`,
// `_dtype`, `_device`; a CollectionProxy's container). Dtype and device
// objects are resolved once each and cached. It builds the same Trace the
// readers build (through TraceBuilder), so every model runs on it unchanged.
#pragma once

#include <nanobind/nanobind.h>

#include "peakmem/trace_text_reader.h"

namespace peakmem_python {

peakmem::ParsedTrace ReadLiveTrace(nanobind::handle trace);

}  // namespace peakmem_python
