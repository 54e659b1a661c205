// The library's front door: load a trace from a file or text
// (frontend/frontend.h: LoadTrace, ParseTrace), run a model on it
// (models/model_choice.h: Analyze, Simulator), get a Report. The CLI and
// the Python extension call these, the writer registry and the allocator
// models; nothing below this header includes it (docs/design.md).
#pragma once

#include "peakmem/frontend/frontend.h"
#include "peakmem/models/model_choice.h"
#include "peakmem/models/runtime_model.h"
#include "peakmem/report/report.h"
