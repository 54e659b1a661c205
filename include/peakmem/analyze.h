// The library's front door: load a trace from a file or text, run a model,
// get a Report. The CLI and the Python extension both call only this.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "peakmem/report/report.h"
#include "peakmem/models/runtime_model.h"
#include "peakmem/frontend/frontend.h"

namespace peakmem {

// Names of the models that exist in this build, in order of preference.
const std::vector<std::string>& AvailableModels();

// Reads a trace file with the front end its text asks for (frontend.h):
// printed trace text, or the JSON export (a file whose first non-blank
// character is '{'). Throws TraceError on bad input. `text_options`: how
// printed traces are read (threads).
ParsedTrace LoadTrace(const std::string& path, const TextReadOptions& text_options = {});
// Same for text held in memory; `name` is used in messages.
ParsedTrace ParseTrace(const std::string& name, std::string text,
                       const TextReadOptions& text_options = {});

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
