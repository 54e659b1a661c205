// Which model runs, by name: a trace through the runtime or the thunder
// model, its distribution and NCCL estimate, then the allocator model over
// its event stream (allocators/allocator_choice.h). The front door
// (analyze.h) and the training step (models/training_step.h) run models
// through this.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "peakmem/allocators/allocator_choice.h"
#include "peakmem/allocators/nccl_buffers.h"
#include "peakmem/ir/parsed_trace.h"
#include "peakmem/models/runtime_model.h"
#include "peakmem/report/report.h"
#include "peakmem/semantics/distribution.h"

namespace peakmem {

// Names of the models that exist in this build, in order of preference.
const std::vector<std::string>& AvailableModels();

// Runs `model` ("runtime" or "thunder") on the trace. Throws
// std::invalid_argument for a model name that does not exist, TraceError for
// input the model cannot size. `runtime_options` apply to the runtime model.
// `allocator`: an allocator model other than requested bytes runs over the
// model's allocation event stream afterwards (Report::allocator); the run
// then keeps the stream, which Report::alloc_log holds only if
// `report_options` asked for it.
Report Analyze(const ParsedTrace& trace, const std::string& model,
               const RuntimeOptions& runtime_options = {},
               const ReportOptions& report_options = {},
               const AllocatorOptions& allocator = {});

// NCCL's buffers for a distributed trace (Report::nccl): `options` with the
// trace's world size and the collectives its ops run; none when the world
// size is unknown or the trace runs no collective.
std::optional<NcclEstimate> DefaultNcclEstimate(const Distribution& distribution, NcclOptions options = {});

// Analyze for callers that run models over and over (an optimization pass
// scoring schedules, the benchmarks): it keeps the models' working memory
// between runs, so a run after the first allocates little and touches no
// fresh pages. One run at a time per Simulator.
class Simulator {
 public:
  Report Analyze(const ParsedTrace& trace, const std::string& model,
                 const RuntimeOptions& runtime_options = {},
                 const ReportOptions& report_options = {},
                 const AllocatorOptions& allocator = {});

 private:
  RuntimeWorkspace runtime_;
};

}  // namespace peakmem
