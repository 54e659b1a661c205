#include "peakmem/planning/recompute_search.h"

#include <algorithm>

namespace peakmem {

RecomputeSearchResult SearchRecomputation(const std::vector<std::int64_t>& flops, const RecomputeSimulate& simulate,
                                          const RecomputeSearchOptions& options,
                                          const std::function<bool()>& should_stop) {
  RecomputeSearchResult r;
  std::vector<std::size_t> trial;
  r.peak_before = r.peak_after = simulate(trial);
  r.simulations = 1;
  std::vector<bool> taken(flops.size(), false);
  while (!options.budget || r.peak_after > *options.budget) {
    // The round's best: its score, peak and candidate (score compared as
    // Python compares floats: the same division, so the same ties).
    std::optional<std::size_t> best;
    double best_score = 0;
    std::int64_t best_peak = 0;
    for (std::size_t c = 0; c < flops.size(); ++c) {
      if (taken[c]) continue;
      if (should_stop && should_stop()) {
        r.stopped = true;
        break;
      }
      if (r.simulations >= options.max_simulations) {
        r.simulation_limit_reached = true;
        break;
      }
      trial = r.chosen;
      trial.push_back(c);
      const std::int64_t peak = simulate(trial);
      ++r.simulations;
      if (peak >= r.peak_after) continue;
      const double score =
          static_cast<double>(r.peak_after - peak) / static_cast<double>(std::max<std::int64_t>(1, flops[c]));
      if (!best || score > best_score || (score == best_score && peak < best_peak)) {
        best = c;
        best_score = score;
        best_peak = peak;
      }
    }
    if (!best) break;
    taken[*best] = true;
    r.chosen.push_back(*best);
    r.peaks.push_back(best_peak);
    r.peak_after = best_peak;
    r.added_flops += flops[*best];
    if (r.stopped || r.simulation_limit_reached) break;
  }
  return r;
}

}  // namespace peakmem
