#include "peakmem/planning/save_search.h"

#include <algorithm>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>

namespace peakmem {
namespace {

void Check(const std::vector<SaveCandidate>& candidates, const SaveSearchOptions& options) {
  if (options.max_simulations < 1) throw std::invalid_argument("max_simulations must be at least 1");
  for (std::size_t c = 0; c < candidates.size(); ++c) {
    if (candidates[c].flops < 0) throw std::invalid_argument("save candidate " + std::to_string(c) + " has negative flops");
    for (std::size_t m : candidates[c].members) {
      if (m >= candidates.size()) {
        throw std::invalid_argument("save candidate " + std::to_string(c) + " has member " + std::to_string(m) +
                                    " of " + std::to_string(candidates.size()));
      }
    }
  }
}

// What keeping candidate c saves: its FLOPs and its members'.
std::int64_t GroupFlops(const std::vector<SaveCandidate>& candidates, std::size_t c) {
  std::int64_t flops = candidates[c].flops;
  for (std::size_t m : candidates[c].members) flops += candidates[m].flops;
  return flops;
}

// The order candidates are tried in: tier by tier, and in a tier by FLOPs
// saved per byte held, most first, ties to the earlier; a candidate
// holding no bytes first of all.
// `bytes` is a single candidate's given bytes, a group's measured ones.
std::vector<std::size_t> TryOrder(const std::vector<SaveCandidate>& candidates,
                                  const std::vector<std::int64_t>& bytes) {
  std::vector<std::size_t> order;
  for (std::size_t c = 0; c < candidates.size(); ++c) {
    if (!candidates[c].members.empty() || candidates[c].flops > 0) order.push_back(c);
  }
  // a before b when a's tier is earlier, or, in one tier, when a holds no
  // bytes and b does, or when flops_a / bytes_a > flops_b / bytes_b
  // (compared as products, no rounding).
  auto ratio_greater = [&](std::size_t a, std::size_t b) {
    if (candidates[a].tier != candidates[b].tier) return candidates[a].tier < candidates[b].tier;
    const bool a_free = bytes[a] <= 0, b_free = bytes[b] <= 0;
    if (a_free || b_free) return a_free && !b_free;
    const __int128 fa = GroupFlops(candidates, a), fb = GroupFlops(candidates, b);
    return fa * __int128{bytes[b]} > fb * __int128{bytes[a]};
  };
  std::stable_sort(order.begin(), order.end(), ratio_greater);
  return order;
}

SaveSearchResult& Finished(const std::vector<SaveCandidate>& candidates, SaveSearchResult& r) {
  for (std::size_t c = 0; c < candidates.size(); ++c) {
    if (!r.kept[c]) r.added_flops += candidates[c].flops;
  }
  return r;
}

std::vector<bool> KeptWith(std::vector<bool> kept, const SaveCandidate& candidate, std::size_t c) {
  kept[c] = true;
  for (std::size_t m : candidate.members) kept[m] = true;
  return kept;
}

}  // namespace

SaveSearchResult SearchSaves(const std::vector<SaveCandidate>& candidates, const SaveSimulate& simulate,
                             const SaveSearchOptions& options) {
  Check(candidates, options);
  SaveSearchResult r;
  // Each set of choices is simulated once; std::nullopt past the limit.
  std::map<std::vector<bool>, std::int64_t> peaks;
  auto peak_of = [&](const std::vector<bool>& kept) -> std::optional<std::int64_t> {
    if (auto known = peaks.find(kept); known != peaks.end()) return known->second;
    if (r.simulations >= options.max_simulations) {
      r.simulation_limit_reached = true;
      return std::nullopt;
    }
    ++r.simulations;
    return peaks[kept] = simulate(kept);
  };
  r.kept.assign(candidates.size(), false);
  r.lowest_peak = r.peak = *peak_of(r.kept);
  const std::int64_t budget = options.budget.value_or(r.lowest_peak);
  r.fits = r.lowest_peak <= budget;
  if (!r.fits) return Finished(candidates, r);
  // A group's bytes: the peak with it kept (and nothing else), over the lowest.
  std::vector<std::int64_t> bytes(candidates.size());
  for (std::size_t c = 0; c < candidates.size(); ++c) {
    bytes[c] = candidates[c].bytes;
    if (candidates[c].members.empty()) continue;
    const std::optional<std::int64_t> peak = peak_of(KeptWith(r.kept, candidates[c], c));
    if (!peak) return Finished(candidates, r);
    bytes[c] = *peak - r.lowest_peak;
  }
  // In order, in batches that double after each batch kept and halve
  // after one that does not fit; a single candidate that does not fit is
  // passed over.
  const std::vector<std::size_t> order = TryOrder(candidates, bytes);
  std::size_t batch = 1;
  for (std::size_t next = 0; next < order.size();) {
    const std::size_t end = std::min(order.size(), next + batch);
    std::vector<bool> trial = r.kept;
    for (std::size_t i = next; i < end; ++i) trial = KeptWith(std::move(trial), candidates[order[i]], order[i]);
    if (trial == r.kept) {  // nothing they keep is recomputed now
      next = end;
      continue;
    }
    const std::optional<std::int64_t> peak = peak_of(trial);
    if (!peak) break;
    if (*peak <= budget) {
      r.kept = std::move(trial);
      r.peak = *peak;
      next = end;
      batch *= 2;
    } else if (end - next > 1) {
      batch = (end - next) / 2;
    } else {
      next = end;
      batch = 1;
    }
  }
  return Finished(candidates, r);
}

}  // namespace peakmem
