// How a model names its breakdown entries. The report infrastructure
// (StepRecorder) builds rows for every model alike; the key strings are
// the model's own (the thunder model's are Thunder's get_alloc_memory keys),
// so each model hands the recorder a BreakdownKeys.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "peakmem/ir/trace.h"
#include "peakmem/report/report.h"
#include "peakmem/sim/alloc_stream.h"

namespace peakmem {

class BreakdownKeys {
 public:
  virtual ~BreakdownKeys() = default;
  // Sets statement `s`'s entries in `out`. `style` is what the model
  // recorded for the statement (0: no entry), `delta` its change of live
  // bytes, `named` the values the model named for it. `key` is a reused
  // buffer. Called from the recorder's thread: must not change state.
  virtual void Set(const Trace& trace, const Statement& s, std::uint8_t style, std::int64_t delta,
                   std::span<const NamedBytes> named, std::string* key,
                   OrderedBreakdown* out) const = 0;
};

// "{op} {name}, {name}..." = the statement's delta, when it named a value
// (style != 0): the storages it made or freed, by the values they were
// bound to (the form of Thunder's default key, so the two models' entries
// line up).
class OpAndNamesKeys final : public BreakdownKeys {
 public:
  void Set(const Trace& trace, const Statement& s, std::uint8_t style, std::int64_t delta,
           std::span<const NamedBytes> named, std::string* key,
           OrderedBreakdown* out) const override {
    if (style == 0 || named.empty()) return;
    AppendOpAndNames(trace, s, named, key);
    out->Set(*key, delta);
  }
  // Writes "{op} {name}, {name}..." into `key`.
  static void AppendOpAndNames(const Trace& trace, const Statement& s,
                               std::span<const NamedBytes> named, std::string* key) {
    key->assign(trace.SymbolName(s));
    *key += ' ';
    for (std::size_t n = 0; n < named.size(); ++n) {
      if (n) *key += ", ";
      *key += trace.value(named[n].first).name;
    }
  }
};

}  // namespace peakmem
