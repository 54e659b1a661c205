#include "peakmem/models/runtime_model.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "peakmem/semantics/fusion.h"
#include "peakmem/semantics/layout.h"
#include "peakmem/models/model_support.h"
#include "peakmem/semantics/op_registry.h"
#include "peakmem/semantics/scratch.h"
#include "peakmem/semantics/view_strides.h"
#include "peakmem/report/breakdown_keys.h"
#include "peakmem/report/live_at_peak.h"
#include "peakmem/report/step_recorder.h"
#include "peakmem/sim/alloc_stream.h"

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

namespace {

// The StepRecorder's caller_period for this model: the simulating thread is
// the slower one here (measured at 10^6 statements: docs/scaling.md), so it builds no rows itself.
constexpr int kCallerPeriod = 0;

using ObjectId = std::uint32_t;
constexpr std::uint32_t kNone = 0xFFFFFFFFu;
using Role = StorageRole;

// One Object per value, so its size (32 bytes) is much of the model's memory
// per statement: what most objects do not need lies outside it. A tensor's
// strides are kept only when they differ from its type's contiguous strides
// (ValueType::contiguous_strides: a few views and permuted outputs); a
// container's elements are a list of their own. (Both inline, an Object was
// 88 bytes.)
struct Object {
  enum class Kind : std::uint8_t { kTensor, kList, kTuple, kDict, kSet, kOther };
  const ValueType* type = nullptr;  // tensors: the value's type (its shape; shared)
  // Tensors: index of their strides in Buffers::strides; kNone when they are
  // the type's contiguous_strides (see RuntimeModel::StridesOf).
  std::uint32_t strides = kNone;
  // Containers: index of their elements in Buffers::elements; kNone while
  // there are none (see RuntimeModel::ElementsOf).
  std::uint32_t elements = kNone;
  int refs = 0;
  StorageId storage = kNone;  // tensors
  Kind kind = Kind::kOther;
  bool contiguous = false;    // tensors: IsContiguous(shape, strides), computed once
  bool layout_known = true;
};

}  // namespace

// The model's working memory, kept by a RuntimeWorkspace between runs.
struct RuntimeWorkspace::Buffers {
  std::vector<const Pattern*> contents;  // CollectionContents of the trace
  std::vector<ObjectId> object_of;       // ValueId -> object it names (kNone if unbound)
  std::vector<bool> bound;               // ValueId currently a live frame local
  std::vector<Object> objects;
  std::vector<StorageRecord> storages;  // the stream's storage table
  std::vector<int> storage_users;       // StorageId -> live tensor objects using it
  std::vector<Dims> strides;                    // Object::strides indexes it
  std::vector<std::vector<ObjectId>> elements;  // Object::elements indexes it
};

RuntimeWorkspace::RuntimeWorkspace() : buffers_(std::make_unique<Buffers>()) {}
RuntimeWorkspace::~RuntimeWorkspace() = default;
RuntimeWorkspace::RuntimeWorkspace(RuntimeWorkspace&&) noexcept = default;
RuntimeWorkspace& RuntimeWorkspace::operator=(RuntimeWorkspace&&) noexcept = default;

namespace {

class RuntimeModel {
 public:
  RuntimeModel(const ParsedTrace& parsed, const RuntimeOptions& options,
               const ReportOptions& report_options, RuntimeWorkspace::Buffers& buffers)
      : parsed_(parsed),
        report_options_(report_options),
        trace_(parsed.trace),
        options_(options),
        contents_(buffers.contents),
        object_of_(buffers.object_of),
        bound_(buffers.bound),
        objects_(buffers.objects),
        storage_users_(buffers.storage_users),
        log_(report_options.alloc_log ? std::make_shared<AllocLog>() : nullptr),
        stream_(&buffers.storages, log_.get(), report_options.breakdown),
        strides_(buffers.strides),
        elements_(buffers.elements) {
    // A workspace that ran before keeps its capacity: these neither allocate
    // nor touch fresh pages unless this trace is bigger.
    CollectionContents(trace_, &contents_);
    object_of_.assign(trace_.values.size(), kNone);
    bound_.assign(trace_.values.size(), false);
    objects_.clear();
    storage_users_.clear();
    strides_.clear();
    for (auto& list : elements_) list.clear();  // keeps their memory for the next run
    element_lists_used_ = 0;
    // About one object and one storage per value; growing would copy them all.
    objects_.reserve(trace_.values.size() + 16);
    buffers.storages.reserve(trace_.values.size() + 16);
    storage_users_.reserve(trace_.values.size() + 16);
    convention_ = options.convention == CallingConvention::kAuto ? InferCallingConvention(trace_)
                                                                : options.convention;
  }

  // Runs the whole trace and lists the storages alive at the peak.
  Report Run();

 private:
  // ---- heap
  ObjectId NewObject(Object::Kind kind);
  StorageId NewStorage(std::int64_t bytes, ValueId named, Role role);
  ObjectId NewTensor(ValueId value, StorageId storage, Dims strides, bool layout_known,
                     int contiguous = -1);  // -1: work it out
  ObjectId NewAllocatedTensor(ValueId value, Dims strides, Role role, bool layout_known = true);
  void IncRef(ObjectId id) { ++objects_[id].refs; }
  // A tensor's strides (see Object::strides).
  // (Valid until the next tensor is made.)
  const Dims& StridesOf(const Object& o) const {
    return o.strides == kNone ? o.type->contiguous_strides : strides_[o.strides];
  }
  // A container's elements (see Object::elements).
  const std::vector<ObjectId>& ElementsOf(const Object& o) const {
    static const std::vector<ObjectId> kEmpty;
    return o.elements == kNone ? kEmpty : elements_[o.elements];
  }
  std::vector<ObjectId>& MutableElements(ObjectId id) {
    Object& o = objects_[id];
    if (o.elements == kNone) {
      o.elements = static_cast<std::uint32_t>(element_lists_used_++);
      if (elements_.size() < element_lists_used_) elements_.emplace_back();
    }
    return elements_[o.elements];
  }
  void DecRef(ObjectId id);
  void Bind(ValueId value, ObjectId object);
  void Unbind(ValueId value);
  // Op scratch: `bytes` allocated and freed inside the current statement.
  void Scratch(std::int64_t bytes);
  [[noreturn]] void FailOverflow() const;

  // ---- building objects for values
  ObjectId MakeValueObject(ValueId value, Role role, bool allocate_tensors, int depth);
  Object::Kind ContainerFor(ValueId value, Object::Kind fallback) const;

  // ---- statements
  void SetUpArguments();
  void Execute(std::size_t index);
  void ExecuteCall(const Statement& s);
  void BindPattern(const Pattern& pattern, ObjectId object, int depth);
  ObjectId BuildReturned(const Expr& e, int depth);
  void ExecuteReturn(const Statement& s);

  // ---- op semantics
  ObjectId FirstTensorArg(const Statement& s, const Expr** expr_out = nullptr);
  ObjectId ArgObject(const Statement& s, std::size_t index) const;
  Dims ViewStrides(const Statement& s, const OpInfo& op, const Object& input, const Value& out,
                   std::size_t output_index, bool* known);
  Dims AllocatedStrides(const Statement& s, const OpInfo* op, const Value& out);
  std::int64_t MatmulOperandClones(const Statement& s) const;

  const Value& ValueOf(ValueId id) const { return trace_.value(id); }
  [[noreturn]] void Fail(SourceLocation at, const std::string& message) const {
    ModelErrors(parsed_).Fail(at, message);
  }
  void Diagnose(const std::string& message) {
    if (diagnosed_.insert(message).second) report_.diagnostics.push_back(message);
  }

  // Software prefetching, in three stages ahead of the statement being run
  // (the first, the statement itself: PrefetchStatementAhead).
  // On a big trace the loop waits on memory, not arithmetic: a statement's
  // arguments are a separate heap block, and the values and objects they
  // name lie anywhere in tables of one entry per value. Statements are
  // sequential; the pointers they hold are not, so: kPrefetchFar statements
  // ahead, fetch the argument blocks; at kPrefetchNear (by then those blocks
  // have arrived), fetch the per-value state of the values they name.
  // Prefetches change no state.
  static constexpr std::size_t kPrefetchFar = 12;
  static constexpr std::size_t kPrefetchNear = 5;
  static void PrefetchStatementData(const Statement& s) {
    __builtin_prefetch(s.args.data());
    if (s.args.size() > 1) __builtin_prefetch(s.args.data() + 1);
    if (!s.kwargs.empty()) __builtin_prefetch(s.kwargs.data());
  }
  void PrefetchValue(ValueId v) const {
    if (v >= object_of_.size()) return;
    __builtin_prefetch(&trace_.values[v]);
    const ObjectId o = object_of_[v];
    if (o < objects_.size()) __builtin_prefetch(&objects_[o]);
  }
  void PrefetchValueState(const Statement& s) const {
    const std::size_t args = std::min<std::size_t>(s.args.size(), 3);
    for (std::size_t a = 0; a < args; ++a) {
      if (s.args[a].kind == Expr::Kind::kValue) PrefetchValue(s.args[a].value);
    }
    for (ValueId v : s.deleted) PrefetchValue(v);
    if (s.outputs.kind == Pattern::Kind::kValue && s.outputs.value < trace_.values.size()) {
      __builtin_prefetch(&trace_.values[s.outputs.value]);
    }
  }

  const ParsedTrace& parsed_;
  ReportOptions report_options_;
  const Trace& trace_;
  RuntimeOptions options_;
  CallingConvention convention_;
  // In the workspace (RuntimeWorkspace::Buffers says what each holds).
  std::vector<const Pattern*>& contents_;
  std::vector<ObjectId>& object_of_;
  std::vector<bool>& bound_;
  std::vector<Object>& objects_;
  std::vector<int>& storage_users_;
  std::shared_ptr<AllocLog> log_;  // when ReportOptions::alloc_log
  AllocStream stream_;
  std::vector<Dims>& strides_;
  std::vector<std::vector<ObjectId>>& elements_;
  std::size_t element_lists_used_ = 0;  // elements_[0, used) belong to this run
  int current_step_ = -1;
  Report report_;
  std::set<std::string> diagnosed_;
  UnknownOps unknown_;
  OpLookup ops_{trace_};
  std::string key_;  // breakdown key being built (reused)
  // Buffers reused by every statement (no allocation per op).
  std::vector<ValueId> flat_args_;
  std::vector<ValueId> flat_outs_;
  std::vector<ObjectId> results_;
  std::vector<Operand> operands_;
};

// ---------------------------------------------------------------- heap

ObjectId RuntimeModel::NewObject(Object::Kind kind) {
  Object o;
  o.kind = kind;
  objects_.push_back(std::move(o));
  return static_cast<ObjectId>(objects_.size() - 1);
}

StorageId RuntimeModel::NewStorage(std::int64_t bytes, ValueId named, Role role) {
  const std::uint8_t device = named == kNoValue ? 0 : stream_.Device(ValueOf(named).type->device);
  const StorageId id = stream_.Alloc(bytes, named, role, device);
  if (id == kNoStorage) FailOverflow();
  storage_users_.push_back(0);
  return id;
}

ObjectId RuntimeModel::NewTensor(ValueId value, StorageId storage, Dims strides,
                                 bool layout_known, int contiguous) {
  const ObjectId id = NewObject(Object::Kind::kTensor);
  Object& o = objects_[id];
  o.storage = storage;
  o.type = ValueOf(value).type;
  const Dims& shape = o.type->shape;
  if (strides.size() != shape.size()) {
    // The op's layout rule gave strides of another rank than the output's
    // printed shape (a malformed trace: `t` of a 0-d tensor typed [14]):
    // the layout cannot be followed, so it is taken as contiguous.
    if (current_step_ >= 0) {
      const Statement& s = trace_.statements[current_step_];
      Diagnose("line " + std::to_string(s.source_line) + ": '" + std::string(trace_.SymbolOf(s)) +
               "' output '" + std::string(ValueOf(value).name) + "' has " +
               std::to_string(shape.size()) + " dimensions, but the op's layout gives " +
               std::to_string(strides.size()) + "; assumed contiguous");
    }
    strides = ContiguousStrides(shape);
    layout_known = false;
    contiguous = 1;
  }
  o.contiguous = contiguous >= 0 ? contiguous != 0 : IsContiguous(shape, strides);
  if (!o.contiguous || strides.size() != o.type->contiguous_strides.size() ||
      strides != o.type->contiguous_strides) {
    o.strides = static_cast<std::uint32_t>(strides_.size());
    strides_.push_back(std::move(strides));
  }
  o.layout_known = layout_known;
  ++storage_users_[storage];
  return id;
}

ObjectId RuntimeModel::NewAllocatedTensor(ValueId value, Dims strides, Role role,
                                          bool layout_known) {
  const Value& v = ValueOf(value);
  // A dense tensor occupies numel * itemsize; a strided one (nvFuser's
  // broadcast outputs) only the span its strides reach.
  std::int64_t bytes = static_cast<std::int64_t>(v.type->bytes);
  const bool contiguous = IsContiguous(v.type->shape, strides);
  if (!contiguous && !IsNonOverlappingAndDense(v.type->shape, strides)) {
    bytes = static_cast<std::int64_t>(StorageSpan(v.type->shape, strides) * v.type->dtype->bits / 8);
  }
  const StorageId storage = NewStorage(bytes, value, role);
  return NewTensor(value, storage, std::move(strides), layout_known, contiguous);
}

void RuntimeModel::DecRef(ObjectId id) {
  Object& o = objects_[id];
  if (o.refs <= 0) throw std::logic_error("peakmem runtime model: object freed twice");
  if (--o.refs > 0) return;
  if (o.kind == Object::Kind::kTensor) {
    if (--storage_users_[o.storage] == 0) {
      if (stream_.storages()[o.storage].freed_at != kNeverFreed) {
        throw std::logic_error("peakmem runtime model: storage freed twice");
      }
      stream_.Free(o.storage);
      if (stream_.counter().live() < 0) {
        throw std::logic_error("peakmem runtime model: live bytes became negative");
      }
    }
    return;
  }
  if (o.elements == kNone) return;
  std::vector<ObjectId> elements = std::move(elements_[o.elements]);
  elements_[o.elements].clear();
  for (ObjectId e : elements) DecRef(e);
}

void RuntimeModel::Bind(ValueId value, ObjectId object) {
  if (bound_[value]) Unbind(value);
  object_of_[value] = object;
  bound_[value] = true;
  IncRef(object);
}

void RuntimeModel::Unbind(ValueId value) {
  if (!bound_[value]) return;
  bound_[value] = false;
  DecRef(object_of_[value]);
}

[[noreturn]] void RuntimeModel::FailOverflow() const {
  const SourceLocation at = current_step_ >= 0 ? trace_.statements[current_step_].at
                                               : SourceLocation{1, 1};
  Fail(at, "total tensor bytes overflow 64 bits");
}

void RuntimeModel::Scratch(std::int64_t bytes) {
  const StorageId id = stream_.Alloc(bytes, kNoValue, Role::kScratch);
  if (id == kNoStorage) FailOverflow();
  storage_users_.push_back(0);  // (its row, so that StorageIds index storage_users_)
  stream_.Free(id);
}

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

ObjectId RuntimeModel::ArgObject(const Statement& s, std::size_t index) const {
  if (index >= s.args.size() || s.args[index].kind != Expr::Kind::kValue) return kNone;
  const ValueId v = s.args[index].value;
  return bound_[v] ? object_of_[v] : kNone;
}

ObjectId RuntimeModel::FirstTensorArg(const Statement& s, const Expr** expr_out) {
  (void)expr_out;
  auto tensor = [&](ValueId v) {
    return bound_[v] && IsTensorKind(ValueOf(v).type->kind) &&
           objects_[object_of_[v]].kind == Object::Kind::kTensor;
  };
  // Usually the first positional argument: no flattening needed.
  if (!s.args.empty() && s.args[0].kind == Expr::Kind::kValue && tensor(s.args[0].value)) {
    return object_of_[s.args[0].value];
  }
  FlatArgs(s, &flat_args_);
  for (ValueId v : flat_args_) {
    if (tensor(v)) return object_of_[v];
  }
  return kNone;
}

Dims RuntimeModel::ViewStrides(const Statement& s, const OpInfo& op, const Object& input,
                               const Value& out, std::size_t output_index, bool* known) {
  const Dims& in_shape = input.type->shape;
  const Dims& in_strides = StridesOf(input);
  const Dims& out_shape = out.type->shape;
  *known = input.layout_known;
  (void)output_index;
  std::string error;
  if (auto strides = ViewOutputStrides(op.layout, s, in_shape, in_strides, out_shape, &error)) {
    return std::move(*strides);
  }
  if (!error.empty()) Fail(s.at, error);
  if (out_shape == in_shape) return in_strides;
  if (IsContiguous(in_shape, in_strides)) return ContiguousStrides(out_shape);
  *known = false;
  Diagnose("line " + std::to_string(s.source_line) + ": the strides of view op '" + std::string(trace_.SymbolOf(s)) +
           "' are not followed; its output is assumed contiguous");
  return ContiguousStrides(out_shape);
}

// CPU matrix products hand BLAS only operands laid out as a row- or
// column-major matrix (ATen's addmm_impl_cpu_: unit stride in one dimension
// and a leading dimension at least the other's size); any other operand
// (an expanded view with stride 0, a strided slice) is cloned contiguous
// first, after the output is allocated, and freed when the op returns.
// Found by the differential tester: `v = x.unsqueeze(0).expand(2, 3);
// v @ v.t()` measures two 24-byte clones on top of the output.
std::int64_t RuntimeModel::MatmulOperandClones(const Statement& s) const {
  const OpInfo* op = ops_.Find(s);
  if (op == nullptr || op->scratch != ScratchRule::kBlasOperandClones) return 0;
  std::int64_t bytes = 0;
  int operands = 0;
  for (const Expr& a : s.args) {
    if (a.kind != Expr::Kind::kValue || !bound_[a.value]) continue;
    const Object& o = objects_[object_of_[a.value]];
    if (o.kind != Object::Kind::kTensor) continue;
    ++operands;
    const Dims& shape = o.type->shape;
    if (shape.size() != 2) return 0;  // only plain 2-D products are modelled
    const std::int64_t rows = shape[0], cols = shape[1];
    const Dims& strides = StridesOf(o);
    const std::int64_t s0 = strides[0], s1 = strides[1];
    const bool row_major = (s1 == 1 || cols == 1) && s0 >= std::max<std::int64_t>(1, cols);
    const bool col_major = (s0 == 1 || rows == 1) && s1 >= std::max<std::int64_t>(1, rows);
    if (!row_major && !col_major) {
      const Value& v = ValueOf(a.value);
      bytes += static_cast<std::int64_t>(v.type->numel * v.type->dtype->bits / 8);
    }
  }
  return operands == 2 ? bytes : 0;
}

Dims RuntimeModel::AllocatedStrides(const Statement& s, const OpInfo* op, const Value& out) {
  const Dims& shape = out.type->shape;
  if (op == nullptr) return ContiguousStrides(shape);
  switch (op->layout) {
    case LayoutRule::kElementwise: {
      std::vector<Operand>& operands = operands_;
      operands.clear();
      FlatArgs(s, &flat_args_);
      for (ValueId v : flat_args_) {
        if (!IsTensorKind(ValueOf(v).type->kind) || !bound_[v]) continue;
        const Object& o = objects_[object_of_[v]];
        if (o.kind != Object::Kind::kTensor || o.type->shape.size() > shape.size()) continue;
        operands.push_back({&o.type->shape, &StridesOf(o), o.contiguous});
      }
      if (operands.empty()) return ContiguousStrides(shape);
      return ElementwiseOutputStrides(shape, operands);
    }
    case LayoutRule::kStrideOrder: {
      std::optional<Dims> order;
      if (s.args.size() >= 2) order = IntList(s.args[1]);
      if (!order || order->size() != shape.size()) return ContiguousStrides(shape);
      std::vector<std::size_t> dims(shape.size());
      for (std::size_t d = 0; d < dims.size(); ++d) dims[d] = d;
      std::stable_sort(dims.begin(), dims.end(),
                       [&](std::size_t a, std::size_t b) { return (*order)[a] < (*order)[b]; });
      Dims strides(shape.size(), 1);
      std::int64_t next = 1;
      for (std::size_t d : dims) {
        strides[d] = next;
        next *= std::max<std::int64_t>(shape[d], 1);
      }
      return strides;
    }
    case LayoutRule::kPreserve: {
      const ObjectId in = FirstTensorArg(s);
      if (in != kNone && objects_[in].type->shape == shape) {
        return PreserveFormatStrides(shape, StridesOf(objects_[in]));
      }
      return ContiguousStrides(shape);
    }
    default:
      return ContiguousStrides(shape);
  }
}

void RuntimeModel::ExecuteCall(const Statement& s) {
  const OpInfo* op = ops_.Find(s);
  unknown_.Note(trace_, s, op);
  const OpEffect effect = op == nullptr ? OpEffect::kAllocates : op->effect;
  std::vector<ValueId>& outputs = flat_outs_;
  FlatOutputs(s, &outputs);

  // Scratch the op allocates and frees before it returns, on top of its
  // inputs (and, per the rule, its outputs).
  ScratchEstimate scratch =
      options_.model_scratch ? EstimateScratch(trace_, s, op) : ScratchEstimate{};
  if (options_.model_scratch) scratch.with_outputs += MatmulOperandClones(s);
  if (scratch.before_outputs > 0) Scratch(scratch.before_outputs);

  // Build the result object: one object per output pattern leaf.
  auto result_for = [&](ValueId out, std::size_t index) -> ObjectId {
    const Value& v = ValueOf(out);
    if (v.type->kind == ValueKind::kUnknown) {
      Fail(v.defined_at, "cannot determine the size of '" + std::string(v.name) +
                             "': no type comment and no subsymbol defines it");
    }
    if (!IsTensorKind(v.type->kind)) {
      return MakeValueObject(out, Role::kIntermediate, true, 0);
    }
    switch (effect) {
      case OpEffect::kReturnsInput:
      case OpEffect::kInPlace: {
        ObjectId in = kNone;
        if (op->returned_arg >= 0) {
          in = ArgObject(s, static_cast<std::size_t>(op->returned_arg));
        } else {
          FlatArgs(s, &flat_args_);
          if (index < flat_args_.size() && bound_[flat_args_[index]]) {
            in = object_of_[flat_args_[index]];
          }
        }
        if (in != kNone && objects_[in].kind == Object::Kind::kTensor) return in;
        Diagnose("line " + std::to_string(s.source_line) + ": '" + std::string(trace_.SymbolOf(s)) +
                 "' should return an input tensor, but its argument is not a live tensor; "
                 "counted as allocating");
        return NewAllocatedTensor(out, ContiguousStrides(v.type->shape), Role::kIntermediate);
      }
      case OpEffect::kViewOfInput: {
        const ObjectId in = FirstTensorArg(s);
        if (in == kNone) break;
        bool known = true;
        const Object& input = objects_[in];
        Dims strides = ViewStrides(s, *op, input, v, index, &known);
        return NewTensor(out, input.storage, std::move(strides), known);
      }
      case OpEffect::kMaybeView: {
        const ObjectId in = FirstTensorArg(s);
        if (in == kNone) break;
        const Object& input = objects_[in];
        if (!input.layout_known) {
          Diagnose("line " + std::to_string(s.source_line) + ": whether '" + std::string(trace_.SymbolOf(s)) +
                   "' copies depends on strides peakmem did not follow; assumed a view");
        }
        if (op->layout == LayoutRule::kReshape) {
          if (auto strides = ComputeViewStrides(input.type->shape, StridesOf(input), v.type->shape)) {
            return NewTensor(out, input.storage, std::move(*strides), input.layout_known);
          }
          return NewAllocatedTensor(out, ContiguousStrides(v.type->shape), Role::kIntermediate);
        }
        if (op->layout == LayoutRule::kContiguous) {  // contiguous(): self when already contiguous
          if (input.contiguous) return in;  // returns self
          return NewAllocatedTensor(out, ContiguousStrides(v.type->shape), Role::kIntermediate);
        }
        // to / type_as: self when dtype and device do not change and no copy is asked.
        const Value& in_value = [&]() -> const Value& {
          FlatArgs(s, &flat_args_);
          for (ValueId a : flat_args_) {
            if (bound_[a] && object_of_[a] == in) return ValueOf(a);
          }
          return v;
        }();
        bool copy = false;
        for (const auto& [name, e] : s.kwargs) {
          if (name == "copy" && e.kind == Expr::Kind::kConstant && e.text == "True") copy = true;
        }
        if (!copy && in_value.type->dtype == v.type->dtype && in_value.type->device == v.type->device &&
            input.type->shape == v.type->shape) {
          return in;
        }
        return NewAllocatedTensor(out, PreserveFormatStrides(v.type->shape, StridesOf(input)),
                                  Role::kIntermediate);
      }
      case OpEffect::kFusion: {
        const std::int64_t bytes = FusionOutputBytes(trace_, s, out);
        const StorageId storage = NewStorage(bytes, out, Role::kIntermediate);
        return NewTensor(out, storage, ContiguousStrides(v.type->shape), true);
      }
      default:
        break;
    }
    return NewAllocatedTensor(out, AllocatedStrides(s, op, v), Role::kIntermediate);
  };

  // Outputs are created in order, then bound (Python binds after the call).
  std::vector<ObjectId>& results = results_;
  results.clear();
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const ObjectId o = result_for(outputs[i], i);
    IncRef(o);  // held by the call's result until bound
    results.push_back(o);
  }
  if (scratch.with_outputs > 0) Scratch(scratch.with_outputs);
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (objects_[results[i]].kind != Object::Kind::kTensor &&
        ValueOf(outputs[i]).type->kind == ValueKind::kCollection) {
      // Elements were created with the container; unpacking binds them.
    }
    Bind(outputs[i], results[i]);
  }
  for (ObjectId o : results) DecRef(o);
}

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
  for (ValueId v = 0; v < bound_.size(); ++v) Unbind(v);
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

Report RuntimeModel::Run() {
  report_.model = "runtime";
  report_.trace_name = trace_.source_name;
  report_.convention = CallingConventionName(convention_);
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
  stream_.Finish(static_cast<std::int32_t>(n));
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
  unknown_.AppendDiagnostics(&report_.diagnostics, "counted as allocating its outputs");
  return std::move(report_);
}

}  // namespace

Report RunRuntimeModel(const ParsedTrace& parsed, const RuntimeOptions& options,
                       const ReportOptions& report_options, RuntimeWorkspace* workspace) {
  if (workspace == nullptr) {
    RuntimeWorkspace local;
    return RuntimeModel(parsed, options, report_options, local.buffers()).Run();
  }
  return RuntimeModel(parsed, options, report_options, workspace->buffers()).Run();
}

}  // namespace peakmem
