// The live reader's class (see live_reader.h), shared by its two source
// files: live_reader.cc (the walk over bound symbols, and gathering) and
// live_values.cc (proxies, types, expressions, symbols). Private to the
// extension.
#pragma once

#include <nanobind/nanobind.h>

#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "cpython_fast_access.h"
#include "live_reader.h"
#include "peakmem/ir/trace_builder.h"

namespace peakmem_python::live {

namespace nb = nanobind;
using peakmem::ContainerKind;
using peakmem::Expr;
using peakmem::Pattern;
using peakmem::SourceLocation;
using peakmem::Statement;
using peakmem::StatementKind;
using peakmem::ValueId;
using peakmem::ValueKind;

enum class ProxyKind { kNotProxy, kTensor, kDTensor, kFutureTensor, kCollection, kNumber, kOther };

// Thunder's classes and ids, looked up once per process.
struct ThunderNames {
  nb::object proxy, tensor, future_tensor, collection, number;
  nb::object unpack_trivial, unpack_sequence, del, ret;
  nb::object clear_mutable_collection = Name("clear_mutable_collection");
  nb::object name_attr = Name("_name"), shape_attr = Name("_shape"), dtype_attr = Name("_dtype"),
             device_attr = Name("_device");
  nb::object sym_attr = Name("sym"), id_attr = Name("id"), sym_name_attr = Name("name"),
             module_attr = Name("module");
  nb::object args_attr = Name("args"), kwargs_attr = Name("kwargs"), output_attr = Name("output");

  static ThunderNames& Get() {
    static ThunderNames* names = [] {
      auto* n = new ThunderNames();
      nb::module_ proxies = nb::module_::import_("thunder.core.proxies");
      n->proxy = proxies.attr("Proxy");
      n->tensor = proxies.attr("TensorProxy");
      n->future_tensor = proxies.attr("FutureTensorProxy");
      n->collection = proxies.attr("CollectionProxy");
      n->number = proxies.attr("NumberProxy");
      nb::object ids = nb::module_::import_("thunder.core.prims").attr("PrimIDs");
      n->unpack_trivial = ids.attr("UNPACK_TRIVIAL");
      n->unpack_sequence = ids.attr("UNPACK_SEQUENCE");
      n->del = ids.attr("DEL");
      n->ret = ids.attr("RETURN");
      return n;
    }();
    return *names;
  }
};

// A tensor type by what it is made of: equal keys make equal types.
struct TypeKey {
  PyObject* dtype = nullptr;
  PyObject* device = nullptr;
  bool future = false;
  peakmem::Dims dims;

  bool operator==(const TypeKey& o) const {
    return dtype == o.dtype && device == o.device && future == o.future && dims == o.dims;
  }
  template <typename H>
  friend H AbslHashValue(H h, const TypeKey& k) {
    return H::combine(std::move(h), k.dtype, k.device, k.future, k.dims);
  }
};

// What AttrBlockReader gathered for one bound symbol: its sym, args,
// kwargs and output (indices kSym...), and, when the output is a tensor
// proxy, the output's _name, _shape, _dtype and _device (kName...). All
// borrowed; nullptr: read by getattr.
struct Gathered {
  enum : int { kSym, kArgs, kKwargs, kOutput };
  enum : int { kName, kShape, kDType, kDevice };
  AttrBlockReader::Found bsym;
  AttrBlockReader::Found proxy;
};

class LiveReader {
 public:
  LiveReader(std::shared_ptr<const peakmem::SourceFile> source, const LiveReadOptions& options)
      : names_(ThunderNames::Get()), builder_(std::move(source)), options_(options) {
    builder_.SetRank(options.rank);
    builder_.SetDTensorLayout(options.dtensor_layout);
  }

  peakmem::Trace Read(nb::handle trace);

 private:
  // What a symbol is, read once per trace (a trace uses a few dozen symbols).
  enum class Special { kNone, kUnpackTrivial, kUnpackSequence, kDel, kReturn, kClear };
  struct SymInfo {
    Special special = Special::kNone;
    // Calls and clears: the (callee, symbol, id) interned in the trace's
    // call_symbols (Statement::call_symbol).
    std::uint32_t call_symbol = peakmem::kNoCallSymbol;
    // Calls: whether the arguments are read (lean: only those of Thunder's
    // alias ops, the only calls whose arguments the thunder model reads).
    bool read_args = true;
  };

  [[noreturn]] void Fail(const std::string& message) const {
    builder_.Fail(At(), "bound symbol " + std::to_string(index_) + ": " + message);
  }
  SourceLocation At() const { return {static_cast<int>(index_) + 1, 1}; }

  // ---- gathering (see AttrBlockReader)
  void Calibrate(PyObject* first_bsym);
  void GatherBlock(PyObject* const* bsyms, Py_ssize_t count);
  bool GatheredMatchesGetattr(PyObject* bsym, const Gathered& g);
  // bsym.<attr i>: gathered, or through getattr.
  nb::object BsymAttr(PyObject* bsym, int i, PyObject* name) {
    if (current_ != nullptr && current_->bsym[i] != nullptr) return nb::borrow(current_->bsym[i]);
    return Attr(bsym, name);
  }
  // Thunder code may run (a method call, a first read of a symbol): what was
  // gathered for the rest of the block is then read again by getattr.
  void PythonRuns() { ++python_calls_; }

  // ---- one bound symbol
  void ReadBoundSymbol(PyObject* bsym);
  void ReadUnpackTrivial(PyObject* bsym);
  void ReadUnpack(PyObject* bsym, PyObject* args, Statement& s);
  void ReadDel(PyObject* args, Statement& s);
  void ReadReturn(PyObject* args, Statement& s);
  void ReadCall(PyObject* bsym, PyObject* args, bool read_args, Statement& s);

  // ---- values
  ProxyKind KindOf(PyObject* obj);
  std::string_view NameOf(PyObject* proxy);
  // The live value a proxy object was last bound to, or kNoValue.
  ValueId Cached(PyObject* proxy) const {
    auto it = proxies_.find(proxy);
    if (it == proxies_.end() || dead_[it->second]) return peakmem::kNoValue;
    return it->second;
  }
  void Remember(PyObject* proxy, ValueId id) {
    proxies_.insert_or_assign(proxy, id);
    if (dead_.size() <= id) dead_.resize(builder_.trace().values.size() + 1, 0);
  }
  ValueId Define(PyObject* proxy);
  void SetType(ValueId id, PyObject* proxy, ProxyKind kind);
  void SetTensorType(ValueId id, PyObject* proxy, ProxyKind kind);
  void SetExactType(ValueId id, PyObject* proxy, ProxyKind kind);
  ContainerKind ContainerOf(PyObject* collection_proxy);
  ValueId Use(PyObject* proxy);
  ValueId Delete(PyObject* proxy);
  Expr ToExpr(PyObject* obj, int depth);
  bool ToContainerExpr(PyObject* obj, int depth, Expr* e);
  void SetConstant(PyObject* obj, Expr* e);
  void FlattenArgs(PyObject* obj, int depth, std::vector<Expr>* out);
  Pattern ToPattern(PyObject* obj, int depth);
  const SymInfo& SymOf(PyObject* sym);
  const peakmem::DType* DTypeOf(nb::handle dtype);
  const std::string& DeviceOf(nb::handle device);
  const std::string& ModuleOf(nb::handle sym);
  void ReadParams(nb::handle trace);
  PyObject* FirstArg(PyObject* args);
  static const peakmem::ValueType& Simple(ValueKind kind);

  ThunderNames& names_;
  peakmem::TraceBuilder builder_;
  const LiveReadOptions options_;
  std::size_t index_ = 0;
  bool returned_ = false;
  // Per trace, keyed by object address: the trace keeps these objects alive
  // while it is read.
  absl::flat_hash_map<PyObject*, ValueId> proxies_;
  std::vector<std::uint8_t> dead_;  // ValueId -> deleted
  // Items of the lists being converted, copied into the trace's arena when
  // a list ends (Trace::SaveExprs); a statement's keyword arguments.
  std::vector<Expr> expr_stack_;
  std::vector<peakmem::KeywordArg> kwargs_;
  std::vector<Pattern> pattern_stack_;  // targets being converted (as expr_stack_)
  std::vector<ValueId> deleted_;        // a `del`'s values (reused)
  peakmem::ArenaSpan<Pattern> TakePatterns(std::size_t base) {
    const peakmem::ArenaSpan<Pattern> items =
        builder_.trace().SaveArray(std::span<const Pattern>(pattern_stack_).subspan(base));
    pattern_stack_.resize(base);
    return items;
  }
  // The items on expr_stack_ from `base` on, saved, and popped.
  peakmem::ExprList TakeItems(std::size_t base) {
    const peakmem::ExprList list =
        builder_.trace().SaveExprs(std::span<const Expr>(expr_stack_).subspan(base));
    expr_stack_.resize(base);
    return list;
  }
  absl::flat_hash_map<PyObject*, SymInfo> syms_;
  absl::flat_hash_map<TypeKey, const peakmem::ValueType*> types_;
  TypeKey key_;  // reused

  AttrBlockReader bsym_reader_, tensor_reader_;
  Gathered block_[AttrBlockReader::kMaxBlock];
  const Gathered* current_ = nullptr;  // the bound symbol being read, if gathered
  std::uint64_t python_calls_ = 0;

  // Process-wide caches keyed by object address; the objects are kept alive
  // (there are few: proxy classes, dtypes, devices, symbols) so that an
  // address is never reused for another object. Guarded by the GIL.
  static inline absl::flat_hash_map<PyTypeObject*, ProxyKind> kinds_;
  static inline std::unordered_map<PyObject*, const peakmem::DType*> dtypes_;
  static inline std::unordered_map<PyObject*, std::string> devices_;
  static inline std::unordered_map<PyObject*, std::string> modules_;
  static inline std::vector<nb::object>* keep_alive_ = new std::vector<nb::object>();
};

}  // namespace peakmem_python::live
