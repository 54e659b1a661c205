#include <nanobind/stl/string.h>

#include <algorithm>

#include "live_reader_impl.h"
#include "peakmem/semantics/op_registry.h"

namespace peakmem_python::live {

// ---------------------------------------------------------------------------
// Symbols, dtypes, devices, proxy kinds

ProxyKind LiveReader::KindOf(PyObject* obj) {
  PyTypeObject* type = Py_TYPE(obj);
  auto it = kinds_.find(type);
  if (it != kinds_.end()) return it->second;
  nb::handle h(obj);
  ProxyKind kind = ProxyKind::kNotProxy;
  if (nb::isinstance(h, names_.tensor)) {
    // thunder/torch/experimental/dtensor_proxy.py's DTensorProxy, a
    // TensorProxy subclass, known by name: importing it imports torch.distributed.
    kind = std::string_view(type->tp_name) == "DTensorProxy" ? ProxyKind::kDTensor
                                                             : ProxyKind::kTensor;
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
  PythonRuns();
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
  PythonRuns();
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
  PythonRuns();
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
    const auto& aliases = peakmem::ThunderAliasOps();
    info.read_args = !options_.lean ||
                     std::find(aliases.begin(), aliases.end(), symbol_id) != aliases.end();
  }
  return syms_.emplace(sym, info).first->second;
}

// ---------------------------------------------------------------------------
// Values and their types

void LiveReader::SetType(ValueId id, PyObject* proxy, ProxyKind kind) {
  if (options_.exact) return SetExactType(id, proxy, kind);
  switch (kind) {
    case ProxyKind::kTensor:
    case ProxyKind::kFutureTensor:
      return SetTensorType(id, proxy, kind);
    case ProxyKind::kDTensor:
      return SetExactType(id, proxy, kind);
    case ProxyKind::kCollection: {
      peakmem::Value& v = builder_.trace().value(id);
      v.type = &Simple(ValueKind::kCollection);
      v.container = ContainerOf(proxy);
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

ContainerKind LiveReader::ContainerOf(PyObject* collection_proxy) {
  PythonRuns();
  nb::object c = nb::handle(collection_proxy).attr("collection")();
  if (PyList_Check(c.ptr())) return ContainerKind::kList;
  if (PyTuple_Check(c.ptr())) return ContainerKind::kTuple;
  if (PyDict_Check(c.ptr())) return ContainerKind::kDict;
  if (PyAnySet_Check(c.ptr())) return ContainerKind::kSet;
  return ContainerKind::kUnknown;
}

// Exact: the type Thunder prints (`type_string()`), parsed as the readers
// parse it.
void LiveReader::SetExactType(ValueId id, PyObject* proxy, ProxyKind kind) {
  PythonRuns();
  nb::object text = nb::handle(proxy).attr("type_string")();
  if (!PyUnicode_Check(text.ptr())) Fail("type_string() of a proxy is not a str");
  builder_.SetType(id, Utf8(text.ptr()), At());
  if (kind == ProxyKind::kCollection) builder_.trace().value(id).container = ContainerOf(proxy);
}

void LiveReader::SetTensorType(ValueId id, PyObject* proxy, ProxyKind kind) {
  // The output's attributes as gathered, or getattr.
  const bool gathered = current_ != nullptr && current_->bsym[Gathered::kOutput] == proxy &&
                        current_->proxy[Gathered::kShape] != nullptr &&
                        current_->proxy[Gathered::kDType] != nullptr &&
                        current_->proxy[Gathered::kDevice] != nullptr;
  auto get = [&](int i, const nb::object& name) {
    return gathered ? nb::borrow(current_->proxy[i]) : Attr(proxy, name.ptr());
  };
  nb::object shape = get(Gathered::kShape, names_.shape_attr);
  nb::object dtype = get(Gathered::kDType, names_.dtype_attr);
  nb::object device = get(Gathered::kDevice, names_.device_attr);
  key_.dtype = dtype.ptr();
  key_.device = device.ptr();
  key_.future = kind == ProxyKind::kFutureTensor;
  key_.dims.clear();
  auto add_dim = [&](PyObject* d) {
    if (!PyLong_CheckExact(d)) {
      Fail("symbolic dimension in the shape of '" + std::string(builder_.trace().value(id).name) +
           "': peakmem needs concrete shapes");
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
  auto type = peakmem::MakeTensorType(DeviceOf(device), d->short_name, key_.dims, key_.future, &error);
  if (!type) Fail("'" + std::string(builder_.trace().value(id).name) + "': " + error.message);
  const peakmem::ValueType* interned = builder_.trace().InternType(std::move(*type));
  types_.emplace(key_, interned);
  builder_.trace().value(id).type = interned;
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
  const bool gathered = current_ != nullptr && current_->bsym[Gathered::kOutput] == proxy &&
                        current_->proxy[Gathered::kName] != nullptr &&
                        PyUnicode_CheckExact(current_->proxy[Gathered::kName]);
  // A gathered name is held by the proxy, which the trace keeps alive.
  const std::string_view name = gathered ? Utf8(current_->proxy[Gathered::kName]) : NameOf(proxy);
  const ValueId id = builder_.Define(name, At());
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

// ---------------------------------------------------------------------------
// Expressions and targets

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
  // Exact: a proxy before anything else, as pytree and the JSON form see it.
  if (!options_.exact || KindOf(p) == ProxyKind::kNotProxy) {
    if (ToContainerExpr(p, depth, &e)) return e;
  }
  if (KindOf(p) != ProxyKind::kNotProxy) {
    e.kind = Expr::Kind::kValue;
    e.value = Use(p);
    return e;
  }
  SetConstant(p, &e);
  return e;
}

// Tuples, lists and dicts (exact: their subclasses, and sets, too) as
// container expressions, slices (not exact) as calls of `slice`; false for
// anything else.
bool LiveReader::ToContainerExpr(PyObject* p, int depth, Expr* e) {
  const bool exact = options_.exact;
  const std::size_t base = expr_stack_.size();
  auto push = [&](PyObject* item) {
    const Expr item_expr = ToExpr(item, depth + 1);
    expr_stack_.push_back(item_expr);
  };
  if (exact ? (PyTuple_Check(p) || PyList_Check(p)) : (PyTuple_CheckExact(p) || PyList_CheckExact(p))) {
    e->kind = PyTuple_Check(p) ? Expr::Kind::kTuple : Expr::Kind::kList;
    for (PyObject* item : ItemsOf(p)) push(item);
  } else if (PyDict_CheckExact(p)) {
    e->kind = Expr::Kind::kDict;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(p, &pos, &key, &value)) {
      push(key);
      push(value);
    }
  } else if (exact && PyDict_Check(p)) {
    PythonRuns();
    e->kind = Expr::Kind::kDict;
    for (nb::handle item : nb::handle(p).attr("items")()) {
      push(nb::handle(item)[0].ptr());
      push(nb::handle(item)[1].ptr());
    }
  } else if (exact && PyAnySet_Check(p)) {
    PythonRuns();
    e->kind = Expr::Kind::kSet;
    for (nb::handle item : nb::handle(p)) push(item.ptr());
  } else if (!exact && PySlice_Check(p)) {
    // slice(start, stop, step), as the printed trace spells it: what a view's
    // strides follow (semantics/view_strides.cc, basic indexing).
    e->kind = Expr::Kind::kCall;
    e->text = "slice";
    const auto* slice = reinterpret_cast<PySliceObject*>(p);
    for (PyObject* item : {slice->start, slice->stop, slice->step}) push(item);
  } else {
    return false;
  }
  e->items = TakeItems(base);
  return true;
}

// A constant: exact, as repr() spells it; otherwise numbers, None, bools
// and the Ellipsis as Python prints them and anything else by its type's
// name.
void LiveReader::SetConstant(PyObject* p, Expr* e) {
  e->kind = Expr::Kind::kConstant;
  if (options_.exact) {
    PythonRuns();
    nb::object text = nb::repr(p);
    e->text = builder_.Keep(Utf8(text.ptr()));
  } else if (p == Py_None) {
    e->text = "None";
  } else if (PyBool_Check(p)) {
    e->text = p == Py_True ? "True" : "False";
  } else if (p == Py_Ellipsis) {  // `x[..., 1:]`: the dimensions it keeps (view_strides.cc)
    e->text = "...";
  } else if (PyLong_CheckExact(p) || PyFloat_CheckExact(p) || PyComplex_CheckExact(p)) {
    e->text = builder_.Keep(nb::cast<std::string>(nb::repr(p)));
  } else {
    e->text = builder_.Intern(std::string("<") + Py_TYPE(p)->tp_name + ">");
  }
  e->SetConstant(e->text);
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
    for (PyObject* item : ItemsOf(obj)) {
      const Pattern target = ToPattern(item, depth + 1);
      pattern_stack_.push_back(target);
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
  PythonRuns();
  nb::object si = trace.attr("siginfo")();
  nb::object defaults = options_.exact ? si.attr("defaultdict") : nb::none();
  auto add = [&](nb::handle name, peakmem::Parameter::Kind kind) {
    peakmem::Parameter param;
    param.kind = kind;
    param.value = builder_.Define(nb::cast<std::string>(name), {0, 1});
    if (!defaults.is_none() && PyMapping_HasKey(defaults.ptr(), name.ptr())) {
      param.default_value = ToExpr(nb::object(defaults[name]).ptr(), 0);
      param.default_value->at = {0, 1};
    }
    builder_.trace().params.push_back(std::move(param));
  };
  for (nb::handle arg : si.attr("args")) add(arg[0], peakmem::Parameter::Kind::kPositional);
  nb::object varargs = si.attr("varargs");
  if (!varargs.is_none()) add(varargs[0], peakmem::Parameter::Kind::kVarArgs);
  for (nb::handle name : si.attr("kwargs")) add(name, peakmem::Parameter::Kind::kKeyword);
  nb::object varkwargs = si.attr("varkwargs");
  if (!varkwargs.is_none()) add(varkwargs[0], peakmem::Parameter::Kind::kVarKwargs);
  builder_.trace().function_name = nb::cast<std::string>(si.attr("name"));
}

PyObject* LiveReader::FirstArg(PyObject* args) {
  if (!PyTuple_Check(args) || PyTuple_GET_SIZE(args) == 0) Fail("expected an argument");
  return PyTuple_GET_ITEM(args, 0);
}

}  // namespace peakmem_python::live
