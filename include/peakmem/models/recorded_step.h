// A recorded step (ir/recorded_step.h: what the eager front end saw) as
// the step's allocation event stream (step_stream.h), so the result is
// read, reported and priced by the allocator models exactly as a traced
// step's is.
#pragma once

#include "peakmem/allocators/allocator_choice.h"
#include "peakmem/ir/recorded_step.h"
#include "peakmem/models/training_step.h"

namespace peakmem {

// The recorded step as one event stream. `events`: keep its rows and log
// (what writers and timelines read). The result's forward and backward
// reports are empty (there are no traces); `step`, the numbers, the phases
// and the allocator pricing are filled as SimulateTrainingStep fills them.
// Throws std::invalid_argument, naming the statement, for a record that
// is not a valid stream (an index out of range, a storage allocated twice,
// a free of a storage not alive, a category or phase out of range).
TrainingStepResult SimulateRecordedStep(const RecordedStep& step, bool events = false,
                                        const AllocatorOptions& allocator = {});

}  // namespace peakmem
