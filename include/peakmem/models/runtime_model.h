// The `runtime` model: what PyTorch really allocates when the trace runs.
//
// The trace is simulated as CPython runs it, at the level of objects and
// reference counts:
//   - objects are tensors (a storage plus shape and strides), lists, tuples,
//     dicts, sets and opaque values; a storage's bytes are freed when the
//     last tensor object that uses it dies;
//   - references come from frame locals (names), container elements, the
//     caller (per the calling convention) and the returned value;
//   - an op call binds its outputs to new storages, to views of an input, or
//     to an input object itself, as the op registry says; strides are
//     propagated so that reshape/contiguous/to copy exactly when PyTorch does;
//   - `del` drops names, unpacking binds names to elements,
//     `clear_mutable_collection` empties lists/dicts/sets (not tuples), and
//     `return` hands the result to the caller before the frame's locals die.
// Memory is counted as requested bytes (the CPU allocator and the profiler's
// allocation events; CUDA's caching allocator rounds on top of this).
//
//   bytes
//     ^        ____ scratch (inside one op)
//     |   ____|    |____
//     |__|              |__ frees at del / clear / frame exit
//     +-------------------------> statements
#pragma once

#include <memory>

#include "peakmem/ir/parsed_trace.h"
#include "peakmem/models/calling_convention.h"
#include "peakmem/report/report.h"

namespace peakmem {

struct RuntimeOptions {
  CallingConvention convention = CallingConvention::kAuto;  // default: inferred
  bool model_scratch = true;  // default true: add op scratch memory to the peak
};

// The runtime model's working memory (its objects, storages and per-value
// tables), for whoever runs the model many times (a pass scoring schedules,
// the benchmarks): a run given the workspace of an earlier run reuses that
// memory instead of allocating it and faulting in fresh pages, which on a
// 10^6-statement trace was a third of the simulation's time. Not for two
// runs at once.
class RuntimeWorkspace {
 public:
  RuntimeWorkspace();
  ~RuntimeWorkspace();
  RuntimeWorkspace(RuntimeWorkspace&&) noexcept;
  RuntimeWorkspace& operator=(RuntimeWorkspace&&) noexcept;

  struct Buffers;  // defined by the model
  Buffers& buffers() { return *buffers_; }

 private:
  std::unique_ptr<Buffers> buffers_;
};

// Runs the model; `workspace` (optional) is reused working memory.
Report RunRuntimeModel(const ParsedTrace& parsed, const RuntimeOptions& options = {},
                       const ReportOptions& report_options = {},
                       RuntimeWorkspace* workspace = nullptr);

}  // namespace peakmem
