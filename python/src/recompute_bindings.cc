// peakmem._core's recomputation bindings: the candidates
// planning/step_recompute.h lists and recompute_search.h's greedy rounds,
// for python/peakmem/recompute.py, which rewrites Thunder's live traces with
// them (one set of rules, in C++).
#include <nanobind/nanobind.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "live_reader.h"
#include "peakmem/frontend/frontend.h"
#include "peakmem/frontend/step_file.h"
#include "peakmem/planning/recompute_search.h"
#include "peakmem/planning/save_search.h"
#include "peakmem/planning/step_recompute.h"

namespace peakmem_python {

void BindRecompute(nb::module_& m) {
  m.def(
      "recompute_candidates",
      [](nb::handle forward, std::vector<std::string> saved, std::vector<std::string> outputs,
         std::vector<std::string> flat_args) {
        peakmem::StepFile step;
        step.forward = nb::isinstance<nb::str>(forward)
                           ? peakmem::ParseTrace("<forward>", nb::cast<std::string>(forward))
                           : peakmem_python::ReadLiveTrace(forward);
        step.spec.saved = std::move(saved);
        step.spec.outputs = std::move(outputs);
        step.spec.flat_args = std::move(flat_args);
        nb::list out;
        for (const peakmem::RecomputeCandidate& c : peakmem::RecomputeCandidates(step)) {
          nb::list steps;
          for (const peakmem::RecomputeStep& s : c.steps) {
            steps.append(nb::make_tuple(s.statement, nb::cast(s.inputs), nb::cast(s.outputs)));
          }
          out.append(DictOf("name", c.name, "flops", c.flops, "expensive", c.expensive, "dropped", c.dropped,
                            "steps", steps));
        }
        return out;
      },
      nb::arg("forward"), nb::arg("saved"), nb::arg("outputs"), nb::arg("flat_args"),
      "The recomputation candidates of a forward trace (a live TraceCtx or its printed text) "
      "with that saved list, outputs and flat arguments (planning/step_recompute.h "
      "RecomputeCandidates: the cheap ones, then the regions named with a trailing '+'), each a dict: "
      "name, flops, expensive, dropped (the saved tensors it drops) and steps, the forward statements "
      "it runs again in forward order, each (statement index, input names, output names).");

  m.def(
      "recompute_search",
      [](const std::vector<std::int64_t>& flops,
         const std::function<std::int64_t(const std::vector<std::size_t>&)>& simulate,
         std::optional<std::int64_t> budget, std::size_t max_simulations,
         std::optional<std::function<bool()>> should_stop, const std::vector<int>& expensive) {
        peakmem::RecomputeSearchOptions options;
        options.budget = budget;
        options.max_simulations = max_simulations;
        const peakmem::RecomputeSearchResult r =
            peakmem::SearchRecomputation(flops, simulate, options, should_stop.value_or(std::function<bool()>()),
                                      std::vector<bool>(expensive.begin(), expensive.end()));
        return DictOf("chosen", r.chosen, "peaks", r.peaks, "peak_before", r.peak_before, "peak_after",
                      r.peak_after, "added_flops", r.added_flops, "simulations", r.simulations,
                      "simulation_limit_reached", r.simulation_limit_reached, "stopped", r.stopped,
                      "expensive_tier", r.expensive_tier);
      },
      nb::arg("flops"), nb::arg("simulate"), nb::arg("budget").none(), nb::arg("max_simulations"),
      nb::arg("should_stop").none(), nb::arg("expensive") = std::vector<int>(),
      "The greedy recomputation search (planning/recompute_search.h): `flops` per candidate, "
      "`simulate(chosen)` the step's peak with those candidate indices recomputed (first with none), "
      "`should_stop()` (or None) asked before each later simulation, `expensive` which candidates are of "
      "the expensive tier. Returns a dict: chosen (in the "
      "order chosen), peaks (after each), peak_before, peak_after, added_flops, simulations, "
      "simulation_limit_reached, stopped, expensive_tier.");

  m.def(
      "save_search",
      [](const std::vector<std::tuple<std::int64_t, std::int64_t, std::vector<std::size_t>, int>>& candidates,
         const std::function<std::int64_t(const std::vector<bool>&)>& simulate, std::optional<std::int64_t> budget,
         std::size_t max_simulations) {
        std::vector<peakmem::SaveCandidate> given;
        for (const auto& [flops, bytes, members, tier] : candidates) given.push_back({flops, bytes, members, tier});
        const peakmem::SaveSearchResult r = peakmem::SearchSaves(given, simulate, {budget, max_simulations});
        return DictOf("kept", r.kept, "lowest_peak", r.lowest_peak, "peak", r.peak, "added_flops", r.added_flops,
                      "simulations", r.simulations, "fits", r.fits, "simulation_limit_reached",
                      r.simulation_limit_reached);
      },
      nb::arg("candidates"), nb::arg("simulate"), nb::arg("budget").none(), nb::arg("max_simulations") = 5000,
      "The save search (planning/save_search.h): `candidates` each (flops, bytes, members, tier), "
      "`simulate(kept)` the step's peak with the candidates kept saved (a list of bools), the rest "
      "recomputed; first with none kept; `budget` None: the lowest peak. Returns a dict: kept, lowest_peak, peak, added_flops, "
      "simulations, fits, simulation_limit_reached. ValueError for negative flops, an unknown member or "
      "max_simulations 0.");
}

}  // namespace peakmem_python
