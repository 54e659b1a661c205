#include "live_trace.h"

#include <nanobind/stl/string.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <initializer_list>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "peakmem/trace_builder.h"

namespace nb = nanobind;

namespace peakmem_python {
namespace {

using peakmem::ContainerKind;
using peakmem::Expr;
using peakmem::Pattern;
using peakmem::SourceLocation;
using peakmem::Statement;
using peakmem::StatementKind;
using peakmem::ValueId;
using peakmem::ValueKind;

// The UTF-8 text of a Python str, without a copy (valid while it lives).
std::string_view Utf8(PyObject* str) {
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(str, &size);
  if (data == nullptr) throw nb::python_error();
  return {data, static_cast<std::size_t>(size)};
}

// getattr(obj, name) as a new reference; raises the Python error if it fails.
nb::object Attr(PyObject* obj, PyObject* name) {
  PyObject* result = PyObject_GetAttr(obj, name);
  if (result == nullptr) throw nb::python_error();
  return nb::steal(result);
}

// getattr for objects whose type does not override __getattribute__ (Thunder's
// proxies define only __getattr__, the fallback for missing attributes):
// object's own lookup, without the slot wrapper's two type lookups. A missing
// attribute goes the ordinary way (and so reaches __getattr__).
nb::object PlainAttr(PyObject* obj, PyObject* name) {
  PyObject* result = PyObject_GenericGetAttr(obj, name);
  if (result == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) throw nb::python_error();
    PyErr_Clear();
    return Attr(obj, name);
  }
  return nb::steal(result);
}

// An interned attribute name: attribute lookups compare interned keys by address.
nb::object Name(const char* text) { return nb::steal(PyUnicode_InternFromString(text)); }

enum class ProxyKind { kNotProxy, kTensor, kFutureTensor, kCollection, kNumber, kOther };

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

// The items of a tuple or list without copying (borrowed; valid while `seq` lives).
struct Items {
  PyObject** data;
  Py_ssize_t size;
  PyObject** begin() const { return data; }
  PyObject** end() const { return data + size; }
};
Items ItemsOf(PyObject* seq) {
  if (PyTuple_Check(seq)) return {&PyTuple_GET_ITEM(seq, 0), PyTuple_GET_SIZE(seq)};
  return {&PyList_GET_ITEM(seq, 0), PyList_GET_SIZE(seq)};
}

class LiveReader {
 public:
  LiveReader(std::shared_ptr<const peakmem::SourceFile> source, bool lean)
      : names_(ThunderNames::Get()), builder_(std::move(source)), lean_(lean) {}

  peakmem::Trace Read(nb::handle trace);

 private:
  // What a symbol is, read once per trace (a trace uses a few dozen symbols).
  enum class Special { kNone, kUnpackTrivial, kUnpackSequence, kDel, kReturn, kClear };
  struct SymInfo {
    Special special = Special::kNone;
    // Calls and clears: the (callee, symbol, id) interned in the trace's
    // call_symbols (Statement::call_symbol).
    std::uint32_t call_symbol = peakmem::kNoCallSymbol;
  };

  [[noreturn]] void Fail(const std::string& message) const {
    builder_.Fail(At(), "bound symbol " + std::to_string(index_) + ": " + message);
  }
  SourceLocation At() const { return {static_cast<int>(index_) + 1, 1}; }

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
  ValueId Use(PyObject* proxy);
  ValueId Delete(PyObject* proxy);
  Expr ToExpr(PyObject* obj, int depth);
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
  const bool lean_;
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
  // Process-wide caches keyed by object address; the objects are kept alive
  // (there are few: proxy classes, dtypes, devices, symbols) so that an
  // address is never reused for another object. Guarded by the GIL.
  static inline absl::flat_hash_map<PyTypeObject*, ProxyKind> kinds_;
  static inline std::unordered_map<PyObject*, const peakmem::DType*> dtypes_;
  static inline std::unordered_map<PyObject*, std::string> devices_;
  static inline std::unordered_map<PyObject*, std::string> modules_;
  static inline std::vector<nb::object>* keep_alive_ = new std::vector<nb::object>();
};

ProxyKind LiveReader::KindOf(PyObject* obj) {
  PyTypeObject* type = Py_TYPE(obj);
  auto it = kinds_.find(type);
  if (it != kinds_.end()) return it->second;
  nb::handle h(obj);
  ProxyKind kind = ProxyKind::kNotProxy;
  if (nb::isinstance(h, names_.tensor)) {
    kind = ProxyKind::kTensor;
  } else if (nb::isinstance(h, names_.future_tensor)) {
    kind = ProxyKind::kFutureTensor;
  } else if (nb::isinstance(h, names_.collection)) {
    kind = ProxyKind::kCollection;
  } else if (nb::isinstance(h, names_.number)) {
    kind = ProxyKind::kNumber;
  } else if (nb::isinstance(h, names_.proxy)) {
    kind = ProxyKind::kOther;
  }
  keep_alive_->push_back(nb::borrow(reinterpret_cast<PyObject*>(type)));
  kinds_.emplace(type, kind);
  return kind;
}

std::string_view LiveReader::NameOf(PyObject* proxy) {
  nb::object name = Attr(proxy, names_.name_attr.ptr());
  // The string lives as long as the proxy, which the trace keeps alive.
  return Utf8(name.ptr());
}

const peakmem::DType* LiveReader::DTypeOf(nb::handle dtype) {
  auto it = dtypes_.find(dtype.ptr());
  if (it != dtypes_.end()) return it->second;
  const std::string short_name = nb::cast<std::string>(dtype.attr("shortname")());
  const peakmem::DType* d = peakmem::FindDType(short_name);
  if (d == nullptr) Fail("unknown dtype '" + short_name + "'");
  keep_alive_->push_back(nb::borrow(dtype));
  dtypes_.emplace(dtype.ptr(), d);
  return d;
}

const std::string& LiveReader::DeviceOf(nb::handle device) {
  auto it = devices_.find(device.ptr());
  if (it != devices_.end()) return it->second;
  std::string text = nb::cast<std::string>(device.attr("device_str")());
  keep_alive_->push_back(nb::borrow(device));
  return devices_.emplace(device.ptr(), std::move(text)).first->second;
}

const std::string& LiveReader::ModuleOf(nb::handle sym) {
  auto it = modules_.find(sym.ptr());
  if (it != modules_.end()) return it->second;
  std::string prefix;
  nb::object module = nb::getattr(sym, names_.module_attr, nb::none());
  if (!module.is_none()) {
    nb::object name = nb::getattr(module, "__name__", nb::none());
    if (!name.is_none()) prefix = nb::cast<std::string>(name) + ".";
  }
  keep_alive_->push_back(nb::borrow(sym));
  return modules_.emplace(sym.ptr(), std::move(prefix)).first->second;
}

const LiveReader::SymInfo& LiveReader::SymOf(PyObject* sym) {
  auto it = syms_.find(sym);
  if (it != syms_.end()) return it->second;
  SymInfo info;
  nb::object id = Attr(sym, names_.id_attr.ptr());
  if (id.is(names_.unpack_trivial)) {
    info.special = Special::kUnpackTrivial;
  } else if (id.is(names_.unpack_sequence)) {
    info.special = Special::kUnpackSequence;
  } else if (id.is(names_.del)) {
    info.special = Special::kDel;
  } else if (id.is(names_.ret)) {
    info.special = Special::kReturn;
  } else if (PyUnicode_Check(id.ptr()) &&
             PyUnicode_Compare(id.ptr(), names_.clear_mutable_collection.ptr()) == 0) {
    info.special = Special::kClear;
    info.call_symbol = builder_.InternCallSymbol(
        "clear_mutable_collection", "clear_mutable_collection", "clear_mutable_collection");
  } else {
    nb::object name = Attr(sym, names_.sym_name_attr.ptr());
    const std::string symbol(Utf8(name.ptr()));
    const std::string callee = ModuleOf(sym) + symbol;
    const std::string symbol_id = PyUnicode_Check(id.ptr()) ? std::string(Utf8(id.ptr())) : std::string();
    info.call_symbol = builder_.InternCallSymbol(callee, symbol, symbol_id);
  }
  return syms_.emplace(sym, info).first->second;
}

void LiveReader::SetType(ValueId id, PyObject* proxy, ProxyKind kind) {
  switch (kind) {
    case ProxyKind::kTensor:
    case ProxyKind::kFutureTensor: {
      nb::object shape = Attr(proxy, names_.shape_attr.ptr());
      nb::object dtype = Attr(proxy, names_.dtype_attr.ptr());
      nb::object device = Attr(proxy, names_.device_attr.ptr());
      key_.dtype = dtype.ptr();
      key_.device = device.ptr();
      key_.future = kind == ProxyKind::kFutureTensor;
      key_.dims.clear();
      auto add_dim = [&](PyObject* d) {
        if (!PyLong_CheckExact(d)) {
          Fail("symbolic dimension in the shape of '" +
               std::string(builder_.trace().value(id).name) + "': peakmem needs concrete shapes");
        }
        const long long n = PyLong_AsLongLong(d);
        if (n == -1 && PyErr_Occurred()) throw nb::python_error();
        key_.dims.push_back(n);
      };
      if (PyTuple_CheckExact(shape.ptr()) || PyList_CheckExact(shape.ptr())) {
        for (PyObject* d : ItemsOf(shape.ptr())) add_dim(d);
      } else {
        for (nb::handle d : shape) add_dim(d.ptr());
      }
      auto it = types_.find(key_);
      if (it != types_.end()) {
        builder_.trace().value(id).type = it->second;
        return;
      }
      const peakmem::DType* d = DTypeOf(dtype);
      peakmem::TypeStringError error;
      auto type = peakmem::MakeTensorType(DeviceOf(device), d->short_name, key_.dims,
                                          key_.future, &error);
      if (!type) Fail("'" + std::string(builder_.trace().value(id).name) + "': " + error.message);
      const peakmem::ValueType* interned = builder_.trace().InternType(std::move(*type));
      types_.emplace(key_, interned);
      builder_.trace().value(id).type = interned;
      return;
    }
    case ProxyKind::kCollection: {
      peakmem::Value& v = builder_.trace().value(id);
      v.type = &Simple(ValueKind::kCollection);
      nb::object c = nb::handle(proxy).attr("collection")();
      if (PyList_Check(c.ptr())) v.container = ContainerKind::kList;
      else if (PyTuple_Check(c.ptr())) v.container = ContainerKind::kTuple;
      else if (PyDict_Check(c.ptr())) v.container = ContainerKind::kDict;
      else if (PyAnySet_Check(c.ptr())) v.container = ContainerKind::kSet;
      return;
    }
    case ProxyKind::kNumber:
      builder_.trace().value(id).type = &Simple(ValueKind::kNumber);
      return;
    default:
      builder_.trace().value(id).type = &Simple(ValueKind::kOpaque);
      return;
  }
}

// A shared type with only a kind (and a printed form).
const peakmem::ValueType& LiveReader::Simple(ValueKind kind) {
  static const auto* types = [] {
    auto* t = new std::vector<peakmem::ValueType>();
    for (ValueKind k : {ValueKind::kCollection, ValueKind::kNumber, ValueKind::kOpaque}) {
      peakmem::ValueType type;
      type.kind = k;
      type.text = k == ValueKind::kCollection ? "Collection" : "";
      t->push_back(type);
    }
    return t;
  }();
  return (*types)[kind == ValueKind::kCollection ? 0 : kind == ValueKind::kNumber ? 1 : 2];
}

ValueId LiveReader::Define(PyObject* proxy) {
  const ProxyKind kind = KindOf(proxy);
  const ValueId id = builder_.Define(NameOf(proxy), At());
  SetType(id, proxy, kind);
  Remember(proxy, id);
  return id;
}

ValueId LiveReader::Use(PyObject* proxy) {
  ValueId id = Cached(proxy);
  if (id != peakmem::kNoValue) return id;
  id = builder_.LookupForUse(NameOf(proxy), At());
  if (id != peakmem::kNoValue) {
    Remember(proxy, id);
    return id;
  }
  // A proxy no statement defined (a constant the trace closes over): define it
  // here so that the models can see its type.
  return Define(proxy);
}

ValueId LiveReader::Delete(PyObject* proxy) {
  const ValueId cached = Cached(proxy);
  const std::string_view name =
      cached != peakmem::kNoValue ? builder_.trace().value(cached).name : NameOf(proxy);
  const ValueId id = builder_.Delete(name, At(), static_cast<int>(index_));
  if (dead_.size() <= id) dead_.resize(builder_.trace().values.size() + 1, 0);
  dead_[id] = 1;
  return id;
}

Expr LiveReader::ToExpr(PyObject* p, int depth) {
  Expr e;
  e.at = At();
  if (depth > 1000) Fail("argument nested too deeply");
  const ValueId cached = Cached(p);
  if (cached != peakmem::kNoValue) {
    e.kind = Expr::Kind::kValue;
    e.value = cached;
    return e;
  }
  if (PyTuple_CheckExact(p) || PyList_CheckExact(p)) {
    e.kind = PyTuple_CheckExact(p) ? Expr::Kind::kTuple : Expr::Kind::kList;
    const std::size_t base = expr_stack_.size();
    for (PyObject* item : ItemsOf(p)) {
      const Expr item_expr = ToExpr(item, depth + 1);
      expr_stack_.push_back(item_expr);
    }
    e.items = TakeItems(base);
    return e;
  }
  if (PyDict_CheckExact(p)) {
    e.kind = Expr::Kind::kDict;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    const std::size_t base = expr_stack_.size();
    while (PyDict_Next(p, &pos, &key, &value)) {
      const Expr key_expr = ToExpr(key, depth + 1);
      expr_stack_.push_back(key_expr);
      const Expr value_expr = ToExpr(value, depth + 1);
      expr_stack_.push_back(value_expr);
    }
    e.items = TakeItems(base);
    return e;
  }
  if (KindOf(p) != ProxyKind::kNotProxy) {
    e.kind = Expr::Kind::kValue;
    e.value = Use(p);
    return e;
  }
  e.kind = Expr::Kind::kConstant;
  if (p == Py_None) {
    e.text = "None";
  } else if (PyBool_Check(p)) {
    e.text = p == Py_True ? "True" : "False";
  } else if (PyLong_CheckExact(p) || PyFloat_CheckExact(p) || PyComplex_CheckExact(p)) {
    e.text = builder_.Keep(nb::cast<std::string>(nb::repr(p)));
  } else {
    e.text = builder_.Intern(std::string("<") + Py_TYPE(p)->tp_name + ">");
  }
  e.SetConstant(e.text);
  return e;
}

// The lean form of an argument: its proxies, in the order ToExpr then
// FlattenValues would give them.
void LiveReader::FlattenArgs(PyObject* p, int depth, std::vector<Expr>* out) {
  if (depth > 1000) Fail("argument nested too deeply");
  ValueId id = Cached(p);
  if (id == peakmem::kNoValue) {
    if (PyTuple_CheckExact(p) || PyList_CheckExact(p)) {
      for (PyObject* item : ItemsOf(p)) FlattenArgs(item, depth + 1, out);
      return;
    }
    if (PyDict_CheckExact(p)) {
      PyObject *key, *value;
      Py_ssize_t pos = 0;
      while (PyDict_Next(p, &pos, &key, &value)) {
        FlattenArgs(key, depth + 1, out);
        FlattenArgs(value, depth + 1, out);
      }
      return;
    }
    if (KindOf(p) == ProxyKind::kNotProxy) return;
    id = Use(p);
  }
  Expr& e = out->emplace_back();
  e.kind = Expr::Kind::kValue;
  e.value = id;
  e.at = At();
}

Pattern LiveReader::ToPattern(PyObject* obj, int depth) {
  Pattern p;
  p.at = At();
  if (depth > 1000) Fail("output nested too deeply");
  const ProxyKind kind = KindOf(obj);
  if (kind == ProxyKind::kNotProxy && (PyTuple_Check(obj) || PyList_Check(obj))) {
    p.kind = PyTuple_Check(obj) ? Pattern::Kind::kTuple : Pattern::Kind::kList;
    const std::size_t base = pattern_stack_.size();
    if (PyTuple_CheckExact(obj) || PyList_CheckExact(obj)) {
      for (PyObject* item : ItemsOf(obj)) {
        const Pattern target = ToPattern(item, depth + 1);
        pattern_stack_.push_back(target);
      }
    } else {
      for (nb::handle item : nb::handle(obj)) {
        const Pattern target = ToPattern(item.ptr(), depth + 1);
        pattern_stack_.push_back(target);
      }
    }
    p.items = TakePatterns(base);
    return p;
  }
  if (kind != ProxyKind::kNotProxy) {
    p.kind = Pattern::Kind::kValue;
    p.value = Define(obj);
    return p;
  }
  p.kind = Pattern::Kind::kIgnore;
  return p;
}

void LiveReader::ReadParams(nb::handle trace) {
  nb::object si = trace.attr("siginfo")();
  auto add = [&](nb::handle name, peakmem::Parameter::Kind kind) {
    peakmem::Parameter param;
    param.kind = kind;
    param.value = builder_.Define(nb::cast<std::string>(name), {0, 1});
    builder_.trace().params.push_back(std::move(param));
  };
  for (nb::handle arg : si.attr("args")) add(arg[0], peakmem::Parameter::Kind::kPositional);
  nb::object varargs = si.attr("varargs");
  if (!varargs.is_none()) add(varargs[0], peakmem::Parameter::Kind::kVarArgs);
  for (nb::handle name : si.attr("kwargs")) add(name, peakmem::Parameter::Kind::kPositional);
  nb::object varkwargs = si.attr("varkwargs");
  if (!varkwargs.is_none()) add(varkwargs[0], peakmem::Parameter::Kind::kVarKwargs);
  builder_.trace().function_name = nb::cast<std::string>(si.attr("name"));
}

PyObject* LiveReader::FirstArg(PyObject* args) {
  if (!PyTuple_Check(args) || PyTuple_GET_SIZE(args) == 0) Fail("expected an argument");
  return PyTuple_GET_ITEM(args, 0);
}

peakmem::Trace LiveReader::Read(nb::handle trace) {
  ReadParams(trace);
  nb::object bsyms = trace.attr("bound_symbols");
  if (!PyList_CheckExact(bsyms.ptr()) && !PyTuple_CheckExact(bsyms.ptr())) {
    bsyms = nb::steal(PySequence_List(bsyms.ptr()));
    if (!bsyms.is_valid()) throw nb::python_error();
  }
  const Items all = ItemsOf(bsyms.ptr());
  peakmem::SegmentedVector<Statement>& statements = builder_.trace().statements;
  statements.reserve(statements.size() + static_cast<std::size_t>(all.size));
  for (Py_ssize_t i = 0; i < all.size; ++i) {
    // The list may not change while it is read: nothing here runs Python code
    // that could change it, but stay in bounds whatever happens.
    if (i >= (PyList_CheckExact(bsyms.ptr()) ? PyList_GET_SIZE(bsyms.ptr()) : all.size)) break;
    PyObject* bsym = all.data[i];
    ++index_;
    if (returned_) Fail("statement after return");
    nb::object sym = Attr(bsym, names_.sym_attr.ptr());
    const SymInfo& info = SymOf(sym.ptr());

    if (info.special == Special::kUnpackTrivial) {
      // A parameter's proxy: its type.
      nb::object output = Attr(bsym, names_.output_attr.ptr());
      const ProxyKind kind = KindOf(output.ptr());
      if (kind == ProxyKind::kNotProxy) continue;
      const ValueId param = builder_.Lookup(NameOf(output.ptr()));
      if (param != peakmem::kNoValue) {
        SetType(param, output.ptr(), kind);
        Remember(output.ptr(), param);
      }
      continue;
    }
    nb::object args = Attr(bsym, names_.args_attr.ptr());
    Statement& s = statements.emplace_back();
    s.at = At();
    s.source_line = static_cast<int>(index_);  // live traces: the bound symbol's 1-based index
    switch (info.special) {
      case Special::kUnpackSequence: {
        s.kind = StatementKind::kUnpack;
        s.source = Use(FirstArg(args.ptr()));
        s.outputs.kind = Pattern::Kind::kTuple;
        s.outputs.at = At();
        nb::object output = Attr(bsym, names_.output_attr.ptr());
        const std::size_t base = pattern_stack_.size();
        for (nb::handle item : output) {
          const Pattern target = ToPattern(item.ptr(), 1);
          pattern_stack_.push_back(target);
        }
        s.outputs.items = TakePatterns(base);
        break;
      }
      case Special::kDel: {
        s.kind = StatementKind::kDel;
        if (!PyTuple_Check(args.ptr())) Fail("bound symbol arguments are not a tuple");
        deleted_.clear();
        for (PyObject* p : ItemsOf(args.ptr())) {
          if (Cached(p) == peakmem::kNoValue && KindOf(p) == ProxyKind::kNotProxy) continue;
          deleted_.push_back(Delete(p));
        }
        s.deleted = builder_.trace().SaveArray(deleted_);
        break;
      }
      case Special::kReturn: {
        s.kind = StatementKind::kReturn;
        if (!PyTuple_Check(args.ptr())) Fail("bound symbol arguments are not a tuple");
        if (lean_) {
          Expr unread;  // the thunder model does not look at it
          unread.kind = Expr::Kind::kTuple;
          s.returned = std::move(unread);
        } else {
          s.returned = PyTuple_GET_SIZE(args.ptr()) == 1 ? ToExpr(FirstArg(args.ptr()), 0)
                                                         : ToExpr(args.ptr(), 0);
        }
        returned_ = true;
        break;
      }
      case Special::kClear:
        s.kind = StatementKind::kClear;
        s.call_symbol = info.call_symbol;
        s.source = Use(FirstArg(args.ptr()));
        break;
      default: {
        s.kind = StatementKind::kCall;
        s.call_symbol = info.call_symbol;
        nb::object kwargs = Attr(bsym, names_.kwargs_attr.ptr());
        if (!PyTuple_Check(args.ptr())) Fail("bound symbol arguments are not a tuple");
        if (!PyDict_Check(kwargs.ptr())) Fail("bound symbol keyword arguments are not a dict");
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        const std::size_t base = expr_stack_.size();
        if (lean_) {
          // Thunder's flat_proxy_args: positional then keyword values.
          for (PyObject* a : ItemsOf(args.ptr())) FlattenArgs(a, 1, &expr_stack_);
          while (PyDict_Next(kwargs.ptr(), &pos, &key, &value)) FlattenArgs(value, 1, &expr_stack_);
          s.args = TakeItems(base);
        } else {
          for (PyObject* a : ItemsOf(args.ptr())) {
            const Expr arg = ToExpr(a, 1);
            expr_stack_.push_back(arg);
          }
          s.args = TakeItems(base);
          kwargs_.clear();
          while (PyDict_Next(kwargs.ptr(), &pos, &key, &value)) {
            const std::string_view name = builder_.Intern(Utf8(key));
            kwargs_.emplace_back(name, ToExpr(value, 1));
          }
          s.kwargs = builder_.trace().SaveKeywordArgs(kwargs_);
        }
        nb::object output = Attr(bsym, names_.output_attr.ptr());
        s.outputs = ToPattern(output.ptr(), 0);
        if (s.outputs.kind == Pattern::Kind::kIgnore) {
          s.outputs.kind = Pattern::Kind::kTuple;  // no outputs
        }
        break;
      }
    }
  }
  if (!returned_) Fail("the trace has no return");
  return std::move(builder_.trace());
}

}  // namespace

peakmem::ParsedTrace ReadLiveTrace(nb::handle trace, bool lean) {
  auto source = std::make_shared<const peakmem::SourceFile>("<TraceCtx>", "");
  LiveReader reader(source, lean);
  peakmem::ParsedTrace parsed;
  parsed.trace = reader.Read(trace);
  parsed.source = std::move(source);
  parsed.source_is_printed_trace = false;
  return parsed;
}

// ---------------------------------------------------------------------------
// Thunder's get_alloc_memory, run directly on the live objects.
//
// The drop-in needs only the peak and the breakdown, so this walk skips the
// IR: it follows thunder.examine.memory_calculation.get_alloc_memory
// (lightning-thunder 0.2.6) step by step, with its ProxyDict (keyed by proxy
// name) kept as C++ tables keyed by object address, and writes the breakdown
// straight into the Python dict it returns (a dict gives Thunder's ordering:
// a key set again keeps its place). Anything it does not expect (an output
// that is not proxies in tuples and lists, an argument that is not a tensor,
// a reference Thunder would assert on, a symbolic size) makes it give up and
// return None; the caller then takes the general path (IR and the thunder
// model), which gives the same numbers or the error the user should see.
namespace {

class Unsupported {};  // thrown to give up; never escapes this file

// Walking a large trace is bound by memory latency more than by work: the
// bound symbols, their attribute storage, argument tuples and output proxies
// lie scattered over the Python heap, and each first touch is a cache (and
// TLB) miss; a bound symbol's output name sits at the end of a chain of six
// dependent loads (bound symbol, its __dict__, the dict's keys, the output
// proxy, its values array, the name). Misses overlap only when the code
// between them is short and does not depend on them, and a getattr is
// neither: so the walk goes in blocks of bound symbols, and for each block
// the Gatherer follows those chains one link at a time for the whole block,
// in tight loops where each loop reads what the previous one prefetched and
// prefetches the next link. The misses of a block then overlap instead of
// queueing one after another.
//
// It reads CPython 3.11's object layout (cpython/object.h, cpython/dictobject.h
// and internal/pycore_dict.h of 3.11):
//  - an instance of a type with Py_TPFLAGS_MANAGED_DICT keeps its attributes
//    in a values array pointed to by the fourth word before the object,
//    indexed like the entries of the type's shared keys
//    (PyHeapTypeObject::ht_cached_keys), or, once a __dict__ was made for it,
//    in that dict, pointed to by the third word. Thunder's cached properties
//    (flat_args, flat_outs, ...) make one for most bound symbols;
//  - such a dict either still shares the type's keys (its ma_values is then a
//    values array like the instance's), or, once it got a key the shared keys
//    lack, has its own table whose entries are in insertion order: an
//    attribute's entry then sits where its shared slot is (the instances set
//    their attributes in the same order), which is checked (the entry's key
//    must be the same interned str) before it is used, and looked up with
//    PyDict_GetItem otherwise.
// The slot of each attribute is found once per call from the type's shared
// keys, and only where no data descriptor on the type stands in front of the
// instance attribute (in lightning-thunder 0.2.6 these are plain instance
// attributes). Objects of another type, or missing an attribute, are read
// through getattr as usual; on other Python versions everything is. Run()
// also compares, for the first bound symbol of every block, what was gathered
// with what getattr gives, and gives up on any difference.
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000 && defined(Py_TPFLAGS_MANAGED_DICT)
#define PEAKMEM_CPYTHON_311_LAYOUT 1
namespace py311 {
// struct _dictkeysobject (internal/pycore_dict.h), up to its index table;
// the entries follow the index table.
struct DictKeys {
  Py_ssize_t dk_refcnt;
  std::uint8_t dk_log2_size;
  std::uint8_t dk_log2_index_bytes;
  std::uint8_t dk_kind;  // DictKeysKind
  std::uint32_t dk_version;
  Py_ssize_t dk_usable;
  Py_ssize_t dk_nentries;
  // char dk_indices[]; then the entries
};
static_assert(sizeof(DictKeys) == 32, "CPython 3.11's PyDictKeysObject header is 32 bytes");
enum : std::uint8_t { kKeysGeneral = 0, kKeysUnicode = 1, kKeysSplit = 2 };
struct UnicodeEntry {  // PyDictUnicodeEntry: the entries of kKeysUnicode and kKeysSplit keys
  PyObject* me_key;
  PyObject* me_value;
};
inline const UnicodeEntry* Entries(const DictKeys* keys) {
  return reinterpret_cast<const UnicodeEntry*>(reinterpret_cast<const char*>(keys) +
                                               sizeof(DictKeys) +
                                               (std::size_t{1} << keys->dk_log2_index_bytes));
}
// The values array of an instance whose type has a managed dict, or nullptr.
inline PyObject** InstanceValues(PyObject* obj) { return reinterpret_cast<PyObject***>(obj)[-4]; }
// Its __dict__, once one was made, or nullptr.
inline PyObject* InstanceDict(PyObject* obj) { return reinterpret_cast<PyObject**>(obj)[-3]; }
}  // namespace py311
#endif

class Gatherer {
 public:
  struct Fields {
    PyObject* sym = nullptr;  // all borrowed from the bound symbol; nullptr: use getattr
    PyObject* args = nullptr;
    PyObject* output = nullptr;
    // The output's _name, _numel and _dtype, when it is a tensor proxy of the
    // calibrated type (borrowed from it); nullptr: use getattr.
    PyObject* name = nullptr;
    PyObject* numel = nullptr;
    PyObject* dtype = nullptr;
  };

  // Where instances of `type` keep the attributes `names` (interned strs):
  // found in the type's shared keys. Leaves the type uncalibrated (so read
  // through getattr) where anything is not as expected.
  void CalibrateBsym(PyTypeObject* type, PyObject* sym, PyObject* args, PyObject* output) {
    bsym_.Calibrate(type, {sym, args, output});
  }
  void CalibrateProxy(PyTypeObject* type, PyObject* name, PyObject* numel, PyObject* dtype) {
    proxy_.Calibrate(type, {name, numel, dtype});
  }
  bool has_bsym() const { return bsym_.type != nullptr; }

  // The _name, _numel and _dtype (borrowed) of proxies[0..count) (count <=
  // kMaxBlock), read as Gather reads the outputs', into out[j].output, name,
  // numel and dtype; all nullptr where a proxy is not of the calibrated type
  // or misses one.
  void GatherProxies(PyObject* const* proxies, Py_ssize_t count, Fields* out) {
    for (Py_ssize_t j = 0; j < count; ++j) out[j] = Fields();
#if PEAKMEM_CPYTHON_311_LAYOUT
    if (proxy_.type == nullptr) return;
    PyObject* found[kMaxBlock][3];
    proxy_.Read(proxies, count, store_, found);
    for (Py_ssize_t j = 0; j < count; ++j) {
      if (found[j][0] == nullptr || found[j][1] == nullptr || found[j][2] == nullptr) continue;
      out[j].output = proxies[j];
      out[j].name = found[j][0];
      out[j].numel = found[j][1];
      out[j].dtype = found[j][2];
    }
#else
    (void)proxies;
    (void)count;
#endif
  }
  // One proxy, as GatherProxies reads it; false where it was not read.
  bool ReadProxy(PyObject* proxy, Fields* f) {
    GatherProxies(&proxy, 1, f);
    return f->name != nullptr;
  }

  // Fills out[0..count) for bsyms[0..count) (count <= kMaxBlock).
  static constexpr Py_ssize_t kMaxBlock = 128;
  void Gather(PyObject* const* bsyms, Py_ssize_t count, Fields* out) {
    for (Py_ssize_t j = 0; j < count; ++j) out[j] = Fields();
#if PEAKMEM_CPYTHON_311_LAYOUT
    if (bsym_.type == nullptr) return;
    // The bound symbols' sym, args and output.
    for (Py_ssize_t j = 0; j < count; ++j) objs_[j] = bsyms[j];
    PyObject* found[kMaxBlock][3];
    bsym_.Read(objs_, count, store_, found);
    Py_ssize_t proxies = 0;
    for (Py_ssize_t j = 0; j < count; ++j) {
      if (found[j][0] == nullptr || found[j][1] == nullptr || found[j][2] == nullptr) continue;
      out[j].sym = found[j][0];
      out[j].args = found[j][1];
      out[j].output = found[j][2];
      __builtin_prefetch(out[j].args);  // the tuple's header and its first items
      PyObject* o = out[j].output;
      if (proxy_.type != nullptr && Py_TYPE(o) == proxy_.type) {
        index_[proxies] = j;
        objs_[proxies++] = o;
      }
    }
    // The output proxies' _name, _numel and _dtype.
    if (proxies == 0) return;
    proxy_.Read(objs_, proxies, store_, found);
    for (Py_ssize_t k = 0; k < proxies; ++k) {
      if (found[k][0] == nullptr || found[k][1] == nullptr || found[k][2] == nullptr) continue;
      Fields& f = out[index_[k]];
      f.name = found[k][0];
      f.numel = found[k][1];
      f.dtype = found[k][2];
      __builtin_prefetch(f.name);  // the str's header and (for short names) its text
      __builtin_prefetch(f.numel);
    }
#else
    (void)bsyms;
    (void)count;
#endif
  }

 private:
#if PEAKMEM_CPYTHON_311_LAYOUT
  // Where one object's attributes are, found link by link.
  struct Store {
    PyObject** values;                 // a values array (the instance's or its dict's)
    const py311::DictKeys* keys;       // or a dict's own table
    PyObject* dict;                    // the dict (for PyDict_GetItem)
  };
#endif
  // Three attributes of the instances of one type.
  struct Layout {
    PyTypeObject* type = nullptr;
    PyObject* names[3] = {};
    int slots[3] = {-1, -1, -1};
#if PEAKMEM_CPYTHON_311_LAYOUT
    const py311::DictKeys* keys = nullptr;  // the type's shared keys
#endif

    void Calibrate(PyTypeObject* t, std::initializer_list<PyObject*> attrs) {
      type = nullptr;
#if PEAKMEM_CPYTHON_311_LAYOUT
      if (!(t->tp_flags & Py_TPFLAGS_HEAPTYPE) || !(t->tp_flags & Py_TPFLAGS_MANAGED_DICT)) return;
      const auto* k =
          reinterpret_cast<const py311::DictKeys*>(reinterpret_cast<PyHeapTypeObject*>(t)->ht_cached_keys);
      if (k == nullptr || k->dk_kind != py311::kKeysSplit) return;
      const py311::UnicodeEntry* entries = py311::Entries(k);
      int i = 0;
      for (PyObject* attr : attrs) {
        // A data descriptor on the type (a property, a slot) would take
        // precedence over the instance's value: leave such a type to getattr.
        PyObject* descr = _PyType_Lookup(t, attr);
        if (descr != nullptr && Py_TYPE(descr)->tp_descr_set != nullptr) return;
        int slot = -1;
        for (Py_ssize_t e = 0; e < k->dk_nentries; ++e) {
          if (entries[e].me_key == attr) slot = static_cast<int>(e);
        }
        if (slot < 0) return;
        names[i] = attr;
        slots[i++] = slot;
      }
      keys = k;
      type = t;
#else
      (void)t;
      (void)attrs;
#endif
    }

#if PEAKMEM_CPYTHON_311_LAYOUT
    // found[j][i] = attribute i of objs[j] (borrowed), nullptr where objs[j]
    // is not of this type or its attribute is not found this way.
    void Read(PyObject* const* objs, Py_ssize_t count, Store* store, PyObject* (*found)[3]) const {
      auto prefetch_slots = [&](PyObject** v) {
        for (int s : slots) __builtin_prefetch(v + s);
      };
      // 1: the object's header and the words before it (values, dict).
      for (Py_ssize_t j = 0; j < count; ++j) {
        const char* p = reinterpret_cast<const char*>(objs[j]);
        __builtin_prefetch(p - 32);
        __builtin_prefetch(p + 8);
      }
      // 2: its values array, or its dict.
      for (Py_ssize_t j = 0; j < count; ++j) {
        Store& s = store[j];
        s = Store{nullptr, nullptr, nullptr};
        if (Py_TYPE(objs[j]) != type) continue;
        if (PyObject** v = py311::InstanceValues(objs[j])) {
          s.values = v;
          prefetch_slots(v);
        } else if (PyObject* d = py311::InstanceDict(objs[j])) {
          s.dict = d;
          __builtin_prefetch(d);
        }
      }
      // 3: the dict's values array (a dict that still shares the type's
      // keys), or its keys.
      for (Py_ssize_t j = 0; j < count; ++j) {
        Store& s = store[j];
        if (s.dict == nullptr) continue;
        if (!PyDict_CheckExact(s.dict)) {
          s.dict = nullptr;
          continue;
        }
        const auto* d = reinterpret_cast<PyDictObject*>(s.dict);
        const auto* k = reinterpret_cast<const py311::DictKeys*>(d->ma_keys);
        if (d->ma_values != nullptr) {
          if (k == keys) {
            s.values = reinterpret_cast<PyObject**>(d->ma_values);
            prefetch_slots(s.values);
          }
        } else {
          s.keys = k;
          __builtin_prefetch(k);
        }
      }
      // 4: the entries of a dict's own table.
      for (Py_ssize_t j = 0; j < count; ++j) {
        const py311::DictKeys* k = store[j].keys;
        if (k == nullptr) continue;
        if (k->dk_kind != py311::kKeysUnicode) {
          store[j].keys = nullptr;
          continue;
        }
        const py311::UnicodeEntry* entries = py311::Entries(k);
        for (int s : slots) {
          if (s < k->dk_nentries) __builtin_prefetch(entries + s);
        }
      }
      // 5: the attributes.
      for (Py_ssize_t j = 0; j < count; ++j) {
        const Store& s = store[j];
        for (int i = 0; i < 3; ++i) {
          PyObject* value = nullptr;
          if (s.values != nullptr) {
            value = s.values[slots[i]];
          } else if (s.keys != nullptr) {
            const py311::UnicodeEntry* entries = py311::Entries(s.keys);
            if (slots[i] < s.keys->dk_nentries && entries[slots[i]].me_key == names[i]) {
              value = entries[slots[i]].me_value;
            } else {
              value = PyDict_GetItem(s.dict, names[i]);
            }
          } else if (s.dict != nullptr) {
            value = PyDict_GetItem(s.dict, names[i]);
          }
          found[j][i] = value;
        }
        // The objects the attributes are (an output proxy: its header and
        // the words before it).
        if (found[j][2] != nullptr) {
          const char* p = reinterpret_cast<const char*>(found[j][2]);
          __builtin_prefetch(p - 32);
          __builtin_prefetch(p + 8);
        }
      }
    }
#endif
  };

  Layout bsym_, proxy_;
#if PEAKMEM_CPYTHON_311_LAYOUT
  Store store_[kMaxBlock];
#endif
  PyObject* objs_[kMaxBlock];
  Py_ssize_t index_[kMaxBlock];
};

class LiveThunder {
 public:
  LiveThunder() : names_(ThunderNames::Get()) {}

  nb::object Run(nb::handle trace);

 private:
  // What the Gatherer read from the values slots for a block's first bound
  // symbol (and its output proxy) must be what getattr gives; any
  // difference means a slot was calibrated wrong, and the whole direct path
  // gives up (the IR path then computes the answer).
  void CheckGathered(PyObject* bsym, const Gatherer::Fields& f) {
    if (f.sym == nullptr) return;
    if (Attr(bsym, names_.sym_attr.ptr()).ptr() != f.sym ||
        Attr(bsym, names_.args_attr.ptr()).ptr() != f.args ||
        Attr(bsym, names_.output_attr.ptr()).ptr() != f.output) {
      throw Unsupported();
    }
    CheckGatheredProxy(f);
  }
  // The same for a tensor proxy's gathered _name, _numel and _dtype.
  void CheckGatheredProxy(const Gatherer::Fields& f) {
    if (f.name == nullptr) return;
    if (Attr(f.output, names_.name_attr.ptr()).ptr() != f.name ||
        Attr(f.output, numel_attr_.ptr()).ptr() != f.numel ||
        Attr(f.output, names_.dtype_attr.ptr()).ptr() != f.dtype) {
      throw Unsupported();
    }
  }

  enum class Rule : std::uint8_t { kSkip, kDefault, kAlias, kDel, kClear };
  struct SymRule {
    Rule rule = Rule::kDefault;
    std::string_view name;  // bsym.sym.name (the str lives as long as the symbol)
  };
  // One proxy object: which name it has (an index into names_table_) and its size.
  struct Obj {
    std::uint32_t name;
    ProxyKind kind;
    std::int64_t bytes;  // numel * dtype.bytes for tensors; -1 otherwise
  };
  // One name: ProxyDict's entry (an index into data_, or -1).
  struct NameEntry {
    std::string_view text;
    int data = -1;
  };
  struct MemoryData {
    std::int64_t count;
    std::int64_t bytes;  // of the proxy it was made for
  };

  const SymRule& RuleOf(PyObject* sym);
  void PrefetchTables(const Gatherer::Fields* block, Py_ssize_t count) const;
  struct TypeInfo {
    ProxyKind kind = ProxyKind::kNotProxy;
    bool plain_getattr = false;  // __getattribute__ is object's
    bool dataclass = false;      // pytree flattens it (tree_flatten_with_dataclass)
  };
  TypeInfo TypeOf(PyObject* obj) {
    // Runs of objects of one type are the rule (proxies, tuples).
    if (Py_TYPE(obj) != last_type_) {
      last_info_ = TypeOfSlow(obj);
      last_type_ = Py_TYPE(obj);
    }
    return last_info_;
  }
  TypeInfo TypeOfSlow(PyObject* obj);
  PyTypeObject* last_type_ = nullptr;  // kept alive by TypeOfSlow's table
  TypeInfo last_info_;
  ProxyKind KindOf(PyObject* obj) { return TypeOf(obj).kind; }
  Obj& ObjOf(PyObject* proxy);
  std::int64_t DTypeBytes(PyObject* dtype);
  // Appends the proxies of `obj` (tuples and lists, depth first) to `out`.
  void FlatOuts(PyObject* obj, int depth, std::vector<PyObject*>* out);
  void FlatArgs(PyObject* obj, int depth, std::vector<PyObject*>* out);
  void Set(const std::string& key, std::int64_t bytes);
  std::int64_t Add(std::int64_t a, std::int64_t b) {
    std::int64_t sum;
    if (__builtin_add_overflow(a, b, &sum)) throw Unsupported();
    return sum;
  }
  // bsym.args / bsym.output: gathered, or through getattr.
  nb::object Args(PyObject* bsym) {
    if (fields_ != nullptr && fields_->args != nullptr) return nb::borrow(fields_->args);
    return Attr(bsym, names_.args_attr.ptr());
  }
  nb::object Output(PyObject* bsym) {
    if (fields_ != nullptr && fields_->output != nullptr) return nb::borrow(fields_->output);
    return Attr(bsym, names_.output_attr.ptr());
  }
  std::int64_t Default(PyObject* bsym, const SymRule& rule);
  std::int64_t Alias(PyObject* bsym);
  std::int64_t Del(PyObject* bsym);
  std::int64_t Clear(PyObject* bsym);
  std::int64_t DropReference(Obj& obj, std::string_view prefix);
  // DropReference for each tensor proxy of `proxies` (others are skipped):
  // the bytes freed, summed.
  std::int64_t DropTensorReferences(const std::vector<PyObject*>& proxies, std::string_view prefix);

  ThunderNames& names_;
  nb::object bytes_attr_ = Name("bytes"), numel_attr_ = Name("_numel");
  nb::object collection_attr_ = Name("collection");
  // The breakdown, in Thunder's order: (key, bytes) as set (Set), made into
  // a dict at the end (Breakdown). Each key str is hashed as it is made,
  // while it is in the cache (the str keeps its hash).
  struct Entry {
    nb::object key;
    PyObject* value;  // held by ints_
  };
  std::vector<Entry> entries_;
  nb::object Breakdown();
  absl::flat_hash_map<std::int64_t, nb::object> ints_;
  absl::flat_hash_map<PyObject*, SymRule> rules_;
  absl::flat_hash_map<PyObject*, Obj> objs_;
  // Proxy names (Thunder's ProxyDict keys) -> index into names_table_,
  // hashed with the str's own hash (cached in the str; computed once).
  struct NameKey {
    std::string_view text;
    Py_hash_t hash;
  };
  struct NameKeyHash {
    std::size_t operator()(const NameKey& k) const { return static_cast<std::size_t>(k.hash); }
  };
  struct NameKeyEq {
    bool operator()(const NameKey& a, const NameKey& b) const {
      return a.hash == b.hash && a.text == b.text;
    }
  };
  static NameKey KeyOf(PyObject* str) {  // str: an exact str
    const Py_hash_t hash = PyObject_Hash(str);
    if (hash == -1) throw nb::python_error();
    return {Utf8(str), hash};
  }
  absl::flat_hash_map<NameKey, std::uint32_t, NameKeyHash, NameKeyEq> name_index_;
  std::vector<nb::object> names_held_;  // names not read from a proxy's own storage
  std::vector<NameEntry> names_table_;
  std::vector<MemoryData> data_;
  absl::flat_hash_map<PyObject*, std::int64_t> dtype_bytes_;
  absl::flat_hash_map<std::string_view, bool> arg_names_;
  std::vector<PyObject*> flat_;  // reused
  std::string key_;              // reused
  Gatherer gatherer_;
  const Gatherer::Fields* fields_ = nullptr;  // the current bound symbol's, if gathered
  std::deque<std::string> name_keep_;  // argument names (stable addresses)
};

LiveThunder::TypeInfo LiveThunder::TypeOfSlow(PyObject* obj) {
  static absl::flat_hash_map<PyTypeObject*, TypeInfo>* types =
      new absl::flat_hash_map<PyTypeObject*, TypeInfo>();
  static std::vector<nb::object>* keep = new std::vector<nb::object>();
  PyTypeObject* type = Py_TYPE(obj);
  auto it = types->find(type);
  if (it != types->end()) return it->second;
  nb::handle h(obj);
  TypeInfo info;
  if (nb::isinstance(h, names_.tensor)) info.kind = ProxyKind::kTensor;
  else if (nb::isinstance(h, names_.future_tensor)) info.kind = ProxyKind::kFutureTensor;
  else if (nb::isinstance(h, names_.proxy)) info.kind = ProxyKind::kOther;
  nb::object own = nb::getattr(nb::handle(reinterpret_cast<PyObject*>(type)), "__getattribute__");
  nb::object base =
      nb::getattr(nb::handle(reinterpret_cast<PyObject*>(&PyBaseObject_Type)), "__getattribute__");
  info.plain_getattr = own.is(base);
  info.dataclass = PyObject_HasAttrString(reinterpret_cast<PyObject*>(type), "__dataclass_fields__");
  keep->push_back(nb::borrow(reinterpret_cast<PyObject*>(type)));
  types->emplace(type, info);
  return info;
}

const LiveThunder::SymRule& LiveThunder::RuleOf(PyObject* sym) {
  auto it = rules_.find(sym);
  if (it != rules_.end()) return it->second;
  static const std::string_view kAliases[] = {
      "unsqueeze", "squeeze", "transpose", "expand", "reshape", "torch_prims_reshape_impl",
      "permute", "contiguous", "split", "torch_wait_prim_impl", "shallow_copy"};
  SymRule r;
  nb::object id = Attr(sym, names_.id_attr.ptr());
  if (id.is(names_.unpack_trivial) || id.is(names_.unpack_sequence) || id.is(names_.ret)) {
    r.rule = Rule::kSkip;
  } else if (id.is(names_.del)) {
    r.rule = Rule::kDel;
  } else if (PyUnicode_CheckExact(id.ptr())) {
    const std::string_view text = Utf8(id.ptr());
    if (text == "clear_mutable_collection") {
      r.rule = Rule::kClear;
    } else {
      for (std::string_view alias : kAliases) {
        if (text == alias) r.rule = Rule::kAlias;
      }
    }
  } else if (!PyLong_CheckExact(id.ptr()) && id.ptr() != Py_None &&
             !PyObject_TypeCheck(id.ptr(), Py_TYPE(names_.del.ptr()))) {
    // An id of another kind might compare equal to one of Thunder's keys.
    throw Unsupported();
  }
  nb::object name = Attr(sym, names_.sym_name_attr.ptr());
  if (!PyUnicode_CheckExact(name.ptr())) throw Unsupported();
  r.name = Utf8(name.ptr());  // the symbol (alive with the trace) holds the str
  return rules_.emplace(sym, r).first->second;
}

// The tables a block of bound symbols will probe (objs_, name_index_) are
// larger than the L2 cache, so each probe would be a miss of its own, taken
// one after the other while the block is processed. So before, for the
// whole block: the entries of the output proxies (a new proxy and its name
// are looked up, then inserted) and, for the calls that read their
// arguments, those of the arguments (the argument tuples were prefetched by
// the Gatherer). Only reads: nothing here runs Python code or changes a table.
void LiveThunder::PrefetchTables(const Gatherer::Fields* block, Py_ssize_t count) const {
  bool reads_args[Gatherer::kMaxBlock];
  for (Py_ssize_t j = 0; j < count; ++j) {
    const Gatherer::Fields& f = block[j];
    reads_args[j] = false;
    if (f.sym == nullptr) continue;
    auto rule = rules_.find(f.sym);
    if (rule == rules_.end() || rule->second.rule == Rule::kSkip) continue;
    reads_args[j] = rule->second.rule != Rule::kDefault;
    if (f.name != nullptr && PyUnicode_CheckExact(f.name)) {
      objs_.prefetch(f.output);
      // Computes the str's hash (and caches it in the str, as any dict
      // lookup would), which ObjOf then reads.
      const Py_hash_t hash = PyObject_Hash(f.name);
      if (hash == -1) {
        PyErr_Clear();  // ObjOf raises it
        continue;
      }
      name_index_.prefetch(NameKey{{}, hash});
    }
  }
  for (Py_ssize_t j = 0; j < count; ++j) {
    if (!reads_args[j] || !PyTuple_CheckExact(block[j].args)) continue;
    // (An item that is no proxy costs a useless prefetch; checking its type
    // would cost a miss on the item itself.)
    for (PyObject* item : ItemsOf(block[j].args)) objs_.prefetch(item);
  }
}

std::int64_t LiveThunder::DTypeBytes(PyObject* dtype) {
  auto it = dtype_bytes_.find(dtype);
  if (it != dtype_bytes_.end()) return it->second;
  nb::object b = Attr(dtype, bytes_attr_.ptr());
  if (!PyLong_CheckExact(b.ptr())) throw Unsupported();
  const long long n = PyLong_AsLongLong(b.ptr());
  if (n == -1 && PyErr_Occurred()) throw nb::python_error();
  dtype_bytes_.emplace(dtype, n);
  return n;
}

LiveThunder::Obj& LiveThunder::ObjOf(PyObject* proxy) {
  auto [it, inserted] = objs_.try_emplace(proxy);
  if (!inserted) return it->second;
  Obj& o = it->second;  // filled below (or the whole walk gives up)
  const TypeInfo type = TypeOf(proxy);
  o.kind = type.kind;
  if (o.kind == ProxyKind::kNotProxy) throw Unsupported();
  // The gathered attributes of the current bound symbol's output, or getattr.
  const Gatherer::Fields* gathered =
      fields_ != nullptr && fields_->output == proxy && fields_->name != nullptr ? fields_ : nullptr;
  // A proxy first met elsewhere (an argument, a collection's item, one of
  // several outputs): read from its storage all the same where it can be.
  Gatherer::Fields read;
  if (gathered == nullptr && gatherer_.ReadProxy(proxy, &read)) gathered = &read;
  auto get = [&](PyObject* attr) { return type.plain_getattr ? PlainAttr(proxy, attr) : Attr(proxy, attr); };
  nb::object name = gathered != nullptr ? nb::borrow(gathered->name) : get(names_.name_attr.ptr());
  if (!PyUnicode_CheckExact(name.ptr())) throw Unsupported();
  // The proxy holds a gathered name; a name getattr gave is held here, in
  // case it was made for the call.
  if (gathered == nullptr) names_held_.push_back(name);
  const NameKey key = KeyOf(name.ptr());
  auto [slot, new_name] = name_index_.try_emplace(key, names_table_.size());
  if (new_name) names_table_.push_back({key.text, -1});
  o.name = slot->second;
  o.bytes = -1;
  if (o.kind == ProxyKind::kTensor || o.kind == ProxyKind::kFutureTensor) {
    nb::object numel = gathered != nullptr ? nb::borrow(gathered->numel) : get(numel_attr_.ptr());
    nb::object dtype = gathered != nullptr ? nb::borrow(gathered->dtype) : get(names_.dtype_attr.ptr());
    if (!PyLong_CheckExact(numel.ptr())) throw Unsupported();
    const long long n = PyLong_AsLongLong(numel.ptr());
    if (n == -1 && PyErr_Occurred()) throw nb::python_error();
    if (n < 0 || __builtin_mul_overflow(static_cast<std::int64_t>(n), DTypeBytes(dtype.ptr()), &o.bytes)) {
      throw Unsupported();
    }
  }
  return o;
}

void LiveThunder::FlatOuts(PyObject* obj, int depth, std::vector<PyObject*>* out) {
  if (depth > 100) throw Unsupported();
  if (PyTuple_CheckExact(obj) || PyList_CheckExact(obj)) {
    for (PyObject* item : ItemsOf(obj)) FlatOuts(item, depth + 1, out);
    return;
  }
  if (obj == Py_None) return;
  if (KindOf(obj) == ProxyKind::kNotProxy) throw Unsupported();  // dicts, dataclasses, ...
  out->push_back(obj);
}

void LiveThunder::FlatArgs(PyObject* obj, int depth, std::vector<PyObject*>* out) {
  if (depth > 100) throw Unsupported();
  // A proxy seen before is known by its address, without touching the object
  // (a miss; its entry in objs_ was prefetched). `obj` itself is a container
  // (the argument tuple, a collection), read already.
  if (depth > 0 && objs_.contains(obj)) {
    out->push_back(obj);
    return;
  }
  if (PyTuple_CheckExact(obj) || PyList_CheckExact(obj)) {
    for (PyObject* item : ItemsOf(obj)) FlatArgs(item, depth + 1, out);
    return;
  }
  if (PyDict_Check(obj) || PyTuple_Check(obj) || PyList_Check(obj) || PyAnySet_Check(obj)) {
    throw Unsupported();  // pytree's order for these is its own
  }
  const TypeInfo type = TypeOf(obj);
  if (type.dataclass) throw Unsupported();  // pytree looks inside
  if (type.kind != ProxyKind::kNotProxy) out->push_back(obj);
}

void LiveThunder::Set(const std::string& key, std::int64_t bytes) {
  // Most values repeat (a few tensor sizes, freed and allocated): one int
  // object per value. (CPython itself shares those from -5 to 256.)
  auto [it, inserted] = ints_.try_emplace(bytes);
  if (inserted) {
    it->second = nb::steal(PyLong_FromLongLong(bytes));
    if (!it->second.is_valid()) throw nb::python_error();
  }
  nb::object k = BreakdownKey(key, nullptr);
  if (PyObject_Hash(k.ptr()) == -1) throw nb::python_error();
  entries_.push_back({std::move(k), it->second.ptr()});
}

nb::object LiveThunder::Breakdown() {
  // Made at its final size, rather than grown (and rehashed) entry by entry.
  // A key set again keeps the place it was first set at, as in Thunder's dict.
  // _PyDict_NewPresized is private CPython API: used where its declaration in
  // cpython/dictobject.h is known (3.11, 3.12); elsewhere the dict grows.
#if PY_VERSION_HEX < 0x030D0000
  nb::object dict = nb::steal(_PyDict_NewPresized(static_cast<Py_ssize_t>(entries_.size())));
#else
  nb::object dict = nb::steal(PyDict_New());
#endif
  if (!dict.is_valid()) throw nb::python_error();
  // The keys were made long ago and have left the cache: each is prefetched
  // a few entries ahead (for writing: the dict takes a reference to it, and
  // reads the hash Set cached in it).
  constexpr std::size_t kAhead = 8;
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    if (i + kAhead < entries_.size()) __builtin_prefetch(entries_[i + kAhead].key.ptr(), 1);
    const Entry& e = entries_[i];
    if (PyDict_SetItem(dict.ptr(), e.key.ptr(), e.value) != 0) throw nb::python_error();
  }
  return dict;
}

std::int64_t LiveThunder::Default(PyObject* bsym, const SymRule& rule) {
  nb::object output = Output(bsym);
  flat_.clear();
  FlatOuts(output.ptr(), 0, &flat_);
  key_.assign(rule.name);
  key_ += ' ';
  const std::size_t names_at = key_.size();
  std::int64_t result = 0;
  for (PyObject* p : flat_) {
    Obj& o = ObjOf(p);
    if (o.kind != ProxyKind::kTensor && o.kind != ProxyKind::kFutureTensor) continue;
    result = Add(result, o.bytes);
    NameEntry& n = names_table_[o.name];
    if (n.data < 0) {
      n.data = static_cast<int>(data_.size());
      data_.push_back({1, o.bytes});
    }
    if (key_.size() > names_at) key_ += ", ";
    key_ += n.text;
  }
  Set(key_, result);
  return result;
}

std::int64_t LiveThunder::Alias(PyObject* bsym) {
  // Only flat_proxy_args[0] matters: the first proxy of the positional
  // arguments, when there is one, comes before any keyword argument's.
  nb::object args = Args(bsym);
  flat_.clear();
  FlatArgs(args.ptr(), 0, &flat_);
  if (flat_.empty()) throw Unsupported();  // a keyword argument or nothing: the general path
  const int data = names_table_[ObjOf(flat_[0]).name].data;
  if (data < 0) throw Unsupported();  // Thunder asserts here
  nb::object output = Output(bsym);
  flat_.clear();
  FlatOuts(output.ptr(), 0, &flat_);
  for (PyObject* out : flat_) {
    ++data_[data].count;
    names_table_[ObjOf(out).name].data = data;
  }
  return 0;
}

std::int64_t LiveThunder::DropReference(Obj& obj, std::string_view prefix) {
  const int data = names_table_[obj.name].data;
  if (data < 0) throw Unsupported();  // Thunder asserts here
  MemoryData& d = data_[data];
  if (d.count == 0) throw Unsupported();  // Thunder raises here
  if (--d.count != 0) return 0;
  key_.assign(prefix);
  key_ += names_table_[obj.name].text;
  Set(key_, -d.bytes);
  return -d.bytes;
}

std::int64_t LiveThunder::Del(PyObject* bsym) {
  // prims.python_del takes its proxies positionally (`del_(*args)`): its
  // keyword arguments are always empty, so they are not read.
  nb::object args = Args(bsym);
  flat_.clear();
  FlatArgs(args.ptr(), 0, &flat_);
  return DropTensorReferences(flat_, "python_del ");
}

std::int64_t LiveThunder::DropTensorReferences(const std::vector<PyObject*>& proxies,
                                               std::string_view prefix) {
  std::int64_t freed = 0;
  for (PyObject* p : proxies) {
    Obj& o = ObjOf(p);
    if (o.kind != ProxyKind::kTensor && o.kind != ProxyKind::kFutureTensor) continue;
    freed = Add(freed, DropReference(o, prefix));
  }
  return freed;
}

std::int64_t LiveThunder::Clear(PyObject* bsym) {
  nb::object args = Args(bsym);
  nb::object kwargs = Attr(bsym, names_.kwargs_attr.ptr());
  if (!PyDict_CheckExact(kwargs.ptr()) || PyDict_GET_SIZE(kwargs.ptr()) != 0) throw Unsupported();
  flat_.clear();
  FlatArgs(args.ptr(), 0, &flat_);
  if (flat_.empty()) throw Unsupported();
  PyObject* coll = flat_[0];
  if (!arg_names_.contains(names_table_[ObjOf(coll).name].text)) return 0;
  nb::object contents = nb::handle(coll).attr(collection_attr_)();
  // MutableSequence, MutableMapping, MutableSet: a list or a set here; a
  // tuple is cleared of nothing; anything else is left to the general path.
  if (PyTuple_CheckExact(contents.ptr())) return 0;
  if (!PyList_CheckExact(contents.ptr())) throw Unsupported();
  std::vector<PyObject*> items;
  FlatArgs(contents.ptr(), 0, &items);
  return DropTensorReferences(items, "clear_mutable_collection ");
}

nb::object LiveThunder::Run(nb::handle trace) {
  // Arguments: tree_iter((trc.args, trc.kwargs)), each a tensor held twice.
  nb::object si = trace.attr("siginfo")();
  for (nb::handle arg : si.attr("args")) {
    nb::object name = arg[0];
    if (!PyUnicode_CheckExact(name.ptr())) throw Unsupported();
    arg_names_.emplace(std::string_view(name_keep_.emplace_back(Utf8(name.ptr()))), true);
  }
  for (nb::handle name : si.attr("kwargs")) {
    if (!PyUnicode_CheckExact(name.ptr())) throw Unsupported();
    arg_names_.emplace(std::string_view(name_keep_.emplace_back(Utf8(name.ptr()))), true);
  }
  nb::object call_args = trace.attr("args");
  nb::object call_kwargs = trace.attr("kwargs");
  std::vector<PyObject*> leaves;
  FlatArgs(call_args.ptr(), 0, &leaves);
  if (!call_kwargs.is_none()) {
    if (!PyDict_CheckExact(call_kwargs.ptr()) || PyDict_GET_SIZE(call_kwargs.ptr()) != 0) {
      throw Unsupported();
    }
  }
  // Thunder keys every leaf by its name and sizes it: a leaf that is not a
  // proxy (a number, a string) makes it raise; the general path says why.
  std::size_t proxies_in_args = 0;
  std::vector<PyObject*> pending{call_args.ptr()};
  while (!pending.empty()) {
    PyObject* o = pending.back();
    pending.pop_back();
    if (PyTuple_CheckExact(o) || PyList_CheckExact(o)) {
      for (PyObject* item : ItemsOf(o)) pending.push_back(item);
    } else if (o != Py_None) {
      if (KindOf(o) == ProxyKind::kNotProxy) throw Unsupported();
      ++proxies_in_args;
    }
  }
  if (proxies_in_args != leaves.size()) throw Unsupported();
  nb::object bsyms = trace.attr("bound_symbols");
  if (!PyList_CheckExact(bsyms.ptr())) throw Unsupported();
  const std::size_t n = static_cast<std::size_t>(PyList_GET_SIZE(bsyms.ptr()));
  objs_.reserve(n + leaves.size());
  name_index_.reserve(n + leaves.size());
  names_table_.reserve(n + leaves.size());
  data_.reserve(n + leaves.size());
  // Where bound symbols and tensor proxies keep the attributes read here.
  if (n > 0) {
    gatherer_.CalibrateBsym(Py_TYPE(PyList_GET_ITEM(bsyms.ptr(), 0)), names_.sym_attr.ptr(),
                            names_.args_attr.ptr(), names_.output_attr.ptr());
  }
  if (PyType_Check(names_.tensor.ptr())) {
    gatherer_.CalibrateProxy(reinterpret_cast<PyTypeObject*>(names_.tensor.ptr()),
                             names_.name_attr.ptr(), numel_attr_.ptr(), names_.dtype_attr.ptr());
  }
  constexpr Py_ssize_t kBlock = Gatherer::kMaxBlock;
  Gatherer::Fields block[kBlock];
  std::int64_t allocated = 0;
  // A backward's arguments are its saved tensors (thousands of them): their
  // attributes are gathered a block at a time, as the bound symbols' are.
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    const std::size_t j = i % kBlock;
    if (j == 0) {
      const std::size_t count = std::min(leaves.size() - i, static_cast<std::size_t>(kBlock));
      gatherer_.GatherProxies(&leaves[i], static_cast<Py_ssize_t>(count), block);
      CheckGatheredProxy(block[0]);
    }
    PyObject* arg = leaves[i];
    fields_ = &block[j];
    Obj& o = ObjOf(arg);
    fields_ = nullptr;
    if (o.kind != ProxyKind::kTensor && o.kind != ProxyKind::kFutureTensor) throw Unsupported();
    NameEntry& entry = names_table_[o.name];
    entry.data = static_cast<int>(data_.size());
    data_.push_back({2, o.bytes});
    allocated = Add(allocated, o.bytes);
    key_.assign("argument ");
    key_ += entry.text;
    Set(key_, o.bytes);
  }
  std::int64_t max_allocated = 0;
  for (Py_ssize_t start = 0; start < PyList_GET_SIZE(bsyms.ptr()); start += kBlock) {
    const Py_ssize_t count = std::min(kBlock, PyList_GET_SIZE(bsyms.ptr()) - start);
    const bool gathered = gatherer_.has_bsym();
    if (gathered) {
      gatherer_.Gather(&PyList_GET_ITEM(bsyms.ptr(), start), count, block);
      CheckGathered(PyList_GET_ITEM(bsyms.ptr(), start), block[0]);
    }
    if (gathered) PrefetchTables(block, count);
    for (Py_ssize_t j = 0; j < count; ++j) {
      // Held while it is read: getattr could run Python code. Should that
      // code change the list, what was gathered is dropped.
      if (start + j >= PyList_GET_SIZE(bsyms.ptr())) break;
      const nb::object held = nb::borrow(PyList_GET_ITEM(bsyms.ptr(), start + j));
      PyObject* bsym = held.ptr();
      fields_ = gathered && PyList_GET_SIZE(bsyms.ptr()) == static_cast<Py_ssize_t>(n)
                    ? &block[j] : nullptr;
      // The gathered fields stay alive with the bound symbol; those this
      // bound symbol's rule reads are held too (a call's arguments are not
      // read: its args tuple, a cache miss, is left alone).
      nb::object sym = fields_ != nullptr && fields_->sym != nullptr
                           ? nb::borrow(fields_->sym)
                           : Attr(bsym, names_.sym_attr.ptr());
      const std::size_t rules_known = rules_.size();
      const SymRule& rule = RuleOf(sym.ptr());
      if (rule.rule == Rule::kSkip) continue;
      // A symbol met for the first time was read by getattr, which could run
      // Python code: this bound symbol is then read by getattr too.
      if (rules_.size() != rules_known) fields_ = nullptr;
      const bool reads_args = rule.rule != Rule::kDefault;
      const bool reads_output = rule.rule == Rule::kDefault || rule.rule == Rule::kAlias;
      nb::object args_held = reads_args && fields_ != nullptr && fields_->args != nullptr
                                 ? nb::borrow(fields_->args) : nb::object();
      nb::object output_held = reads_output && fields_ != nullptr && fields_->output != nullptr
                                   ? nb::borrow(fields_->output) : nb::object();
      switch (rule.rule) {
        case Rule::kSkip: continue;
        case Rule::kDefault: allocated = Add(allocated, Default(bsym, rule)); break;
        case Rule::kAlias: allocated = Add(allocated, Alias(bsym)); break;
        case Rule::kDel: allocated = Add(allocated, Del(bsym)); break;
        case Rule::kClear: allocated = Add(allocated, Clear(bsym)); break;
      }
      max_allocated = std::max(max_allocated, allocated);
    }
  }
  fields_ = nullptr;
  return nb::make_tuple(nb::int_(max_allocated), Breakdown());
}

}  // namespace

nb::object BreakdownKey(std::string_view key, const char* errors) {
  bool ascii = true;
  for (unsigned char c : key) ascii &= c < 0x80;
  PyObject* k;
  if (ascii) {
    k = PyUnicode_New(static_cast<Py_ssize_t>(key.size()), 0x7f);
    if (k != nullptr) std::memcpy(PyUnicode_DATA(k), key.data(), key.size());
  } else {
    k = PyUnicode_DecodeUTF8(key.data(), static_cast<Py_ssize_t>(key.size()), errors);
  }
  if (k == nullptr) throw nb::python_error();
  return nb::steal(k);
}

void SetBreakdownItem(PyObject* dict, std::string_view key, std::int64_t bytes,
                      const char* errors) {
  nb::object k = BreakdownKey(key, errors);
  nb::object value = nb::steal(PyLong_FromLongLong(bytes));
  if (!value.is_valid() || PyDict_SetItem(dict, k.ptr(), value.ptr()) != 0) {
    throw nb::python_error();
  }
}

nb::object ThunderAllocMemoryLive(nb::handle trace) {
  try {
    return LiveThunder().Run(trace);
  } catch (const Unsupported&) {
    return nb::none();
  } catch (const nb::python_error&) {
    // Something Thunder's objects raised: the general path reports it.
    return nb::none();
  }
}

}  // namespace peakmem_python
