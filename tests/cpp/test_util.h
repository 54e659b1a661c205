// Small helpers shared by the GoogleTest suites: parse inline trace text,
// run a model, and turn errors and breakdowns into values that read well in
// EXPECT_EQ.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "peakmem/analyze.h"
#include "peakmem/report/report.h"
#include "peakmem/ir/source.h"
#include "peakmem/ir/trace.h"
#include "peakmem/frontend/trace_text_reader.h"

namespace peakmem {
namespace testing_util {

// The name every inline trace is read under, as it appears in messages.
inline constexpr const char* kTraceName = "t.trace";

using Breakdown = std::vector<std::pair<std::string, std::int64_t>>;

// A chain of `links` ops (t_i from t_{i-1}), about two statements each, for
// tests that need a big trace: values used far from where they were bound
// (every 100th is kept to the end), types given later (`# t: "..."` after
// an `update_aliases`, whose output takes its input's type), and a long
// final return.
inline std::string ChainTrace(int links) {
  std::string text = "def f(a, w):\n  # a: \"cpu f32[4]\"\n  # w: \"cpu f32[4]\"\n";
  text += "  t0 = torch.neg(a)  # t0: \"cpu f32[4]\"\n";
  std::string returned = "  return (t0";
  for (int i = 1; i < links; ++i) {
    const std::string t = "t" + std::to_string(i);
    const std::string prev = "t" + std::to_string(i - 1);
    if (i % 7 == 0) {
      text += "  (" + t + ",) = update_aliases((" + prev + ",))\n";
    } else {
      text += "  " + t + " = torch.add(" + prev + ", w)  # " + t + ": \"cpu f32[4]\"\n";
    }
    if ((i - 1) % 100 == 0) {
      if (i > 1) returned += ", " + prev;  // kept to the end
    } else {
      if (i % 7 == 0) text += "  # " + prev + ": \"cpu f32[4]\"\n";  // a type given later
      text += "  del " + prev + "\n";
    }
  }
  text += returned + ", t" + std::to_string(links - 1) + ")\n";
  return text;
}

// Reads inline trace text as the file "t.trace".
inline ParsedTrace Parse(std::string text) {
  return ReadTraceText(kTraceName, std::move(text));
}

// Reads and analyses inline trace text with `model`.
inline Report Run(std::string text, const std::string& model = "thunder") {
  return Analyze(Parse(std::move(text)), model);
}

// Reads (and, when `model` is not empty, analyses) the text; returns the
// TraceError's full what() or "" when nothing was thrown.
inline std::string ErrorOf(std::string text, const std::string& model = "thunder") {
  try {
    ParsedTrace parsed = Parse(std::move(text));
    if (!model.empty()) Analyze(parsed, model);
  } catch (const TraceError& e) {
    return e.what();
  }
  return "";
}

inline Breakdown Items(const Report& report) {
  Breakdown items;
  for (const auto& [key, bytes] : report.breakdown.items()) items.emplace_back(key, bytes);
  return items;
}

// The statement's outputs as names, flattened.
inline std::vector<std::string> OutputNames(const Trace& trace, const Statement& s) {
  std::vector<std::string> names;
  for (ValueId id : FlatOutputs(s)) names.emplace_back(trace.value(id).name);
  return names;
}

// The value currently bound to `name` (the last definition of it).
inline const Value* FindValue(const Trace& trace, const std::string& name) {
  const Value* found = nullptr;
  for (const Value& v : trace.values) {
    if (v.name == name) found = &v;
  }
  return found;
}

// Integrity checks that hold for every report of the thunder model:
// the steps chain (live = previous live + delta, starting from the bytes the
// arguments hold), the final bytes are the last step's live bytes, and the
// peak is the largest live value after a statement that is not skipped
// (unpack, assign, return), or 0.
inline void ExpectConsistent(const ParsedTrace& parsed, const Report& report) {
  ASSERT_EQ(report.steps.size(), parsed.trace.statements.size());
  std::int64_t peak = 0;
  int peak_step = -1;
  for (std::size_t i = 0; i < report.steps.size(); ++i) {
    const Step& step = report.steps[i];
    EXPECT_EQ(step.index, static_cast<int>(i));
    if (i > 0) {
      EXPECT_EQ(step.live_bytes, report.steps[i - 1].live_bytes + step.delta_bytes)
          << "step " << i;
    }
    const StatementKind kind = parsed.trace.statements[i].kind;
    const bool skipped = kind == StatementKind::kUnpack || kind == StatementKind::kAssign ||
                         kind == StatementKind::kReturn;
    if (skipped) {
      EXPECT_EQ(step.delta_bytes, 0) << "step " << i;
    } else if (step.live_bytes > peak) {
      peak = step.live_bytes;
      peak_step = static_cast<int>(i);
    }
  }
  EXPECT_EQ(report.peak_bytes, peak);
  EXPECT_EQ(report.peak_step, peak_step);
  if (!report.steps.empty()) EXPECT_EQ(report.final_bytes, report.steps.back().live_bytes);
}

}  // namespace testing_util
}  // namespace peakmem
