// What each op does to memory, as data.
//
// One table, keyed by the symbol name Thunder reports (the callee's last
// dotted component: `torch.nn.functional.linear` -> `linear`), says whether an
// op allocates new outputs, returns views of its first tensor input, returns
// an input itself, or works in place. Models consult this table instead of
// spreading op names through their code. An op not in the table is reported
// in the diagnostics of every model and treated as allocating its outputs.
#pragma once

#include <string_view>
#include <vector>

namespace peakmem {

enum class OpEffect : unsigned char {
  kAllocates,     // every tensor output is a fresh storage
  kViewOfInput,   // outputs share the first tensor argument's storage
  kMaybeView,     // reshape/contiguous/to: a view or a copy, by layout
  kReturnsInput,  // the output is an input object (copy_ returns its destination)
  kInPlace,       // mutates an input, allocates nothing (add_, ...)
  kNoOutput,      // no tensor outputs (bookkeeping ops)
  kFusion,        // a fusion region (nvFusionN, TorchCompileN): allocates its outputs
};

struct OpInfo {
  std::string_view name;
  OpEffect effect;
};

// The op's entry, or nullptr when peakmem does not know the op. Fusion
// regions are recognised by name pattern (`nvFusion3`, `TorchCompile0`).
const OpInfo* FindOp(std::string_view symbol_name);

const std::vector<OpInfo>& AllOps();

}  // namespace peakmem
