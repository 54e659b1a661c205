#include "peakmem/models/training_step.h"

#include <algorithm>
#include <functional>
#include <set>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

#include "peakmem/analyze.h"

namespace peakmem {
namespace {

constexpr const char* kCategories[] = {"parameters", "inputs", "gradients", "optimizer_state",
                                       "activations", "temporaries"};

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

// The backward's storages of the gradients it returns (each with its
// bytes), and the largest copy AccumulateGrad makes into an empty .grad: a
// gradient laid out unlike its parameter is copied to the parameter's
// strides, not stolen (accumulate_grad.h: obeys_layout_contract,
// clone_obey_contract).
std::int64_t AccumulatedGrads(const TrainingStepSpec& spec, const Report& bw, const std::unordered_map<std::string_view, Returned>& fw,
                              std::vector<std::pair<StorageId, std::int64_t>>* grads) {
  const auto by_bw = ByName(bw);
  if (spec.grads.size() != spec.flat_args.size()) {
    throw std::runtime_error("the backward returns " + std::to_string(spec.grads.size()) +
                             " gradients for the forward's " + std::to_string(spec.flat_args.size()) +
                             " arguments");
  }
  std::int64_t copy = 0;
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
    const std::vector<std::int64_t>& shape = *r.shape;
    for (std::size_t d = 0; d < shape.size() && d < r.strides->size() && d < param.strides->size(); ++d) {
      if (shape[d] != 1 && (*r.strides)[d] != (*param.strides)[d]) {
        copy = std::max(copy, param.bytes);  // a dense copy in the parameter's layout
        break;
      }
    }
    for (const auto& [storage, bytes] : *grads) {
      if (storage == r.storage) {
        throw std::invalid_argument("the gradients of two arguments share " + g +
                                    "'s storage: AccumulateGrad would clone one of them; not "
                                    "modelled yet");
      }
    }
    grads->push_back({r.storage, r.bytes});
  }
  return copy;
}

std::int64_t ArgumentBytes(const Report& report) {
  if (report.steps.empty()) return report.final_bytes;
  return report.steps[0].live_bytes - report.steps[0].delta_bytes;
}

// The bytes held at a moment of the step, by category and by module.
struct Holding {
  std::int64_t categories[6] = {};
  std::map<std::string, std::int64_t> modules;
  void AddModule(const std::string& module, std::int64_t bytes) {
    if (bytes) modules[module] += bytes;
  }
};

// What joins the phases: the totals carried from one to the next, and the
// attribution of what the step holds outside the traces.
class StepJoin {
 public:
  StepJoin(const TrainingStepSpec& spec, bool by_module) : spec_(spec), by_module_(by_module) {}

  std::int64_t peak = 0;
  std::string phase = "forward";
  int step = 1;
  Holding at_peak;

  // A candidate peak; `fill` says what is held then (called only when it is the new peak).
  void Reach(std::int64_t value, const char* name, int k, const std::function<void(Holding*)>& fill) {
    if (value <= peak) return;
    peak = value;
    phase = name;
    step = k;
    at_peak = Holding{};
    fill(&at_peak);
    std::int64_t known = 0;
    for (int c = 0; c < 5; ++c) known += at_peak.categories[c];
    at_peak.categories[5] = value - known;  // temporaries: the loss, the cotangent, intermediates
    if (by_module_) {
      std::int64_t attributed = 0;
      for (const auto& [m, b] : at_peak.modules) attributed += b;
      at_peak.AddModule("", value - attributed);  // the inputs, the loss, the cotangent
    }
  }

  // The parameters, the inputs, `grads` bytes of .grad and `state` bytes of
  // optimizer state, each to its module.
  void Held(Holding* h, std::int64_t grads, std::int64_t state,
            const std::map<std::string, std::int64_t>& state_modules) const {
    h->categories[0] = spec_.parameter_bytes;
    h->categories[1] = spec_.input_bytes;
    h->categories[2] = grads;
    h->categories[3] = state;
    if (!by_module_) return;
    std::int64_t trainable = 0;
    for (const auto& t : spec_.held) {
      h->AddModule(t.module, t.bytes);
      if (t.trainable) trainable += t.bytes;
    }
    // .grad is as large as its parameter; what is not (a partial layout
    // copy being made) goes to the top.
    if (grads == trainable) {
      for (const auto& t : spec_.held)
        if (t.trainable) h->AddModule(t.module, t.bytes);
    }
    if (state) {
      for (const auto& [m, b] : state_modules) h->AddModule(m, b);
    }
  }

  // The tensors a trace made that are live at its peak (not its arguments), to their modules.
  void Live(Holding* h, const Report& report, const std::map<std::string, std::string, std::less<>>& modules) const {
    if (!by_module_) return;
    for (const LiveTensor& t : report.live_at_peak) {
      if (t.role == "argument" || t.bytes == 0) continue;
      auto it = modules.find(t.name);
      h->AddModule(it == modules.end() ? std::string() : it->second, t.bytes);
    }
  }

 private:
  const TrainingStepSpec& spec_;
  bool by_module_;
};

// A report's intermediates live at its peak, as activations (the saved
// tensors), gradients (those returned as gradients) and temporaries.
void LiveByRole(const Report& report, const std::set<std::string_view>& saved,
                const std::set<std::string_view>& grads, Holding* h) {
  for (const LiveTensor& t : report.live_at_peak) {
    if (t.role == "argument" || t.bytes == 0) continue;
    if (t.role == "saved" || saved.count(t.name)) {
      h->categories[4] += t.bytes;
    } else if (grads.count(t.name)) {
      h->categories[2] += t.bytes;
    }
  }
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
                                        const TrainingStepSpec& spec, bool events) {
  if (spec.steps < 1) throw std::invalid_argument("steps must be >= 1");
  if (optimizer_first && spec.steps > 1 && !optimizer_later) {
    throw std::invalid_argument("a step with an optimizer run more than once needs its later step() program");
  }
  ReportOptions report_options;
  report_options.returned_tensors = true;
  report_options.alloc_log = events;
  TrainingStepResult out;
  // The forward, and the identity of everything it returns.
  out.forward = Analyze(forward, "runtime", Options(CallingConvention::kForward, spec), report_options);
  const auto returned = ByName(out.forward);
  // The backward, its saved tensors the forward's; autograd holds the cotangents.
  RuntimeOptions bw_options = Options(CallingConvention::kBackward, spec);
  const std::int64_t own_saved = BackwardArgumentTensors(spec, out.forward, &bw_options.argument_tensors);
  out.backward = Analyze(backward, "runtime", bw_options, report_options);
  std::vector<std::pair<StorageId, std::int64_t>> grads;
  const std::int64_t layout_copy = AccumulatedGrads(spec, out.backward, returned, &grads);
  for (const auto& [storage, bytes] : grads) {
    out.grad_storages.push_back(storage);
    out.grad_bytes += bytes;
  }
  // The loss: the forward's outputs that are not its arguments, each storage once.
  std::set<StorageId> output_storages;
  std::int64_t loss_bytes = 0;
  for (const std::string& name : spec.outputs) {
    const Returned& r = Find(returned, name, "the output");
    if (r.role != StorageRole::kArgument && output_storages.insert(r.storage).second) loss_bytes += r.bytes;
  }
  std::set<StorageId> saved_storages;
  for (const std::string& name : spec.saved) {
    const Returned& r = returned.at(name);
    if (r.role != StorageRole::kArgument && !output_storages.count(r.storage)) saved_storages.insert(r.storage);
  }
  out.saved_storages.assign(saved_storages.begin(), saved_storages.end());
  // The optimizer's step() programs: the parameters, their .grad and the state kept are arguments.
  const std::set<std::string_view> state_names(spec.optimizer_state.begin(), spec.optimizer_state.end());
  std::int64_t state_bytes = 0;
  std::map<std::string, std::int64_t> state_modules;
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
    state_bytes = out.optimizer_first->final_bytes - ArgumentBytes(*out.optimizer_first);
    for (const ReturnedTensor& t : out.optimizer_first->returned_tensors) {
      if (!state_names.count(t.name) || t.role != StorageRole::kIntermediate) continue;
      out.first_state_storages.push_back(t.storage);
      auto m = spec.optimizer_modules.find(t.name);
      state_modules[m == spec.optimizer_modules.end() ? std::string() : m->second] += t.storage_bytes;
    }
  }

  // The join (python/peakmem/step.py's module docstring).
  const std::int64_t outside = spec.parameter_bytes + spec.input_bytes - ArgumentBytes(out.forward);
  if (outside < 0) {
    throw std::runtime_error(
        "the forward's arguments hold " + std::to_string(ArgumentBytes(out.forward)) +
        " bytes, more than the module's parameters and buffers (" + std::to_string(spec.parameter_bytes) +
        ") and the inputs (" + std::to_string(spec.input_bytes) +
        "): tensors passed twice (tied weights) are not modelled yet");
  }
  const std::set<std::string_view> saved_names(spec.saved.begin(), spec.saved.end());
  std::set<std::string_view> grad_names;
  for (const ReturnedTensor& t : out.backward.returned_tensors) grad_names.insert(t.name);
  StepJoin join(spec, !spec.value_modules.empty());
  join.peak = spec.parameter_bytes + spec.input_bytes;
  join.Held(&join.at_peak, 0, 0, {});
  join.at_peak.AddModule("", spec.input_bytes);
  std::int64_t carry = 0;  // .grad held between steps
  std::int64_t state = 0;  // optimizer state
  const std::map<std::string, std::int64_t> no_state;
  for (int k = 1; k <= spec.steps; ++k) {
    const auto& held_state = state ? state_modules : no_state;
    const std::int64_t held = outside + carry + state;  // beyond the forward's arguments
    out.phases.push_back({"forward", k, 0, held, carry, state});
    join.Reach(held + out.forward.peak_bytes, "forward", k, [&](Holding* h) {
      join.Held(h, carry, state, held_state);
      LiveByRole(out.forward, saved_names, {}, h);
      join.Live(h, out.forward, spec.value_modules);
    });
    // After the forward: its final bytes (arguments, the loss, saved
    // tensors); loss.backward() adds the cotangent; the backward counts the
    // saved tensors it owns as its arguments.
    const std::int64_t offset = held + out.forward.final_bytes + spec.cotangent_bytes - own_saved;
    out.phases.push_back({"backward", k, 1, offset, carry, state});
    join.Reach(offset + out.backward.peak_bytes, "backward", k, [&](Holding* h) {
      join.Held(h, carry, state, held_state);
      LiveByRole(out.backward, {}, grad_names, h);
      join.Live(h, out.backward, spec.value_modules);
    });
    // The backward returns: what it still held but its gradients is
    // released; AccumulateGrad steals them into empty .grad fields, or adds
    // them in place and frees them. Then the cotangent goes; no moment of
    // the backward's return holds more.
    if (carry == 0) {
      if (layout_copy) {
        // Into empty .grad fields, one AccumulateGrad at a time: the
        // backward's gradients (and the cotangent) beside one
        // parameter-layout copy.
        join.Reach(offset + out.backward.final_bytes + layout_copy, "backward", k, [&](Holding* h) {
          join.Held(h, out.grad_bytes, state, held_state);
          h->categories[2] += layout_copy;
        });
      }
      carry = out.grad_bytes;
    }
    if (optimizer_first) {
      // optimizer.step(): the parameters, inputs, .grad, the state and the
      // loss (alive until step() returns) are held; the program's
      // arguments are the parameters, their gradients and the state.
      const Report& program = k == 1 ? *out.optimizer_first : *out.optimizer_later;
      const std::int64_t base = spec.parameter_bytes + spec.input_bytes + carry + state + loss_bytes;
      out.phases.push_back({"optimizer", k, k == 1 ? 2 : 3, base - ArgumentBytes(program), carry, state});
      join.Reach(base - ArgumentBytes(program) + program.peak_bytes, "optimizer", k, [&](Holding* h) {
        std::int64_t kept = 0;  // the state kept or made so far
        for (const LiveTensor& t : program.live_at_peak)
          if (state_names.count(t.name)) kept += t.bytes;
        join.Held(h, carry, 0, {});
        h->categories[3] = kept;
        if (state) {
          for (const auto& [m, b] : state_modules) h->AddModule(m, b);
        }
        join.Live(h, program, spec.optimizer_modules);
      });
      if (k == 1) state = state_bytes;
    }
    if (spec.zero_grad) carry = 0;
  }
  out.peak_bytes = join.peak;
  out.final_bytes = spec.parameter_bytes + spec.input_bytes + carry + state;
  out.phase_at_peak = join.phase;
  out.step_at_peak = join.step;
  for (int c = 0; c < 6; ++c) out.by_category.emplace_back(kCategories[c], join.at_peak.categories[c]);
  if (!spec.value_modules.empty()) {
    for (const auto& [m, b] : join.at_peak.modules)
      if (b) out.by_module.emplace_back(m, b);
    std::stable_sort(out.by_module.begin(), out.by_module.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
  }
  return out;
}

}  // namespace peakmem
