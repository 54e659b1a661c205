#include "peakmem/models/runtime_model.h"

#include <string>

#include "peakmem/report/breakdown_keys.h"
#include "peakmem/report/live_at_peak.h"
#include "runtime_interpreter.h"

namespace peakmem {

RuntimeWorkspace::RuntimeWorkspace() : buffers_(std::make_unique<Buffers>()) {}
RuntimeWorkspace::~RuntimeWorkspace() = default;
RuntimeWorkspace::RuntimeWorkspace(RuntimeWorkspace&&) noexcept = default;
RuntimeWorkspace& RuntimeWorkspace::operator=(RuntimeWorkspace&&) noexcept = default;

namespace runtime_detail {

// ---------------------------------------------------------------- values

Object::Kind RuntimeModel::ContainerFor(ValueId value, Object::Kind fallback) const {
  switch (ValueOf(value).container) {
    case ContainerKind::kList: return Object::Kind::kList;
    case ContainerKind::kTuple: return Object::Kind::kTuple;
    case ContainerKind::kDict: return Object::Kind::kDict;
    case ContainerKind::kSet: return Object::Kind::kSet;
    case ContainerKind::kUnknown: break;
  }
  return fallback;
}

// The object a value stands for before anything names it: a tensor (with a
// fresh storage when `allocate_tensors`), or a container filled from the
// collection's first unpack.
ObjectId RuntimeModel::MakeValueObject(ValueId value, Role role, bool allocate_tensors,
                                       int depth) {
  const Value& v = ValueOf(value);
  if (depth > 1000) Fail(v.defined_at, "collections nested too deeply");
  if (IsTensorKind(v.type->kind)) {
    if (!allocate_tensors) return NewObject(Object::Kind::kOther);
    // (Only the arguments, made before the first statement, have specs.)
    if (!argument_specs_.empty() && current_step_ < 0) {
      const auto it = argument_specs_.find(v.name);
      if (it != argument_specs_.end()) return NewArgumentTensor(value, role, *it->second);
    }
    return NewAllocatedTensor(value, ContiguousStrides(v.type->shape), role);
  }
  if (v.type->kind == ValueKind::kCollection) {
    // Collections the caller passes: as the trace says (a live trace knows),
    // else tuples; the plain convention makes every one a tuple.
    const ObjectId id = NewObject(convention_ == CallingConvention::kPlain
                                      ? Object::Kind::kTuple
                                      : ContainerFor(value, Object::Kind::kTuple));
    if (const Pattern* items = contents_[value]) {
      std::vector<const Pattern*> stack;
      // Elements in order; nested patterns become nested tuples.
      auto fill = [&](auto& self, const Pattern& p, ObjectId container) -> void {
        for (const Pattern& item : p.items) {
          ObjectId element = kNone;
          if (item.kind == Pattern::Kind::kValue) {
            element = MakeValueObject(item.value, role, allocate_tensors, depth + 1);
            object_of_[item.value] = element;  // unpacking later binds this very object
          } else if (item.kind == Pattern::Kind::kIgnore) {
            element = NewObject(Object::Kind::kOther);
          } else {
            element = NewObject(Object::Kind::kTuple);
            self(self, item, element);
          }
          IncRef(element);
          MutableElements(container).push_back(element);
        }
      };
      if (items->kind == Pattern::Kind::kValue) {
        Pattern single = *items;
        Pattern wrapper;
        wrapper.items = ArenaSpan<Pattern>(&single, 1);
        fill(fill, wrapper, id);
      } else {
        fill(fill, *items, id);
      }
    }
    return id;
  }
  if (v.type->kind == ValueKind::kUnknown && IsTensorKind(v.type->kind)) return kNone;
  return NewObject(Object::Kind::kOther);
}

void RuntimeModel::SetUpArguments() {
  // The inputs are created before the call, inside the measured region, so
  // they count (as Thunder's estimate counts arguments).
  for (std::size_t i = 0; i < trace_.params.size(); ++i) {
    const Parameter& p = trace_.params[i];
    const Value& v = ValueOf(p.value);
    if (v.type->kind == ValueKind::kUnknown) {
      bool used = false;
      for (const Statement& s : trace_.statements) {
        for (ValueId u : FlatArgs(s)) used = used || u == p.value;
      }
      if (used) Fail(v.defined_at, "argument '" + std::string(v.name) + "' has no type comment");
      Diagnose("argument '" + std::string(v.name) + "' has no type comment and is never used; modelled as an empty " +
               (convention_ == CallingConvention::kBackward ? "list" : "object"));
    }
    const bool saved = convention_ == CallingConvention::kBackward && i == 0;
    const Role role = saved ? Role::kSaved : Role::kArgument;
    ObjectId object = kNone;
    if (convention_ == CallingConvention::kBackward) {
      // fn([saved_tensors_list, saved_other], cotangents): lists at run time,
      // whatever the proxies said at trace time.
      object = MakeValueObject(p.value, role, true, 0);
      Object& o = objects_[object];
      if (o.kind != Object::Kind::kTensor) o.kind = Object::Kind::kList;
      const std::vector<ObjectId>& elements = ElementsOf(o);
      if (saved && elements.size() == 2) {
        objects_[elements[0]].kind = Object::Kind::kList;   // saved_tensors_list
        objects_[elements[1]].kind = Object::Kind::kTuple;  // ctx.saved_other
        // ThunderFunction.backward keeps `saved_tensors_list` in a local and
        // ctx keeps `saved_other`: the caller holds both for the whole call.
        IncRef(elements[0]);
        IncRef(elements[1]);
      }
    } else {
      object = MakeValueObject(p.value, role, true, 0);
    }
    IncRef(object);  // the caller's reference (its argument / local)
    Bind(p.value, object);
  }
  for (const auto& [named, bytes] : stream_.step_named()) {
    key_.assign("argument ");
    key_ += ValueOf(named).name;
    report_.breakdown.Set(key_, bytes);
  }
  stream_.ClearStepNamed();
  stream_.EndStep();
}

// ---------------------------------------------------------------- statements

void RuntimeModel::BindPattern(const Pattern& pattern, ObjectId object, int depth) {
  if (depth > 1000) Fail(pattern.at, "assignment target nested too deeply");
  switch (pattern.kind) {
    case Pattern::Kind::kValue:
      Bind(pattern.value, object);
      return;
    case Pattern::Kind::kIgnore:
      return;
    case Pattern::Kind::kTuple:
    case Pattern::Kind::kList: {
      const std::vector<ObjectId> elements = ElementsOf(objects_[object]);
      if (elements.size() != pattern.items.size()) {
        Fail(pattern.at, "cannot unpack " + std::to_string(elements.size()) + " elements into " +
                             std::to_string(pattern.items.size()) + " targets");
      }
      for (std::size_t i = 0; i < pattern.items.size(); ++i) {
        BindPattern(pattern.items[i], elements[i], depth + 1);
      }
      return;
    }
  }
}

void RuntimeModel::FailUnknownContents(const Statement& s) const { Fail(s.at, UntypedUnpackMessage(trace_, s)); }

ObjectId RuntimeModel::BuildReturned(const Expr& e, int depth) {
  if (depth > 1000) Fail(e.at, "returned value nested too deeply");
  switch (e.kind) {
    case Expr::Kind::kValue: {
      if (!bound_[e.value]) Fail(e.at, "returned value '" + std::string(ValueOf(e.value).name) + "' is not live");
      const ObjectId o = object_of_[e.value];
      IncRef(o);
      return o;
    }
    case Expr::Kind::kTuple:
    case Expr::Kind::kList:
    case Expr::Kind::kDict:
    case Expr::Kind::kSet: {
      const ObjectId c = NewObject(e.kind == Expr::Kind::kList  ? Object::Kind::kList
                                   : e.kind == Expr::Kind::kDict ? Object::Kind::kDict
                                   : e.kind == Expr::Kind::kSet  ? Object::Kind::kSet
                                                                 : Object::Kind::kTuple);
      for (const Expr& item : e.items) {
        const ObjectId element = BuildReturned(item, depth + 1);
        if (element != kNone) MutableElements(c).push_back(element);
      }
      IncRef(c);
      return c;
    }
    default:
      return kNone;
  }
}

void RuntimeModel::ExecuteReturn(const Statement& s) {
  // The caller receives the returned object, then the frame's locals die.
  BuildReturned(*s.returned, 0);
  if (report_options_.returned_tensors) {
    std::set<std::string_view> seen;
    RecordReturned(*s.returned, 0, &seen);
  }
  for (ValueId v = 0; v < bound_.size(); ++v) Unbind(v);
}

void RuntimeModel::RecordReturned(const Expr& e, int depth, std::set<std::string_view>* seen) {
  if (depth > 1000) Fail(e.at, "returned value nested too deeply");
  if (e.kind == Expr::Kind::kValue) {
    if (!bound_[e.value]) return;
    const Object& o = objects_[object_of_[e.value]];
    const std::string_view name = ValueOf(e.value).name;
    if (o.kind != Object::Kind::kTensor || !seen->insert(name).second) return;
    const StorageRecord& storage = stream_.storages()[o.storage];
    const Dims& strides = StridesOf(o);
    const Dims& shape = ValueOf(e.value).type->shape;
    report_.returned_tensors.push_back({std::string(name), o.storage, storage.bytes,
                                        std::vector<std::int64_t>(strides.begin(), strides.end()),
                                        storage.role,
                                        std::vector<std::int64_t>(shape.begin(), shape.end())});
    return;
  }
  for (const Expr& item : e.items) RecordReturned(item, depth + 1, seen);
}

void RuntimeModel::Execute(std::size_t index) {
  const Statement& s = trace_.statements[index];
  switch (s.kind) {
    case StatementKind::kCall:
      ExecuteCall(s);
      return;
    case StatementKind::kUnpack: {
      if (!bound_[s.source]) Fail(s.at, "unpack of '" + std::string(ValueOf(s.source).name) + "', which is not live");
      const ObjectId source = object_of_[s.source];
      const Object& o = objects_[source];
      if (o.kind == Object::Kind::kTensor || o.kind == Object::Kind::kOther) {
        Fail(s.at, "cannot unpack '" + std::string(ValueOf(s.source).name) + "': not a collection");
      }
      if (ElementsOf(o).empty() && !s.outputs.items.empty()) FailUnknownContents(s);
      BindPattern(s.outputs, source, 0);
      return;
    }
    case StatementKind::kAssign:
      if (!bound_[s.source]) Fail(s.at, "'" + std::string(ValueOf(s.source).name) + "' is not live");
      BindPattern(s.outputs, object_of_[s.source], 0);
      return;
    case StatementKind::kDel:
      for (ValueId v : s.deleted) Unbind(v);
      return;
    case StatementKind::kClear: {
      if (!bound_[s.source]) return;
      Object& o = objects_[object_of_[s.source]];
      if (o.kind == Object::Kind::kList || o.kind == Object::Kind::kDict ||
          o.kind == Object::Kind::kSet) {
        if (o.elements == kNone) return;
        std::vector<ObjectId> elements = std::move(elements_[o.elements]);
        elements_[o.elements].clear();
        for (ObjectId e : elements) DecRef(e);
      }
      return;
    }
    case StatementKind::kReturn:
      ExecuteReturn(s);
      return;
  }
}

void RuntimeModel::FindInt64Indices() {
  if (!ops_.AnyOp([](const OpInfo& op) {
        return op.int64_indices_output >= 0 || op.int64_indices_argument >= 0;
      })) {
    return;
  }
  auto mark = [&](ValueId v) {
    const ValueType& t = *ValueOf(v).type;
    if (!IsTensorKind(t.kind) || t.dtype == nullptr || t.dtype->bits == 64) return;
    // numel * 8 cannot overflow where numel * bits / 8 did not, for bits >= 8.
    const std::uint64_t bytes = t.numel * 8;
    if (t.numel != 0 && bytes / 8 != t.numel) FailOverflow();
    int64_indices_[v] = static_cast<std::int64_t>(bytes);
  };
  std::vector<ValueId> outputs;
  for (const Statement& s : trace_.statements) {
    if (s.kind != StatementKind::kCall) continue;
    const OpInfo* op = ops_.Find(s);
    if (op == nullptr) continue;
    if (op->int64_indices_argument >= 0 &&
        static_cast<std::size_t>(op->int64_indices_argument) < s.args.size() &&
        s.args[op->int64_indices_argument].kind == Expr::Kind::kValue) {
      mark(s.args[op->int64_indices_argument].value);
    }
    if (op->int64_indices_output >= 0) {
      FlatOutputs(s, &outputs);
      if (static_cast<std::size_t>(op->int64_indices_output) < outputs.size()) {
        mark(outputs[op->int64_indices_output]);
      }
    }
  }
}

Report RuntimeModel::Run() {
  report_.model = "runtime";
  report_.trace_name = trace_.source_name;
  report_.convention = CallingConventionName(convention_);
  FindInt64Indices();
  SetUpArguments();
  const std::size_t n = trace_.statements.size();
  const bool rows = report_options_.steps || report_options_.breakdown;
  const OpAndNamesKeys keys;
  StepRecorder recorder(parsed_, &report_, report_options_, keys, kCallerPeriod);
  const RequestedBytes& counter = stream_.counter();
  for (std::size_t i = 0; i < n; ++i) {
    PrefetchStatementAhead(trace_.statements, i);
    if (i + kPrefetchFar < n) PrefetchStatementData(trace_.statements[i + kPrefetchFar]);
    if (i + kPrefetchNear < n) PrefetchValueState(trace_.statements[i + kPrefetchNear]);
    current_step_ = static_cast<int>(i);
    const std::int64_t before = counter.live();
    stream_.BeginStep(static_cast<std::int32_t>(i));
    Execute(i);
    stream_.EndStep();
    // The step's row and breakdown key (StepRecorder: on another thread
    // for a big trace), from the storages the step made and freed.
    if (rows) {
      recorder.Record(i, counter.live() - before, counter.live(), counter.step_peak(),
                      stream_.step_named(), 1);
    }
    stream_.ClearStepNamed();
  }
  stream_.Finish(static_cast<std::int32_t>(n), trace_);
  report_.peak_bytes = counter.peak();
  report_.peak_step = counter.peak_moment().step;
  report_.final_bytes = counter.live();
  report_.tensor_peak_bytes = counter.tensor_peak();
  report_.alloc_log = log_;
  recorder.EndRows();  // the rest of the rows, built while the live storages are listed
  if (report_options_.live_at_peak) {
    report_.live_at_peak = LiveAtPeak(trace_, stream_.storages(), counter.peak_moment(),
                                      report_options_.live_at_peak_limit,
                                      &report_.live_at_peak_total);
  }
  recorder.Finish();
  const int peak_line = report_.peak_step >= 0 && static_cast<std::size_t>(report_.peak_step) <
                                                      trace_.statements.size()
                            ? trace_.statements[report_.peak_step].source_line
                            : -1;
  unknown_.AppendDiagnostics(&report_.diagnostics, "counted as allocating its outputs", peak_line);
  return std::move(report_);
}

}  // namespace runtime_detail

Report RunRuntimeModel(const ParsedTrace& parsed, const RuntimeOptions& options,
                       const ReportOptions& report_options, RuntimeWorkspace* workspace) {
  if (workspace == nullptr) {
    RuntimeWorkspace local;
    return runtime_detail::RuntimeModel(parsed, options, report_options, local.buffers()).Run();
  }
  return runtime_detail::RuntimeModel(parsed, options, report_options, workspace->buffers()).Run();
}

}  // namespace peakmem
