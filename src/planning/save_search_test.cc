// The save search on made-up steps whose peaks are worked out by hand: a
// base of 100 bytes plus what each saved candidate holds.
#include "peakmem/planning/save_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

namespace peakmem {
namespace {

// Candidates a, b, c, d (FLOPs, bytes held when saved): (10, 5), (40, 10),
// (3, 1), (0, 2).
const std::vector<SaveCandidate> kSingles = {{10, 5, {}}, {40, 10, {}}, {3, 1, {}}, {0, 2, {}}};

std::int64_t Additive(const std::vector<bool>& kept) {
  const std::int64_t held[] = {5, 10, 1, 2};
  std::int64_t peak = 100;
  for (std::size_t c = 0; c < kept.size(); ++c) peak += kept[c] ? held[c] : 0;
  return peak;
}

TEST(SaveSearch, KeepsWhatFitsMostFlopsPerByteFirst) {
  // FLOPs per byte: b 4, c 3, a 2; d saves nothing and is passed over.
  // b: 110 <= 112, kept; then c and a together: 116 > 112; c alone: 111,
  // kept; a: 116 (the set c and a made: not simulated again), recomputed.
  // Simulations: everything recomputed, b, c and a, c: 4.
  std::vector<std::vector<bool>> calls;
  const SaveSearchResult r = SearchSaves(
      kSingles, [&](const std::vector<bool>& kept) { calls.push_back(kept); return Additive(kept); }, {112});
  EXPECT_TRUE(r.fits);
  EXPECT_EQ(r.lowest_peak, 100);
  EXPECT_EQ(r.kept, (std::vector<bool>{false, true, true, false}));
  EXPECT_EQ(r.peak, 111);
  EXPECT_EQ(r.added_flops, 10);  // a's; d adds nothing
  EXPECT_EQ(r.simulations, 4u);
  ASSERT_EQ(calls.size(), 4u);
  EXPECT_EQ(calls[0], (std::vector<bool>{false, false, false, false}));
  EXPECT_EQ(calls[1], (std::vector<bool>{false, true, false, false}));
}

TEST(SaveSearch, NothingFitsBelowTheLowestPeak) {
  const SaveSearchResult r = SearchSaves(kSingles, Additive, {99});
  EXPECT_FALSE(r.fits);
  EXPECT_EQ(r.lowest_peak, 100);
  EXPECT_EQ(r.kept, (std::vector<bool>(4, false)));
  EXPECT_EQ(r.added_flops, 10 + 40 + 3);
  EXPECT_EQ(r.simulations, 1u);
}

// A block: a (10, 5) and b (40, 10) saved one by one, or g, the whole block
// left unplanned (7 FLOPs of its own), whose peak `plain` is given.
const std::vector<SaveCandidate> kBlock = {{10, 5, {}}, {40, 10, {}}, {7, 0, {0, 1}}};

SaveSimulate BlockSimulation(std::int64_t plain) {
  return [plain](const std::vector<bool>& kept) -> std::int64_t {
    if (kept[2]) return plain;
    return 100 + (kept[0] ? 5 : 0) + (kept[1] ? 10 : 0);
  };
}

void ExpectResult(const SaveSearchResult& r, const std::vector<bool>& kept, std::int64_t peak,
                  std::int64_t added_flops, std::size_t simulations) {
  EXPECT_EQ(r.kept, kept);
  EXPECT_EQ(r.peak, peak);
  EXPECT_EQ(r.added_flops, added_flops);
  EXPECT_EQ(r.simulations, simulations);
}

TEST(SaveSearch, AGroupFitsWhereItsMembersDoNot) {
  // g kept alone peaks at 108: 8 bytes over the lowest, for 7 + 10 + 40 = 57
  // FLOPs, 7.1 per byte, before b (4) and a (2). Budget 109: g fits (its
  // trial is the simulation that measured it); a and b are kept with it.
  // Simulations: the lowest and g's.
  ExpectResult(SearchSaves(kBlock, BlockSimulation(108), {109}), {true, true, true}, 108, 0, 2);
}

TEST(SaveSearch, AGroupHoldingMorePerFlopComesAfterTheSingles) {
  // g alone peaks at 130: 30 bytes for 57 FLOPs, 1.9 per byte, after b (4)
  // and a (2). Budget 116: b (110) and a (115) kept, then g (130) not: its
  // own 7 FLOPs are added. Simulations: the lowest, g's, b's, a's (g's
  // trial is the one that measured it).
  ExpectResult(SearchSaves(kBlock, BlockSimulation(130), {116}), {true, true, false}, 115, 7, 4);
}

TEST(SaveSearch, AnEarlierTierIsTriedFirstWhateverItsRatio) {
  // b (40 FLOPs, 10 bytes: 4 per byte) in tier 1, c (3, 1: 3 per byte) in
  // tier 0. Budget 110: c first (101, kept), then b (111, not). In one tier
  // b would come first (110, kept) and c after it (111, not).
  const std::vector<SaveCandidate> tiered = {{40, 10, {}, 1}, {3, 1, {}, 0}};
  auto simulate = [](const std::vector<bool>& kept) -> std::int64_t {
    return 100 + (kept[0] ? 10 : 0) + (kept[1] ? 1 : 0);
  };
  EXPECT_EQ(SearchSaves(tiered, simulate, {110}).kept, (std::vector<bool>{false, true}));
  const std::vector<SaveCandidate> one_tier = {{40, 10, {}, 0}, {3, 1, {}, 0}};
  EXPECT_EQ(SearchSaves(one_tier, simulate, {110}).kept, (std::vector<bool>{true, false}));
}

TEST(SaveSearch, ManyThatFitAreKeptInDoublingBatches) {
  // Eight candidates of 1 byte each, all fitting: batches of 1, 2, 4, then
  // the one left. Simulations: 1 + 4 (one at a time: 1 + 8).
  const std::vector<SaveCandidate> eight(8, SaveCandidate{1, 1, {}});
  auto simulate = [](const std::vector<bool>& kept) -> std::int64_t {
    return 100 + std::count(kept.begin(), kept.end(), true);
  };
  ExpectResult(SearchSaves(eight, simulate, {108}), std::vector<bool>(8, true), 108, 0, 5);
}

TEST(SaveSearch, StopsAtTheSimulationLimit) {
  // The first simulation and b's: then the limit.
  const SaveSearchResult r = SearchSaves(kSingles, Additive, {112, 2});
  EXPECT_TRUE(r.simulation_limit_reached);
  EXPECT_EQ(r.simulations, 2u);
  EXPECT_EQ(r.kept, (std::vector<bool>{false, true, false, false}));
  EXPECT_EQ(r.added_flops, 10 + 3);
}

TEST(SaveSearch, OneHoldingNoBytesIsTriedFirst) {
  // a (10,000 FLOPs for 100 bytes) and z (10 FLOPs for none): z first.
  const std::vector<SaveCandidate> two = {{10000, 100, {}}, {10, 0, {}}};
  std::vector<std::vector<bool>> calls;
  SearchSaves(two, [&](const std::vector<bool>& kept) { calls.push_back(kept); return std::int64_t{100}; }, {100});
  ASSERT_GE(calls.size(), 2u);
  EXPECT_EQ(calls[1], (std::vector<bool>{false, true}));
}

TEST(SaveSearch, WithoutABudgetTheLowestPeakIsTheBudget) {
  // Lowest 100: b (110), c (101) and a (105) each raise it; only d, which
  // saves no FLOPs, would not, and it is passed over. Nothing is kept.
  const SaveSearchResult r = SearchSaves(kSingles, Additive, {std::nullopt});
  EXPECT_TRUE(r.fits);
  EXPECT_EQ(r.kept, (std::vector<bool>(4, false)));
  EXPECT_EQ(r.peak, 100);
}

TEST(SaveSearch, RejectsNegativeFlopsUnknownMembersAndNoSimulations) {
  EXPECT_THROW(SearchSaves({{-1, 0, {}}}, Additive, {100}), std::invalid_argument);
  EXPECT_THROW(SearchSaves({{1, 0, {3}}}, Additive, {100}), std::invalid_argument);
  EXPECT_THROW(SearchSaves(kSingles, Additive, {100, 0}), std::invalid_argument);
}

}  // namespace
}  // namespace peakmem
