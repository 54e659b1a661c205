// Whether a step fits: the one verdict every output gives (Python's
// StepReport, `peakmem step`'s text and JSON, the largest batch).
//
// A GPU runs out of memory when what the process holds on it passes the
// card's memory: the caching allocator's reserved bytes (what cudaMalloc
// gave it, cached blocks included) plus what the allocator never sees (the
// CUDA context: the driver's and the libraries' modules; NCCL's
// communicator buffers on a distributed rank). So where the allocator
// model ran, the verdict is its reserved peak plus `context_bytes` against
// the budget, and the allocator ran with `budget - context_bytes` as its
// capacity, so that "fits" means it never failed a request (it frees its
// cache and retries before it fails, as PyTorch's does). Without an
// allocator model (the CPU target, or allocator="requested") the verdict is
// the requested peak plus `context_bytes` against the budget, and says so.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "peakmem/semantics/execution_context.h"

namespace peakmem {

enum class VerdictBasis : unsigned char {
  kRequested,  // the storages' own bytes at the peak
  kReserved,   // the caching allocator's reserved bytes at their peak
};

std::string_view VerdictBasisName(VerdictBasis basis);  // "requested", "reserved"

struct BudgetVerdict {
  std::int64_t budget = 0;
  std::int64_t context_bytes = 0;
  VerdictBasis basis = VerdictBasis::kRequested;
  // The basis's peak plus the context: what the card holds at the worst
  // point (for an allocator that ran out of memory, what it held when the
  // failing request came).
  std::int64_t counted_bytes = 0;
  bool fits = false;
  // budget - counted_bytes; nullopt where the allocator ran out of memory
  // (its reserved bytes stop at the failed request: the step's would-be
  // peak is not known).
  std::optional<std::int64_t> headroom_bytes;
};

// The allocator's figures the verdict reads, where it ran.
struct AllocatorPeak {
  std::int64_t reserved_peak_bytes = 0;
  bool out_of_memory = false;
};

BudgetVerdict JudgeBudget(std::int64_t budget, std::int64_t requested_peak_bytes,
                          const std::optional<AllocatorPeak>& allocator, std::int64_t context_bytes);

// What a step is judged with, the caller's choices completed by the target
// device's defaults, one rule for Python (step/budget.py) and `peakmem
// step`: on a GPU model of the catalog (execution_context.h) the budget is
// the card's memory unless given, `context_bytes` its CUDA context unless
// given (plus `nccl_bytes`, a rank's NCCL buffers, also outside the
// allocator), the allocator model "cuda-caching" unless named; elsewhere no
// budget, no context and "requested". The allocator's capacity is
// `device_memory` where given, else the budget less the context (at least a
// byte: a budget the context fills leaves the allocator nothing) when an
// allocator model runs and there is a budget.
struct BudgetTerms {
  std::optional<std::int64_t> budget;
  std::int64_t context_bytes = 0;
  std::string allocator;  // "requested" or "cuda-caching"
  std::optional<std::int64_t> capacity;
};
BudgetTerms ResolveBudgetTerms(std::string_view device, std::optional<std::int64_t> budget,
                               std::optional<std::int64_t> context_bytes, std::string_view allocator,
                               std::optional<std::int64_t> device_memory, std::int64_t nccl_bytes = 0);

// The verdict as every text output prints it: "budget B bytes (80.00 GiB):
// fits, headroom H bytes (...)", then what was counted where it is more
// than the requested peak ("the caching allocator's reserved peak R + the
// CUDA context C").
std::string BudgetVerdictText(const BudgetVerdict& verdict);
// {"budget", "fits", "headroom_bytes" (null where the allocator ran out),
//  "budget_basis" ("requested" or "reserved"), "context_bytes",
//  "counted_bytes"}: the keys every JSON output gives.
nlohmann::ordered_json BudgetVerdictJson(const std::optional<BudgetVerdict>& verdict);

}  // namespace peakmem
