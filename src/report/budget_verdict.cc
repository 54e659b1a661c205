#include "peakmem/report/budget_verdict.h"

#include <fmt/format.h>

#include <algorithm>

#include "peakmem/report/human_bytes.h"

namespace peakmem {

std::string_view VerdictBasisName(VerdictBasis basis) {
  return basis == VerdictBasis::kReserved ? "reserved" : "requested";
}

BudgetVerdict JudgeBudget(std::int64_t budget, std::int64_t requested_peak_bytes,
                          const std::optional<AllocatorPeak>& allocator, std::int64_t context_bytes) {
  BudgetVerdict v;
  v.budget = budget;
  v.context_bytes = context_bytes;
  if (allocator) {
    v.basis = VerdictBasis::kReserved;
    v.counted_bytes = allocator->reserved_peak_bytes + context_bytes;
    v.fits = !allocator->out_of_memory && v.counted_bytes <= budget;
    if (!allocator->out_of_memory) v.headroom_bytes = budget - v.counted_bytes;
    return v;
  }
  v.basis = VerdictBasis::kRequested;
  v.counted_bytes = requested_peak_bytes + context_bytes;
  v.fits = v.counted_bytes <= budget;
  v.headroom_bytes = budget - v.counted_bytes;
  return v;
}

BudgetTerms ResolveBudgetTerms(std::string_view device, std::optional<std::int64_t> budget,
                               std::optional<std::int64_t> context_bytes, std::string_view allocator,
                               std::optional<std::int64_t> device_memory, std::int64_t nccl_bytes) {
  const GpuModel* gpu = FindGpuModel(device);
  BudgetTerms t;
  t.budget = budget ? budget : gpu != nullptr ? std::optional<std::int64_t>(gpu->total_memory_bytes) : std::nullopt;
  t.context_bytes = context_bytes ? *context_bytes : gpu != nullptr ? gpu->context_bytes : 0;
  if (gpu != nullptr) t.context_bytes += nccl_bytes;
  t.allocator = !allocator.empty() ? std::string(allocator) : gpu != nullptr ? "cuda-caching" : "requested";
  if (device_memory) {
    t.capacity = device_memory;
  } else if (t.allocator != "requested" && t.budget) {
    t.capacity = std::max<std::int64_t>(*t.budget - t.context_bytes, 1);
  }
  return t;
}

std::string BudgetVerdictText(const BudgetVerdict& v) {
  std::string out = fmt::format("budget {} bytes ({}): {}", GroupedBytes(v.budget), HumanBytes(v.budget),
                                v.fits ? "fits" : "does not fit");
  if (v.headroom_bytes) {
    out += fmt::format(", headroom {} bytes ({})", GroupedBytes(*v.headroom_bytes), HumanBytes(*v.headroom_bytes));
  }
  if (v.basis == VerdictBasis::kReserved && !v.headroom_bytes) {
    out += "; the caching allocator runs out of memory within the budget";
    if (v.context_bytes != 0) out += fmt::format(" less {} outside it", GroupedBytes(v.context_bytes));
  } else if (v.basis == VerdictBasis::kReserved) {
    out += fmt::format("; counted: the caching allocator's reserved peak {} + {} outside it (the CUDA context, a "
                       "rank's NCCL buffers)",
                       GroupedBytes(v.counted_bytes - v.context_bytes), GroupedBytes(v.context_bytes));
  } else if (v.context_bytes != 0) {
    out += fmt::format("; counted: the requested peak {} + {} outside the allocator",
                       GroupedBytes(v.counted_bytes - v.context_bytes), GroupedBytes(v.context_bytes));
  }
  return out;
}

nlohmann::ordered_json BudgetVerdictJson(const std::optional<BudgetVerdict>& v) {
  nlohmann::ordered_json j;
  if (!v) {
    for (const char* key : {"budget", "fits", "headroom_bytes", "budget_basis", "context_bytes", "counted_bytes"}) {
      j[key] = nullptr;
    }
    return j;
  }
  j["budget"] = v->budget;
  j["fits"] = v->fits;
  j["headroom_bytes"] = v->headroom_bytes ? nlohmann::ordered_json(*v->headroom_bytes) : nullptr;
  j["budget_basis"] = std::string(VerdictBasisName(v->basis));
  j["context_bytes"] = v->context_bytes;
  j["counted_bytes"] = v->counted_bytes;
  return j;
}

}  // namespace peakmem
