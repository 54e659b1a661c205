// DiffReports on the hand-built report of writers/writer_test_util.h (A)
// and a copy whose t0 is 2048 bytes instead of 1024 (B): B's live bytes are
// A's + 1024 after step 0 (3064) and inside it (peak 3068), equal elsewhere.
#include "peakmem/report/report_diff.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <stdexcept>

#include "writers/writer_test_util.h"

namespace peakmem {
namespace {

using writers::testing::HandBuiltReport;

Report WiderT0() {
  Report b = HandBuiltReport(true);
  auto log = std::make_shared<AllocLog>(*b.alloc_log);
  log->storages[2].bytes = 2048;
  for (AllocEvent& e : log->events) {
    if (e.storage == 2) e.delta = e.alloc ? 2048 : -2048;
  }
  b.alloc_log = log;
  b.peak_bytes = 3068;
  b.steps[0].delta_bytes = 2048;
  b.steps[0].live_bytes = 3064;
  b.steps[0].peak_bytes = 3068;
  b.steps[1].delta_bytes = -2048;
  return b;
}

TEST(ReportDiff, PeakFinalFirstDivergenceAndWhatAccountsForIt) {
  const ReportDiff d = DiffReports(HandBuiltReport(true), WiderT0());
  EXPECT_EQ(d.b_peak - d.a_peak, 1024);
  EXPECT_EQ(d.b_final - d.a_final, 0);
  EXPECT_EQ(d.first_divergence, 1);  // after step 0
  EXPECT_EQ(d.a_at.live_bytes, 2040);
  EXPECT_EQ(d.b_at.live_bytes, 3064);
  EXPECT_EQ(d.a_at.op, "mul");
  ASSERT_EQ(d.by_category.size(), 1u);
  EXPECT_EQ(d.by_category[0].key, "intermediate");
  EXPECT_EQ(d.by_category[0].delta(), 1024);
  ASSERT_EQ(d.by_op.size(), 1u);
  EXPECT_EQ(d.by_op[0].key, "mul");
  ASSERT_EQ(d.by_storage.size(), 1u);
  EXPECT_EQ(d.by_storage[0].key, "t0");
  EXPECT_EQ(d.by_storage[0].a_bytes, 1024);
  EXPECT_EQ(d.by_storage[0].b_bytes, 2048);
  const nlohmann::json j = nlohmann::json::parse(DiffToJson(d, "a.trace", "b.trace"));
  EXPECT_EQ(j["peak_delta_bytes"], 1024);
  EXPECT_EQ(j["first_divergence"]["step"], 0);
  EXPECT_NE(DiffToText(d, "a.trace", "b.trace").find("B - A = +1024 bytes"), std::string::npos);
}

TEST(ReportDiff, ATraceAgainstItselfHasNoDifference) {
  const ReportDiff d = DiffReports(HandBuiltReport(true), HandBuiltReport(true));
  EXPECT_EQ(d.first_divergence, -1);
  EXPECT_TRUE(d.by_category.empty());
  EXPECT_TRUE(d.by_storage.empty());
  EXPECT_TRUE(nlohmann::json::parse(DiffToJson(d, "a", "a"))["first_divergence"].is_null());
}

TEST(ReportDiff, AShorterTraceDivergesWhereItEnds) {
  Report shorter = HandBuiltReport(true);
  // Only the first two statements: drop step 2 and t1.
  auto log = std::make_shared<AllocLog>(*shorter.alloc_log);
  log->steps = 2;
  log->events.pop_back();
  log->storages.pop_back();
  log->storage_names.pop_back();
  shorter.alloc_log = log;
  shorter.steps.pop_back();
  shorter.final_bytes = 1016;
  const ReportDiff d = DiffReports(shorter, HandBuiltReport(true));
  EXPECT_EQ(d.first_divergence, 3);
  EXPECT_FALSE(d.a_at.exists);
  EXPECT_TRUE(d.b_at.exists);
  EXPECT_EQ(d.b_final - d.a_final, 600);
}

TEST(ReportDiff, NeedsTheEventLogOfBothSides) {
  try {
    DiffReports(HandBuiltReport(true), HandBuiltReport(false));
    FAIL() << "a report without a log was compared";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("report B has no allocation event log"), std::string::npos);
  }
}

}  // namespace
}  // namespace peakmem
