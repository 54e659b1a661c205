// The `thunder` model: Thunder's own estimator, reproduced exactly.
//
// Mirrors `thunder.examine.memory_calculation.get_alloc_memory`
// (lightning-thunder 0.2.6, the release pinned by this project):
//   1. Every tensor leaf of the arguments (collections flattened depth first)
//      is counted up front with two references (the function's and the
//      caller's); key "argument x".
//   2. unpack_trivial, unpack_sequence and return are skipped (no peak update).
//   3. Ops in Thunder's alias list (`ThunderAliasOps`, the op registry's
//      thunder_alias flag) allocate nothing; their
//      outputs share the first argument's reference count.
//   4. `del x` drops one reference per tensor; at zero the *original* tensor's
//      size is freed; key "python_del x".
//   5. `clear_mutable_collection(c)` drops one reference of each direct tensor
//      element, but only when `c` is a signature argument and a mutable
//      container; key "clear_mutable_collection x".
//   6. Every other op allocates all its tensor outputs (even an output that is
//      an input); key "{symbol name} {output names}".
//   The peak starts at 0 and is updated after each op that is not skipped, so
//   the arguments alone never set it.
// Assumption where the printed trace is silent: a collection argument whose
// container type is unknown is a list (Thunder calls backward with lists).
#pragma once

#include <string_view>
#include <vector>

#include "peakmem/report/report.h"
#include "peakmem/ir/parsed_trace.h"

namespace peakmem {

// Runs the model. Throws TraceError where Thunder's function would fail or
// where a size cannot be determined.
Report RunThunderModel(const ParsedTrace& parsed, const ReportOptions& report_options = {});

}  // namespace peakmem
