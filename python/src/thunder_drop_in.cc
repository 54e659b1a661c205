#include "thunder_drop_in.h"

#include <cstring>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "cpython_fast_access.h"
#include "live_reader.h"
#include "peakmem/analyze.h"

namespace nb = nanobind;

namespace peakmem_python {
namespace {

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

}  // namespace

nb::object BreakdownDict(const peakmem::OrderedBreakdown& breakdown, const char* errors) {
  const auto& items = breakdown.items();
  // Made at its final size rather than grown (and rehashed) entry by entry.
  nb::object dict = NewPresizedDict(static_cast<Py_ssize_t>(items.size()));
  // Most values repeat (a few tensor sizes, allocated and freed): one int
  // object per value.
  absl::flat_hash_map<std::int64_t, nb::object> ints;
  for (const auto& [key, bytes] : items) {
    auto [it, inserted] = ints.try_emplace(bytes);
    if (inserted) {
      it->second = nb::steal(PyLong_FromLongLong(bytes));
      if (!it->second.is_valid()) throw nb::python_error();
    }
    nb::object k = BreakdownKey(key, errors);
    if (PyDict_SetItem(dict.ptr(), k.ptr(), it->second.ptr()) != 0) throw nb::python_error();
  }
  return dict;
}

nb::object ThunderAllocMemory(nb::handle trace) {
  LiveReadOptions read_options;
  read_options.lean = true;
  const peakmem::ParsedTrace parsed = ReadLiveTrace(trace, read_options);
  // The peak and the breakdown only.
  peakmem::ReportOptions report_options;
  report_options.steps = false;
  report_options.live_at_peak = false;
  report_options.second_thread = false;
  peakmem::Report report;
  {
    nb::gil_scoped_release release;
    report = peakmem::Analyze(parsed, "thunder", {}, report_options);
  }
  return nb::make_tuple(nb::int_(report.peak_bytes), BreakdownDict(report.breakdown, "replace"));
}

}  // namespace peakmem_python
