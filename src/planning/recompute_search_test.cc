// The greedy recomputation search on a made-up step whose peak is the
// baseline less each chosen candidate's own drop (additive), so that every
// round's scores can be worked out by hand.
#include "peakmem/planning/recompute_search.h"

#include <gtest/gtest.h>

namespace peakmem {
namespace {

// Candidates a, b, c, d: FLOPs 0, 10, 5, 3; each lowers the peak of 100 by
// 4, 30, 20, 0 bytes.
const std::vector<std::int64_t> kFlops = {0, 10, 5, 3};
const std::vector<std::int64_t> kDrop = {4, 30, 20, 0};

struct Additive {
  std::vector<std::vector<std::size_t>> calls;
  std::int64_t operator()(const std::vector<std::size_t>& chosen) {
    calls.push_back(chosen);
    std::int64_t peak = 100;
    for (std::size_t c : chosen) peak -= kDrop[c];
    return peak;
  }
};

TEST(RecomputeSearch, KeepsTheBestDropPerFlopEachRound) {
  // Round 1: a 4/max(1,0) = 4 (peak 96), b 30/10 = 3, c 20/5 = 4 (peak 80),
  // d no drop. a and c tie at 4: the lower peak, c. Round 2 (from 80): a 4,
  // b 3 -> a (76). Round 3: b (46). Round 4: only d, which never lowers it.
  // Simulations: 1 + 4 + 3 + 2 + 1 = 11.
  Additive sim;
  const RecomputeSearchResult r =
      SearchRecomputation(kFlops, [&](const auto& c) { return sim(c); }, RecomputeSearchOptions{});
  EXPECT_EQ(r.chosen, (std::vector<std::size_t>{2, 0, 1}));
  EXPECT_EQ(r.peaks, (std::vector<std::int64_t>{80, 76, 46}));
  EXPECT_EQ(r.peak_before, 100);
  EXPECT_EQ(r.peak_after, 46);
  EXPECT_EQ(r.added_flops, 5 + 0 + 10);
  EXPECT_EQ(r.simulations, 11u);
  EXPECT_EQ(sim.calls.size(), 11u);
  EXPECT_TRUE(sim.calls[0].empty());  // the step as it is, first
  EXPECT_EQ(sim.calls[5], (std::vector<std::size_t>{2, 0}));  // round 2 tries on top of c
  EXPECT_FALSE(r.simulation_limit_reached);
  EXPECT_FALSE(r.stopped);
}

TEST(RecomputeSearch, StopsAsSoonAsTheBudgetFits) {
  // After c the peak is 80 > 78; after a, 76 fits: two choices, 1 + 4 + 3 simulations.
  Additive sim;
  RecomputeSearchOptions options;
  options.budget = 78;
  const RecomputeSearchResult r = SearchRecomputation(kFlops, [&](const auto& c) { return sim(c); }, options);
  EXPECT_EQ(r.chosen, (std::vector<std::size_t>{2, 0}));
  EXPECT_EQ(r.peak_after, 76);
  EXPECT_EQ(r.simulations, 8u);
  // A budget the step already fits: nothing tried.
  options.budget = 100;
  const RecomputeSearchResult none = SearchRecomputation(kFlops, [&](const auto& c) { return sim(c); }, options);
  EXPECT_TRUE(none.chosen.empty());
  EXPECT_EQ(none.simulations, 1u);
}

TEST(RecomputeSearch, ARoundCutShortKeepsTheBestItTried) {
  // Three simulations: the step, then a (96) and b (70); the round stops
  // there with a scoring 4 > b's 3: a is kept, and the search ends.
  Additive sim;
  RecomputeSearchOptions options;
  options.max_simulations = 3;
  const RecomputeSearchResult r = SearchRecomputation(kFlops, [&](const auto& c) { return sim(c); }, options);
  EXPECT_EQ(r.chosen, (std::vector<std::size_t>{0}));
  EXPECT_EQ(r.peak_after, 96);
  EXPECT_TRUE(r.simulation_limit_reached);
  // The caller's own bound (wall time), asked before the simulation bound:
  // stopping at the third try of round 1, where the simulation bound is
  // also reached, keeps a the same way and says it stopped.
  int asked = 0;
  const RecomputeSearchResult stopped = SearchRecomputation(
      kFlops, [&](const auto& c) { return sim(c); }, options, [&] { return ++asked > 2; });
  EXPECT_TRUE(stopped.stopped);
  EXPECT_FALSE(stopped.simulation_limit_reached);
  EXPECT_EQ(stopped.chosen, (std::vector<std::size_t>{0}));
}

TEST(RecomputeSearch, ExpensiveCandidatesOnlyWhenTheBudgetDemandsThem) {
  // a (cheap, 1 FLOP, lowers the peak of 100 by 5), e (expensive, 100
  // FLOPs, by 50), b (cheap, 1 FLOP, by nothing).
  const std::vector<std::int64_t> flops = {1, 100, 1};
  const std::vector<bool> expensive = {false, true, false};
  auto simulate = [](const std::vector<std::size_t>& chosen) {
    std::int64_t peak = 100;
    for (std::size_t c : chosen) peak -= c == 0 ? 5 : c == 1 ? 50 : 0;
    return peak;
  };
  // No budget: round 1 tries a and b (a: 95), round 2 b alone (no drop):
  // the cheap ones are spent and nothing more is tried. 1 + 2 + 1 simulations.
  RecomputeSearchOptions options;
  RecomputeSearchResult r = SearchRecomputation(flops, simulate, options, {}, expensive);
  EXPECT_EQ(r.chosen, (std::vector<std::size_t>{0}));
  EXPECT_EQ(r.peak_after, 95);
  EXPECT_EQ(r.simulations, 4u);
  EXPECT_FALSE(r.expensive_tier);
  // A budget of 60: the same round 1 and 2, then e and b tried on top of a:
  // e (45) fits. 1 + 2 + 1 + 2 simulations.
  options.budget = 60;
  r = SearchRecomputation(flops, simulate, options, {}, expensive);
  EXPECT_EQ(r.chosen, (std::vector<std::size_t>{0, 1}));
  EXPECT_EQ(r.peaks, (std::vector<std::int64_t>{95, 45}));
  EXPECT_EQ(r.added_flops, 101);
  EXPECT_EQ(r.simulations, 6u);
  EXPECT_TRUE(r.expensive_tier);
  // A budget the cheap ones meet: e is never tried.
  options.budget = 96;
  r = SearchRecomputation(flops, simulate, options, {}, expensive);
  EXPECT_EQ(r.chosen, (std::vector<std::size_t>{0}));
  EXPECT_EQ(r.simulations, 3u);
  EXPECT_FALSE(r.expensive_tier);
}

}  // namespace
}  // namespace peakmem
