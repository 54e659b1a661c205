#include "peakmem/models/training_step.h"

#include <algorithm>
#include <array>
#include <map>
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
  // A tied argument's gradient (TrainingStepSpec::tied_args): the engine
  // adds it in place into the earlier argument's, in AccumulateGrad's
  // input buffer (input_buffer.cpp, InputBuffer::add: the buffer holds the
  // only reference to a dense gradient), and frees it; that one goes on to
  // AccumulateGrad alone.
  bool tied = false;
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
    out_g.tied = spec.tied_args.count(arg) > 0;
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

// The forward's argument_tensors for tied arguments: each and the argument
// it is tied to share one storage group.
void TiedArgumentTensors(const TrainingStepSpec& spec, std::vector<ArgumentTensor>* out) {
  std::map<std::string_view, int> group_of;  // the earlier argument -> its group
  for (const auto& [arg, first] : spec.tied_args) {
    auto [it, fresh] = group_of.emplace(first, static_cast<int>(group_of.size()));
    if (fresh) out->push_back({first, false, it->second, -1, {}});
    out->push_back({arg, false, it->second, -1, {}});
  }
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
  std::string error;
  const std::optional<ExecutionContext> context = ParseTargetDevice(spec.device, &error);
  if (!context) throw std::invalid_argument("the step's device: " + error);
  options.context = *context;
  return options;
}


// One training step's simulation: each program's own run (RunPrograms),
// then the held tensors (HoldParametersAndInputs) and `spec.steps`
// iterations of forward, backward with AccumulateGrad, and
// optimizer.step(), replayed into one StepStream.
class StepSimulation {
 public:
  StepSimulation(const TrainingStepSpec& spec, bool events, TrainingStepResult* out)
      : spec_(spec), out_(*out), stream_(events), events_(events) {}

  void RunPrograms(const ParsedTrace& forward, const ParsedTrace& backward, const ParsedTrace* optimizer_first,
                   const ParsedTrace* optimizer_later);
  void HoldParametersAndInputs();
  void Forward(int k);
  void Backward(int k);
  void Optimizer(int k);
  StepStream& stream() { return stream_; }

 private:
  // Frees the storages among `ids` still alive, except those `keep(local)` holds on to.
  template <typename Keep>
  void FreeAliveAmong(const std::vector<StorageId>& ids, Keep keep) {
    for (std::size_t local = 0; local < ids.size(); ++local) {
      if (ids[local] != kNoStorage && stream_.alive(ids[local]) && !keep(local)) stream_.Free(ids[local]);
    }
  }
  TrainingStepPhase Phase(std::string_view name, int k, int order) {
    TrainingStepPhase phase{std::string(name), k, order, 0, stream_.live(kGradients), stream_.live(kOptimizerState)};
    phase.first = stream_.next_step();
    return phase;
  }

  const TrainingStepSpec& spec_;
  TrainingStepResult& out_;
  StepStream stream_;
  const bool events_;
  bool has_optimizer_ = false;
  std::unordered_map<std::string_view, Returned> returned_;  // the forward's returned tensors
  std::vector<Gradient> gradients_;
  std::set<StorageId> loss_, saved_;  // forward storages: the loss, the saved tensors it owns
  std::set<std::string_view> state_names_;
  std::int64_t forward_arguments_ = 0;
  std::uint8_t device_ = 0;
  std::vector<StorageId> fw_ids_;  // this iteration's forward storages in the stream
  std::vector<StorageId> grads_;   // .grad, one storage a gradient (empty: none)
};

void StepSimulation::RunPrograms(const ParsedTrace& forward, const ParsedTrace& backward,
                                 const ParsedTrace* optimizer_first, const ParsedTrace* optimizer_later) {
  // Each program's own run, keeping its stream (the step replays it); with
  // `events`, also its rows and what is live at its peak.
  ReportOptions report_options;
  report_options.returned_tensors = true;
  report_options.alloc_log = true;
  report_options.steps = events_;
  report_options.breakdown = events_;
  report_options.live_at_peak = events_;
  RuntimeOptions fw_options = Options(CallingConvention::kForward, spec_);
  TiedArgumentTensors(spec_, &fw_options.argument_tensors);
  out_.forward = Analyze(forward, "runtime", fw_options, report_options);
  returned_ = ByName(out_.forward);
  // The backward, its saved tensors the forward's; autograd holds the cotangents.
  RuntimeOptions bw_options = Options(CallingConvention::kBackward, spec_);
  BackwardArgumentTensors(spec_, out_.forward, &bw_options.argument_tensors);
  out_.backward = Analyze(backward, "runtime", bw_options, report_options);
  gradients_ = Gradients(spec_, out_.backward, returned_);
  for (const Gradient& g : gradients_) {
    if (!g.tied) out_.grad_bytes += out_.backward.alloc_log->storages[g.storage].bytes;
  }
  // The loss (the forward's outputs that are not its arguments) and the
  // saved tensors the forward owns, as the forward's storages.
  for (const std::string& name : spec_.outputs) {
    const Returned& r = Find(returned_, name, "the output");
    if (r.role != StorageRole::kArgument) loss_.insert(r.storage);
  }
  for (const std::string& name : spec_.saved) {
    const Returned& r = returned_.at(name);
    if (r.role != StorageRole::kArgument && !loss_.count(r.storage)) saved_.insert(r.storage);
  }
  // The optimizer's step() programs: the parameters, their .grad and the state kept are arguments.
  state_names_ = std::set<std::string_view>(spec_.optimizer_state.begin(), spec_.optimizer_state.end());
  has_optimizer_ = optimizer_first != nullptr;
  if (has_optimizer_) {
    if (spec_.trainable_bytes >= 0 && spec_.trainable_bytes != out_.grad_bytes) {
      throw std::invalid_argument(
          "the backward returns " + std::to_string(out_.grad_bytes) +
          " bytes of gradients, the trainable parameters hold " + std::to_string(spec_.trainable_bytes) +
          ": a parameter without a gradient, or an input that requires one, is not modelled yet "
          "with an optimizer");
    }
    RuntimeOptions plain = Options(CallingConvention::kPlain, spec_);
    plain.note_cpu_trace_on_cuda = false;  // peakmem's own program, for whichever device
    out_.optimizer_first = Analyze(*optimizer_first, "runtime", plain, report_options);
    if (!out_.optimizer_first->diagnostics.empty()) {  // the program is peakmem's own: every op must be known
      throw std::runtime_error("the " + spec_.optimizer_name +
                               " step program: " + out_.optimizer_first->diagnostics[0]);
    }
    if (spec_.steps > 1) out_.optimizer_later = Analyze(*optimizer_later, "runtime", plain, report_options);
  }
  forward_arguments_ = ArgumentBytes(out_.forward);
  if (spec_.parameter_bytes + spec_.input_bytes < forward_arguments_) {
    throw std::runtime_error(
        "the forward's arguments hold " + std::to_string(forward_arguments_) +
        " bytes, more than the module's parameters and buffers (" + std::to_string(spec_.parameter_bytes) +
        ") and the inputs (" + std::to_string(spec_.input_bytes) +
        "): a tensor passed twice that the spec does not name as tied (forward.tied) is not modelled");
  }
}

// Before the first statement: the module's parameters and buffers (each
// storage), then the inputs, on the forward's device.
void StepSimulation::HoldParametersAndInputs() {
  for (const StorageRecord& r : out_.forward.alloc_log->storages) {
    if (r.made_at == kBeforeFirstStep) {
      device_ = stream_.Device(out_.forward.alloc_log->devices[r.device]);
      break;
    }
  }
  std::int64_t held_bytes = 0;
  for (const TrainingStepSpec::HeldTensor& t : spec_.held) {
    stream_.Alloc(t.bytes, "parameter of " + (t.module.empty() ? std::string("the module") : t.module),
                  StorageRole::kArgument, kParameters, t.module, device_);
    held_bytes += t.bytes;
  }
  if (held_bytes != spec_.parameter_bytes) {  // the spec names no storage (or not every one): the rest as one
    stream_.Alloc(spec_.parameter_bytes - held_bytes, "parameters", StorageRole::kArgument, kParameters, "", device_);
  }
  std::int64_t input_bytes = 0;
  for (const std::int64_t bytes : spec_.input_storages) {
    stream_.Alloc(bytes, "input", StorageRole::kArgument, kInputs, "", device_);
    input_bytes += bytes;
  }
  if (input_bytes != spec_.input_bytes) {
    stream_.Alloc(spec_.input_bytes - input_bytes, "inputs", StorageRole::kArgument, kInputs, "", device_);
  }
}

// The forward: its arguments are the held tensors.
void StepSimulation::Forward(int k) {
  TrainingStepPhase phase = Phase("forward", k, 0);
  phase.around = stream_.live() - forward_arguments_;
  fw_ids_ = stream_.Run(
      out_.forward, Label("forward", k), [](StorageId) { return kNoStorage; },
      [&](StorageId local) { return saved_.count(local) ? kActivations : kTemporaries; }, spec_.value_modules,
      [](StorageId) { return std::string_view(); });
  phase.end = stream_.next_step();
  out_.phases.push_back(phase);
}

// loss.backward(): the cotangent, then the backward, whose saved tensors
// are the forward's (those held elsewhere cost it nothing), then
// AccumulateGrad.
void StepSimulation::Backward(int k) {
  TrainingStepPhase phase = Phase("backward", k, 1);
  stream_.Begin();
  StorageId cotangent = kNoStorage;
  if (spec_.cotangent_bytes > 0) {
    cotangent = stream_.Alloc(spec_.cotangent_bytes, "cotangent", StorageRole::kIntermediate, kTemporaries, "", device_);
  }
  stream_.End(Label("backward", k), "loss.backward", "the cotangent, torch.ones_like(loss)", 0);
  phase.around = stream_.live() - ArgumentBytes(out_.backward);
  const AllocLog& bw_log = *out_.backward.alloc_log;
  std::unordered_map<StorageId, std::string_view> bw_grads;  // the backward's storage -> its module
  for (const Gradient& g : gradients_) bw_grads.emplace(g.storage, g.module);
  const std::vector<StorageId> bw_ids = stream_.Run(
      out_.backward, Label("backward", k),
      [&](StorageId local) {
        if (bw_log.storages[local].bytes == 0) return kNoStorage;  // external: a parameter, input or the loss
        return fw_ids_[Find(returned_, std::string(bw_log.storage_names[local]), "the backward's saved tensor").storage];
      },
      [&](StorageId local) { return bw_grads.count(local) ? kGradients : kTemporaries; }, spec_.value_modules,
      [&](StorageId local) {  // a gradient is its parameter's module's
        auto it = bw_grads.find(local);
        return it == bw_grads.end() ? std::string_view() : it->second;
      });
  // AccumulateGrad, one gradient at a time: into an empty .grad each is
  // stolen or copied to its parameter's layout; into an existing one it
  // is added in place and freed. Then what the backward still held and
  // the cotangent go; the loss stays until step() returns.
  stream_.Begin();
  const bool fresh = grads_.empty();
  for (const Gradient& g : gradients_) {
    if (g.tied) stream_.Free(bw_ids[g.storage]);
  }
  for (const Gradient& g : gradients_) {
    if (g.tied) continue;
    const StorageId made = bw_ids[g.storage];
    if (!fresh) {
      stream_.Free(made);
    } else if (g.copy_bytes > 0) {
      grads_.push_back(stream_.Alloc(g.copy_bytes, g.name, StorageRole::kIntermediate, kGradients, g.module, device_));
      stream_.Free(made);
    } else {
      grads_.push_back(made);
    }
  }
  const std::set<StorageId> kept(grads_.begin(), grads_.end());
  FreeAliveAmong(bw_ids, [&](std::size_t local) { return kept.count(bw_ids[local]) > 0; });
  FreeAliveAmong(fw_ids_, [&](std::size_t local) { return loss_.count(static_cast<StorageId>(local)) > 0; });
  if (cotangent != kNoStorage) stream_.Free(cotangent);
  stream_.End(Label("backward", k), "AccumulateGrad", "the gradients into .grad; the backward's own tensors and the cotangent released", 0);
  phase.end = stream_.next_step();
  out_.phases.push_back(phase);
}

// optimizer.step(): the parameters, their .grad and the state are its
// arguments; the first one's leftovers are the state, kept from then on.
// Then step() returns: zero_grad(set_to_none=True) drops .grad; the loss dies.
void StepSimulation::Optimizer(int k) {
  TrainingStepPhase phase = Phase("optimizer", k, k == 1 ? 2 : 3);
  std::vector<StorageId> opt_ids;
  if (has_optimizer_) {
    const Report& program = k == 1 ? *out_.optimizer_first : *out_.optimizer_later;
    phase.around = stream_.live() - ArgumentBytes(program);
    opt_ids = stream_.Run(
        program, Label("optimizer", k), [](StorageId) { return kNoStorage; },
        [&](StorageId local) {
          return state_names_.count(program.alloc_log->storage_names[local]) ? kOptimizerState : kTemporaries;
        },
        spec_.optimizer_modules, [](StorageId) { return std::string_view(); });
  }
  stream_.Begin();
  if (has_optimizer_ && k > 1) FreeAliveAmong(opt_ids, [](std::size_t) { return false; });
  if (spec_.zero_grad) {
    for (const StorageId g : grads_) stream_.Free(g);
    grads_.clear();
  }
  for (const StorageId local : loss_) stream_.Free(fw_ids_[local]);
  stream_.End(Label(has_optimizer_ ? "optimizer" : "backward", k), "step() returns",
              spec_.zero_grad ? "zero_grad(set_to_none=True); the loss released" : "the loss released", 0);
  if (has_optimizer_) {
    phase.end = stream_.next_step();
    out_.phases.push_back(phase);
  } else {
    out_.phases.back().end = stream_.next_step();
  }
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
  TrainingStepResult out;
  StepSimulation simulation(spec, events, &out);
  simulation.RunPrograms(forward, backward, optimizer_first, optimizer_later);
  simulation.HoldParametersAndInputs();
  for (int k = 1; k <= spec.steps; ++k) {
    simulation.Forward(k);
    simulation.Backward(k);
    simulation.Optimizer(k);
  }
  // The numbers, from the stream.
  std::vector<ReportPhase> phases;
  for (const TrainingStepPhase& p : out.phases) phases.push_back({p.phase, p.step, p.first, p.end});
  FinishTrainingStep(simulation.stream(), phases, !spec.value_modules.empty(), allocator, &out);
  out.step.distribution = out.forward.distribution;
  return out;
}

}  // namespace peakmem
