// The runtime model's interpreter, shared by the files that implement it
// (private to src/models): runtime_model.cc (the frame: arguments,
// statements, return, the run), runtime_heap.cc (objects, storages and
// reference counts) and runtime_op_call.cc (what one op call does to the
// heap, by the op registry's effect and layout rules).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "peakmem/models/model_support.h"
#include "peakmem/models/runtime_model.h"
#include "peakmem/report/step_recorder.h"
#include "peakmem/semantics/layout.h"
#include "peakmem/semantics/op_registry.h"
#include "peakmem/semantics/scratch.h"
#include "peakmem/sim/alloc_stream.h"

namespace peakmem {
namespace runtime_detail {

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

}  // namespace runtime_detail

// The model's working memory, kept by a RuntimeWorkspace between runs.
struct RuntimeWorkspace::Buffers {
  std::vector<const Pattern*> contents;  // CollectionContents of the trace
  std::vector<runtime_detail::ObjectId> object_of;       // ValueId -> object it names (kNone if unbound)
  std::vector<bool> bound;               // ValueId currently a live frame local
  std::vector<runtime_detail::Object> objects;
  std::vector<StorageRecord> storages;  // the stream's storage table
  std::vector<int> storage_users;       // StorageId -> live tensor objects using it
  std::vector<Dims> strides;                    // Object::strides indexes it
  std::vector<std::vector<runtime_detail::ObjectId>> elements;  // Object::elements indexes it
};

namespace runtime_detail {

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
    for (const ArgumentTensor& a : options_.argument_tensors) argument_specs_[a.name] = &a;
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
  // An argument tensor held as `spec` says (RuntimeOptions::argument_tensors).
  ObjectId NewArgumentTensor(ValueId value, Role role, const ArgumentTensor& spec);
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
  // An unpack of a collection whose contents the trace never gives (an
  // older printer's backward: `t1, t2, = C0` with no type comments): fails
  // naming every value from there on whose size is unknown.
  [[noreturn]] void FailUnknownContents(const Statement& s) const;
  void ExecuteCall(const Statement& s);
  // The object an op call's output `out` (its `index`-th flat output) is
  // bound to, by the op's effect: an input itself, a view of an input's
  // storage, or a new storage.
  ObjectId CallResult(const Statement& s, const OpInfo* op, ValueId out, std::size_t index);
  ObjectId ReturnedInput(const Statement& s, const OpInfo& op, ValueId out, std::size_t index);
  ObjectId MaybeViewResult(const Statement& s, const OpInfo& op, ObjectId in, ValueId out);
  ObjectId ConversionResult(const Statement& s, ObjectId in, ValueId out);
  void BindPattern(const Pattern& pattern, ObjectId object, int depth);
  ObjectId BuildReturned(const Expr& e, int depth);
  void ExecuteReturn(const Statement& s);
  // Report::returned_tensors: the tensors `e` names.
  void RecordReturned(const Expr& e, int depth, std::set<std::string_view>* seen);

  // ---- op semantics
  ObjectId FirstTensorArg(const Statement& s);
  ObjectId ArgObject(const Statement& s, std::size_t index) const;
  Dims ViewStrides(const Statement& s, const OpInfo& op, const Object& input, const Value& out,
                   bool* known);
  Dims AllocatedStrides(const Statement& s, const OpInfo* op, const Value& out);
  std::int64_t MatmulOperandClones(const Statement& s, const OpInfo* op) const;
  // OpInfo::contiguous_copy_arguments: the copies' bytes.
  std::int64_t ContiguousArgumentCopy(const Statement& s, const OpInfo* op) const;
  // Whether a tensor is among the call's arguments after its first.
  bool HasTensorAfterFirst(const Statement& s);
  std::int64_t DTensorRedistribution(const Statement& s);
  // A CPU convolution's scratch (convolution_scratch.h); diagnoses a call
  // its rules do not cover and counts nothing for it.
  ScratchEstimate ConvolutionScratch(const Statement& s, const OpInfo& op);
  std::int64_t HalfFullReductionCopy(const Statement& s, const OpInfo& op) const;
  // ScratchRule::kHalfIndexAdd: half-precision index_add's float32 buffer
  // (and a strided index's contiguous copy) on the CPU.
  std::int64_t HalfIndexAddBuffer(const Statement& s) const;
  // PyTorch's intra-op threads: RuntimeOptions::cpu_threads, else this
  // machine's CPUs (PyTorch's own default).
  int CpuThreads() const;
  // Whether the call runs CUDA's kernels (RuntimeOptions::context, else the
  // device of its first tensor argument).
  bool RunsOnCuda(const Statement& s) const;
  // The scratch of a call that runs CUDA's kernels: each registry rule as
  // CUDA's kernel allocates it, or a diagnostic where that is not known.
  ScratchEstimate CudaScratch(const Statement& s, const OpInfo* op);
  // Whether the report already says that a CPU trace is predicted with
  // CUDA's kernels (once a run).
  bool said_cpu_trace_on_cuda_ = false;
  // On CUDA: the CPU kernels' scratch rules the model has no CUDA
  // counterpart for count nothing; a diagnostic names the call.
  void DiagnoseCpuOnlyRule(const Statement& s, std::string_view rule);

  const Value& ValueOf(ValueId id) const { return trace_.value(id); }
  // The bytes a dense tensor value takes at run time: its type's, except
  // for indices the trace types wrongly (OpInfo::int64_indices_output).
  std::int64_t DenseBytes(ValueId id) const {
    if (!int64_indices_.empty()) {
      if (auto it = int64_indices_.find(id); it != int64_indices_.end()) return it->second;
    }
    return static_cast<std::int64_t>(ValueOf(id).type->bytes);
  }
  // Fills int64_indices_ from the trace's calls.
  void FindInt64Indices();
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
  // MatmulOperandClones' latest answers, kept because a trace repeats its
  // products layer after layer. An answer is a function of the op, the
  // operands' types (interned: one pointer per type string in this run's
  // trace) and strides, and the output's type.
  struct ProductAnswer {
    const OpInfo* op = nullptr;
    const ValueType* a = nullptr;
    const ValueType* b = nullptr;
    const ValueType* out = nullptr;
    Dims a_strides;
    Dims b_strides;
    std::int64_t bytes = 0;
  };
  mutable std::array<ProductAnswer, 16> product_answers_;
  mutable std::size_t next_product_answer_ = 0;
  std::vector<ValueId> flat_outs_;
  std::vector<ObjectId> results_;
  std::vector<Operand> operands_;
  // RuntimeOptions::argument_tensors by name, and the storage of each
  // storage group made so far (kNone: not yet).
  std::map<std::string_view, const ArgumentTensor*> argument_specs_;
  // Values that are int64 indices whatever their printed dtype, with their
  // size at 8 bytes an element (FindInt64Indices; empty for most traces).
  absl::flat_hash_map<ValueId, std::int64_t> int64_indices_;
  std::vector<StorageId> group_storage_;
};

}  // namespace runtime_detail
}  // namespace peakmem
