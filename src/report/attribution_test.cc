// Attribution on the hand-built report of writers/writer_test_util.h, whose
// storages and live bytes are derived there:
//   arguments a 16 (argument), b 1000 (saved); step 0 (mul) makes t0 1024 and
//   a 4-byte scratch, freed in the step (peak 2044 inside it); step 1 frees
//   t0; step 2 (neg) makes t1 600.
#include "peakmem/report/attribution.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "writers/writer_test_util.h"

namespace peakmem {
namespace {

using writers::testing::HandBuiltReport;

std::vector<std::string> Names(const Attribution& a) {
  std::vector<std::string> out;
  for (const AttributedStorage& s : a.largest) out.emplace_back(s.name);
  return out;
}

TEST(Attribution, AtThePeakInsideTheStatementWithItsScratch) {
  const Attribution a = AttributeAtPeak(HandBuiltReport(true), 0);
  EXPECT_TRUE(a.at_peak);
  EXPECT_EQ(a.step, 0);
  EXPECT_EQ(a.live_bytes, 2044);  // 16 + 1000 + 1024 + 4
  EXPECT_EQ(a.storages, 4u);
  EXPECT_EQ(Names(a), (std::vector<std::string>{"t0", "b", "a", "(scratch)"}));
  ASSERT_EQ(a.by_category.size(), 4u);
  EXPECT_EQ(a.by_category[0].key, "intermediate");
  EXPECT_EQ(a.by_category[0].bytes, 1024);
  EXPECT_EQ(a.by_category[1].key, "saved");
  EXPECT_EQ(a.by_category[2].key, "argument");
  EXPECT_EQ(a.by_category[3].key, "scratch");
  EXPECT_EQ(a.by_category[3].bytes, 4);
  // t0 and the scratch were made by mul (1028), a and b by the caller (1016).
  ASSERT_EQ(a.by_op.size(), 2u);
  EXPECT_EQ(a.by_op[0].key, "mul");
  EXPECT_EQ(a.by_op[0].bytes, 1028);
  EXPECT_EQ(a.by_op[0].storages, 2u);
  EXPECT_EQ(a.by_op[1].key, "caller");
  EXPECT_EQ(a.by_op[1].bytes, 1016);
  EXPECT_EQ(a.largest[0].line, 5);
  EXPECT_EQ(a.largest[0].made_at, 0);
}

TEST(Attribution, AfterAStepTheScratchAndFreedStoragesAreGone) {
  const Report r = HandBuiltReport(true);
  EXPECT_EQ(AttributeAfterStep(r, kBeforeFirstStep, 0).live_bytes, 1016);
  EXPECT_EQ(AttributeAfterStep(r, 0, 0).live_bytes, 2040);
  const Attribution one = AttributeAfterStep(r, 1, 0);
  EXPECT_FALSE(one.at_peak);
  EXPECT_EQ(Names(one), (std::vector<std::string>{"b", "a"}));
  // The limit keeps the largest.
  EXPECT_EQ(Names(AttributeAfterStep(r, 2, 1)), (std::vector<std::string>{"b"}));
  EXPECT_EQ(AttributeAfterStep(r, 2, 1).storages, 3u);
}

TEST(Attribution, ReturnedStoragesAreOutputsAndBackwardArgumentsCotangents) {
  Report r = HandBuiltReport(true);
  ReturnedTensor t1;
  t1.name = "t1";
  t1.storage = 4;
  r.returned_tensors.push_back(t1);
  r.convention = "backward";
  const Attribution a = AttributeAfterStep(r, 2, 0);
  std::vector<std::string> categories;
  for (const AttributedStorage& s : a.largest) categories.emplace_back(s.category);
  // b 1000 saved, t1 600 output, a 16 the backward's cotangent.
  EXPECT_EQ(categories, (std::vector<std::string>{"saved", "output", "cotangent"}));
}

TEST(Attribution, NamesWhatIsMissing) {
  EXPECT_THROW(AttributeAtPeak(HandBuiltReport(false), 0), std::invalid_argument);
  const Report r = HandBuiltReport(true);
  try {
    AttributeAfterStep(r, 3, 0);
    FAIL() << "step 3 of 3 statements accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("steps 0 to 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(AttributeAfterStep(r, -2, 0), std::invalid_argument);
}

}  // namespace
}  // namespace peakmem

namespace peakmem {
namespace {

TEST(Attribution, LiveByCategoryAtEveryPoint) {
  const auto live = LiveByCategory(writers::testing::HandBuiltReport(true));
  // [argument, cotangent, saved, output, intermediate, collective, scratch]
  ASSERT_EQ(live.size(), 4u);
  EXPECT_EQ(live[0], (std::array<std::int64_t, kCategoryCount>{16, 0, 1000, 0, 0, 0, 0}));
  EXPECT_EQ(live[1], (std::array<std::int64_t, kCategoryCount>{16, 0, 1000, 0, 1024, 0, 0}));
  EXPECT_EQ(live[2], (std::array<std::int64_t, kCategoryCount>{16, 0, 1000, 0, 0, 0, 0}));
  EXPECT_EQ(live[3], (std::array<std::int64_t, kCategoryCount>{16, 0, 1000, 0, 600, 0, 0}));
}

TEST(Attribution, WhatACollectiveAllocatedIsItsOwnCategoryUnlessReturned) {
  // The hand-built report with its step 2 (t1, 600 bytes) an all-gather:
  // after it, t1 is "collective"; returned, it is an output.
  Report r = writers::testing::HandBuiltReport(true);
  r.steps[2].op = "torch_all_gather_prim_impl";
  EXPECT_EQ(LiveByCategory(r)[3],
            (std::array<std::int64_t, kCategoryCount>{16, 0, 1000, 0, 0, 600, 0}));
  r.returned_tensors.push_back(ReturnedTensor{});
  r.returned_tensors.back().storage = 4;
  EXPECT_EQ(LiveByCategory(r)[3],
            (std::array<std::int64_t, kCategoryCount>{16, 0, 1000, 600, 0, 0, 0}));
}

}  // namespace
}  // namespace peakmem
