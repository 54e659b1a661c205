// Small helpers for reading Python objects from C++, and a fast path for
// reading the same attributes of many objects of one type.
//
// The fast path (AttrBlockReader) reads CPython 3.11's private object layout
// and is compiled only for that version; on any other version, and for any
// object not laid out as it expects, it reports "not read" and the caller
// uses getattr, which gives the same objects.
#pragma once

#include <nanobind/nanobind.h>

#include <cstddef>
#include <initializer_list>
#include <string_view>

namespace peakmem_python {

// The UTF-8 text of a Python str, without a copy (valid while it lives).
// Raises the Python error if it has none (a lone surrogate).
std::string_view Utf8(PyObject* str);

// getattr(obj, name) as a new reference; raises the Python error if it fails.
nanobind::object Attr(PyObject* obj, PyObject* name);

// An interned str: attribute lookups compare interned keys by address.
nanobind::object Name(const char* text);

// The items of a tuple or list without copying (borrowed; valid while the
// sequence lives and is not resized).
struct Items {
  PyObject** data;
  Py_ssize_t size;
  PyObject** begin() const { return data; }
  PyObject** end() const { return data + size; }
};
// `seq` must be a tuple or a list (subclasses included).
Items ItemsOf(PyObject* seq);

// Reads up to kMaxAttrs instance attributes of a block of objects of one
// type, for a walk over a large trace.
//
// Such a walk is bound by memory latency more than by work: bound symbols,
// their attribute storage, argument tuples and output proxies lie scattered
// over the Python heap, and each first touch is a cache (and TLB) miss; a
// bound symbol's output name sits at the end of a chain of six dependent
// loads (bound symbol, its __dict__, the dict's keys, the output proxy, its
// values array, the name). Misses overlap only when the code between them is
// short and does not depend on them, and a getattr is neither: so Read
// follows those chains one link at a time for the whole block, in tight
// loops where each loop reads what the previous one prefetched and prefetches
// the next link. The misses of a block then overlap instead of queueing.
//
// On CPython 3.11 an instance of a type with Py_TPFLAGS_MANAGED_DICT keeps
// its attributes in a values array (indexed like the type's shared keys) or,
// once a __dict__ was made for it, in that dict; such a dict either still
// shares the type's keys, or has its own table whose entries are in
// insertion order (an attribute's entry is then checked to hold the same
// interned key before it is used, and looked up with PyDict_GetItem
// otherwise). An attribute is read this way only where no data descriptor on
// the type stands in front of the instance attribute.
class AttrBlockReader {
 public:
  static constexpr int kMaxAttrs = 4;
  static constexpr Py_ssize_t kMaxBlock = 128;
  using Found = PyObject* [kMaxAttrs];

  // Where instances of `type` keep `names` (interned strs, at most
  // kMaxAttrs). Leaves the reader uncalibrated (every object "not read")
  // where anything is not as expected, or on another Python version.
  void Calibrate(PyTypeObject* type, std::initializer_list<PyObject*> names);
  PyTypeObject* type() const { return type_; }
  bool calibrated() const { return type_ != nullptr; }

  // found[j][i] = attribute i of objs[j] (borrowed from objs[j]), or
  // nullptr where objs[j] is not of the calibrated type or the attribute is
  // not found this way (count <= kMaxBlock). Runs no Python code.
  void Read(PyObject* const* objs, Py_ssize_t count, Found* found);

 private:
  // Where each object's attributes are (an array of count Stores, private
  // to the implementation).
  void Locate(PyObject* const* objs, Py_ssize_t count, void* stores) const;

  PyTypeObject* type_ = nullptr;
  int count_ = 0;
  PyObject* names_[kMaxAttrs] = {};
  int slots_[kMaxAttrs] = {};
  const void* keys_ = nullptr;  // the type's shared keys
};

// A dict with room for `size` items without growing (the private
// _PyDict_NewPresized where it exists; a plain dict otherwise).
nanobind::object NewPresizedDict(Py_ssize_t size);

}  // namespace peakmem_python
