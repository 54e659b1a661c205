#include "peakmem/models/training_step_report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "peakmem/report/allocator_summary.h"
#include "peakmem/report/human_bytes.h"
#include "peakmem/report/report.h"

namespace peakmem {
namespace {

// Each program's diagnostics once, prefixed by its phase, then the step's
// own (a recorded step's: it has no programs apart).
std::vector<std::string> Diagnostics(const TrainingStepResult& step) {
  std::vector<std::string> out;
  for (const std::string& d : step.forward.diagnostics) out.push_back("forward: " + d);
  for (const std::string& d : step.backward.diagnostics) out.push_back("backward: " + d);
  for (const std::string& d : step.step.diagnostics) out.push_back(d);
  return out;
}

}  // namespace

std::optional<BudgetVerdict> JudgeStep(const TrainingStepResult& step, const TrainingStepReportOptions& options) {
  if (!options.budget) return std::nullopt;
  std::optional<AllocatorPeak> allocator;
  if (step.step.allocator != nullptr) {
    const CudaAllocatorStats& s = step.step.allocator->stats;
    allocator = AllocatorPeak{s.reserved_bytes_peak, s.oom_step != kCudaNoStep};
  }
  return JudgeBudget(*options.budget, step.peak_bytes, allocator, options.context_bytes);
}

std::string TrainingStepToText(const TrainingStepResult& step, const TrainingStepReportOptions& options) {
  std::string out = fmt::format("peakmem step: {}\n", options.name);
  if (!options.optimizer.empty()) out += fmt::format("optimizer: {}\n", options.optimizer);
  out += fmt::format("peak {} bytes ({}) in the {} of step {}; final {} bytes ({})\n", step.peak_bytes,
                     HumanBytes(step.peak_bytes), step.phase_at_peak, step.step_at_peak, step.final_bytes,
                     HumanBytes(step.final_bytes));
  if (const std::optional<BudgetVerdict> verdict = JudgeStep(step, options)) {
    out += BudgetVerdictText(*verdict) + "\n";
  }
  out += "\nat the peak, by category:\n";
  for (const auto& [category, bytes] : step.by_category) out += fmt::format("  {:<16} {:>14}\n", category, bytes);
  if (!step.by_module.empty()) {
    out += "\nat the peak, by module (the largest):\n";
    for (std::size_t i = 0; i < step.by_module.size() && i < options.modules; ++i) {
      const auto& [module, bytes] = step.by_module[i];
      out += fmt::format("  {:<40} {:>14}\n", module.empty() ? "(top: inputs, loss, cotangent)" : module, bytes);
    }
  }
  if (step.step.allocator != nullptr) out += AllocatorSummaryText(step.step);
  out += "\nphases (the highest live bytes inside each, and what the step holds around it):\n";
  for (const TrainingStepPhase& p : step.phases) {
    out += fmt::format("  {:<9} step {:<3} peak {:>14}  around {:>14}\n", p.phase, p.step, p.peak, p.around);
  }
  const std::vector<std::string> diagnostics = Diagnostics(step);
  if (!diagnostics.empty()) {
    out += "\ndiagnostics:\n";
    for (const std::string& d : diagnostics) out += "  " + d + "\n";
  }
  return out;
}

std::string TrainingStepToJson(const TrainingStepResult& step, const TrainingStepReportOptions& options,
                               int indent) {
  nlohmann::ordered_json j;
  j["schema_version"] = kReportSchemaVersion;
  j["kind"] = "training_step";
  j["step_file"] = options.name;
  j["optimizer"] = options.optimizer.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(options.optimizer);
  j["peak_bytes"] = step.peak_bytes;
  j["final_bytes"] = step.final_bytes;
  j["phase_at_peak"] = step.phase_at_peak;
  j["step_at_peak"] = step.step_at_peak;
  j["by_category"] = nlohmann::ordered_json::object();
  for (const auto& [category, bytes] : step.by_category) j["by_category"][category] = bytes;
  j["by_module"] = nlohmann::ordered_json::object();
  for (const auto& [module, bytes] : step.by_module) j["by_module"][module] = bytes;
  const nlohmann::ordered_json verdict = BudgetVerdictJson(JudgeStep(step, options));
  for (const auto& [key, value] : verdict.items()) j[key] = value;
  j["allocator"] = AllocatorSummaryJson(step.step);
  j["phases"] = nlohmann::ordered_json::array();
  for (const TrainingStepPhase& p : step.phases) {
    j["phases"].push_back({{"phase", p.phase}, {"step", p.step},
                           {"peak_bytes", p.peak},
                           {"around_bytes", p.around}});
  }
  j["diagnostics"] = Diagnostics(step);
  return j.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace peakmem
