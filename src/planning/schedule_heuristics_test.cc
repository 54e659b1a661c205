// Inductor's list schedules (torch/_inductor/memory.py) on a small graph,
// each order derived by hand from the rules in schedule_heuristics.h.
#include "peakmem/planning/schedule_heuristics.h"

#include <gtest/gtest.h>

#include "peakmem/analyze.h"
#include "planning_test_util.h"
#include "test_util.h"

namespace peakmem {
namespace {

using testing_util::Parse;

// Nodes: 0 a = exp(x) 1024 B, 1 b = exp(x) 1024 B, 2 c = sum(a) 4 B,
// 3 d = sum(b) 4 B, 4 the return (pinned: a segment of its own).
DependenceGraph TwoChains() {
  return BuildDependenceGraph(Parse(testing_util::kTwoChainsTrace).trace);
}

TEST(ScheduleHeuristics, StorageUseCountsReadersAndWhatMayBeFreed) {
  const DependenceGraph g = TwoChains();
  const StorageUse use = ComputeStorageUse(g);
  EXPECT_EQ(use.reads[2], (std::vector<NodeId>{0}));
  EXPECT_EQ(use.readers[0], 1u);
  EXPECT_TRUE(use.freeable[0]);   // a is deleted
  EXPECT_FALSE(use.freeable[2]);  // c is returned
}

TEST(ScheduleHeuristics, LeastPeakMemoryFirstRunsEachSumRightAfterItsExp) {
  // Start: live 0, max 0, ready {0, 1}: both 1024 > gap 0, equal keys, 0
  // first (live 1024, max 1024). Ready {1, 2}: gap 0; 1 keys (1024, 1024),
  // 2 keys (4, 4 - 1024) as it frees a: 2 (live 4). Then 1, then 3.
  EXPECT_EQ(LeastPeakMemoryFirstOrder(TwoChains()), (std::vector<NodeId>{0, 2, 1, 3, 4}));
}

TEST(ScheduleHeuristics, BreadthFirstTakesReadyNodesByTheirLastPredecessor) {
  // 0 and 1 ready with key 0 (no predecessor); 0 at position 0 readies 2
  // (key 1), 1 at position 1 readies 3 (key 2): 0, 1, 2, 3.
  EXPECT_EQ(BreadthFirstOrder(TwoChains()), (std::vector<NodeId>{0, 1, 2, 3, 4}));
}

TEST(ScheduleHeuristics, DepthFirstVisitsBySizeAfterPredecessors) {
  // Sizes: 0 and 1 1024 (x is a parameter: not counted), 2 and 3 4 + 1024
  // (they read a, b). Smallest first: 0, 1, then 2 and 3, each already
  // after its predecessor.
  EXPECT_EQ(DepthFirstOrder(TwoChains()), (std::vector<NodeId>{0, 1, 2, 3, 4}));
}

TEST(ScheduleHeuristics, XlaListFreesFirstScalarsFirstTiesToTheLastMadeReady) {
  // Ready 0 then 1, both (freed 0 - 1024, 1 user): the tie goes to the one
  // made ready last, 1. Ready 0, 3: 3's outputs are one element (d): first.
  // Then 0, then 2.
  EXPECT_EQ(XlaListOrder(TwoChains()), (std::vector<NodeId>{1, 3, 0, 2, 4}));
}

TEST(ScheduleHeuristics, XlaDepthFirstAndPostOrderWalkFromTheSinks) {
  // Segment 0's sinks are 2 and 3 (the return is a segment of its own): the
  // walk from 2 emits 0 then 2, from 3 emits 1 then 3. Both orders agree
  // here (one predecessor each).
  EXPECT_EQ(XlaDepthFirstOrder(TwoChains()), (std::vector<NodeId>{0, 2, 1, 3, 4}));
  EXPECT_EQ(XlaPostOrder(TwoChains()), (std::vector<NodeId>{0, 2, 1, 3, 4}));
}


}  // namespace
}  // namespace peakmem

namespace peakmem {
namespace {

TEST(ScheduleHeuristics, EveryOrderIsValidOnTheZoosTraces) {
  // Every heuristic on every stored model-zoo trace: a permutation that keeps
  // each dependence and each pinned statement in place.
  for (const char* model : {"bert", "gpt2", "llama", "mlp_mixer", "moe", "resnet", "t5", "vit"}) {
    for (const char* kind : {"fw", "bw"}) {
      const std::string path = std::string(PEAKMEM_TEST_DATA_DIR) + "/zoo/" + model + "/" + kind + ".trace";
      const DependenceGraph g = BuildDependenceGraph(LoadTrace(path).trace);
      for (const auto& order : {TraceOrder(g), LeastPeakMemoryFirstOrder(g), BreadthFirstOrder(g), DepthFirstOrder(g),
                                XlaListOrder(g), XlaDepthFirstOrder(g), XlaPostOrder(g)}) {
        EXPECT_TRUE(IsValidOrder(g, order)) << path;
      }
    }
  }
}

}  // namespace
}  // namespace peakmem
