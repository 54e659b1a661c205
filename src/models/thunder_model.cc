#include "peakmem/models/thunder_model.h"

#include <algorithm>
#include <map>
#include <span>
#include <unordered_set>

#include "peakmem/models/model_support.h"
#include "peakmem/semantics/op_registry.h"
#include "peakmem/report/breakdown_keys.h"
#include "peakmem/report/step_recorder.h"
#include "peakmem/sim/alloc_stream.h"

namespace peakmem {

namespace {

// The StepRecorder's caller_period for this model: its counting takes about
// a third of the time its rows take (measured at 10^6 statements:
// docs/scaling.md), so the counting thread builds every
// other block of rows itself.
constexpr int kCallerPeriod = 2;

// Thunder's breakdown keys (get_alloc_memory's), by the style each
// statement records.
enum ThunderKeyStyle : std::uint8_t {
  kNoKey = 0,
  kOpAndOutputs,  // "{symbol} {output names}" = the statement's delta, even with no outputs
  kEachDeleted,   // "python_del {name}" = its bytes, for each tensor a `del` frees
  kEachCleared,   // "clear_mutable_collection {name}" = its bytes, for each tensor a clear frees
};

class ThunderKeys final : public BreakdownKeys {
 public:
  void Set(const Trace& trace, const Statement& s, std::uint8_t style, std::int64_t delta,
           std::span<const NamedBytes> named, std::string* key,
           OrderedBreakdown* out) const override {
    if (style == kEachDeleted || style == kEachCleared) {
      for (const NamedBytes& n : named) {
        key->assign(style == kEachDeleted ? "python_del " : "clear_mutable_collection ");
        *key += trace.value(n.first).name;
        out->Set(*key, n.second);
      }
    } else if (style == kOpAndOutputs) {
      OpAndNamesKeys::AppendOpAndNames(trace, s, named, key);
      out->Set(*key, delta);
    }
  }
};

// Thunder matches its alias list against the symbol's id (OpInfo::thunder_alias).
bool IsThunderAlias(std::string_view id) {
  const OpInfo* op = id.empty() ? nullptr : FindOp(id);
  return op != nullptr && op->thunder_alias;
}

class ThunderModel {
 public:
  ThunderModel(const ParsedTrace& parsed, const ReportOptions& report_options)
      : parsed_(parsed),
        report_options_(report_options),
        trace_(parsed.trace),
        contents_(CollectionContents(trace_)),
        data_of_(trace_.values.size(), -1),
        log_(report_options.alloc_log ? std::make_shared<AllocLog>() : nullptr),
        stream_(&storages_, log_.get(), false) {}

  Report Run();

 private:
  // Thunder's MemoryData: a reference count and the proxy whose size is freed.
  // (`storage`: the stream's storage that its proxy's allocation made.)
  struct MemoryData {
    int count;
    ValueId proxy;
    StorageId storage;
  };

  std::int64_t CountArguments();
  // Sums byte counts; a total past 64 bits is an input error, not a wrapped number.
  std::int64_t CheckedAdd(std::int64_t a, std::int64_t b, SourceLocation at) const {
    std::int64_t sum = 0;
    if (__builtin_add_overflow(a, b, &sum) || (sum < 0 && a >= 0 && b >= 0)) {
      errors_.Fail(at, "total tensor bytes overflow 64 bits");
    }
    return sum;
  }
  // What Thunder counts for a tensor value: numel * dtype.bytes. Its packed
  // fp4 dtype is half a byte per element, so an odd number of them is a
  // fraction Thunder reports as a float; there is no integer to give.
  std::int64_t ThunderBytes(const Value& v) const {
    if (v.type->thunder_half_byte) {
      errors_.Fail(v.defined_at,
                   "Thunder counts '" + std::string(v.name) + "' (" + v.type->text + ") as " +
                       std::to_string(v.type->thunder_bytes) +
                       ".5 bytes (half a byte per f4_e2m1fn_x2 element), which the thunder "
                       "model cannot report as a whole number; the runtime model counts the " +
                       std::to_string(v.type->bytes) + " bytes PyTorch allocates");
    }
    return static_cast<std::int64_t>(v.type->thunder_bytes);
  }
  bool IsUsed(ValueId id) const {
    std::vector<ValueId> args;
    for (const Statement& s : trace_.statements) {
      FlatArgs(s, &args);
      for (ValueId used : args) {
        if (used == id) return true;
      }
    }
    return false;
  }
  void CountArgumentLeaves(const Pattern& pattern, std::int64_t* allocated, int depth);
  void CountArgument(ValueId id, std::int64_t* allocated, int depth);
  std::int64_t Default(const Statement& s);
  std::int64_t Alias(const Statement& s);
  std::int64_t Del(const Statement& s);
  std::int64_t Clear(const Statement& s);
  std::int64_t DropReference(ValueId id, const Statement& s);
  void ClearLeaves(const Pattern& pattern, const Statement& s, std::int64_t* freed);

  const ParsedTrace& parsed_;
  ReportOptions report_options_;
  const Trace& trace_;
  std::vector<const Pattern*> contents_;
  std::vector<int> data_of_;  // ValueId -> index in memory_data_, -1 if unregistered
  std::vector<MemoryData> memory_data_;
  Report report_;
  ModelErrors errors_{parsed_};
  std::string key_;            // breakdown key being built (reused: no allocation per step)
  // The values a statement's breakdown entries name, with their bytes (see
  // StepRecorder::Keys; reused).
  std::vector<std::pair<ValueId, std::int64_t>> named_;
  std::vector<ValueId> flat_;  // flattened arguments or outputs (reused)
  std::vector<char> alias_;    // call_symbol -> Thunder alias op
  // The allocation event stream: Thunder's count as storages (each output
  // a storage, freed when its MemoryData's count drops to 0; an output
  // counted again without a new MemoryData is a storage never freed, as
  // Thunder never subtracts it).
  std::vector<StorageRecord> storages_;
  std::shared_ptr<AllocLog> log_;
  AllocStream stream_;
  std::vector<ValueId> outputs_;  // the current statement's counted outputs (reused)

  StorageId Emit(std::int64_t bytes, ValueId value, StorageRole role) {
    return stream_.Alloc(bytes, value, role, stream_.Device(trace_.value(value).type->device));
  }
  // Allocates the outputs Default counted, and registers each new
  // MemoryData's storage.
  void EmitOutputs() {
    for (ValueId id : outputs_) {
      const StorageId storage = Emit(ThunderBytes(trace_.value(id)), id, StorageRole::kIntermediate);
      MemoryData& data = memory_data_[data_of_[id]];
      if (data.proxy == id && data.storage == kNoStorage) data.storage = storage;
    }
    outputs_.clear();
  }
};

void ThunderModel::CountArgument(ValueId id, std::int64_t* allocated, int depth) {
  const Value& v = trace_.value(id);
  switch (v.type->kind) {
    case ValueKind::kTensor:
    case ValueKind::kFutureTensor: {
      data_of_[id] = static_cast<int>(memory_data_.size());
      const std::int64_t bytes = ThunderBytes(v);
      *allocated = CheckedAdd(*allocated, bytes, v.defined_at);
      memory_data_.push_back({2, id, Emit(bytes, id, StorageRole::kArgument)});
      key_.assign("argument ");
      key_ += v.name;
      if (report_options_.breakdown) report_.breakdown.Set(key_, bytes);
      return;
    }
    case ValueKind::kCollection:
      if (contents_[id] == nullptr) {
        report_.diagnostics.push_back("the contents of collection argument '" +
                                      std::string(v.name) +
                                      "' are never unpacked; counted as empty");
        return;
      }
      CountArgumentLeaves(*contents_[id], allocated, depth + 1);
      return;
    case ValueKind::kUnknown:
      if (IsUsed(id)) {
        // An untyped collection the trace unpacks: name what has no size.
        if (const Statement* unpack = FirstUnpackOf(trace_, id)) {
          errors_.Fail(unpack->at, UntypedUnpackMessage(trace_, *unpack));
        }
        errors_.Fail(v.defined_at, "argument '" + std::string(v.name) + "' has no type comment");
      }
      // Thunder prints no type for an argument the trace never uses.
      report_.diagnostics.push_back("argument '" + std::string(v.name) +
                                    "' has no type comment and is never used; counted as 0 bytes");
      return;
    default:
      report_.diagnostics.push_back("argument '" + std::string(v.name) + "' is a " +
                                    ValueKindName(v.type->kind) +
                                    ", not a tensor; Thunder's get_alloc_memory would raise on it, "
                                    "peakmem counts it as 0 bytes");
      return;
  }
}

void ThunderModel::CountArgumentLeaves(const Pattern& pattern, std::int64_t* allocated,
                                       int depth) {
  if (depth > 1000) errors_.Fail(pattern.at, "collections nested too deeply");
  if (pattern.kind == Pattern::Kind::kValue) {
    CountArgument(pattern.value, allocated, depth);
    return;
  }
  for (const Pattern& item : pattern.items) CountArgumentLeaves(item, allocated, depth);
}

std::int64_t ThunderModel::CountArguments() {
  std::int64_t allocated = 0;
  for (const Parameter& p : trace_.params) CountArgument(p.value, &allocated, 0);
  return allocated;
}

// Thunder's key: "{symbol} {output names}" (kOpAndOutputs).
std::int64_t ThunderModel::Default(const Statement& s) {
  std::int64_t result = 0;
  const bool keyed = report_options_.breakdown;
  FlatOutputs(s, &flat_);
  for (ValueId id : flat_) {
    const Value& v = trace_.value(id);
    if (v.type->kind == ValueKind::kUnknown) {
      errors_.Fail(v.defined_at, "cannot determine the size of '" + std::string(v.name) +
                                     "': no type comment and no subsymbol defines it");
    }
    if (!IsTensorKind(v.type->kind)) continue;
    result = CheckedAdd(result, ThunderBytes(v), v.defined_at);
    if (data_of_[id] < 0) {
      data_of_[id] = static_cast<int>(memory_data_.size());
      memory_data_.push_back({1, id, kNoStorage});
    }
    // Allocated once the statement's total is known not to overflow (Run).
    outputs_.push_back(id);
    if (keyed) named_.emplace_back(id, 0);
  }
  return result;
}

std::int64_t ThunderModel::Alias(const Statement& s) {
  FlatArgs(s, &flat_);
  if (flat_.empty() || data_of_[flat_[0]] < 0) {
    errors_.Fail(s.at, "alias op '" + std::string(trace_.SymbolName(s)) +
                           "' on a value Thunder never counted (its get_alloc_memory asserts here)");
  }
  const int data = data_of_[flat_[0]];
  FlatOutputs(s, &flat_);
  for (ValueId out : flat_) {
    ++memory_data_[data].count;
    data_of_[out] = data;
  }
  return 0;
}

// The key: "python_del {name}" or "clear_mutable_collection {name}"
// (kEachDeleted, kEachCleared).
std::int64_t ThunderModel::DropReference(ValueId id, const Statement& s) {
  const Value& v = trace_.value(id);
  if (data_of_[id] < 0) {
    errors_.Fail(s.at, "Thunder's get_alloc_memory never counted tensor '" + std::string(v.name) +
                           "' (it asserts here); was it unpacked from a collection that is not "
                           "an argument?");
  }
  MemoryData& data = memory_data_[data_of_[id]];
  if (data.count == 0) {
    errors_.Fail(s.at, "reference count of '" + std::string(v.name) + "' would become negative");
  }
  if (--data.count != 0) return 0;
  const std::int64_t size = ThunderBytes(trace_.value(data.proxy));
  if (data.storage != kNoStorage) stream_.Free(data.storage);
  if (report_options_.breakdown) named_.emplace_back(id, -size);
  return -size;
}

std::int64_t ThunderModel::Del(const Statement& s) {
  std::int64_t freed = 0;
  for (ValueId id : s.deleted) {
    const Value& v = trace_.value(id);
    // An untyped output of an alias op (a split printed without subsymbols)
    // is still a tensor: Thunder registered it when the alias op ran.
    const bool registered_alias = v.type->kind == ValueKind::kUnknown && data_of_[id] >= 0;
    if (v.type->kind == ValueKind::kUnknown && !registered_alias) {
      errors_.Fail(s.at, "cannot determine the type of '" + std::string(v.name) + "' deleted here");
    }
    if (!IsTensorKind(v.type->kind) && !registered_alias) continue;
    freed += DropReference(id, s);
  }
  return freed;
}

void ThunderModel::ClearLeaves(const Pattern& pattern, const Statement& s, std::int64_t* freed) {
  if (pattern.kind == Pattern::Kind::kValue) {
    if (IsTensorKind(trace_.value(pattern.value).type->kind)) {
      *freed += DropReference(pattern.value, s);
    }
    return;
  }
  for (const Pattern& item : pattern.items) ClearLeaves(item, s, freed);
}

std::int64_t ThunderModel::Clear(const Statement& s) {
  const Value& c = trace_.value(s.source);
  const bool is_argument = std::any_of(trace_.params.begin(), trace_.params.end(),
                                       [&](const Parameter& p) {
                                         return trace_.value(p.value).name == c.name;
                                       });
  if (!is_argument) return 0;
  if (c.container == ContainerKind::kTuple) return 0;
  if (c.type->kind != ValueKind::kCollection) return 0;
  std::int64_t freed = 0;
  if (contents_[s.source] != nullptr) {
    // Direct elements only: a nested collection is a CollectionProxy leaf.
    const Pattern& contents = *contents_[s.source];
    const std::span<const Pattern> items = contents.kind == Pattern::Kind::kValue
                                               ? std::span<const Pattern>(&contents, 1)
                                               : std::span<const Pattern>(contents.items);
    for (const Pattern& item : items) ClearLeaves(item, s, &freed);
  }
  return freed;
}

Report ThunderModel::Run() {
  report_.model = "thunder";
  report_.trace_name = trace_.source_name;
  std::int64_t allocated = CountArguments();
  stream_.EndStep();
  std::int64_t max_allocated = 0;
  UnknownOps unknown;
  const OpLookup ops(trace_);
  // Whether each distinct call is one of Thunder's alias ops (by its id).
  for (const CallSymbol& c : trace_.call_symbols) alias_.push_back(IsThunderAlias(c.symbol_id));
  const std::size_t n = trace_.statements.size();
  const bool rows = report_options_.steps || report_options_.breakdown;
  // Rows and breakdown keys on a second thread for a big trace, as the
  // runtime model does: they cost more than this model's counting.
  const ThunderKeys thunder_keys;
  StepRecorder recorder(parsed_, &report_, report_options_, thunder_keys, kCallerPeriod);
  for (std::size_t i = 0; i < n; ++i) {
    const Statement& s = trace_.statements[i];
    const std::int64_t before = allocated;
    stream_.BeginStep(static_cast<std::int32_t>(i));
    std::uint8_t keys = kNoKey;
    switch (s.kind) {
      case StatementKind::kUnpack:
      case StatementKind::kAssign:
      case StatementKind::kReturn:
        break;
      case StatementKind::kDel:
        allocated = CheckedAdd(allocated, Del(s), s.at);
        keys = kEachDeleted;
        break;
      case StatementKind::kClear:
        // Thunder's current estimator knows only `clear_mutable_collection`;
        // the older `clear_collection` falls through to the default rule.
        allocated = CheckedAdd(allocated, s.legacy_clear ? Default(s) : Clear(s), s.at);
        keys = s.legacy_clear ? kOpAndOutputs : kEachCleared;
        break;
      case StatementKind::kCall: {
        unknown.Note(trace_, s, ops.Find(s));
        const bool alias = s.call_symbol < alias_.size() ? alias_[s.call_symbol] != 0
                                                         : IsThunderAlias(trace_.SymbolIdOf(s));
        allocated = CheckedAdd(allocated, alias ? Alias(s) : Default(s), s.at);
        keys = alias ? kNoKey : kOpAndOutputs;
        break;
      }
    }
    EmitOutputs();
    stream_.EndStep();
    const bool skipped = s.kind == StatementKind::kUnpack || s.kind == StatementKind::kAssign ||
                         s.kind == StatementKind::kReturn;
    if (!skipped && allocated > max_allocated) {
      max_allocated = allocated;
      report_.peak_step = static_cast<int>(i);
    }
    if (rows) {
      recorder.Record(i, allocated - before, allocated, allocated, named_,
                      report_options_.breakdown ? keys : static_cast<std::uint8_t>(kNoKey));
    }
    named_.clear();
  }
  report_.peak_bytes = max_allocated;
  report_.final_bytes = allocated;
  stream_.Finish(static_cast<std::int32_t>(n), trace_);
  report_.alloc_log = log_;
  recorder.Finish();
  unknown.AppendDiagnostics(&report_.diagnostics, "counted as allocating its outputs, as Thunder does");
  return std::move(report_);
}

}  // namespace

Report RunThunderModel(const ParsedTrace& parsed, const ReportOptions& report_options) {
  return ThunderModel(parsed, report_options).Run();
}

}  // namespace peakmem
