#include "peakmem/models/model_choice.h"

#include <algorithm>
#include <stdexcept>

#include "peakmem/allocators/nccl_buffers.h"
#include "peakmem/models/runtime_model.h"
#include "peakmem/models/thunder_model.h"
#include "peakmem/semantics/distribution.h"

namespace peakmem {

const std::vector<std::string>& AvailableModels() {
  static const std::vector<std::string> models = {"runtime", "thunder"};
  return models;
}

namespace {

Report RunModel(const ParsedTrace& trace, const std::string& model,
                const RuntimeOptions& runtime_options, const ReportOptions& report_options,
                RuntimeWorkspace* runtime_workspace) {
  if (model == "thunder") return RunThunderModel(trace, report_options);
  if (model == "runtime") {
    return RunRuntimeModel(trace, runtime_options, report_options, runtime_workspace);
  }
  throw std::invalid_argument("unknown model '" + model + "'; available models: runtime, thunder");
}

// The model, then the allocator model over its event stream.
Report RunPriced(const ParsedTrace& trace, const std::string& model,
                 const RuntimeOptions& runtime_options, const ReportOptions& report_options,
                 const AllocatorOptions& allocator, RuntimeWorkspace* runtime_workspace) {
  if (allocator.model == AllocatorModel::kRequested) {
    return RunModel(trace, model, runtime_options, report_options, runtime_workspace);
  }
  // Settings the allocator rejects fail before the model runs.
  if (std::string problem = ValidateCudaCachingOptions(allocator.cuda); !problem.empty()) {
    throw std::invalid_argument(problem);
  }
  ReportOptions with_log = report_options;
  with_log.alloc_log = true;
  Report report = RunModel(trace, model, runtime_options, with_log, runtime_workspace);
  report.allocator = std::make_shared<const AllocatorResult>(
      RunAllocatorModel(*report.alloc_log, allocator));
  if (!report_options.alloc_log) report.alloc_log.reset();
  return report;
}

}  // namespace

std::optional<NcclEstimate> DefaultNcclEstimate(const Distribution& d, NcclOptions options) {
  if (!d.distributed || d.world_size < 1) return std::nullopt;
  options.world_size = d.world_size;
  options.collectives.clear();
  for (const std::string& op : d.collective_ops) {
    const std::string c = NcclCollectiveOf(op);
    if (!c.empty() && std::find(options.collectives.begin(), options.collectives.end(), c) == options.collectives.end())
      options.collectives.push_back(c);
  }
  if (options.collectives.empty()) return std::nullopt;
  return EstimateNcclBuffers(options);
}

namespace {

// The distribution (before the model: a world size the trace contradicts
// fails at once), then the priced run.
Report AnalyzeWith(const ParsedTrace& trace, const std::string& model,
                   const RuntimeOptions& runtime_options, const ReportOptions& report_options,
                   const AllocatorOptions& allocator, RuntimeWorkspace* workspace) {
  Distribution distribution =
      DistributionOf(trace.trace, *trace.source, trace.rank, trace.world_size);
  Report report = RunPriced(trace, model, runtime_options, report_options, allocator, workspace);
  for (const std::string& d : distribution.disagreements) report.diagnostics.push_back(d);
  report.nccl = DefaultNcclEstimate(distribution);
  report.distribution = std::move(distribution);
  return report;
}

}  // namespace

Report Analyze(const ParsedTrace& trace, const std::string& model,
               const RuntimeOptions& runtime_options, const ReportOptions& report_options,
               const AllocatorOptions& allocator) {
  return AnalyzeWith(trace, model, runtime_options, report_options, allocator, nullptr);
}

Report Simulator::Analyze(const ParsedTrace& trace, const std::string& model,
                          const RuntimeOptions& runtime_options,
                          const ReportOptions& report_options,
                          const AllocatorOptions& allocator) {
  return AnalyzeWith(trace, model, runtime_options, report_options, allocator, &runtime_);
}

}  // namespace peakmem
