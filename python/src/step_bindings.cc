// peakmem._core's training step (peakmem/models/training_step.h, the
// recorded step of peakmem/models/recorded_step.h) and the ATen scratch
// the eager front end asks for.
#include <nanobind/stl/function.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <nlohmann/json.hpp>

#include "bindings.h"
#include "live_reader.h"
#include "peakmem/analyze.h"
#include "peakmem/frontend/recorded_step_file.h"
#include "peakmem/frontend/step_file.h"
#include "peakmem/frontend/step_spec_json.h"
#include "peakmem/models/recorded_step.h"
#include "peakmem/models/training_step.h"
#include "peakmem/semantics/aten_ops.h"
#include "peakmem/semantics/convolution_scratch.h"

namespace peakmem_python {
namespace {

// A live TraceCtx or printed text, read for `rank` of `world_size` (0: as
// the trace says): the DTensor shards that rank holds.
peakmem::ParsedTrace AnyTrace(nb::handle trace, const std::string& name, int rank = 0, int world_size = 0) {
  const peakmem::TextReadOptions text_options = RankRead(rank, world_size);
  peakmem::ParsedTrace parsed;
  if (nb::isinstance<nb::str>(trace)) {
    parsed = peakmem::ParseTrace(name, nb::cast<std::string>(trace), text_options);
  } else {
    peakmem_python::LiveReadOptions options;
    options.rank = text_options.rank;
    parsed = peakmem_python::ReadLiveTrace(trace, options);
  }
  parsed.rank = rank;
  parsed.world_size = world_size;
  return parsed;
}

// A value of a step spec from Python (a dict, list or tuple, str, bool,
// int or None) as JSON; `where` names it in the error for anything else.
nlohmann::ordered_json ToJson(nb::handle v, const std::string& where) {
  if (v.is_none()) return nullptr;
  if (nb::isinstance<nb::bool_>(v)) return nb::cast<bool>(v);
  if (nb::isinstance<nb::int_>(v)) return nb::cast<std::int64_t>(v);
  if (nb::isinstance<nb::str>(v)) return nb::cast<std::string>(v);
  if (nb::isinstance<nb::dict>(v)) {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (const auto& [key, value] : nb::borrow<nb::dict>(v)) {
      if (!nb::isinstance<nb::str>(key)) {
        throw std::invalid_argument("the step spec's '" + where + "' has a key that is not a str");
      }
      const std::string name = nb::cast<std::string>(key);
      out[name] = ToJson(value, where.empty() ? name : where + "." + name);
    }
    return out;
  }
  if (nb::isinstance<nb::list>(v) || nb::isinstance<nb::tuple>(v)) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    std::size_t i = 0;
    for (nb::handle item : v) out.push_back(ToJson(item, where + "[" + std::to_string(i++) + "]"));
    return out;
  }
  throw std::invalid_argument("the step spec's '" + where + "' is a " +
                              nb::cast<std::string>(nb::str(nb::handle(Py_TYPE(v.ptr())).attr("__name__"))) +
                              ", not a list, dict, str, int, bool or None");
}

// The spec peakmem.step passes: the step file's spec part, in its one
// schema (frontend/step_spec_json.h). A malformed or unknown key is a
// ValueError naming it.
peakmem::RankedStepSpec StepSpec(const nb::dict& d) {
  const nlohmann::ordered_json json = ToJson(d, "");
  try {
    return peakmem::StepSpecFromJson(json, "the step spec");
  } catch (const peakmem::StepFileError& e) {
    throw std::invalid_argument(e.what());
  }
}

nb::dict StepToDict(peakmem::TrainingStepResult r) {
  nb::dict d;
  d["peak_bytes"] = r.peak_bytes;
  d["final_bytes"] = r.final_bytes;
  d["phase_at_peak"] = r.phase_at_peak;
  d["step_at_peak"] = r.step_at_peak;
  nb::dict categories, modules;
  for (const auto& [k, v] : r.by_category) categories[k.c_str()] = v;
  for (const auto& [k, v] : r.by_module) modules[k.c_str()] = v;
  d["by_category"] = categories;
  d["by_module"] = modules;
  nb::list phases;
  for (const peakmem::TrainingStepPhase& p : r.phases) {
    phases.append(nb::make_tuple(p.phase, p.step, p.program, p.around, p.first, p.end));
  }
  d["phases"] = phases;
  d["grad_bytes"] = r.grad_bytes;
  d["step"] = PyReport(std::move(r.step));
  d["forward"] = PyReport(std::move(r.forward));
  d["backward"] = PyReport(std::move(r.backward));
  d["optimizer_first"] = r.optimizer_first ? nb::cast(PyReport(std::move(*r.optimizer_first))) : nb::none();
  d["optimizer_later"] = r.optimizer_later ? nb::cast(PyReport(std::move(*r.optimizer_later))) : nb::none();
  return d;
}

// A recorded step from Python lists (python/peakmem/step/eager.py writes
// them): storages (bytes, name, category, module, device, scratch),
// statements (op, source, events), phases (name, iteration, first, end).
using RecordedStorages = std::vector<std::tuple<std::int64_t, std::string, int, std::string, std::string, bool>>;
using RecordedStatements = std::vector<std::tuple<std::string, std::string, std::vector<std::int64_t>>>;
using RecordedPhases = std::vector<std::tuple<std::string, int, std::int32_t, std::int32_t>>;

peakmem::RecordedStep MakeRecordedStep(const RecordedStorages& storages, const std::vector<std::int64_t>& held,
                                       const RecordedStatements& statements, const RecordedPhases& phases,
                                       const std::vector<std::string>& diagnostics) {
  peakmem::RecordedStep step;
  step.diagnostics = diagnostics;
  step.storages.reserve(storages.size());
  for (const auto& [bytes, name, category, module, device, scratch] : storages) {
    if (category < 0 || category > 255) throw std::invalid_argument("a recorded storage's category is out of range");
    step.storages.push_back({bytes, name, static_cast<std::uint8_t>(category), module, device, scratch});
  }
  step.held = held;
  step.statements.reserve(statements.size());
  for (const auto& [op, source, events] : statements) step.statements.push_back({op, source, events});
  for (const auto& [name, iteration, first, end] : phases) step.phases.push_back({name, iteration, first, end});
  return step;
}

// One (name, value) of aten_scratch's arguments.
peakmem::AtenArgument AtenArgumentOf(const nb::tuple& item, const std::string& op) {
  peakmem::AtenArgument a;
  a.name = nb::cast<std::string>(item[0]);
  nb::handle v = item[1];
  if (nb::isinstance<nb::bool_>(v)) {
    a.kind = peakmem::AtenArgument::Kind::kNumber;
    a.number = peakmem::NumberKind::kBool;
    a.integer = nb::cast<bool>(v);
  } else if (nb::isinstance<nb::int_>(v)) {
    a.kind = peakmem::AtenArgument::Kind::kNumber;
    a.number = peakmem::NumberKind::kInt;
    a.integer = nb::cast<std::int64_t>(v);
  } else if (nb::isinstance<nb::float_>(v)) {
    a.kind = peakmem::AtenArgument::Kind::kNumber;
    a.number = peakmem::NumberKind::kFloat;
    a.real = nb::cast<double>(v);
  } else if (PyComplex_Check(v.ptr())) {
    a.kind = peakmem::AtenArgument::Kind::kNumber;
    a.number = peakmem::NumberKind::kComplex;
  } else if (nb::isinstance<nb::list>(v)) {
    a.kind = peakmem::AtenArgument::Kind::kInts;
    a.ints = nb::cast<std::vector<std::int64_t>>(v);
  } else if (nb::isinstance<nb::str>(v)) {  // a dtype, by its short name
    a.dtype = peakmem::FindDType(nb::cast<std::string>(v));
  } else if (nb::isinstance<nb::tuple>(v)) {
    const nb::tuple t = nb::cast<nb::tuple>(v);
    const auto dtype = nb::cast<std::string>(t[1]);
    const auto shape = nb::cast<std::vector<std::int64_t>>(t[2]);
    const auto strides = nb::cast<std::vector<std::int64_t>>(t[3]);
    peakmem::TypeStringError error;
    std::optional<peakmem::ValueType> type =
        peakmem::MakeTensorType("cpu", dtype, peakmem::Dims(shape.begin(), shape.end()), false, &error);
    if (!type) throw std::invalid_argument(op + ": argument " + a.name + ": " + error.message);
    a.kind = peakmem::AtenArgument::Kind::kTensor;
    a.type = std::move(*type);
    a.strides = peakmem::Dims(strides.begin(), strides.end());
    a.wrapped = nb::cast<bool>(t[4]);
    if (a.wrapped) {
      const std::string_view d = a.type.dtype->short_name;
      a.number = d == "b8" ? peakmem::NumberKind::kBool
                 : d[0] == 'c' ? peakmem::NumberKind::kComplex
                 : d[0] == 'f' || d == "bf16" ? peakmem::NumberKind::kFloat
                                              : peakmem::NumberKind::kInt;
    }
  }
  return a;
}

// The eager front end's recorded step: simulated, and as its file.
void BindRecordedStep(nb::module_& m) {
  m.def(
      "simulate_recorded_step",
      [](const RecordedStorages& storages, const std::vector<std::int64_t>& held,
         const RecordedStatements& statements, const RecordedPhases& phases,
         const std::vector<std::string>& diagnostics, bool events, const std::string& allocator,
         const std::optional<std::string>& alloc_conf, const std::optional<std::string>& device_memory) {
        const peakmem::AllocatorOptions priced = Allocator(allocator, alloc_conf, device_memory);
        const peakmem::RecordedStep step = MakeRecordedStep(storages, held, statements, phases, diagnostics);
        peakmem::TrainingStepResult result;
        {
          nb::gil_scoped_release release;
          result = peakmem::SimulateRecordedStep(step, events, priced);
        }
        return StepToDict(std::move(result));
      },
      nb::arg("storages"), nb::arg("held"), nb::arg("statements"), nb::arg("phases"),
      nb::arg("diagnostics") = std::vector<std::string>(), nb::arg("events") = false,
      nb::arg("allocator") = "requested", nb::arg("alloc_conf") = nb::none(), nb::arg("device_memory") = nb::none(),
      "A step recorded as it ran (peakmem/models/recorded_step.h), as simulate_step's dict.");

  m.def(
      "recorded_step_file_json",
      [](const RecordedStorages& storages, const std::vector<std::int64_t>& held,
         const RecordedStatements& statements, const RecordedPhases& phases,
         const std::vector<std::string>& diagnostics, const std::string& optimizer, const std::string& device) {
        peakmem::RecordedStep step = MakeRecordedStep(storages, held, statements, phases, diagnostics);
        step.optimizer = optimizer;
        step.device = device;
        return nb::module_::import_("json").attr("loads")(peakmem::RecordedStepToJson(step).dump());
      },
      nb::arg("storages"), nb::arg("held"), nb::arg("statements"), nb::arg("phases"), nb::arg("diagnostics"),
      nb::arg("optimizer") = "", nb::arg("device") = "",
      "The recorded step file (docs/step-file.md, \"Recorded steps\") of simulate_recorded_step's lists, "
      "the optimizer's description ('' without one) and the target device it was recorded for ('' for none "
      "named), as a dict (frontend/recorded_step_file.h).");
}

}  // namespace

void BindStep(nb::module_& m) {
  BindRecordedStep(m);

  m.def(
      "aten_scratch",
      [](const std::string& name, const nb::list& arguments, int threads, const std::string& device) {
        std::vector<peakmem::AtenArgument> args;
        args.reserve(arguments.size());
        for (nb::handle item : arguments) args.push_back(AtenArgumentOf(nb::cast<nb::tuple>(item), name));
        std::string why_not;
        std::string error;
        const std::optional<peakmem::ExecutionContext> context = peakmem::ParseTargetDevice(device, &error);
        if (!context) throw std::invalid_argument(error);
        const peakmem::ScratchEstimate s = peakmem::EstimateAtenScratch(name, args, threads, &why_not, *context);
        return nb::make_tuple(s.before_outputs, s.with_outputs, why_not, peakmem::FindAtenOp(name) != nullptr);
      },
      nb::arg("name"), nb::arg("arguments"), nb::arg("threads"), nb::arg("device") = "cpu",
      "The registry's scratch of one ATen call on `device`'s kernels ('cpu', or a CUDA target such as "
      "'cuda:h100': execution_context.h) "
      "(peakmem/semantics/aten_ops.h). arguments: "
      "(name, value) in schema order, value a bool, int, float or complex, a list of ints, "
      "('tensor', dtype short name, shape, strides, wrapped), or None for anything else. Returns "
      "(before_outputs, with_outputs, why_not, known): why_not is non-empty when the op's rule does not "
      "cover the call (nothing is counted for it); known is whether the registry has the op at all.");

  m.def(
      "fold_scratch_events",
      [](const std::vector<std::tuple<std::int64_t, bool>>& events) {
        std::vector<peakmem::ScratchEvent> in;
        in.reserve(events.size());
        for (const auto& [bytes, output] : events) in.push_back({bytes, output});
        const peakmem::ScratchEstimate s = peakmem::FoldScratchEvents(in);
        return nb::make_tuple(s.before_outputs, s.with_outputs);
      },
      nb::arg("events"),
      "One op's allocations (bytes > 0) and frees (bytes < 0) in order, each (bytes, returned to the caller), "
      "as the (before_outputs, with_outputs) scratch aten_scratch gives "
      "(peakmem/semantics/convolution_scratch.h FoldScratchEvents).");

  m.def(
      "simulate_step",
      [](nb::handle forward, nb::handle backward, const std::optional<std::string>& optimizer_first,
         const std::optional<std::string>& optimizer_later, const nb::dict& spec_dict, bool events,
         const std::string& allocator, const std::optional<std::string>& alloc_conf,
         const std::optional<std::string>& device_memory) {
        const peakmem::AllocatorOptions priced = Allocator(allocator, alloc_conf, device_memory);
        const peakmem::RankedStepSpec ranked = StepSpec(spec_dict);
        const peakmem::TrainingStepSpec& spec = ranked.spec;
        // DTensor values are read for the rank the step runs as.
        const int rank = ranked.rank, world_size = ranked.world_size;
        const peakmem::ParsedTrace fw = AnyTrace(forward, "<forward>", rank, world_size);
        const peakmem::ParsedTrace bw = AnyTrace(backward, "<backward>", rank, world_size);
        const std::string opt_name = "<torch.optim." + spec.optimizer_name + ".step>";
        std::optional<peakmem::ParsedTrace> first, later;
        if (optimizer_first) first = peakmem::ParseTrace(opt_name, *optimizer_first);
        if (optimizer_later) later = peakmem::ParseTrace(opt_name, *optimizer_later);
        peakmem::TrainingStepResult result;
        {
          nb::gil_scoped_release release;
          result = peakmem::SimulateTrainingStep(fw, bw, first ? &*first : nullptr, later ? &*later : nullptr,
                                                 spec, events, priced);
        }
        return StepToDict(std::move(result));
      },
      nb::arg("forward"), nb::arg("backward"), nb::arg("optimizer_first") = nb::none(),
      nb::arg("optimizer_later") = nb::none(), nb::arg("spec") = nb::dict(), nb::arg("events") = false,
      nb::arg("allocator") = "requested", nb::arg("alloc_conf") = nb::none(), nb::arg("device_memory") = nb::none(),
      "One training step (peakmem/models/training_step.h): the forward and backward as live "
      "TraceCtx or printed text, the optimizer's step() programs as text, the spec as a dict in the "
      "step file's schema without the traces (docs/step-file.md; frontend/step_spec_json.h). The "
      "result's 'step' is the whole step's Report (its stream priced with `allocator`, as analyze "
      "prices a trace's).");

  m.def(
      "step_file_json",
      [](const std::string& forward, const std::string& backward, const nb::dict& spec,
         const std::optional<std::string>& optimizer_first, const std::optional<std::string>& optimizer_later,
         const std::string& optimizer) {
        const peakmem::StepFileText file{forward, backward, optimizer_first, optimizer_later, optimizer,
                                         StepSpec(spec)};
        return nb::module_::import_("json").attr("loads")(peakmem::StepFileToJson(file).dump());
      },
      nb::arg("forward"), nb::arg("backward"), nb::arg("spec"), nb::arg("optimizer_first") = nb::none(),
      nb::arg("optimizer_later") = nb::none(), nb::arg("optimizer") = "",
      "The step file (docs/step-file.md) as a dict: the printed forward and backward traces, simulate_step's "
      "spec, and with an optimizer its step() programs and description (frontend/step_file.h).");
}

}  // namespace peakmem_python
