// Reads a live Thunder TraceCtx into peakmem's IR, in C++.
//
// The walk touches only what the models need: each bound symbol's symbol
// (id, name, module), arguments, keyword arguments and output, and each
// proxy's name and, where it is defined, its type (TensorProxy `_shape`,
// `_dtype`, `_device`; a CollectionProxy's container). Dtype and device
// objects are resolved once each and cached. It builds the same Trace the
// readers build (through TraceBuilder), so every model runs on it unchanged.
//
// Proxies, symbols and tensor types are resolved once per trace and cached by
// object address (the trace keeps those objects alive while it is read), so a
// proxy's attributes are read where it is defined, not at every use.
//
// `lean` reads only what the thunder model needs: a call's arguments become
// its flattened proxies (Thunder's `flat_proxy_args`, in the same order),
// constants and keyword names are dropped and the return value is not read.
// The per-step table (FormatStatement) and the runtime model need the full
// form.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <string_view>

#include "peakmem/ir/parsed_trace.h"

namespace peakmem_python {

peakmem::ParsedTrace ReadLiveTrace(nanobind::handle trace, bool lean = false);

// Thunder's get_alloc_memory(trace) computed on the live objects without
// building the IR: (peak, breakdown dict), or None where the trace holds
// something this walk does not handle (the caller then takes the general
// path, which gives the same answer or the right error).
nanobind::object ThunderAllocMemoryLive(nanobind::handle trace);

// dict[key] = bytes for a breakdown entry. Keys are ASCII names almost
// always, and are then made without UTF-8 decoding; other keys are decoded
// with `errors` (nullptr: strict). Raises the Python error on failure.
void SetBreakdownItem(PyObject* dict, std::string_view key, std::int64_t bytes,
                      const char* errors);
// The str for a breakdown key, made as SetBreakdownItem makes it.
nanobind::object BreakdownKey(std::string_view key, const char* errors);

}  // namespace peakmem_python
