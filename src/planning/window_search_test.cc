// The exact window search on the planning tests' two chains
// (planning_test_util.h), its best order derived by hand.
#include "peakmem/planning/window_search.h"

#include <gtest/gtest.h>

#include "planning_test_util.h"
#include "test_util.h"

namespace peakmem {
namespace {

using testing_util::Parse;

TEST(WindowSearch, FindsTheBestOrderOfTheWindow) {
  // Live bytes counted from the window's start. The given order: a 1024,
  // b 2048, c 2052 (the peak). 0, 2, 1, 3: a 1024, c 1028 (a freed: 4),
  // b 1028, d 1032 (the peak). Nothing is lower: the second exp runs with
  // one sum's 4 bytes alive, and its own sum adds 4 more.
  const DependenceGraph g = BuildDependenceGraph(Parse(testing_util::kTwoChainsTrace).trace);
  const StorageUse use = ComputeStorageUse(g);
  std::vector<NodeId> order = TraceOrder(g);
  const std::vector<std::size_t> position = {0, 1, 2, 3, 4};
  ASSERT_TRUE(SearchWindow(g, use, ReadersOf(g, use), order, position, 0, 4));
  EXPECT_EQ(order, (std::vector<NodeId>{0, 2, 1, 3, 4}));
  // Already the best: unchanged.
  const std::vector<std::size_t> position2 = {0, 2, 1, 3, 4};
  EXPECT_FALSE(SearchWindow(g, use, ReadersOf(g, use), order, position2, 0, 4));
}

}  // namespace
}  // namespace peakmem
