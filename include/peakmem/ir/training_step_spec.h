// What joins a training step's traces (models/training_step.h simulates
// the step): plain data, in ir/ so that its one JSON schema
// (frontend/step_spec_json.h), which the step file and the Python binding
// both read, fills it without the models.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace peakmem {

// What joins the traces: the names they use for what crosses between them,
// and what the step holds outside them.
struct TrainingStepSpec {
  // The forward's tensors saved for the backward, in the order the backward
  // unpacks them (the forward's return: `(saved_tensors, saved_other)`).
  std::vector<std::string> saved;
  // The forward's outputs (the loss): held until step() returns.
  std::vector<std::string> outputs;
  // The forward's flat arguments, in order; the backward returns one gradient
  // (or none) for each.
  std::vector<std::string> flat_args;
  // A flat argument that is the same tensor as an earlier one -> that one:
  // tied weights, one parameter reached by two module paths, which Thunder
  // passes once per path. One storage; autograd sums their gradients into
  // the earlier one's before AccumulateGrad.
  std::map<std::string, std::string, std::less<>> tied_args;
  // The backward's returned gradient for each flat argument ("" for none).
  std::vector<std::string> grads;
  // The backward's cotangent arguments: autograd holds them.
  std::vector<std::string> cotangents;
  std::int64_t cotangent_bytes = 0;  // torch.ones_like(loss)
  // Bytes of the distinct storages the module holds (parameters and
  // buffers) and the caller's input tensors.
  std::int64_t parameter_bytes = 0;
  std::int64_t input_bytes = 0;
  // With an optimizer: what its trainable parameters' gradients hold, each its
  // parameter's (local) elements times their size (-1: not checked),
  // the names its state has in its step() programs, and its class's name.
  std::int64_t trainable_bytes = -1;
  std::vector<std::string> optimizer_state;
  std::string optimizer_name;
  int steps = 1;
  bool zero_grad = true;
  int cpu_threads = 0;  // RuntimeOptions::cpu_threads
  // The target device whose kernels run the step (RuntimeOptions::context,
  // semantics/execution_context.h's ParseTargetDevice); empty: as traced.
  std::string device;
  // Each forward and backward value's nn.Module path ("" for the top),
  // for the breakdown by module (python/peakmem/module_paths.py); empty: none.
  std::map<std::string, std::string, std::less<>> value_modules;
  // The same for the optimizer programs' values (a parameter's state and
  // temporaries: the parameter's module).
  std::map<std::string, std::string, std::less<>> optimizer_modules;
  // The module path of each parameter or buffer storage the module holds,
  // its bytes, and whether the optimizer trains it (in the optimizer's
  // order: the backward's gradients and the state follow it).
  struct HeldTensor {
    std::string module;
    std::int64_t bytes = 0;
    bool trainable = false;
    bool operator==(const HeldTensor&) const = default;
  };
  std::vector<HeldTensor> held;
  // The caller's input tensors' storages, each its bytes (empty: one storage
  // of input_bytes). They are allocated before the step, after `held`.
  std::vector<std::int64_t> input_storages;

  bool operator==(const TrainingStepSpec&) const = default;
};

}  // namespace peakmem
