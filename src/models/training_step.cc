#include "peakmem/models/training_step.h"

#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

#include "peakmem/models/model_choice.h"
#include "peakmem/models/step_stream.h"
#include "peakmem/report/attribution.h"
#include "peakmem/sim/alloc_stream.h"

namespace peakmem {
namespace {

struct Returned {
  StorageId storage = kNoStorage;
  std::int64_t bytes = 0;
  const std::vector<std::int64_t>* strides = nullptr;
  const std::vector<std::int64_t>* shape = nullptr;
  StorageRole role = StorageRole::kIntermediate;
};

std::unordered_map<std::string_view, Returned> ByName(const Report& report) {
  std::unordered_map<std::string_view, Returned> out;
  for (const ReturnedTensor& t : report.returned_tensors) {
    out[t.name] = {t.storage, t.storage_bytes, &t.strides, &t.shape, t.role};
  }
  return out;
}

const Returned& Find(const std::unordered_map<std::string_view, Returned>& returned,
                     const std::string& name, const char* what) {
  auto it = returned.find(name);
  if (it == returned.end()) {
    throw std::runtime_error(std::string(what) + " " + name + " is not returned by the forward");
  }
  return it->second;
}

// The backward's argument_tensors for the saved tensors, and the bytes of
// the storages it owns (each forward storage once): a saved parameter, input
// or output is that tensor (external); saved views of one forward storage
// are one storage with the forward's strides.
std::int64_t SavedIdentity(const TrainingStepSpec& spec,
                           const std::unordered_map<std::string_view, Returned>& returned,
                           std::vector<ArgumentTensor>* out) {
  const std::set<std::string_view> outputs(spec.outputs.begin(), spec.outputs.end());
  std::unordered_map<StorageId, int> groups;
  std::int64_t own = 0;
  for (const std::string& name : spec.saved) {
    const Returned& r = Find(returned, name, "the backward's saved tensor");
    if (r.role == StorageRole::kArgument || outputs.count(name)) {
      out->push_back({name, true, -1, 0, *r.strides});
      continue;
    }
    auto [it, fresh] = groups.emplace(r.storage, static_cast<int>(groups.size()));
    if (fresh) own += r.bytes;
    out->push_back({name, false, it->second, r.bytes, *r.strides});
  }
  return own;
}

// A gradient the backward returns, as AccumulateGrad takes it.
struct Gradient {
  std::string_view name;       // the backward's value
  StorageId storage = kNoStorage;  // the backward's storage
  // Into an empty .grad: a gradient laid out unlike its parameter is copied
  // to the parameter's strides, not stolen (accumulate_grad.h:
  // obeys_layout_contract, clone_obey_contract): the copy's bytes (0: stolen).
  std::int64_t copy_bytes = 0;
  std::string_view module;  // its own, else its parameter's (StepSpec::value_modules)
};

// The gradients the backward returns, in the forward's argument order.
std::vector<Gradient> Gradients(const TrainingStepSpec& spec, const Report& bw,
                                const std::unordered_map<std::string_view, Returned>& fw) {
  const auto by_bw = ByName(bw);
  if (spec.grads.size() != spec.flat_args.size()) {
    throw std::runtime_error("the backward returns " + std::to_string(spec.grads.size()) +
                             " gradients for the forward's " + std::to_string(spec.flat_args.size()) +
                             " arguments");
  }
  std::vector<Gradient> out;
  for (std::size_t i = 0; i < spec.grads.size(); ++i) {
    const std::string& g = spec.grads[i];
    if (g.empty()) continue;
    const std::string& arg = spec.flat_args[i];
    auto it = by_bw.find(g);
    if (it == by_bw.end()) throw std::runtime_error("the backward does not return the gradient " + g);
    const Returned& r = it->second;
    if (r.role != StorageRole::kIntermediate) {
      throw std::invalid_argument("the gradient of " + arg + " (" + g +
                                  ") is a view of a tensor the step holds elsewhere (" +
                                  StorageRoleName(r.role) +
                                  "); AccumulateGrad would clone it: not modelled yet");
    }
    const Returned& param = Find(fw, arg, "the argument");
    Gradient out_g{g, r.storage, 0, ModuleOf(spec.value_modules, g)};
    if (out_g.module.empty()) out_g.module = ModuleOf(spec.value_modules, arg);
    const std::vector<std::int64_t>& shape = *r.shape;
    for (std::size_t d = 0; d < shape.size() && d < r.strides->size() && d < param.strides->size(); ++d) {
      if (shape[d] != 1 && (*r.strides)[d] != (*param.strides)[d]) {
        out_g.copy_bytes = param.bytes;  // a dense copy in the parameter's layout
        break;
      }
    }
    for (const Gradient& other : out) {
      if (other.storage == r.storage) {
        throw std::invalid_argument("the gradients of two arguments share " + g +
                                    "'s storage: AccumulateGrad would clone one of them; not "
                                    "modelled yet");
      }
    }
    out.push_back(out_g);
  }
  return out;
}

// The bytes of the storages a run's caller passed (made before its first statement).
std::int64_t ArgumentBytes(const Report& report) {
  std::int64_t bytes = 0;
  for (const StorageRecord& s : report.alloc_log->storages)
    if (s.made_at == kBeforeFirstStep) bytes += s.bytes;
  return bytes;
}

std::string Label(std::string_view phase, int iteration) {
  return std::string(phase) + " " + std::to_string(iteration);
}

RuntimeOptions Options(CallingConvention convention, const TrainingStepSpec& spec) {
  RuntimeOptions options;
  options.convention = convention;
  options.cpu_threads = spec.cpu_threads;
  return options;
}

}  // namespace

std::int64_t BackwardArgumentTensors(const TrainingStepSpec& spec, const Report& forward,
                                     std::vector<ArgumentTensor>* out) {
  const std::int64_t own = SavedIdentity(spec, ByName(forward), out);
  for (const std::string& name : spec.cotangents) out->push_back({name, true, -1, 0, {}});
  return own;
}

TrainingStepResult SimulateTrainingStep(const ParsedTrace& forward, const ParsedTrace& backward,
                                        const ParsedTrace* optimizer_first,
                                        const ParsedTrace* optimizer_later,
                                        const TrainingStepSpec& spec, bool events,
                                        const AllocatorOptions& allocator) {
  if (spec.steps < 1) throw std::invalid_argument("steps must be >= 1");
  if (optimizer_first && spec.steps > 1 && !optimizer_later) {
    throw std::invalid_argument("a step with an optimizer run more than once needs its later step() program");
  }
  // Each program's own run, keeping its stream (the step replays it); with
  // `events`, also its rows and what is live at its peak.
  ReportOptions report_options;
  report_options.returned_tensors = true;
  report_options.alloc_log = true;
  report_options.steps = events;
  report_options.breakdown = events;
  report_options.live_at_peak = events;
  TrainingStepResult out;
  out.forward = Analyze(forward, "runtime", Options(CallingConvention::kForward, spec), report_options);
  const auto returned = ByName(out.forward);
  // The backward, its saved tensors the forward's; autograd holds the cotangents.
  RuntimeOptions bw_options = Options(CallingConvention::kBackward, spec);
  BackwardArgumentTensors(spec, out.forward, &bw_options.argument_tensors);
  out.backward = Analyze(backward, "runtime", bw_options, report_options);
  const std::vector<Gradient> gradients = Gradients(spec, out.backward, returned);
  for (const Gradient& g : gradients) out.grad_bytes += out.backward.alloc_log->storages[g.storage].bytes;
  // The loss (the forward's outputs that are not its arguments) and the
  // saved tensors the forward owns, as the forward's storages.
  std::set<StorageId> loss, saved;
  for (const std::string& name : spec.outputs) {
    const Returned& r = Find(returned, name, "the output");
    if (r.role != StorageRole::kArgument) loss.insert(r.storage);
  }
  for (const std::string& name : spec.saved) {
    const Returned& r = returned.at(name);
    if (r.role != StorageRole::kArgument && !loss.count(r.storage)) saved.insert(r.storage);
  }
  // The optimizer's step() programs: the parameters, their .grad and the state kept are arguments.
  const std::set<std::string_view> state_names(spec.optimizer_state.begin(), spec.optimizer_state.end());
  if (optimizer_first) {
    if (spec.trainable_bytes >= 0 && spec.trainable_bytes != out.grad_bytes) {
      throw std::invalid_argument(
          "the backward returns " + std::to_string(out.grad_bytes) +
          " bytes of gradients, the trainable parameters hold " + std::to_string(spec.trainable_bytes) +
          ": a parameter without a gradient, or an input that requires one, is not modelled yet "
          "with an optimizer");
    }
    const RuntimeOptions plain = Options(CallingConvention::kPlain, spec);
    out.optimizer_first = Analyze(*optimizer_first, "runtime", plain, report_options);
    if (!out.optimizer_first->diagnostics.empty()) {  // the program is peakmem's own: every op must be known
      throw std::runtime_error("the " + spec.optimizer_name +
                               " step program: " + out.optimizer_first->diagnostics[0]);
    }
    if (spec.steps > 1) out.optimizer_later = Analyze(*optimizer_later, "runtime", plain, report_options);
  }
  const std::int64_t forward_arguments = ArgumentBytes(out.forward);
  if (spec.parameter_bytes + spec.input_bytes < forward_arguments) {
    throw std::runtime_error(
        "the forward's arguments hold " + std::to_string(forward_arguments) +
        " bytes, more than the module's parameters and buffers (" + std::to_string(spec.parameter_bytes) +
        ") and the inputs (" + std::to_string(spec.input_bytes) +
        "): tensors passed twice (tied weights) are not modelled yet");
  }

  // The stream. Before the first statement: the module's parameters and
  // buffers (each storage), then the inputs, on the forward's device.
  StepStream stream(events);
  std::uint8_t device = 0;
  for (const StorageRecord& r : out.forward.alloc_log->storages) {
    if (r.made_at == kBeforeFirstStep) {
      device = stream.Device(out.forward.alloc_log->devices[r.device]);
      break;
    }
  }
  std::int64_t held_bytes = 0;
  for (const TrainingStepSpec::HeldTensor& t : spec.held) {
    stream.Alloc(t.bytes, "parameter of " + (t.module.empty() ? std::string("the module") : t.module),
                 StorageRole::kArgument, kParameters, t.module, device);
    held_bytes += t.bytes;
  }
  if (held_bytes != spec.parameter_bytes) {  // the spec names no storage (or not every one): the rest as one
    stream.Alloc(spec.parameter_bytes - held_bytes, "parameters", StorageRole::kArgument, kParameters, "", device);
  }
  std::int64_t input_bytes = 0;
  for (const std::int64_t bytes : spec.input_storages) {
    stream.Alloc(bytes, "input", StorageRole::kArgument, kInputs, "", device);
    input_bytes += bytes;
  }
  if (input_bytes != spec.input_bytes) {
    stream.Alloc(spec.input_bytes - input_bytes, "inputs", StorageRole::kArgument, kInputs, "", device);
  }
  const auto held_elsewhere = [](StorageId) { return kNoStorage; };
  const auto no_module = [](StorageId) { return std::string_view(); };
  const auto alive_among = [&](const std::vector<StorageId>& ids, auto keep) {
    for (std::size_t local = 0; local < ids.size(); ++local) {
      if (ids[local] != kNoStorage && stream.alive(ids[local]) && !keep(local)) stream.Free(ids[local]);
    }
  };

  std::vector<ReportPhase> phases;
  std::vector<StorageId> grads;  // .grad, one storage a gradient (empty: none)
  std::vector<StorageId> first_state;  // what the optimizer's first step() left: its state
  for (int k = 1; k <= spec.steps; ++k) {
    // The forward: its arguments are the held tensors.
    TrainingStepPhase fw_phase{"forward", k, 0, 0, stream.live(kGradients), stream.live(kOptimizerState)};
    fw_phase.first = stream.next_step();
    fw_phase.around = stream.live() - forward_arguments;
    const std::vector<StorageId> fw_ids = stream.Run(
        out.forward, Label("forward", k), held_elsewhere,
        [&](StorageId local) { return saved.count(local) ? kActivations : kTemporaries; }, spec.value_modules,
        no_module);
    fw_phase.end = stream.next_step();
    out.phases.push_back(fw_phase);

    // loss.backward(): the cotangent, then the backward, whose saved
    // tensors are the forward's (those held elsewhere cost it nothing).
    TrainingStepPhase bw_phase{"backward", k, 1, 0, stream.live(kGradients), stream.live(kOptimizerState)};
    bw_phase.first = stream.next_step();
    stream.Begin();
    StorageId cotangent = kNoStorage;
    if (spec.cotangent_bytes > 0) {
      cotangent = stream.Alloc(spec.cotangent_bytes, "cotangent", StorageRole::kIntermediate, kTemporaries, "", device);
    }
    stream.End(Label("backward", k), "loss.backward", "the cotangent, torch.ones_like(loss)", 0);
    bw_phase.around = stream.live() - ArgumentBytes(out.backward);
    const AllocLog& bw_log = *out.backward.alloc_log;
    std::unordered_map<StorageId, std::string_view> bw_grads;  // the backward's storage -> its module
    for (const Gradient& g : gradients) bw_grads.emplace(g.storage, g.module);
    const std::vector<StorageId> bw_ids = stream.Run(
        out.backward, Label("backward", k),
        [&](StorageId local) {
          if (bw_log.storages[local].bytes == 0) return kNoStorage;  // external: a parameter, input or the loss
          return fw_ids[Find(returned, std::string(bw_log.storage_names[local]), "the backward's saved tensor").storage];
        },
        [&](StorageId local) { return bw_grads.count(local) ? kGradients : kTemporaries; }, spec.value_modules,
        [&](StorageId local) {  // a gradient is its parameter's module's
          auto it = bw_grads.find(local);
          return it == bw_grads.end() ? std::string_view() : it->second;
        });
    // AccumulateGrad, one gradient at a time: into an empty .grad each is
    // stolen or copied to its parameter's layout; into an existing one it
    // is added in place and freed. Then what the backward still held and
    // the cotangent go; the loss stays until step() returns.
    stream.Begin();
    const bool fresh = grads.empty();
    for (const Gradient& g : gradients) {
      const StorageId made = bw_ids[g.storage];
      if (!fresh) {
        stream.Free(made);
      } else if (g.copy_bytes > 0) {
        grads.push_back(stream.Alloc(g.copy_bytes, g.name, StorageRole::kIntermediate, kGradients, g.module, device));
        stream.Free(made);
      } else {
        grads.push_back(made);
      }
    }
    const std::set<StorageId> kept(grads.begin(), grads.end());
    alive_among(bw_ids, [&](std::size_t local) { return kept.count(bw_ids[local]) > 0; });
    alive_among(fw_ids, [&](std::size_t local) { return loss.count(static_cast<StorageId>(local)) > 0; });
    if (cotangent != kNoStorage) stream.Free(cotangent);
    stream.End(Label("backward", k), "AccumulateGrad", "the gradients into .grad; the backward's own tensors and the cotangent released", 0);
    bw_phase.end = stream.next_step();
    out.phases.push_back(bw_phase);

    // optimizer.step(): the parameters, their .grad and the state are its
    // arguments; the first one's leftovers are the state, kept from then on.
    TrainingStepPhase opt_phase{"optimizer", k, k == 1 ? 2 : 3, 0, stream.live(kGradients),
                                stream.live(kOptimizerState)};
    opt_phase.first = stream.next_step();
    std::vector<StorageId> opt_ids;
    if (optimizer_first) {
      const Report& program = k == 1 ? *out.optimizer_first : *out.optimizer_later;
      opt_phase.around = stream.live() - ArgumentBytes(program);
      opt_ids = stream.Run(
          program, Label("optimizer", k), held_elsewhere,
          [&](StorageId local) {
            return state_names.count(program.alloc_log->storage_names[local]) ? kOptimizerState : kTemporaries;
          },
          spec.optimizer_modules, no_module);
    }
    // step() returns: zero_grad(set_to_none=True) drops .grad; the loss dies.
    stream.Begin();
    if (optimizer_first && k > 1) alive_among(opt_ids, [](std::size_t) { return false; });
    if (spec.zero_grad) {
      for (const StorageId g : grads) stream.Free(g);
      grads.clear();
    }
    for (const StorageId local : loss) stream.Free(fw_ids[local]);
    stream.End(Label(optimizer_first ? "optimizer" : "backward", k), "step() returns",
               spec.zero_grad ? "zero_grad(set_to_none=True); the loss released" : "the loss released", 0);
    if (optimizer_first) {
      opt_phase.end = stream.next_step();
      out.phases.push_back(opt_phase);
    } else {
      out.phases.back().end = stream.next_step();
    }
  }

  // The numbers, from the stream.
  for (const TrainingStepPhase& p : out.phases) phases.push_back({p.phase, p.step, p.first, p.end});
  FinishTrainingStep(stream, phases, !spec.value_modules.empty(), allocator, &out);
  out.step.distribution = out.forward.distribution;
  return out;
}

}  // namespace peakmem
