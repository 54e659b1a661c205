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

// One forward statement a candidate runs again in the backward: its index,
// the tensors it reads and the values it makes.
struct RecomputeStep {
  std::size_t statement = 0;
  std::vector<std::string> inputs, outputs;
};

// What the backward could make again instead of the forward saving it
// (recompute.candidates, same rules, same order). Cheap candidates first,
// in the order of the saved list: a saved tensor (not a forward output or
// flat argument) made by a single-output op the registry recomputes as a
// view or a per-element op (RecomputeCostOf) from tensors only. Then the
// expensive ones (recompute_search.h's tiers), in the order of the saved
// list: a saved tensor's region, named by it with a trailing `+`: the saved
// tensors sharing its storage (made from it, or it from them, by views and
// shallow_copy) dropped together, each made again by its statement, and
// every statement that makes an input the region lacks made again too,
// back to the inputs the backward has (other saved tensors, forward
// arguments and outputs); every statement recomputable (contractions and
// softmax included: RecomputeCostOf), from tensors only. A region that is
// some cheap candidate exactly, or another region exactly, is not listed
// again; nor one whose storage is a forward argument's or output's (dropping
// it frees nothing).
struct RecomputeCandidate {
  std::string name;
  std::int64_t flops = 0;             // summed over its steps (semantics' RecomputeFlops)
  bool expensive = false;             // the expensive tier
  std::vector<std::string> dropped;   // the saved tensors it drops (a cheap one: itself)
  std::vector<RecomputeStep> steps;   // in forward order
};

// The step's candidates, as above.
std::vector<RecomputeCandidate> RecomputeCandidates(const StepFile& step);

// What recomputing `chosen` (indices into `pool`) takes (recompute._closure):
// the saved list without what they drop, in order, then each input a
// recomputed statement reads that the backward would lack (in the forward
// order of the statements, each statement once however many candidates
// run it); and those statements in forward order.
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
