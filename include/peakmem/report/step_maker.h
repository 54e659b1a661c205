// The per-statement rows of a report (Step), made from a trace's
// statements: what every model and the StepRecorder build rows with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "peakmem/ir/parsed_trace.h"
#include "peakmem/ir/string_hash.h"
#include "peakmem/report/report.h"

namespace peakmem {

// Makes the report rows for statements, their text viewing the source (a
// printed trace) or re-printed once into the report's arena (JSON, live).
class StepMaker {
 public:
  // Makes `report` keep what its steps' text views alive.
  StepMaker(const ParsedTrace& parsed, Report* report);
  Step Make(std::size_t index, std::int64_t delta, std::int64_t live);
  // Copies every op name a step of this trace can have into the report now:
  // Make then writes nothing to the report's strings for a printed trace
  // (so two StepMakers can make steps of one report at once).
  void Warm();
  // The op name as a view the report keeps alive.
  std::string_view Op(const Statement& s);

 private:
  const ParsedTrace& parsed_;
  Report* report_;
  absl::flat_hash_map<std::string_view, std::string_view, StringHash> ops_;  // trace's view -> report's
  std::vector<std::string_view> by_call_symbol_;  // call_symbol -> report's view (empty: not yet)
};

}  // namespace peakmem
