// The greedy choice of forward values to recompute in the backward instead
// of saving them (python/peakmem/recompute.py's module docstring states the
// rule; this is its one implementation, for `peakmem plan STEP.json
// --recompute` and for peakmem.recompute.search alike).
//
// Each round tries every candidate not yet chosen on top of the choices so
// far, asks the caller for the step's peak with them (the simulation), and
// keeps the one that lowers the peak the most per added FLOP:
// (peak drop) / max(1, flops), ties to the lower peak, then to the earlier
// candidate. A candidate that does not lower the peak is never kept. With a
// budget the search stops as soon as the peak fits; it is bounded by a
// number of simulations (the same choice on every machine) and, through
// `should_stop`, by whatever else the caller bounds it with (wall time). A
// round cut short keeps the best it tried.
//
// Candidates come in two tiers: cheap ones (views, pointwise ops) and
// expensive ones (regions that recompute matmuls, softmax...). The rounds
// first try the cheap ones only; when none lowers the peak any more and a
// budget is given that the step does not yet fit, the rounds go on over
// every candidate not yet chosen. Without a budget only cheap ones are
// chosen. The sequence of choices does not depend on the budget (the
// switch happens where the cheap ones run out, whatever the budget), so a
// larger budget stops earlier along the same sequence.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace peakmem {

struct RecomputeSearchOptions {
  std::optional<std::int64_t> budget;  // bytes (none: as low as it goes)
  std::size_t max_simulations = 5000;  // the first simulation (no choice) counts
};

struct RecomputeSearchResult {
  // Candidate indices in the order they were chosen, and the peak after each.
  std::vector<std::size_t> chosen;
  std::vector<std::int64_t> peaks;
  std::int64_t peak_before = 0, peak_after = 0;
  std::int64_t added_flops = 0;
  std::size_t simulations = 0;
  bool simulation_limit_reached = false;
  bool stopped = false;  // should_stop said so
  bool expensive_tier = false;  // the rounds went on to the expensive candidates
};

// The step's peak with `chosen` (candidate indices, in the order chosen)
// recomputed; called with none first.
using RecomputeSimulate = std::function<std::int64_t(const std::vector<std::size_t>& chosen)>;

// Searches over candidates whose added FLOPs are `flops` (one per
// candidate, >= 0). `should_stop` (may be empty) is asked before each
// simulation after the first, ahead of the simulation bound. `expensive`
// (empty: none) says which candidates are of the expensive tier.
RecomputeSearchResult SearchRecomputation(const std::vector<std::int64_t>& flops, const RecomputeSimulate& simulate,
                                          const RecomputeSearchOptions& options,
                                          const std::function<bool()>& should_stop = {},
                                          const std::vector<bool>& expensive = {});

}  // namespace peakmem
