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

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "peakmem/ir/parsed_trace.h"
#include "peakmem/models/calling_convention.h"
#include "peakmem/report/report.h"
#include "peakmem/semantics/execution_context.h"

namespace peakmem {

// How one tensor argument of a trace is held when the trace runs inside a
// bigger program (a training step: the backward's saved tensors are the
// forward's parameters, inputs and activations, with their identity). Named
// by its value name in the trace: a parameter or a leaf of a collection
// argument's first unpack.
struct ArgumentTensor {
  std::string name;
  // Held outside the trace for the whole run (a parameter, an input, the
  // loss the caller keeps): it costs the trace nothing (a zero-byte storage)
  // and the trace never frees it.
  bool external = false;
  // Arguments with the same group (>= 0) are views of one storage: it is
  // allocated once, and freed when the last of them dies. -1: its own.
  int storage_group = -1;
  // The storage's bytes (-1: the tensor's own, numel * element size).
  std::int64_t storage_bytes = -1;
  // Empty: contiguous.
  std::vector<std::int64_t> strides;
};

struct RuntimeOptions {
  CallingConvention convention = CallingConvention::kAuto;  // default: inferred
  bool model_scratch = true;  // default true: add op scratch memory to the peak
  // PyTorch's intra-op thread count on the CPU (torch.get_num_threads()):
  // some kernels' scratch is per thread (convolution_scratch.h). Default 0:
  // this machine's CPUs, PyTorch's own default.
  int cpu_threads = 0;
  // Whose kernels' rules apply (execution_context.h). Default: each
  // tensor's own device as the trace names it, `meta` the CPU's.
  ExecutionContext context;
  // With a CUDA `context` over a trace of CPU tensors: a diagnostic says
  // that the program was traced for the CPU (Thunder's CUDA trace can
  // differ). Off for programs peakmem writes itself (the optimizer's).
  bool note_cpu_trace_on_cuda = true;
  // Default empty: every argument tensor is a storage of its own, made by
  // the caller (see CallingConvention). Entries override that per argument.
  std::vector<ArgumentTensor> argument_tensors;
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
