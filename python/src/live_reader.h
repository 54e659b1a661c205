// Reads a live Thunder TraceCtx into peakmem's IR, in C++: the one walker of
// a TraceCtx's objects. The thunder drop-in, peakmem.analyze on a TraceCtx
// and the JSON export all read through it.
//
// The walk touches each bound symbol's symbol (id, name, module), arguments,
// keyword arguments and output, and each proxy's name and, where it is
// defined, its type (TensorProxy `_shape`, `_dtype`, `_device`; a
// CollectionProxy's container). It builds the same Trace the readers build
// (through TraceBuilder), so every model runs on it unchanged. Proxies,
// symbols, dtypes, devices and tensor types are resolved once per trace and
// cached by object address (the trace keeps those objects alive while it is
// read), so a proxy's attributes are read where it is defined, not at every
// use; bound symbols' and tensor proxies' attributes are read a block at a
// time (AttrBlockReader).
#pragma once

#include <nanobind/nanobind.h>

#include "peakmem/frontend/trace_text_reader.h"

namespace peakmem_python {

struct LiveReadOptions {
  // Default false. What the thunder model needs only, as Thunder's
  // get_alloc_memory reads it: the arguments of Thunder's alias ops
  // (ThunderAliasOps) become their flattened proxies (`flat_proxy_args`, in
  // the same order); other calls' arguments are not read (nor checked), the
  // return value is not read, constants and keyword names are dropped. The
  // per-step table and the runtime model need the full form.
  bool lean = false;
  // Default false. Everything the JSON form (docs/trace-json.md) carries, as
  // Thunder's objects spell it: every proxy's type is its `type_string()`,
  // every constant its `repr()` (containers by isinstance, as pytree sees
  // them: tuple and list subclasses, dicts, sets and frozensets), parameters'
  // defaults, and an op whose output is not a proxy or a container keeps the
  // `_` target. Slower (a Python call per proxy and constant); not with lean.
  bool exact = false;
  // The rank DTensor values are read for: their shard (ir/dtensor_layout.h),
  // from the type Thunder prints (a DTensorProxy's shape is the global one).
  int rank = 0;
  // TextReadOptions::dtensor_layout.
  std::string dtensor_layout;
};

peakmem::ParsedTrace ReadLiveTrace(nanobind::handle trace, const LiveReadOptions& options = {});

}  // namespace peakmem_python
