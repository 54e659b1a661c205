#include "live_reader.h"

#include <nanobind/stl/string.h>

#include "live_reader_impl.h"

namespace nb = nanobind;

namespace peakmem_python::live {

// ---------------------------------------------------------------------------
// Gathering

void LiveReader::Calibrate(PyObject* first_bsym) {
  // Exact reads call into Thunder for every proxy and constant: nothing to gain.
  if (options_.exact) return;
  bsym_reader_.Calibrate(Py_TYPE(first_bsym), {names_.sym_attr.ptr(), names_.args_attr.ptr(),
                                               names_.kwargs_attr.ptr(), names_.output_attr.ptr()});
  if (PyType_Check(names_.tensor.ptr())) {
    tensor_reader_.Calibrate(reinterpret_cast<PyTypeObject*>(names_.tensor.ptr()),
                             {names_.name_attr.ptr(), names_.shape_attr.ptr(),
                              names_.dtype_attr.ptr(), names_.device_attr.ptr()});
  }
}

void LiveReader::GatherBlock(PyObject* const* bsyms, Py_ssize_t count) {
  AttrBlockReader::Found found[AttrBlockReader::kMaxBlock];
  bsym_reader_.Read(bsyms, count, found);
  PyObject* outputs[AttrBlockReader::kMaxBlock];
  Py_ssize_t of[AttrBlockReader::kMaxBlock];  // the bound symbol of outputs[k]
  Py_ssize_t tensors = 0;
  for (Py_ssize_t j = 0; j < count; ++j) {
    Gathered& g = block_[j];
    for (int i = 0; i < AttrBlockReader::kMaxAttrs; ++i) {
      g.bsym[i] = found[j][i];
      g.proxy[i] = nullptr;
    }
    PyObject* out = g.bsym[Gathered::kOutput];
    if (out != nullptr && tensor_reader_.calibrated() && Py_TYPE(out) == tensor_reader_.type()) {
      of[tensors] = j;
      outputs[tensors++] = out;
    }
  }
  if (tensors == 0) return;
  tensor_reader_.Read(outputs, tensors, found);
  for (Py_ssize_t k = 0; k < tensors; ++k) {
    for (int i = 0; i < AttrBlockReader::kMaxAttrs; ++i) block_[of[k]].proxy[i] = found[k][i];
  }
}

// What was gathered for a block's first bound symbol (and its output) must
// be what getattr gives; a difference means an attribute's place was
// calibrated wrong, and the rest of the trace is read by getattr.
bool LiveReader::GatheredMatchesGetattr(PyObject* bsym, const Gathered& g) {
  const PyObject* bsym_names[] = {names_.sym_attr.ptr(), names_.args_attr.ptr(),
                                  names_.kwargs_attr.ptr(), names_.output_attr.ptr()};
  const PyObject* proxy_names[] = {names_.name_attr.ptr(), names_.shape_attr.ptr(),
                                   names_.dtype_attr.ptr(), names_.device_attr.ptr()};
  for (int i = 0; i < AttrBlockReader::kMaxAttrs; ++i) {
    if (g.bsym[i] != nullptr &&
        Attr(bsym, const_cast<PyObject*>(bsym_names[i])).ptr() != g.bsym[i]) {
      return false;
    }
    if (g.proxy[i] != nullptr &&
        Attr(g.bsym[Gathered::kOutput], const_cast<PyObject*>(proxy_names[i])).ptr() != g.proxy[i]) {
      return false;
    }
  }
  return true;
}

// ---------------------------------------------------------------------------
// The walk

void LiveReader::ReadUnpackTrivial(PyObject* bsym) {
  // A parameter's proxy: its type.
  nb::object output = BsymAttr(bsym, Gathered::kOutput, names_.output_attr.ptr());
  const ProxyKind kind = KindOf(output.ptr());
  if (kind == ProxyKind::kNotProxy) return;
  const ValueId param = builder_.Lookup(NameOf(output.ptr()));
  if (param != peakmem::kNoValue) {
    SetType(param, output.ptr(), kind);
    Remember(output.ptr(), param);
  }
}

void LiveReader::ReadUnpack(PyObject* bsym, PyObject* args, Statement& s) {
  s.kind = StatementKind::kUnpack;
  s.source = Use(FirstArg(args));
  s.outputs.kind = Pattern::Kind::kTuple;
  s.outputs.at = At();
  nb::object output = BsymAttr(bsym, Gathered::kOutput, names_.output_attr.ptr());
  const std::size_t base = pattern_stack_.size();
  for (nb::handle item : output) {
    const Pattern target = ToPattern(item.ptr(), 1);
    pattern_stack_.push_back(target);
  }
  s.outputs.items = TakePatterns(base);
}

void LiveReader::ReadDel(PyObject* args, Statement& s) {
  s.kind = StatementKind::kDel;
  if (!PyTuple_Check(args)) Fail("bound symbol arguments are not a tuple");
  deleted_.clear();
  for (PyObject* p : ItemsOf(args)) {
    if (Cached(p) == peakmem::kNoValue && KindOf(p) == ProxyKind::kNotProxy) continue;
    deleted_.push_back(Delete(p));
  }
  s.deleted = builder_.trace().SaveArray(deleted_);
}

void LiveReader::ReadReturn(PyObject* args, Statement& s) {
  s.kind = StatementKind::kReturn;
  if (!PyTuple_Check(args)) Fail("bound symbol arguments are not a tuple");
  if (options_.lean) {
    Expr unread;  // the thunder model does not look at it
    unread.kind = Expr::Kind::kTuple;
    s.returned = std::move(unread);
  } else {
    s.returned = PyTuple_GET_SIZE(args) == 1 ? ToExpr(FirstArg(args), 0) : ToExpr(args, 0);
  }
  returned_ = true;
}

void LiveReader::ReadCall(PyObject* bsym, PyObject* args, bool read_args, Statement& s) {
  s.kind = StatementKind::kCall;
  if (!read_args) {
    // Lean, and not an alias op: the thunder model reads only the outputs
    // (as Thunder's get_alloc_memory does).
    nb::object output = BsymAttr(bsym, Gathered::kOutput, names_.output_attr.ptr());
    s.outputs = ToPattern(output.ptr(), 0);
    if (s.outputs.kind == Pattern::Kind::kIgnore) s.outputs.kind = Pattern::Kind::kTuple;
    return;
  }
  nb::object kwargs = BsymAttr(bsym, Gathered::kKwargs, names_.kwargs_attr.ptr());
  if (!PyTuple_Check(args)) Fail("bound symbol arguments are not a tuple");
  if (!PyDict_Check(kwargs.ptr())) Fail("bound symbol keyword arguments are not a dict");
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  const std::size_t base = expr_stack_.size();
  if (options_.lean) {
    // Thunder's flat_proxy_args: positional then keyword values.
    for (PyObject* a : ItemsOf(args)) FlattenArgs(a, 1, &expr_stack_);
    while (PyDict_Next(kwargs.ptr(), &pos, &key, &value)) FlattenArgs(value, 1, &expr_stack_);
    s.args = TakeItems(base);
  } else {
    for (PyObject* a : ItemsOf(args)) {
      const Expr arg = ToExpr(a, 1);
      expr_stack_.push_back(arg);
    }
    s.args = TakeItems(base);
    kwargs_.clear();
    while (PyDict_Next(kwargs.ptr(), &pos, &key, &value)) {
      if (!PyUnicode_Check(key)) Fail("a keyword argument's name is not a str");
      const std::string_view name = builder_.Intern(Utf8(key));
      kwargs_.emplace_back(name, ToExpr(value, 1));
    }
    s.kwargs = builder_.trace().SaveKeywordArgs(kwargs_);
  }
  nb::object output = BsymAttr(bsym, Gathered::kOutput, names_.output_attr.ptr());
  s.outputs = ToPattern(output.ptr(), 0);
  // No outputs; the exact form keeps the `_` Thunder's printer writes.
  if (s.outputs.kind == Pattern::Kind::kIgnore && !options_.exact) s.outputs.kind = Pattern::Kind::kTuple;
}

void LiveReader::ReadBoundSymbol(PyObject* bsym) {
  if (returned_) Fail("statement after return");
  nb::object sym = BsymAttr(bsym, Gathered::kSym, names_.sym_attr.ptr());
  const SymInfo& info = SymOf(sym.ptr());
  if (info.special == Special::kUnpackTrivial) return ReadUnpackTrivial(bsym);
  Statement& s = builder_.trace().statements.emplace_back();
  s.at = At();
  s.source_line = static_cast<int>(index_);  // live traces: the bound symbol's 1-based index
  s.call_symbol = info.call_symbol;
  // (Not read where it is not needed: an argument tuple not yet touched is a cache miss.)
  auto args = [&] { return BsymAttr(bsym, Gathered::kArgs, names_.args_attr.ptr()); };
  switch (info.special) {
    case Special::kUnpackSequence:
      return ReadUnpack(bsym, args().ptr(), s);
    case Special::kDel:
      return ReadDel(args().ptr(), s);
    case Special::kReturn:
      return ReadReturn(args().ptr(), s);
    case Special::kClear:
      s.kind = StatementKind::kClear;
      s.source = Use(FirstArg(args().ptr()));
      return;
    default:
      return ReadCall(bsym, info.read_args ? args().ptr() : nullptr, info.read_args, s);
  }
}

peakmem::Trace LiveReader::Read(nb::handle trace) {
  ReadParams(trace);
  nb::object bsyms = trace.attr("bound_symbols");
  if (!PyList_CheckExact(bsyms.ptr()) && !PyTuple_CheckExact(bsyms.ptr())) {
    bsyms = nb::steal(PySequence_List(bsyms.ptr()));
    if (!bsyms.is_valid()) throw nb::python_error();
  }
  const Py_ssize_t n = ItemsOf(bsyms.ptr()).size;
  builder_.trace().statements.reserve(builder_.trace().statements.size() + static_cast<std::size_t>(n));
  builder_.ReserveNames(static_cast<std::size_t>(n));
  proxies_.reserve(static_cast<std::size_t>(n));
  if (n > 0) Calibrate(ItemsOf(bsyms.ptr()).data[0]);
  constexpr Py_ssize_t kBlock = AttrBlockReader::kMaxBlock;
  for (Py_ssize_t start = 0; start < n; start += kBlock) {
    // The list may not change while it is read: nothing here runs Python
    // code that could change it, but stay in bounds whatever happens.
    const Items all = ItemsOf(bsyms.ptr());
    if (start >= all.size) break;
    const Py_ssize_t count = std::min(kBlock, all.size - start);
    bool gathered = bsym_reader_.calibrated();
    if (gathered) {
      GatherBlock(all.data + start, count);
      if (!GatheredMatchesGetattr(all.data[start], block_[0])) {
        bsym_reader_ = AttrBlockReader();
        tensor_reader_ = AttrBlockReader();
        gathered = false;
      }
    }
    const std::uint64_t calls_at_gather = python_calls_;
    for (Py_ssize_t j = 0; j < count; ++j) {
      const Items now = ItemsOf(bsyms.ptr());
      if (start + j >= now.size) break;
      // Held while it is read: Thunder code may run (a method call), and
      // what was gathered is used only while none has.
      const nb::object held = nb::borrow(now.data[start + j]);
      current_ = gathered && now.data == all.data && python_calls_ == calls_at_gather ? &block_[j] : nullptr;
      ++index_;
      ReadBoundSymbol(held.ptr());
    }
    current_ = nullptr;
  }
  if (!returned_) Fail("the trace has no return");
  return std::move(builder_.trace());
}

}  // namespace peakmem_python::live

namespace peakmem_python {

peakmem::ParsedTrace ReadLiveTrace(nb::handle trace, const LiveReadOptions& options) {
  auto source = std::make_shared<const peakmem::SourceFile>("<TraceCtx>", "");
  live::LiveReader reader(source, options);
  peakmem::ParsedTrace parsed;
  parsed.trace = reader.Read(trace);
  parsed.source = std::move(source);
  parsed.source_is_printed_trace = false;
  return parsed;
}

}  // namespace peakmem_python
