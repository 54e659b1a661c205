// A training step's result (models/training_step.h) as `peakmem step`
// prints it: text for people, JSON for scripts (docs/step-file.md, "The
// report").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "peakmem/models/training_step.h"
#include "peakmem/report/budget_verdict.h"

namespace peakmem {

struct TrainingStepReportOptions {
  std::string name;                   // the step file, for the heading
  std::string optimizer;              // its description ("" without one)
  std::optional<std::int64_t> budget;  // bytes the step must fit in
  // What the card holds outside the allocator (report/budget_verdict.h):
  // the CUDA context on a GPU target, 0 on the CPU.
  std::int64_t context_bytes = 0;
  std::size_t modules = 10;           // the text lists this many modules, the largest
};

// The budget's verdict on the step (nullopt without a budget): the
// allocator's reserved peak where it ran, else the requested peak.
std::optional<BudgetVerdict> JudgeStep(const TrainingStepResult& step, const TrainingStepReportOptions& options);

std::string TrainingStepToText(const TrainingStepResult& step, const TrainingStepReportOptions& options);
// {"schema_version", "kind": "training_step", "peak_bytes", "final_bytes",
//  "phase_at_peak", "step_at_peak", "by_category", "by_module", "budget",
//  "fits", "headroom_bytes", "budget_basis", "context_bytes",
//  "counted_bytes" (report/budget_verdict.h's verdict), "allocator" (null, or allocator_summary.h's
//  object for the whole step's stream), "phases": [{"phase", "step",
//  "peak_bytes", "around_bytes"}], "diagnostics"}. The text shows the same
//  allocator section as a trace's text report.
std::string TrainingStepToJson(const TrainingStepResult& step, const TrainingStepReportOptions& options,
                               int indent = 2);

}  // namespace peakmem
