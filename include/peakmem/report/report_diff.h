// Two reports compared: what `peakmem diff A B` says. A and B are two
// traces of one program (two executors, two configurations, before and
// after a change), analysed with the same model.
//
// The difference at the peak is split three ways, each summing exactly to
// B's peak minus A's: by category and by the op that made the storages
// (attribution.h), and by storage, matched by the name of the value each was
// first bound to (names that only one side has count whole).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "peakmem/report/attribution.h"
#include "peakmem/report/report.h"

namespace peakmem {

struct DiffGroup {
  std::string key;     // a category, an op, or a storage's name
  std::int64_t a_bytes = 0;
  std::int64_t b_bytes = 0;
  std::int64_t delta() const { return b_bytes - a_bytes; }
};

// A statement of one side at the first point where the live bytes differ.
struct DiffPoint {
  bool exists = false;  // false: that trace has no statement at this point
  int line = 0;
  std::string op;
  std::string source;
  std::int64_t live_bytes = 0;  // after it (the arguments alone at point 0)
};

struct ReportDiff {
  std::int64_t a_peak = 0, b_peak = 0, a_final = 0, b_final = 0;
  std::int32_t a_peak_step = kBeforeFirstStep, b_peak_step = kBeforeFirstStep;
  std::size_t a_steps = 0, b_steps = 0;
  // The first point (0: the arguments alone, i + 1: after statement i)
  // where the live bytes differ; -1 when they never do (the shorter
  // trace's points compared, then its end against the longer's next).
  std::int64_t first_divergence = -1;
  DiffPoint a_at, b_at;
  // At each side's peak, largest |delta| first; groups equal on both sides
  // left out.
  std::vector<DiffGroup> by_category, by_op, by_storage;
};

// Compares `a` and `b`; both must carry the allocation event log and their
// steps (ReportOptions::alloc_log, steps). Throws std::invalid_argument
// naming the side that lacks them.
ReportDiff DiffReports(const Report& a, const Report& b);

// Renderings: text for people, JSON ({"a": {"trace", "peak_bytes", ...},
// "b": ..., "peak_delta_bytes", "final_delta_bytes", "first_divergence",
// "by_category", "by_op", "by_storage"}; docs/report.schema.json's "diff").
std::string DiffToText(const ReportDiff& diff, std::string_view a_name, std::string_view b_name);
std::string DiffToJson(const ReportDiff& diff, std::string_view a_name, std::string_view b_name,
                       int indent = 2);

}  // namespace peakmem
