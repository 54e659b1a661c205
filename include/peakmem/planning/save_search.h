// The search that starts from everything recomputed and keeps saved what
// fits: the planner of eager steps' selective checkpointing
// (python/peakmem/step/eager_recompute.py), where every candidate is one
// operator's output that checkpoint would run again in the backward, or a
// whole block left out of checkpointing.
//
// The first simulation recomputes every candidate: the lowest peak the
// candidates reach. If it does not fit the budget, nothing fits. Otherwise
// each group (a candidate with members: keeping it keeps them too, as a
// block left out of checkpointing keeps all of its operators) is simulated
// kept alone, and the bytes it holds over the lowest peak are its bytes.
// Then every candidate is tried once, tier by tier (the caller's: what
// costs many FLOPs per byte before whole groups, the rest after), in a tier
// most FLOPs saved per byte first (a group's FLOPs are its own and its
// members'; ties to the earlier; one holding no bytes first of all; a
// single one whose recomputation costs nothing is passed over, keeping it
// only costs memory), and kept when the
// step with it and everything kept before still fits. The tries go in
// batches: after a batch is kept the next is twice as long, after one does
// not fit it is half as long, and a single candidate that does not fit is
// passed over. Where keeping more never lowers the peak, this keeps what
// trying one candidate at a time keeps, in as few as log2(n) simulations
// where most fit. Every choice is
// judged by the caller's simulation of the whole step, so candidates that
// only fit together, or only apart, are found as the simulation finds them,
// not as a model of memory guesses. Each set of choices is simulated once.
// The result meets the budget whenever the lowest peak does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace peakmem {

struct SaveCandidate {
  std::int64_t flops = 0;             // what recomputing it adds, >= 0
  std::int64_t bytes = 0;             // what saving it is expected to hold (the order only; a group's are measured)
  std::vector<std::size_t> members;   // candidates kept with it (a group), none for a single one
  int tier = 0;                       // tried after every candidate of an earlier tier
};

struct SaveSearchOptions {
  // Bytes the step's peak must not exceed; none: the lowest peak (keep saved
  // whatever does not raise it).
  std::optional<std::int64_t> budget;
  std::size_t max_simulations = 5000;  // >= 1; the first simulation counts
};

struct SaveSearchResult {
  std::vector<bool> kept;             // per candidate: saved (true) or recomputed
  std::int64_t lowest_peak = 0;       // every candidate recomputed
  std::int64_t peak = 0;              // with `kept`
  std::int64_t added_flops = 0;       // the flops of the candidates recomputed
  std::size_t simulations = 0;
  bool fits = false;                  // lowest_peak <= budget
  bool simulation_limit_reached = false;
};

// The step's peak with the candidates `kept` saved and the others recomputed.
using SaveSimulate = std::function<std::int64_t(const std::vector<bool>& kept)>;

// std::invalid_argument for negative flops, a member index out of range or
// max_simulations 0.
SaveSearchResult SearchSaves(const std::vector<SaveCandidate>& candidates, const SaveSimulate& simulate,
                             const SaveSearchOptions& options);

}  // namespace peakmem
