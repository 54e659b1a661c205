#include "peakmem/models/calling_convention.h"

namespace peakmem {

const char* CallingConventionName(CallingConvention convention) {
  switch (convention) {
    case CallingConvention::kAuto: return "auto";
    case CallingConvention::kForward: return "forward";
    case CallingConvention::kBackward: return "backward";
    case CallingConvention::kPlain: return "plain";
  }
  return "?";
}

bool ParseCallingConvention(std::string_view text, CallingConvention* out) {
  for (CallingConvention c : {CallingConvention::kAuto, CallingConvention::kForward,
                              CallingConvention::kBackward, CallingConvention::kPlain}) {
    if (text == CallingConventionName(c)) {
      *out = c;
      return true;
    }
  }
  return false;
}

CallingConvention InferCallingConvention(const Trace& trace) {
  if (trace.params.size() == 2 && trace.value(trace.params[0].value).name == "saved_for_backward" &&
      trace.value(trace.params[1].value).name == "cotangents") {
    return CallingConvention::kBackward;
  }
  return CallingConvention::kForward;
}

}  // namespace peakmem
