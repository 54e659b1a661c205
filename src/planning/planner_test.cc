// The planner on small traces whose best order is derived by hand. f32[N] is
// 4N bytes; the runtime model's rules (runtime_model.h) for these ops: each
// call allocates its output (no scratch: no Python numbers, f32 throughout),
// `del` frees when no view or container still holds the storage, the caller
// of a forward holds its arguments and the returned values.
#include "peakmem/planning/planner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "peakmem/planning/planned_trace.h"
#include "peakmem/planning/schedule_heuristics.h"
#include "planning_test_util.h"
#include "test_util.h"

namespace peakmem {
namespace {

using testing_util::Parse;

PlanOptions Forward() {
  PlanOptions options;
  options.runtime.convention = CallingConvention::kForward;
  return options;
}

// Two independent chains, each an exp then a sum, written breadth first.
// Trace order: x (1024) + a (1024) + b (1024) = 3072 at b; then c (4) while
// a and b live: 3076, the peak. Depth first (a, c, del a, b, d, del b):
// x + a + c = 2052 at c, x + c + b = 2052 at b, x + c + b + d = 2056 at d,
// the peak: 3076 - 2056 = 1020 bytes lower.
const char* const kTwoChains = testing_util::kTwoChainsTrace;

TEST(Planner, FreesAfterLastUseLowerThePeakOfTwoChains) {
  ParsedTrace parsed = Parse(kTwoChains);
  const PlanResult plan = PlanTrace(parsed, Forward());
  EXPECT_EQ(plan.original_peak_bytes, 3076);
  EXPECT_EQ(plan.planned_peak_bytes, 2056);
  EXPECT_EQ(plan.planned_final_bytes, 1024 + 8);  // x (the caller's) and c, d
  EXPECT_TRUE(plan.unchanged_reason.empty());
  EXPECT_TRUE(IsValidOrder(plan.graph, plan.order));
  // The trace is given back as it was.
  EXPECT_EQ(parsed.trace.statements.size(), 7u);
  EXPECT_EQ(parsed.trace.statements[3].kind, StatementKind::kDel);
  // The planned text: the same lines, the exps each before their sum, the
  // dels after the last uses.
  EXPECT_EQ(PrintPlan(parsed, plan),
            "# Planned by peakmem: peak 3076 -> 2056 bytes\n"
            "import torch\n"
            "@torch.no_grad()\n"
            "def fn(x):\n"
            "  # x: \"cpu f32[256]\"\n"
            "  a = torch.exp(x)  # a: \"cpu f32[256]\"\n"
            "  c = torch.sum(a)  # c: \"cpu f32[]\"\n"
            "  del a\n"
            "  b = torch.exp(x)  # b: \"cpu f32[256]\"\n"
            "  d = torch.sum(b)  # d: \"cpu f32[]\"\n"
            "  del b\n"
            "  return (c, d)\n");
  // What the planned text reads back as is what the plan predicted.
  ParsedTrace again = Parse(PrintPlan(parsed, plan));
  EXPECT_EQ(PlanTrace(again, Forward()).original_peak_bytes, 2056);
}

TEST(Planner, BaselinesAreSimulatedAndTheSearchStartsFromTheLowest) {
  ParsedTrace parsed = Parse(kTwoChains);
  const PlanResult plan = PlanTrace(parsed, Forward());
  ASSERT_EQ(plan.baselines.size(), 7u);  // the trace, Inductor's three, XLA's three
  EXPECT_EQ(plan.baselines[0].name, "trace order");
  EXPECT_EQ(plan.baselines[0].peak_bytes, 3076);
  for (const PlanCandidate& c : plan.baselines) EXPECT_GE(c.peak_bytes, plan.planned_peak_bytes) << c.name;
}

TEST(Planner, AnUnknownOpIsPinnedAndNothingMovesAcrossIt) {
  // frobnicate is not in the registry: its effects are unknown, so b (made
  // after it) may not move before it, and a (made before) not after it. The
  // only other order is none: the trace is returned as it is, with why.
  ParsedTrace parsed = Parse(R"(def fn(x):
  # x: "cpu f32[256]"
  a = torch.exp(x)  # a: "cpu f32[256]"
  t = frobnicate(x)  # t: "cpu f32[256]"
  b = torch.exp(x)  # b: "cpu f32[256]"
  return (a, t, b)
)");
  const PlanResult plan = PlanTrace(parsed, Forward());
  EXPECT_EQ(plan.graph.pinned_count, 2u);  // frobnicate and the return
  EXPECT_EQ(plan.graph.first_pin_reason, "an op peakmem does not know (its effects are unknown)");
  EXPECT_EQ(plan.order, (std::vector<NodeId>{0, 1, 2, 3}));
  EXPECT_EQ(plan.planned_peak_bytes, plan.original_peak_bytes);
  EXPECT_NE(plan.unchanged_reason.find("no statement can move"), std::string::npos) << plan.unchanged_reason;
}

TEST(Planner, RandomOpsKeepTheirOrderAndInPlaceOpsPin) {
  ParsedTrace parsed = Parse(R"(def fn(x):
  # x: "cpu f32[16]"
  r0 = torch.rand_like(x)  # r0: "cpu f32[16]"
  a = torch.exp(x)  # a: "cpu f32[16]"
  r1 = torch.rand_like(x)  # r1: "cpu f32[16]"
  x.add_(a)
  return (r0, r1, a)
)");
  const DependenceGraph g = BuildDependenceGraph(parsed.trace);
  ASSERT_EQ(g.size(), 5u);
  // r1 after r0 (the generator's order), though no value joins them.
  EXPECT_EQ(g.preds[2], (std::vector<NodeId>{0}));
  EXPECT_TRUE(g.preds[1].empty());
  EXPECT_TRUE(g.pinned[3]);  // add_
  EXPECT_EQ(g.segment, (std::vector<std::uint32_t>{0, 0, 0, 1, 2}));
  EXPECT_TRUE(IsValidOrder(g, {1, 0, 2, 3, 4}));
  EXPECT_FALSE(IsValidOrder(g, {2, 0, 1, 3, 4}));  // r1 before r0
  EXPECT_FALSE(IsValidOrder(g, {0, 1, 3, 2, 4}));  // r1 past the in-place add
}

TEST(Planner, AParameterNothingReadsIsFreedBeforeTheFirstStatement) {
  const DependenceGraph g = BuildDependenceGraph(Parse(R"(def fn(x, y):
  # x: "cpu f32[16]"
  # y: "cpu f32[16]"
  a = torch.exp(x)  # a: "cpu f32[16]"
  del x, y
  return a
)").trace);
  const FreePlacement frees = PlaceFrees(g, TraceOrder(g));
  ASSERT_EQ(frees.before_first.size(), 1u);  // y
  ASSERT_EQ(frees.after[0].size(), 1u);      // x, after its last use
  EXPECT_TRUE(frees.after[1].empty());       // nothing after the return
}

// A tree of concatenations over leaves of chosen sizes: every internal node
// concatenates its children (its output is their sum), the root is
// returned. The best peak over every order is found by trying all the
// topological orders with the liveness rule the runtime model follows for
// these ops (a node's output is allocated while its children are alive;
// each child is freed right after its one reader; nothing else allocates):
// an independent count, with which the planner's exact simulation agrees.
struct Tree {
  std::vector<int> parent;  // -1 for the root (the last node)
  std::vector<std::int64_t> elements;  // leaves' sizes; internal: sum of children
};

Tree RandomTree(std::mt19937& rng, int nodes) {
  Tree t;
  t.parent.assign(nodes, -1);
  t.elements.assign(nodes, 0);
  // Node i's parent is a later node, so the node order is topological;
  // nodes with no child are leaves.
  for (int i = 0; i + 1 < nodes; ++i) t.parent[i] = std::uniform_int_distribution<int>(i + 1, nodes - 1)(rng);
  std::vector<int> children(nodes, 0);
  for (int i = 0; i + 1 < nodes; ++i) ++children[t.parent[i]];
  for (int i = 0; i < nodes; ++i) {
    if (children[i] == 0) t.elements[i] = std::uniform_int_distribution<int>(1, 64)(rng);
  }
  for (int i = 0; i + 1 < nodes; ++i) t.elements[t.parent[i]] += t.elements[i];
  return t;
}

std::string TreeTrace(const Tree& t) {
  const int n = static_cast<int>(t.parent.size());
  std::string text = "def fn():\n";
  std::vector<std::vector<int>> children(n);
  for (int i = 0; i + 1 < n; ++i) children[t.parent[i]].push_back(i);
  for (int i = 0; i < n; ++i) {
    const std::string type = "  # n" + std::to_string(i) + ": \"cpu f32[" + std::to_string(t.elements[i]) + "]\"\n";
    if (children[i].empty()) {
      text += "  n" + std::to_string(i) + " = torch.zeros((" + std::to_string(t.elements[i]) +
              ",), device=torch.device(\"cpu\"), dtype=torch.float32)" + type;
    } else {
      text += "  n" + std::to_string(i) + " = torch.cat([";
      for (std::size_t k = 0; k < children[i].size(); ++k) text += (k ? ", n" : "n") + std::to_string(children[i][k]);
      text += "], 0)" + type;
      text += "  del ";
      for (std::size_t k = 0; k < children[i].size(); ++k) text += (k ? ", n" : "n") + std::to_string(children[i][k]);
      text += "\n";
    }
  }
  return text + "  return n" + std::to_string(n - 1) + "\n";
}

std::int64_t BestTreePeak(const Tree& t) {
  const int n = static_cast<int>(t.parent.size());
  std::vector<int> order(n);
  for (int i = 0; i < n; ++i) order[i] = i;
  std::int64_t best = -1;
  do {
    std::vector<int> at(n);
    for (int i = 0; i < n; ++i) at[order[i]] = i;
    bool topological = true;
    for (int i = 0; i + 1 < n; ++i) topological = topological && at[i] < at[t.parent[i]];
    if (!topological) continue;
    std::int64_t live = 0, peak = 0;
    for (int v : order) {
      live += 4 * t.elements[v];
      peak = std::max(peak, live);
      for (int c = 0; c + 1 < n; ++c) {
        if (t.parent[c] == v) live -= 4 * t.elements[c];
      }
    }
    if (best < 0 || peak < best) best = peak;
  } while (std::next_permutation(order.begin(), order.end()));
  return best;
}

TEST(Planner, ReachesTheOptimumOnTrees) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 12; ++trial) {
    const Tree tree = RandomTree(rng, 6 + trial % 4);  // 6 to 9 nodes: every order tried above
    const std::string text = TreeTrace(tree);
    ParsedTrace parsed = Parse(text);
    PlanOptions options;
    options.runtime.convention = CallingConvention::kForward;
    const PlanResult plan = PlanTrace(parsed, options);
    EXPECT_EQ(plan.planned_peak_bytes, BestTreePeak(tree)) << text;
    EXPECT_LE(plan.planned_peak_bytes, plan.original_peak_bytes);
  }
}

}  // namespace
}  // namespace peakmem
