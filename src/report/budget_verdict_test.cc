#include "peakmem/report/budget_verdict.h"

#include <gtest/gtest.h>

namespace peakmem {
namespace {

TEST(BudgetVerdict, RequestedPeakAgainstTheBudget) {
  // 100 bytes held at the peak, no context: 20 left of 120; 121 needed of 120 does not fit.
  BudgetVerdict v = JudgeBudget(120, 100, std::nullopt, 0);
  EXPECT_TRUE(v.fits);
  EXPECT_EQ(v.basis, VerdictBasis::kRequested);
  EXPECT_EQ(v.counted_bytes, 100);
  EXPECT_EQ(v.headroom_bytes, 20);
  v = JudgeBudget(120, 100, std::nullopt, 21);
  EXPECT_FALSE(v.fits);
  EXPECT_EQ(v.counted_bytes, 121);
  EXPECT_EQ(v.headroom_bytes, -1);
}

TEST(BudgetVerdict, ReservedPeakAndContextWhereTheAllocatorRan) {
  // The requested peak (90) does not decide: reserved 100 + context 15 = 115 of 120.
  BudgetVerdict v = JudgeBudget(120, 90, AllocatorPeak{100, false}, 15);
  EXPECT_TRUE(v.fits);
  EXPECT_EQ(v.basis, VerdictBasis::kReserved);
  EXPECT_EQ(v.counted_bytes, 115);
  EXPECT_EQ(v.headroom_bytes, 5);
  EXPECT_EQ(VerdictBasisName(v.basis), "reserved");
}

TEST(BudgetVerdict, AnAllocatorThatRanOutHasNoHeadroom) {
  BudgetVerdict v = JudgeBudget(120, 90, AllocatorPeak{100, true}, 15);
  EXPECT_FALSE(v.fits);
  EXPECT_FALSE(v.headroom_bytes.has_value());
}

TEST(BudgetVerdict, AGpuModelsTermsAreItsMemoryItsContextAndTheCachingAllocator) {
  // An L4 (deviceQuery: 23,570,219,008 bytes), nothing given: its memory, its
  // context (plus a rank's NCCL buffers) and the caching allocator with the
  // budget less the context as its capacity.
  const BudgetTerms l4 = ResolveBudgetTerms("cuda:l4", std::nullopt, std::nullopt, "", std::nullopt, 1000);
  EXPECT_EQ(l4.budget, 23'570'219'008);
  EXPECT_EQ(l4.context_bytes, kAssumedContextBytes + 1000);
  EXPECT_EQ(l4.allocator, "cuda-caching");
  EXPECT_EQ(l4.capacity, 23'570'219'008 - kAssumedContextBytes - 1000);
  // What the caller gives stands; a budget the context fills leaves one byte.
  const BudgetTerms mine = ResolveBudgetTerms("cuda:l4", 100, 200, "", std::nullopt);
  EXPECT_EQ(mine.budget, 100);
  EXPECT_EQ(mine.context_bytes, 200);
  EXPECT_EQ(mine.capacity, 1);
  EXPECT_EQ(ResolveBudgetTerms("cuda:l4", 100, 0, "requested", std::nullopt).capacity, std::nullopt);
  // The CPU: no budget, no context, requested bytes; NCCL's bytes are a GPU's.
  const BudgetTerms cpu = ResolveBudgetTerms("cpu", std::nullopt, std::nullopt, "", std::nullopt, 1000);
  EXPECT_EQ(cpu.budget, std::nullopt);
  EXPECT_EQ(cpu.context_bytes, 0);
  EXPECT_EQ(cpu.allocator, "requested");
  EXPECT_EQ(ResolveBudgetTerms("", 500, std::nullopt, "cuda-caching", std::nullopt).capacity, 500);
  EXPECT_EQ(ResolveBudgetTerms("", 500, std::nullopt, "cuda-caching", 64).capacity, 64);
}

TEST(BudgetVerdict, TextAndJsonSayWhatWasCounted) {
  EXPECT_EQ(BudgetVerdictText(JudgeBudget(120, 100, std::nullopt, 0)), "budget 120 bytes (120 B): fits, headroom 20 bytes (20 B)");
  EXPECT_EQ(BudgetVerdictText(JudgeBudget(120, 90, AllocatorPeak{100, false}, 15)),
            "budget 120 bytes (120 B): fits, headroom 5 bytes (5 B); counted: the caching allocator's reserved peak "
            "100 + 15 outside it (the CUDA context, a rank's NCCL buffers)");
  EXPECT_EQ(BudgetVerdictText(JudgeBudget(120, 90, AllocatorPeak{100, true}, 15)),
            "budget 120 bytes (120 B): does not fit; the caching allocator runs out of memory within the budget "
            "less 15 outside it");
  EXPECT_EQ(BudgetVerdictText(JudgeBudget(25'769'803'776, 25'407'222'792, std::nullopt, 0)),
            "budget 25,769,803,776 bytes (24.00 GiB): fits, headroom 362,580,984 bytes (345.8 MiB)");
  const nlohmann::ordered_json j = BudgetVerdictJson(JudgeBudget(120, 90, AllocatorPeak{100, true}, 15));
  EXPECT_EQ(j["fits"], false);
  EXPECT_TRUE(j["headroom_bytes"].is_null());
  EXPECT_EQ(j["budget_basis"], "reserved");
  EXPECT_EQ(j["context_bytes"], 15);
  EXPECT_TRUE(BudgetVerdictJson(std::nullopt)["fits"].is_null());
}

}  // namespace
}  // namespace peakmem
