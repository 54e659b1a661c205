#include "peakmem/planning/recompute_search.h"

#include <algorithm>

namespace peakmem {
namespace {

// One round: every candidate not taken (and of the allowed tier) tried on
// top of r.chosen; returns the best, if any lowers the peak, with its peak.
std::optional<std::size_t> Round(const std::vector<std::int64_t>& flops, const RecomputeSimulate& simulate,
                                 const RecomputeSearchOptions& options, const std::function<bool()>& should_stop,
                                 const std::vector<bool>& allowed, RecomputeSearchResult& r,
                                 std::int64_t* best_peak) {
  // The round's best: its score, peak and candidate (score compared as
  // Python compares floats: the same division, so the same ties).
  std::optional<std::size_t> best;
  double best_score = 0;
  std::vector<std::size_t> trial;
  for (std::size_t c = 0; c < flops.size(); ++c) {
    if (!allowed[c]) continue;
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
    if (!best || score > best_score || (score == best_score && peak < *best_peak)) {
      best = c;
      best_score = score;
      *best_peak = peak;
    }
  }
  return best;
}

}  // namespace

RecomputeSearchResult SearchRecomputation(const std::vector<std::int64_t>& flops, const RecomputeSimulate& simulate,
                                          const RecomputeSearchOptions& options,
                                          const std::function<bool()>& should_stop,
                                          const std::vector<bool>& expensive) {
  RecomputeSearchResult r;
  r.peak_before = r.peak_after = simulate({});
  r.simulations = 1;
  auto is_expensive = [&](std::size_t c) { return c < expensive.size() && expensive[c]; };
  std::vector<bool> allowed(flops.size());
  for (std::size_t c = 0; c < flops.size(); ++c) allowed[c] = !is_expensive(c);
  while (!options.budget || r.peak_after > *options.budget) {
    std::int64_t best_peak = 0;
    const std::optional<std::size_t> best = Round(flops, simulate, options, should_stop, allowed, r, &best_peak);
    if (!best) {
      if (r.stopped || r.simulation_limit_reached || r.expensive_tier || !options.budget) break;
      // The cheap candidates are spent and the step does not fit: on to
      // every candidate not yet chosen.
      r.expensive_tier = true;
      bool any = false;
      for (std::size_t c = 0; c < flops.size(); ++c) {
        if (is_expensive(c)) allowed[c] = any = true;
      }
      if (!any) break;
      continue;
    }
    allowed[*best] = false;
    r.chosen.push_back(*best);
    r.peaks.push_back(best_peak);
    r.peak_after = best_peak;
    r.added_flops += flops[*best];
    if (r.stopped || r.simulation_limit_reached) break;
  }
  return r;
}

}  // namespace peakmem
