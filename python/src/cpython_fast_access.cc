#include "cpython_fast_access.h"

#include <cstdint>

namespace nb = nanobind;

namespace peakmem_python {

std::string_view Utf8(PyObject* str) {
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(str, &size);
  if (data == nullptr) throw nb::python_error();
  return {data, static_cast<std::size_t>(size)};
}

nb::object Attr(PyObject* obj, PyObject* name) {
  PyObject* result = PyObject_GetAttr(obj, name);
  if (result == nullptr) throw nb::python_error();
  return nb::steal(result);
}

nb::object Name(const char* text) { return nb::steal(PyUnicode_InternFromString(text)); }

Items ItemsOf(PyObject* seq) {
  if (PyTuple_Check(seq)) return {&PyTuple_GET_ITEM(seq, 0), PyTuple_GET_SIZE(seq)};
  return {&PyList_GET_ITEM(seq, 0), PyList_GET_SIZE(seq)};
}

// CPython 3.11's object layout (cpython/object.h, cpython/dictobject.h and
// internal/pycore_dict.h of 3.11).
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000 && defined(Py_TPFLAGS_MANAGED_DICT)
#define PEAKMEM_CPYTHON_311_LAYOUT 1
namespace {
// struct _dictkeysobject up to its index table; the entries follow the index table.
struct DictKeys {
  Py_ssize_t dk_refcnt;
  std::uint8_t dk_log2_size;
  std::uint8_t dk_log2_index_bytes;
  std::uint8_t dk_kind;  // DictKeysKind
  std::uint32_t dk_version;
  Py_ssize_t dk_usable;
  Py_ssize_t dk_nentries;
};
static_assert(sizeof(DictKeys) == 32, "CPython 3.11's PyDictKeysObject header is 32 bytes");
enum : std::uint8_t { kKeysGeneral = 0, kKeysUnicode = 1, kKeysSplit = 2 };
struct UnicodeEntry {  // PyDictUnicodeEntry: the entries of kKeysUnicode and kKeysSplit keys
  PyObject* me_key;
  PyObject* me_value;
};
const UnicodeEntry* Entries(const DictKeys* keys) {
  return reinterpret_cast<const UnicodeEntry*>(reinterpret_cast<const char*>(keys) +
                                               sizeof(DictKeys) +
                                               (std::size_t{1} << keys->dk_log2_index_bytes));
}
// The values array of an instance whose type has a managed dict, or nullptr.
PyObject** InstanceValues(PyObject* obj) { return reinterpret_cast<PyObject***>(obj)[-4]; }
// Its __dict__, once one was made, or nullptr.
PyObject* InstanceDict(PyObject* obj) { return reinterpret_cast<PyObject**>(obj)[-3]; }

// Where one object's attributes are, found link by link.
struct Store {
  PyObject** values;      // a values array (the instance's or its dict's)
  const DictKeys* keys;   // or a dict's own table
  PyObject* dict;         // the dict (for PyDict_GetItem)
};

void PrefetchObject(const void* obj) {
  const char* p = static_cast<const char*>(obj);
  __builtin_prefetch(p - 32);  // the values and dict pointers before it
  __builtin_prefetch(p + 8);   // its type and first fields
}
}  // namespace
#endif

void AttrBlockReader::Calibrate(PyTypeObject* t, std::initializer_list<PyObject*> names) {
  type_ = nullptr;
#if PEAKMEM_CPYTHON_311_LAYOUT
  if (names.size() > kMaxAttrs) return;
  if (!(t->tp_flags & Py_TPFLAGS_HEAPTYPE) || !(t->tp_flags & Py_TPFLAGS_MANAGED_DICT)) return;
  const auto* k = reinterpret_cast<const DictKeys*>(reinterpret_cast<PyHeapTypeObject*>(t)->ht_cached_keys);
  if (k == nullptr || k->dk_kind != kKeysSplit) return;
  const UnicodeEntry* entries = Entries(k);
  int i = 0;
  for (PyObject* attr : names) {
    // A data descriptor on the type (a property, a slot) would take
    // precedence over the instance's value: leave such a type to getattr.
    PyObject* descr = _PyType_Lookup(t, attr);
    if (descr != nullptr && Py_TYPE(descr)->tp_descr_set != nullptr) return;
    int slot = -1;
    for (Py_ssize_t e = 0; e < k->dk_nentries; ++e) {
      if (entries[e].me_key == attr) slot = static_cast<int>(e);
    }
    if (slot < 0) return;
    names_[i] = attr;
    slots_[i++] = slot;
  }
  count_ = i;
  keys_ = k;
  type_ = t;
#else
  (void)t;
  (void)names;
#endif
}

#if PEAKMEM_CPYTHON_311_LAYOUT
// Steps 1 to 4 of Read: where each object's attributes are.
void AttrBlockReader::Locate(PyObject* const* objs, Py_ssize_t count, void* stores) const {
  Store* store = static_cast<Store*>(stores);
  auto prefetch_slots = [&](PyObject** v) {
    for (int i = 0; i < count_; ++i) __builtin_prefetch(v + slots_[i]);
  };
  // 1: the object's header and the words before it (values, dict).
  for (Py_ssize_t j = 0; j < count; ++j) PrefetchObject(objs[j]);
  // 2: its values array, or its dict.
  for (Py_ssize_t j = 0; j < count; ++j) {
    Store& s = store[j];
    s = Store{nullptr, nullptr, nullptr};
    if (Py_TYPE(objs[j]) != type_) continue;
    if (PyObject** v = InstanceValues(objs[j])) {
      s.values = v;
      prefetch_slots(v);
    } else if (PyObject* d = InstanceDict(objs[j])) {
      s.dict = d;
      __builtin_prefetch(d);
    }
  }
  // 3: the dict's values array (a dict that still shares the type's keys), or its keys.
  for (Py_ssize_t j = 0; j < count; ++j) {
    Store& s = store[j];
    if (s.dict == nullptr) continue;
    if (!PyDict_CheckExact(s.dict)) {
      s.dict = nullptr;
      continue;
    }
    const auto* d = reinterpret_cast<PyDictObject*>(s.dict);
    const auto* k = reinterpret_cast<const DictKeys*>(d->ma_keys);
    if (d->ma_values != nullptr) {
      if (k == keys_) {
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
    const DictKeys* k = store[j].keys;
    if (k == nullptr) continue;
    if (k->dk_kind != kKeysUnicode) {
      store[j].keys = nullptr;
      continue;
    }
    const UnicodeEntry* entries = Entries(k);
    for (int i = 0; i < count_; ++i) {
      if (slots_[i] < k->dk_nentries) __builtin_prefetch(entries + slots_[i]);
    }
  }
}
#endif

void AttrBlockReader::Read(PyObject* const* objs, Py_ssize_t count, Found* found) {
  for (Py_ssize_t j = 0; j < count; ++j) {
    for (PyObject*& f : found[j]) f = nullptr;
  }
#if PEAKMEM_CPYTHON_311_LAYOUT
  if (type_ == nullptr) return;
  Store store[kMaxBlock];
  Locate(objs, count, store);
  // 5: the attributes, and the objects they are.
  for (Py_ssize_t j = 0; j < count; ++j) {
    const Store& s = store[j];
    for (int i = 0; i < count_; ++i) {
      PyObject* value = nullptr;
      if (s.values != nullptr) {
        value = s.values[slots_[i]];
      } else if (s.keys != nullptr) {
        const UnicodeEntry* entries = Entries(s.keys);
        if (slots_[i] < s.keys->dk_nentries && entries[slots_[i]].me_key == names_[i]) {
          value = entries[slots_[i]].me_value;
        } else {
          value = PyDict_GetItem(s.dict, names_[i]);
        }
      } else if (s.dict != nullptr) {
        value = PyDict_GetItem(s.dict, names_[i]);
      }
      found[j][i] = value;
      if (value != nullptr) PrefetchObject(value);
    }
  }
#else
  (void)objs;
#endif
}

nb::object NewPresizedDict(Py_ssize_t size) {
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030D0000 && !defined(Py_LIMITED_API)
  PyObject* d = _PyDict_NewPresized(size);
#else
  (void)size;
  PyObject* d = PyDict_New();
#endif
  if (d == nullptr) throw nb::python_error();
  return nb::steal(d);
}

}  // namespace peakmem_python
