// Helpers shared by the thunder model's tests (thunder_model_test.cc,
// thunder_model_alias_test.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "peakmem/models/thunder_model.h"
#include "test_util.h"

namespace peakmem::thunder_model_test {

// Parses, runs the thunder model and checks the report's integrity.
inline Report RunChecked(const std::string& text) {
  const ParsedTrace parsed = testing_util::Parse(text);
  Report report = RunThunderModel(parsed);
  testing_util::ExpectConsistent(parsed, report);
  return report;
}

inline std::vector<std::int64_t> LiveBytes(const Report& report) {
  std::vector<std::int64_t> live;
  for (const Step& s : report.steps) live.push_back(s.live_bytes);
  return live;
}

}  // namespace peakmem::thunder_model_test
