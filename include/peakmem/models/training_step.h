// One training step as one program: the forward, the backward, gradient
// accumulation and the optimizer's step(), `steps` times in a row, simulated
// by the runtime model and joined with the identity of every tensor carried
// across them (python/peakmem/step.py's module docstring states the step and
// the rules; this is where they are implemented, for estimate_step and for
// `peakmem step STEP.json` alike).
//
// The step, as measure_step runs it:
//
//   loss = model(*inputs)        # the forward trace; the caller holds every argument
//   loss.backward()              # the backward trace, called as Thunder's autograd
//                                # function calls it; AccumulateGrad into .grad
//   optimizer.step()             # peakmem.optimizer_program's program
//   optimizer.zero_grad(set_to_none=True)   # when zero_grad
//
// with the parameters, buffers and inputs held throughout.
//
// The step is one allocation event stream (sim/alloc_events.h), emitted in
// the order the step runs: the held tensors, then for each iteration the
// forward's events, the cotangent, the backward's (a saved tensor it frees
// is the forward's storage), AccumulateGrad (a layout copy is an
// allocation, a stolen gradient none, one added into .grad is freed), what
// the backward leaves, the optimizer's step() and zero_grad. Its peak,
// final bytes, categories and modules are read from that stream, and
// TrainingStepResult::step is a Report of it, so every writer and allocator
// model that takes a trace's report takes the step.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "peakmem/allocators/allocator_choice.h"
#include "peakmem/ir/parsed_trace.h"
#include "peakmem/ir/training_step_spec.h"
#include "peakmem/models/runtime_model.h"
#include "peakmem/report/report.h"

namespace peakmem {

// One trace run of the step, as the timeline shows it.
struct TrainingStepPhase {
  std::string phase;  // "forward", "backward" or "optimizer"
  int step = 1;       // 1-based
  // Which report ran: 0 the forward, 1 the backward, 2 the optimizer's
  // first step() (it makes the state), 3 a later one.
  int program = 0;
  std::int64_t around = 0;           // bytes held beside the trace's own
  std::int64_t gradients = 0;        // of them, .grad kept from earlier steps
  std::int64_t optimizer_state = 0;  // and the optimizer's state
  // The statements of TrainingStepResult::step this phase spans, [first,
  // end): the trace's statements and, after them, the step's own moments
  // (the cotangent before the backward, AccumulateGrad after it, zero_grad
  // after the optimizer).
  std::int32_t first = 0, end = 0;
  // The highest live bytes of the step inside [first, end), scratch
  // included: the phase's peak, read off the step's one stream.
  std::int64_t peak = 0;
};

struct TrainingStepResult {
  std::int64_t peak_bytes = 0;
  std::int64_t final_bytes = 0;
  std::string phase_at_peak = "forward";
  int step_at_peak = 1;
  // The bytes held at the peak by category: parameters, inputs, gradients,
  // optimizer_state, activations, temporaries (they sum to peak_bytes).
  std::vector<std::pair<std::string, std::int64_t>> by_category;
  // The same by nn.Module path (empty without TrainingStepSpec::value_modules),
  // largest first; "" is the top module (the loss, the cotangent, inputs).
  std::vector<std::pair<std::string, std::int64_t>> by_module;
  Report forward, backward;
  std::optional<Report> optimizer_first, optimizer_later;
  std::vector<TrainingStepPhase> phases;
  std::int64_t grad_bytes = 0;  // the gradients the backward returns
  // The whole step as one program (model "runtime", convention "step"): its
  // statements are every phase's, in the order the step runs them, named
  // "<phase> <iteration>: <statement>" in Step::source, plus the step's own
  // moments (op "loss.backward", "AccumulateGrad", "step() returns"); its
  // storages carry kStepCategories (Report::storage_categories) and its
  // phases Report::phases. With `events`, it keeps the stream (alloc_log),
  // its per-statement rows and what is live at the peak; the allocator
  // asked for ran over the stream (Report::allocator).
  Report step;
};

// The backward's argument tensors as the step passes them
// (RuntimeOptions::argument_tensors): each saved tensor the forward's own
// (a parameter, input or output is external; saved views of one forward
// storage are one storage with the forward's strides), and the cotangents
// autograd holds. `forward`: the forward's report with its returned
// tensors. Adds to `out`; returns the bytes of the storages the backward
// owns. Throws std::runtime_error for a saved tensor the forward does not return.
std::int64_t BackwardArgumentTensors(const TrainingStepSpec& spec, const Report& forward,
                                     std::vector<ArgumentTensor>* out);

// Simulates the step. `optimizer_first`/`optimizer_later`: the optimizer's
// first and later step() programs (null: no optimizer; `later` is needed
// when spec.steps > 1). `events`: TrainingStepResult::step keeps the
// stream and its rows (what writers and the timeline read); without, only
// the numbers are made. `allocator`: an allocator model other than
// requested bytes runs over the step's stream (Report::allocator of
// TrainingStepResult::step). Throws std::invalid_argument for a step peakmem
// does not model (a gradient that is a view of a held tensor, two gradients
// sharing a storage, gradients that do not match the trainable parameters)
// and TraceError / std::runtime_error for traces that do not fit together.
TrainingStepResult SimulateTrainingStep(const ParsedTrace& forward, const ParsedTrace& backward,
                                        const ParsedTrace* optimizer_first,
                                        const ParsedTrace* optimizer_later,
                                        const TrainingStepSpec& spec, bool events = false,
                                        const AllocatorOptions& allocator = {});

}  // namespace peakmem
