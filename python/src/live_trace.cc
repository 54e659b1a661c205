#include "live_trace.h"

#include <nanobind/stl/string.h>

#include <string>
#include <unordered_map>

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
std::string_view Utf8(nb::handle str) {
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(str.ptr(), &size);
  if (data == nullptr) throw nb::python_error();
  return {data, static_cast<std::size_t>(size)};
}

enum class ProxyKind { kNotProxy, kTensor, kFutureTensor, kCollection, kNumber, kOther };

// Thunder's classes and ids, looked up once per process.
struct ThunderNames {
  nb::object proxy, tensor, future_tensor, collection, number;
  nb::object unpack_trivial, unpack_sequence, del, ret;
  nb::str clear_mutable_collection{"clear_mutable_collection"};
  nb::str name_attr{"_name"}, shape_attr{"_shape"}, dtype_attr{"_dtype"}, device_attr{"_device"};
  nb::str sym_attr{"sym"}, id_attr{"id"}, sym_name_attr{"name"}, module_attr{"module"};
  nb::str args_attr{"args"}, kwargs_attr{"kwargs"}, output_attr{"output"};

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

class LiveReader {
 public:
  LiveReader(std::shared_ptr<const peakmem::SourceFile> source)
      : names_(ThunderNames::Get()), builder_(std::move(source)) {}

  peakmem::Trace Read(nb::handle trace);

 private:
  [[noreturn]] void Fail(const std::string& message) const {
    builder_.Fail(At(), "bound symbol " + std::to_string(index_) + ": " + message);
  }
  SourceLocation At() const { return {static_cast<int>(index_) + 1, 1}; }

  ProxyKind KindOf(nb::handle obj);
  std::string_view NameOf(nb::handle proxy);
  ValueId Define(nb::handle proxy);
  void SetType(ValueId id, nb::handle proxy, ProxyKind kind);
  ValueId Use(nb::handle proxy);
  Expr ToExpr(nb::handle obj, int depth);
  Pattern ToPattern(nb::handle obj, int depth);
  const peakmem::DType* DTypeOf(nb::handle dtype);
  const std::string& DeviceOf(nb::handle device);
  const std::string& ModuleOf(nb::handle sym);
  void ReadParams(nb::handle trace);
  static const peakmem::ValueType& Simple(ValueKind kind, const char* text);

  ThunderNames& names_;
  peakmem::TraceBuilder builder_;
  std::size_t index_ = 0;
  // Process-wide caches keyed by object address; the objects are kept alive
  // (there are few: proxy classes, dtypes, devices, symbols) so that an
  // address is never reused for another object. Guarded by the GIL.
  static inline std::unordered_map<PyTypeObject*, ProxyKind> kinds_;
  static inline std::unordered_map<PyObject*, const peakmem::DType*> dtypes_;
  static inline std::unordered_map<PyObject*, std::string> devices_;
  static inline std::unordered_map<PyObject*, std::string> modules_;
  static inline std::vector<nb::object>* keep_alive_ = new std::vector<nb::object>();
  bool returned_ = false;
};

ProxyKind LiveReader::KindOf(nb::handle obj) {
  PyTypeObject* type = Py_TYPE(obj.ptr());
  auto it = kinds_.find(type);
  if (it != kinds_.end()) return it->second;
  ProxyKind kind = ProxyKind::kNotProxy;
  if (nb::isinstance(obj, names_.tensor)) {
    kind = ProxyKind::kTensor;
  } else if (nb::isinstance(obj, names_.future_tensor)) {
    kind = ProxyKind::kFutureTensor;
  } else if (nb::isinstance(obj, names_.collection)) {
    kind = ProxyKind::kCollection;
  } else if (nb::isinstance(obj, names_.number)) {
    kind = ProxyKind::kNumber;
  } else if (nb::isinstance(obj, names_.proxy)) {
    kind = ProxyKind::kOther;
  }
  keep_alive_->push_back(nb::borrow(reinterpret_cast<PyObject*>(type)));
  kinds_.emplace(type, kind);
  return kind;
}

std::string_view LiveReader::NameOf(nb::handle proxy) {
  nb::object name = nb::steal(PyObject_GetAttr(proxy.ptr(), names_.name_attr.ptr()));
  if (!name.is_valid()) throw nb::python_error();
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(name.ptr(), &size);
  if (data == nullptr) throw nb::python_error();
  // The string lives as long as the proxy, which the trace keeps alive.
  return std::string_view(data, static_cast<std::size_t>(size));
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

void LiveReader::SetType(ValueId id, nb::handle proxy, ProxyKind kind) {
  peakmem::Value& v = builder_.trace().value(id);
  switch (kind) {
    case ProxyKind::kTensor:
    case ProxyKind::kFutureTensor: {
      nb::object shape_owner = nb::steal(PyObject_GetAttr(proxy.ptr(), names_.shape_attr.ptr()));
      if (!shape_owner.is_valid()) throw nb::python_error();
      peakmem::Dims shape;
      for (nb::handle d : shape_owner) {
        if (!PyLong_CheckExact(d.ptr())) {
          Fail("symbolic dimension in the shape of '" + std::string(v.name) +
               "': peakmem needs concrete shapes");
        }
        shape.push_back(PyLong_AsLongLong(d.ptr()));
      }
      nb::object dtype = nb::steal(PyObject_GetAttr(proxy.ptr(), names_.dtype_attr.ptr()));
      nb::object device = nb::steal(PyObject_GetAttr(proxy.ptr(), names_.device_attr.ptr()));
      if (!dtype.is_valid() || !device.is_valid()) throw nb::python_error();
      const peakmem::DType* d = DTypeOf(dtype);
      peakmem::TypeStringError error;
      auto type = peakmem::MakeTensorType(DeviceOf(device), d->short_name, std::move(shape),
                                          kind == ProxyKind::kFutureTensor, &error);
      if (!type) Fail("'" + std::string(v.name) + "': " + error.message);
      v.type = builder_.trace().InternType(std::move(*type));
      return;
    }
    case ProxyKind::kCollection: {
      v.type = &Simple(ValueKind::kCollection, "Collection");
      nb::object c = proxy.attr("collection")();
      if (PyList_Check(c.ptr())) v.container = ContainerKind::kList;
      else if (PyTuple_Check(c.ptr())) v.container = ContainerKind::kTuple;
      else if (PyDict_Check(c.ptr())) v.container = ContainerKind::kDict;
      else if (PyAnySet_Check(c.ptr())) v.container = ContainerKind::kSet;
      return;
    }
    case ProxyKind::kNumber:
      v.type = &Simple(ValueKind::kNumber, "");
      return;
    default:
      v.type = &Simple(ValueKind::kOpaque, "");
      return;
  }
}

// A shared type with only a kind (and a printed form).
const peakmem::ValueType& LiveReader::Simple(ValueKind kind, const char* text) {
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
  (void)text;
  return (*types)[kind == ValueKind::kCollection ? 0 : kind == ValueKind::kNumber ? 1 : 2];
}

ValueId LiveReader::Define(nb::handle proxy) {
  const ProxyKind kind = KindOf(proxy);
  const ValueId id = builder_.Define(NameOf(proxy), At());
  SetType(id, proxy, kind);
  return id;
}

ValueId LiveReader::Use(nb::handle proxy) {
  const std::string_view name = NameOf(proxy);
  const ValueId id = builder_.LookupForUse(name, At());
  if (id != peakmem::kNoValue) return id;
  // A proxy no statement defined (a constant the trace closes over): define it
  // here so that the models can see its type.
  return Define(proxy);
}

Expr LiveReader::ToExpr(nb::handle obj, int depth) {
  Expr e;
  e.at = At();
  if (depth > 1000) Fail("argument nested too deeply");
  PyObject* p = obj.ptr();
  if (PyTuple_CheckExact(p) || PyList_CheckExact(p)) {
    e.kind = PyTuple_CheckExact(p) ? Expr::Kind::kTuple : Expr::Kind::kList;
    for (nb::handle item : obj) e.items.push_back(ToExpr(item, depth + 1));
    return e;
  }
  if (PyDict_CheckExact(p)) {
    e.kind = Expr::Kind::kDict;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(p, &pos, &key, &value)) {
      e.items.push_back(ToExpr(key, depth + 1));
      e.items.push_back(ToExpr(value, depth + 1));
    }
    return e;
  }
  if (KindOf(obj) != ProxyKind::kNotProxy) {
    e.kind = Expr::Kind::kValue;
    e.value = Use(obj);
    return e;
  }
  e.kind = Expr::Kind::kConstant;
  if (p == Py_None) {
    e.text = "None";
  } else if (PyBool_Check(p)) {
    e.text = p == Py_True ? "True" : "False";
  } else if (PyLong_CheckExact(p) || PyFloat_CheckExact(p) || PyComplex_CheckExact(p)) {
    e.text = builder_.Keep(nb::cast<std::string>(nb::repr(obj)));
  } else {
    e.text = builder_.Intern(std::string("<") + Py_TYPE(p)->tp_name + ">");
  }
  return e;
}

Pattern LiveReader::ToPattern(nb::handle obj, int depth) {
  Pattern p;
  p.at = At();
  if (depth > 1000) Fail("output nested too deeply");
  if (PyTuple_Check(obj.ptr()) || PyList_Check(obj.ptr())) {
    if (KindOf(obj) == ProxyKind::kNotProxy) {
      p.kind = PyTuple_Check(obj.ptr()) ? Pattern::Kind::kTuple : Pattern::Kind::kList;
      for (nb::handle item : obj) p.items.push_back(ToPattern(item, depth + 1));
      return p;
    }
  }
  if (KindOf(obj) != ProxyKind::kNotProxy) {
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

peakmem::Trace LiveReader::Read(nb::handle trace) {
  ReadParams(trace);
  nb::object bsyms = trace.attr("bound_symbols");
  for (nb::handle bsym : bsyms) {
    ++index_;
    if (returned_) Fail("statement after return");
    nb::object sym = nb::steal(PyObject_GetAttr(bsym.ptr(), names_.sym_attr.ptr()));
    if (!sym.is_valid()) throw nb::python_error();
    nb::object id = nb::steal(PyObject_GetAttr(sym.ptr(), names_.id_attr.ptr()));
    nb::object args = nb::steal(PyObject_GetAttr(bsym.ptr(), names_.args_attr.ptr()));
    nb::object output = nb::steal(PyObject_GetAttr(bsym.ptr(), names_.output_attr.ptr()));
    if (!id.is_valid() || !args.is_valid() || !output.is_valid()) throw nb::python_error();

    Statement s;
    s.at = At();
    s.source_line = static_cast<int>(index_);  // live traces: the bound symbol's 1-based index
    if (id.is(names_.unpack_trivial)) {
      // A parameter's proxy: its type.
      if (KindOf(output) == ProxyKind::kNotProxy) continue;
      const ValueId param = builder_.Lookup(NameOf(output));
      if (param != peakmem::kNoValue) SetType(param, output, KindOf(output));
      continue;
    }
    if (id.is(names_.unpack_sequence)) {
      s.kind = StatementKind::kUnpack;
      s.source = Use(nb::handle(PyTuple_GET_ITEM(args.ptr(), 0)));
      s.outputs.kind = Pattern::Kind::kTuple;
      s.outputs.at = At();
      for (nb::handle item : output) s.outputs.items.push_back(ToPattern(item, 1));
    } else if (id.is(names_.del)) {
      s.kind = StatementKind::kDel;
      for (nb::handle p : args) {
        if (KindOf(p) == ProxyKind::kNotProxy) continue;
        s.deleted.push_back(builder_.Delete(NameOf(p), At(), static_cast<int>(index_)));
      }
    } else if (id.is(names_.ret)) {
      s.kind = StatementKind::kReturn;
      s.returned = PyTuple_GET_SIZE(args.ptr()) == 1
                       ? ToExpr(nb::handle(PyTuple_GET_ITEM(args.ptr(), 0)), 0)
                       : ToExpr(args, 0);
      returned_ = true;
    } else if (PyUnicode_Check(id.ptr()) &&
               PyUnicode_Compare(id.ptr(), names_.clear_mutable_collection.ptr()) == 0) {
      s.kind = StatementKind::kClear;
      s.callee = s.symbol = s.symbol_id = "clear_mutable_collection";
      s.source = Use(nb::handle(PyTuple_GET_ITEM(args.ptr(), 0)));
    } else {
      s.kind = StatementKind::kCall;
      nb::object name = nb::steal(PyObject_GetAttr(sym.ptr(), names_.sym_name_attr.ptr()));
      if (!name.is_valid()) throw nb::python_error();
      s.symbol = builder_.Intern(Utf8(name));
      s.callee = builder_.Intern(ModuleOf(sym) + std::string(s.symbol));
      if (PyUnicode_Check(id.ptr())) s.symbol_id = builder_.Intern(Utf8(id));
      for (nb::handle a : args) s.args.push_back(ToExpr(a, 1));
      nb::object kwargs = nb::steal(PyObject_GetAttr(bsym.ptr(), names_.kwargs_attr.ptr()));
      if (!kwargs.is_valid()) throw nb::python_error();
      PyObject *key, *value;
      Py_ssize_t pos = 0;
      while (PyDict_Next(kwargs.ptr(), &pos, &key, &value)) {
        s.kwargs.emplace_back(builder_.Intern(Utf8(nb::handle(key))), ToExpr(value, 1));
      }
      s.outputs = ToPattern(output, 0);
      if (s.outputs.kind == Pattern::Kind::kIgnore) {
        s.outputs.kind = Pattern::Kind::kTuple;  // no outputs
      }
    }
    builder_.trace().statements.push_back(std::move(s));
  }
  if (!returned_) Fail("the trace has no return");
  return std::move(builder_.trace());
}

}  // namespace

peakmem::ParsedTrace ReadLiveTrace(nb::handle trace) {
  auto source = std::make_shared<const peakmem::SourceFile>("<TraceCtx>", "");
  LiveReader reader(source);
  peakmem::ParsedTrace parsed;
  parsed.trace = reader.Read(trace);
  parsed.source = std::move(source);
  parsed.source_is_printed_trace = false;
  return parsed;
}

}  // namespace peakmem_python
