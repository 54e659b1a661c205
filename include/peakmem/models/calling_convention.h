// How the caller of a trace holds its arguments: who keeps a reference to
// each input while the trace runs decides when an input can be freed, so
// the runtime model needs it before the first statement.
#pragma once

#include <string_view>

#include "peakmem/ir/trace.h"

namespace peakmem {

enum class CallingConvention {
  kAuto,      // backward if the signature is Thunder's backward_fn(saved_for_backward, cotangents)
  kForward,   // the caller holds every argument for the whole call; collections are
              // the containers the trace says (tuples where it does not say)
  kBackward,  // Thunder's autograd: fn([saved_tensors_list, saved_other], cotangents_list);
              // only those lists (and the caller's locals naming them) hold the tensors
  kPlain,     // the caller holds every argument, and every collection is a tuple
              // (nothing can be cleared); for traces from elsewhere
};

const char* CallingConventionName(CallingConvention convention);
// Parses "auto", "forward", "backward", "plain"; returns false otherwise.
bool ParseCallingConvention(std::string_view text, CallingConvention* out);
// kBackward for Thunder's backward signature (saved_for_backward, cotangents),
// else kForward.
CallingConvention InferCallingConvention(const Trace& trace);

}  // namespace peakmem
