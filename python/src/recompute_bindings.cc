// peakmem._core's recomputation bindings: the candidates
// planning/step_recompute.h lists, for python/peakmem/recompute.py, which
// rewrites Thunder's live traces with them (one set of rules, in C++).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <vector>

#include "live_reader.h"
#include "peakmem/frontend/frontend.h"
#include "peakmem/frontend/step_file.h"
#include "peakmem/planning/step_recompute.h"

namespace nb = nanobind;

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
          nb::dict d;
          d["name"] = c.name;
          d["flops"] = c.flops;
          d["expensive"] = c.expensive;
          d["dropped"] = nb::cast(c.dropped);
          d["steps"] = steps;
          out.append(d);
        }
        return out;
      },
      nb::arg("forward"), nb::arg("saved"), nb::arg("outputs"), nb::arg("flat_args"),
      "The recomputation candidates of a forward trace (a live TraceCtx or its printed text) "
      "with that saved list, outputs and flat arguments (planning/step_recompute.h "
      "RecomputeCandidates: the cheap ones, then the regions named with a trailing '+'), each a dict: "
      "name, flops, expensive, dropped (the saved tensors it drops) and steps, the forward statements "
      "it runs again in forward order, each (statement index, input names, output names).");
}
