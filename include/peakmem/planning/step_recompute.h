// Recomputation on a step file: saved tensors the backward makes again
// instead of the forward keeping them, chosen by recompute_search.h's greedy
// rule judged by the training-step simulation (models/training_step.h), and
// the step's printed traces rewritten to do it, as
// python/peakmem/recompute.py rewrites Thunder's TraceCtx's:
//   - the forward returns the kept saved tensors, its frees placed again;
//   - the backward unpacks the kept ones from C0, runs each recomputed
//     statement (copied from the forward) right before the first statement
//     that reads its value, and its frees (and collection clears) are placed
//     again; everything else keeps its lines.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "peakmem/frontend/step_file.h"
#include "peakmem/planning/recompute_search.h"

namespace peakmem {

// A saved tensor the backward could make again (recompute.candidates): not
// a forward output or flat argument, made by a single-output op the registry
// recomputes (RecomputeCostOf: a view or a per-element op) from tensors only.
struct RecomputeCandidate {
  std::string name;
  std::int64_t flops = 0;      // 0 for a view, else the output's elements
  std::size_t statement = 0;   // its forward statement's index
  std::vector<std::string> inputs;  // the tensors its op reads, in order
};

// The step's candidates, in the order of its saved list.
std::vector<RecomputeCandidate> RecomputeCandidates(const StepFile& step);

// What recomputing `chosen` (indices into `pool`) takes (recompute._closure):
// the saved list without them, in order, then each input a recomputed
// statement reads that the backward would lack (in the forward order of the
// chosen statements); and the chosen statements in forward order.
struct RecomputeClosure {
  std::vector<std::string> saved;
  std::vector<std::size_t> statements;
};
RecomputeClosure CloseRecomputation(const std::vector<std::string>& saved, const std::vector<RecomputeCandidate>& pool,
                                    const std::vector<std::size_t>& chosen);

// The step's printed traces with `chosen` recomputed, and the saved list
// they pass. Throws StepFileError for traces not read from printed text or
// not shaped as Thunder's (a forward not ending with `return (data,
// (saved, other))`, a backward without its `... = C0` unpack).
struct RecomputedTraces {
  std::string forward, backward;
  std::vector<std::string> saved;
};
RecomputedTraces RewriteForRecomputation(const StepFile& step, const std::vector<RecomputeCandidate>& pool,
                                         const std::vector<std::size_t>& chosen);

// The search over the step's candidates, each variant's peak simulated from
// its rewritten traces read back (what the planned step file will say).
struct StepRecomputation {
  RecomputeSearchResult search;
  std::vector<RecomputeCandidate> pool;
  std::vector<std::string> names;  // the recomputed values, in candidate order
  RecomputedTraces traces;         // with them recomputed (the step's own when none)
};
StepRecomputation PlanStepRecomputation(const StepFile& step, const RecomputeSearchOptions& options);

// The step file `step_json` (its text) with the rewritten traces and saved
// list; every other field as it was.
std::string WriteRecomputedStep(const std::string& name, const std::string& step_json, const RecomputedTraces& traces);

}  // namespace peakmem
