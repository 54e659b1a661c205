// The `thunder` model's alias rule and collection clears (peakmem/thunder_model.h),
// rule by rule. Every expected number below is derived by hand in the comment
// above it, from the rules in thunder_model.h; f32[4] is 16 bytes throughout.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "peakmem/analyze.h"
#include "peakmem/models/thunder_model.h"
#include "peakmem/semantics/op_registry.h"
#include "thunder_model_test_util.h"

namespace peakmem {
namespace {

using testing_util::Breakdown;
using testing_util::ExpectConsistent;
using testing_util::FindValue;
using testing_util::Items;
using testing_util::Parse;
using thunder_model_test::LiveBytes;
using thunder_model_test::RunChecked;

// ---------------------------------------------------------------- alias rule

TEST(ThunderModel, AliasOpAllocatesNothingAndSharesTheCount) {
  //   t0 = neg(a)            +16 -> 32, t0 count 1
  //   t1 = unsqueeze(t0, 0)    0 -> 32, t0/t1 count 2 (no key)
  //   del t0                 count 1, nothing -> 32
  //   t2 = exp(t1)           +16 -> 48  peak
  //   del t1                 count 0: frees t0's 16, key "python_del t1" -> 32
  // peak 48, final 32.
  const Report report = RunChecked(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.neg(a)  # t0: "cpu f32[4]"
  t1 = torch.unsqueeze(t0, 0)  # t1: "cpu f32[1, 4]"
  del t0
  t2 = torch.exp(t1)  # t2: "cpu f32[1, 4]"
  del t1
  return t2
)");
  EXPECT_EQ(report.peak_bytes, 48);
  EXPECT_EQ(report.final_bytes, 32);
  EXPECT_EQ(LiveBytes(report), (std::vector<std::int64_t>{32, 32, 32, 48, 32, 32}));
  EXPECT_EQ(Items(report), (Breakdown{{"argument a", 16},
                                      {"neg t0", 16},
                                      {"exp t2", 16},
                                      {"python_del t1", -16}}));
}

TEST(ThunderModel, ExpandFreesTheOriginalSize) {
  //   t0 = neg(a)              +16 -> 32
  //   t1 = expand(t0, (3, 4))    0 -> 32 (t1 is f32[3, 4] = 48 bytes, but an alias)
  //   del t0                   count 2 -> 1 -> 32
  //   t2 = sum(t1)             +4 -> 36  peak
  //   del t1                   count 0: frees t0's 16, not 48 -> 20
  const Report report = RunChecked(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.neg(a)  # t0: "cpu f32[4]"
  t1 = Tensor.expand(t0, (3, 4))  # t1: "cpu f32[3, 4]"
  del t0
  t2 = torch.sum(t1)  # t2: "cpu f32[]"
  del t1
  return t2
)");
  EXPECT_EQ(report.peak_bytes, 36);
  EXPECT_EQ(report.final_bytes, 20);
  EXPECT_EQ(Items(report), (Breakdown{{"argument a", 16},
                                      {"neg t0", 16},
                                      {"sum t2", 4},
                                      {"python_del t1", -16}}));
}

TEST(ThunderModel, AliasOfAnAliasFreesTheOriginalWhenTheLastDies) {
  //   t0 = neg(a)                +16 -> 32 (count 1)
  //   t1 = unsqueeze(t0, 0)        0 (count 2)
  //   t2 = Tensor.expand(t1, ...)  0 (count 3)
  //   del t0, t1                 count 1 -> 32
  //   del t2                     count 0: -16 (t0's size) -> 16, key "python_del t2"
  // Peak 32 (first reached after neg, step 0).
  const Report report = RunChecked(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.neg(a)  # t0: "cpu f32[4]"
  t1 = torch.unsqueeze(t0, 0)  # t1: "cpu f32[1, 4]"
  t2 = Tensor.expand(t1, (5, 4))  # t2: "cpu f32[5, 4]"
  del t0, t1
  del t2
  return None
)");
  EXPECT_EQ(report.peak_bytes, 32);
  EXPECT_EQ(report.peak_step, 0);
  EXPECT_EQ(report.final_bytes, 16);
  EXPECT_EQ(Items(report),
            (Breakdown{{"argument a", 16}, {"neg t0", 16}, {"python_del t2", -16}}));
}

TEST(ThunderModel, AliasOfAnArgumentNeverFreesIt) {
  //   t0 = reshape(a, (2, 2))  0, a count 3 -> live 16, peak 16
  //   del a, t0                count 1 -> nothing
  const Report report = RunChecked(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.reshape(a, (2, 2))  # t0: "cpu f32[2, 2]"
  del a, t0
  return None
)");
  EXPECT_EQ(report.peak_bytes, 16);
  EXPECT_EQ(report.final_bytes, 16);
  EXPECT_EQ(Items(report), (Breakdown{{"argument a", 16}}));
}

class ThunderAliasOpTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ThunderAliasOpTest, AllocatesNothing) {
  // a: 16; the alias op adds 0: live 16 after it, so peak 16 and final 16,
  // and the breakdown has the argument only.
  const Report report = RunChecked(std::string(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = )") + GetParam() + R"((a)  # t0: "cpu f32[4]"
  return t0
)");
  EXPECT_EQ(report.peak_bytes, 16);
  EXPECT_EQ(report.final_bytes, 16);
  EXPECT_EQ(Items(report), (Breakdown{{"argument a", 16}}));
}

INSTANTIATE_TEST_SUITE_P(ThunderAliasList, ThunderAliasOpTest,
                         ::testing::Values("torch.unsqueeze", "torch.squeeze", "torch.transpose",
                                           "Tensor.expand", "torch.reshape",
                                           "torch_prims_reshape_impl", "torch.permute",
                                           "Tensor.contiguous", "torch.split",
                                           "torch_wait_prim_impl", "shallow_copy"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '.') c = '_';
                           }
                           return name;
                         });

TEST(ThunderModel, LtorchCalleeIsNotAnAlias) {
  // ltorch.reshape's id is not "reshape": the default rule allocates 16.
  const Report report = RunChecked(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = ltorch.reshape(a, (2, 2))  # t0: "cpu f32[2, 2]"
  return t0
)");
  EXPECT_EQ(report.peak_bytes, 32);
  EXPECT_EQ(Items(report), (Breakdown{{"argument a", 16}, {"reshape t0", 16}}));
}

TEST(ThunderModel, PrimsCalleeIsNotAnAlias) {
  // prims.transpose: the default rule allocates 16.
  const Report report = RunChecked(R"(def f(a):
  # a: "cpu f32[2, 2]"
  t0 = prims.transpose(a, (1, 0))  # t0: "cpu f32[2, 2]"
  return t0
)");
  EXPECT_EQ(report.peak_bytes, 32);
  EXPECT_EQ(Items(report), (Breakdown{{"argument a", 16}, {"transpose t0", 16}}));
}

TEST(ThunderModel, SplitOutputsTypedBySubSymbolsAreFreedWhenTheLastDies) {
  //   t0 = neg(a)                  +16 -> 32 (count 1)
  //   [t1, t2] = split(t0, 2)        0 (count 3)
  //   del t0                       count 2 -> 32
  //   del t1                       count 1 -> 32
  //   t3 = exp(t2)                 +8 -> 40  peak
  //   del t2                       count 0: -16 (t0's size) -> 24
  const Report report = RunChecked(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.neg(a)  # t0: "cpu f32[4]"
  [t1, t2] = torch.split(t0, 2)
    # [t1, t2] = ltorch.split(t0, 2)
      # t1 = prims.slice_prim(t0, [0], [2], [1])  # t1: "cpu f32[2]"
      # t2 = prims.slice_prim(t0, [2], [4], [1])  # t2: "cpu f32[2]"
  del t0
  del t1
  t3 = torch.exp(t2)  # t3: "cpu f32[2]"
  del t2
  return t3
)");
  EXPECT_EQ(report.peak_bytes, 40);
  EXPECT_EQ(report.final_bytes, 24);
  EXPECT_EQ(Items(report), (Breakdown{{"argument a", 16},
                                      {"neg t0", 16},
                                      {"exp t3", 8},
                                      {"python_del t2", -16}}));
}

TEST(ThunderModel, UntypedSplitOutputsAreStillFreedWhenTheLastDies) {
  // Thunder prints no type comment on a line with several outputs; without
  // subsymbols the split outputs have no printed type. They are still the
  // TensorProxies Thunder's alias rule registered, so deleting them drops the
  // shared count exactly as in the test above:
  //   32 -> 32 -> 32 -> 32 -> 40 (peak) -> del t2 frees t0's 16 -> 24.
  const Report report = RunChecked(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.neg(a)  # t0: "cpu f32[4]"
  [t1, t2] = torch.split(t0, 2)
  del t0
  del t1
  t3 = torch.exp(t2)  # t3: "cpu f32[2]"
  del t2
  return t3
)");
  EXPECT_EQ(report.peak_bytes, 40);
  EXPECT_EQ(report.final_bytes, 24);
  EXPECT_EQ(Items(report), (Breakdown{{"argument a", 16},
                                      {"neg t0", 16},
                                      {"exp t3", 8},
                                      {"python_del t2", -16}}));
}

// ---------------------------------------------------------------- clears

TEST(ThunderModel, ClearOfAnArgumentCollectionDropsItsDirectElements) {
  // a: 16, b: 8 (both count 2) -> 24.
  //   del a                            a 2 -> 1 -> 24  peak
  //   clear_mutable_collection(saved)  a 1 -> 0: -16 "clear_mutable_collection a";
  //                                    b 2 -> 1 -> 8
  //   del b                            b 1 -> 0: -8 "python_del b" -> 0
  const Report report = RunChecked(R"(def backward_fn(saved):
  # saved: "Collection"
  a, b, = saved
  # a: "cpu f32[4]"
  # b: "cpu f32[2]"
  del a
  clear_mutable_collection(saved)
  del b
  return None
)");
  EXPECT_EQ(report.peak_bytes, 24);
  EXPECT_EQ(report.final_bytes, 0);
  EXPECT_EQ(LiveBytes(report), (std::vector<std::int64_t>{24, 24, 8, 0, 0}));
  EXPECT_EQ(Items(report), (Breakdown{{"argument a", 16},
                                      {"argument b", 8},
                                      {"clear_mutable_collection a", -16},
                                      {"python_del b", -8}}));
}

TEST(ThunderModel, ClearDoesNotReleaseTensorsOfANestedCollection) {
  // saved = [C0], C0 = [a]: a is counted (16, count 2). Clearing `saved`
  // drops its direct element C0, a collection, so a keeps both counts;
  // clearing C0 (not an argument) does nothing; del a: 2 -> 1.
  // Live 16 throughout; the clear is not skipped, so peak 16. Final 16.
  const Report report = RunChecked(R"(def backward_fn(saved):
  # saved: "Collection"
  C0, = saved
  # C0: "Collection"
  a, = C0
  # a: "cpu f32[4]"
  clear_mutable_collection(saved)
  clear_mutable_collection(C0)
  del C0, a
  return None
)");
  EXPECT_EQ(report.peak_bytes, 16);
  EXPECT_EQ(report.final_bytes, 16);
  EXPECT_EQ(Items(report), (Breakdown{{"argument a", 16}}));
}

TEST(ThunderModel, ClearOfANonArgumentCollectionDoesNothing) {
  // C0 is not a signature argument: its clear drops nothing, so del a only
  // takes a's count 2 -> 1. Peak 16, final 16.
  const Report report = RunChecked(R"(def backward_fn(saved):
  # saved: "Collection"
  C0, = saved
  # C0: "Collection"
  a, = C0
  # a: "cpu f32[4]"
  clear_mutable_collection(C0)
  del a
  return None
)");
  EXPECT_EQ(report.peak_bytes, 16);
  EXPECT_EQ(report.final_bytes, 16);
  EXPECT_EQ(Items(report), (Breakdown{{"argument a", 16}}));
}

TEST(ThunderModel, ClearOfATupleArgumentDoesNothing) {
  // A tuple cannot be cleared. The printed trace never says "tuple" (a live
  // trace does), so the container kind is set in the IR.
  //   clear: nothing; del a: 2 -> 1. Peak 16, final 16.
  ParsedTrace parsed = Parse(R"(def f(saved):
  # saved: "Collection"
  a, = saved
  # a: "cpu f32[4]"
  clear_mutable_collection(saved)
  del a
  return None
)");
  parsed.trace.value(parsed.trace.params[0].value).container = ContainerKind::kTuple;
  const Report report = RunThunderModel(parsed);
  EXPECT_EQ(report.final_bytes, 16);
  EXPECT_EQ(Items(report), (Breakdown{{"argument a", 16}}));
}

TEST(ThunderModel, ClearOfAnExplicitListArgumentReleases) {
  // Same trace with the container known to be a list: clear drops a to 1,
  // del a drops it to 0: -16. Peak 16 (after the clear), final 0.
  ParsedTrace parsed = Parse(R"(def f(saved):
  # saved: "Collection"
  a, = saved
  # a: "cpu f32[4]"
  clear_mutable_collection(saved)
  del a
  return None
)");
  parsed.trace.value(parsed.trace.params[0].value).container = ContainerKind::kList;
  const Report report = RunThunderModel(parsed);
  EXPECT_EQ(report.peak_bytes, 16);
  EXPECT_EQ(report.final_bytes, 0);
  EXPECT_EQ(Items(report), (Breakdown{{"argument a", 16}, {"python_del a", -16}}));
}

TEST(ThunderModel, LegacyClearCollectionFallsToTheDefaultRule) {
  // clear_collection is not Thunder's clear_mutable_collection: the default
  // rule writes "clear_collection " = 0 and drops nothing; del a: 2 -> 1.
  // Peak 16 (after the clear), final 16.
  const Report report = RunChecked(R"(def backward_fn(saved):
  # saved: "Collection"
  a, = saved
  # a: "cpu f32[4]"
  clear_collection(saved)
  del a
  return None
)");
  EXPECT_EQ(report.peak_bytes, 16);
  EXPECT_EQ(report.final_bytes, 16);
  EXPECT_EQ(Items(report), (Breakdown{{"argument a", 16}, {"clear_collection ", 0}}));
}

}  // namespace
}  // namespace peakmem
