// Op scratch rules (scratch.h) on single statements; each byte count is
// derived in the comment from the rule, whose numbers were measured on
// the CPU (see scratch.h).
#include "peakmem/semantics/scratch.h"

#include <gtest/gtest.h>

#include "peakmem/semantics/op_registry.h"
#include "test_util.h"

namespace peakmem {
namespace {

ScratchEstimate ScratchOfFirstCall(const std::string& text) {
  const ParsedTrace parsed = testing_util::Parse(text);
  for (const Statement& s : parsed.trace.statements) {
    if (s.kind == StatementKind::kCall) return EstimateScratch(parsed.trace, s);
  }
  ADD_FAILURE() << "no call";
  return {};
}

TEST(Scratch, WrappedFloatOnAFloat32OpIsADoublePlusItsCast) {
  // 2.0 wrapped as a 0-d double (8) and cast to f32 (4): 12, alive with the output.
  const ScratchEstimate s = ScratchOfFirstCall(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.mul(a, 2.0)  # t0: "cpu f32[4]"
  return t0
)");
  EXPECT_EQ(s.with_outputs, 12);
  EXPECT_EQ(s.before_outputs, 0);
}

TEST(Scratch, WrappedFloatOnAFloat64OpNeedsNoCast) {
  // f64 op: the wrapped double (8) is already its dtype.
  const ScratchEstimate s = ScratchOfFirstCall(R"(def f(a):
  # a: "cpu f64[4]"
  t0 = torch.mul(a, 2.0)  # t0: "cpu f64[4]"
  return t0
)");
  EXPECT_EQ(s.with_outputs, 8);
}

TEST(Scratch, WhereScalarIsAZeroDimTensorOfTheResultDtype) {
  // where(c, a, 0.0) with an f32 result: one 0-d f32 scalar_tensor, 4 bytes.
  const ScratchEstimate s = ScratchOfFirstCall(R"(def f(c, a):
  # c: "cpu b8[4]"
  # a: "cpu f32[4]"
  t0 = torch.where(c, a, 0.0)  # t0: "cpu f32[4]"
  return t0
)");
  EXPECT_EQ(s.with_outputs, 4);
}

TEST(Scratch, OpsWithoutARuleHaveNone) {
  const ScratchEstimate s = ScratchOfFirstCall(R"(def f(a):
  # a: "cpu f32[4, 4]"
  t0 = torch.sum(a, 1)  # t0: "cpu f32[4]"
  return t0
)");
  EXPECT_EQ(s.with_outputs, 0);
  EXPECT_EQ(s.before_outputs, 0);
}

}  // namespace
}  // namespace peakmem
