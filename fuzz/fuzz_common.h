// Shared body of the fuzz targets: run a parsed trace through both models and
// both renderings, and check the invariants every outcome must satisfy.
//
// Expected outcomes for arbitrary input:
//   - a Report for each model (rendered to JSON and text), or
//   - a peakmem::TraceError whose location is inside the input, or
//   - std::invalid_argument (an unknown model or option; not reachable here).
// Anything else is a finding: another exception type (the target lets it
// escape, so libFuzzer reports it as a crash with the input saved), a crash,
// a sanitizer report, a hang (-timeout) or runaway memory (-rss_limit_mb).
#pragma once

#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

#include "peakmem/analyze.h"
#include "peakmem/report/report.h"
#include "peakmem/models/runtime_model.h"
#include "peakmem/ir/source.h"
#include "peakmem/frontend/trace_text_reader.h"

#include <simdjson.h>

namespace peakmem_fuzz {

[[noreturn]] inline void Finding(const std::string& what) {
  std::fprintf(stderr, "peakmem fuzz finding: %s\n", what.c_str());
  std::abort();
}

// A TraceError must name a place in the input: a line inside it, a column >= 1.
inline void CheckError(const peakmem::TraceError& e, const peakmem::SourceFile& source) {
  const peakmem::SourceLocation at = e.location();
  if (at.line < 1 || at.line > source.line_count() || at.column < 1) {
    Finding("TraceError outside the input (" + std::to_string(at.line) + ":" +
            std::to_string(at.column) + ", " + std::to_string(source.line_count()) +
            " lines): " + e.what());
  }
  if (e.file() != source.name()) Finding("TraceError names another file: " + std::string(e.what()));
}

// A report never holds a negative byte count, has one step per statement,
// and its numbers agree with each other (see CheckReport's body).
inline void CheckReport(const peakmem::Report& r, const peakmem::ParsedTrace& parsed) {
  auto check = [&](std::int64_t v, const char* field) {
    if (v < 0) Finding(std::string("negative ") + field + " in a " + r.model + " report");
  };
  check(r.peak_bytes, "peak_bytes");
  check(r.final_bytes, "final_bytes");
  if (r.tensor_peak_bytes < -1) Finding("tensor_peak_bytes < -1");
  for (const peakmem::Step& s : r.steps) {
    check(s.live_bytes, "step live_bytes");
    check(s.peak_bytes, "step peak_bytes");
  }
  // (Breakdown entries may be negative: Thunder records frees as -bytes.)
  if (r.steps.size() != parsed.trace.statements.size()) {
    Finding(r.model + " report: " + std::to_string(r.steps.size()) + " steps for " +
            std::to_string(parsed.trace.statements.size()) + " statements");
  }
  if (r.peak_step < -1 || r.peak_step >= static_cast<int>(r.steps.size())) {
    Finding(r.model + " report: peak_step " + std::to_string(r.peak_step) + " out of range");
  }
  // A total past 2^63 - 1 must be a TraceError, never a number clamped to the
  // largest int64 (no real trace comes within a factor of a million of it).
  if (r.peak_bytes == INT64_MAX || r.final_bytes == INT64_MAX) {
    Finding(r.model + " report: a byte count of INT64_MAX (saturated?)");
  }
  if (r.model == "thunder") {
    // Steps chain: live = previous live + delta.
    for (std::size_t i = 1; i < r.steps.size(); ++i) {
      if (r.steps[i].live_bytes != r.steps[i - 1].live_bytes + r.steps[i].delta_bytes) {
        Finding("thunder report: step " + std::to_string(i) + " does not chain");
      }
    }
    if (!r.steps.empty() && r.final_bytes != r.steps.back().live_bytes) {
      Finding("thunder report: final_bytes is not the last step's live bytes");
    }
  } else {
    // The runtime peak is the most bytes live at any moment.
    if (r.final_bytes > r.peak_bytes) Finding("runtime report: final_bytes > peak_bytes");
    for (const peakmem::Step& s : r.steps) {
      if (s.live_bytes > r.peak_bytes || s.peak_bytes > r.peak_bytes) {
        Finding("runtime report: a step above peak_bytes");
      }
    }
  }
  for (const peakmem::LiveTensor& t : r.live_at_peak) check(t.bytes, "live tensor bytes");
  // Both renderings must work on every report.
  const std::string json = peakmem::ReportToJson(r);
  const std::string text = peakmem::ReportToText(r);
  if (json.empty() || text.empty()) Finding("empty rendering");
}

inline void RunModel(const peakmem::ParsedTrace& parsed, const std::string& model,
                     const peakmem::RuntimeOptions& options = {}) {
  try {
    CheckReport(peakmem::Analyze(parsed, model, options), parsed);
  } catch (const peakmem::TraceError& e) {
    CheckError(e, *parsed.source);
  } catch (const std::invalid_argument&) {
  }
}

// Both models (the runtime model under each calling convention, and once
// without scratch) on a trace that read successfully.
inline void RunPipeline(const peakmem::ParsedTrace& parsed) {
  if (!parsed.source) Finding("ParsedTrace without its source");
  RunModel(parsed, "thunder");
  RunModel(parsed, "runtime");
  using peakmem::CallingConvention;
  for (CallingConvention c :
       {CallingConvention::kForward, CallingConvention::kBackward, CallingConvention::kPlain}) {
    peakmem::RuntimeOptions options;
    options.convention = c;
    RunModel(parsed, "runtime", options);
  }
  peakmem::RuntimeOptions no_scratch;
  no_scratch.model_scratch = false;
  RunModel(parsed, "runtime", no_scratch);
}

}  // namespace peakmem_fuzz
