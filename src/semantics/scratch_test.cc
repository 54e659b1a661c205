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

TEST(Scratch, InPlaceArithmeticWrapsItsNumberToo) {
  // exp_avg_sq.mul_(0.999) on bf16 (torch.optim.Adam): a wrapped double (8)
  // cast to bf16 (2), measured as the events 8, 2, -2, -8.
  EXPECT_EQ(ScratchOfFirstCall(R"(def f(a):
  # a: "cpu bf16[4]"
  torch.Tensor.mul_(a, 0.999)
  return a
)").with_outputs, 10);
  // step_t += 1 on Adam's f32 step: a wrapped int64 (8) cast to f32 (4).
  EXPECT_EQ(ScratchOfFirstCall(R"(def f(s):
  # s: "cpu f32[]"
  torch.Tensor.add_(s, 1)
  return s
)").with_outputs, 12);
  // A tensor operand, the number a keyword (alpha): nothing is wrapped.
  EXPECT_EQ(ScratchOfFirstCall(R"(def f(a, b):
  # a: "cpu f32[4]"
  # b: "cpu f32[4]"
  torch.Tensor.add_(a, b, alpha=-0.1)
  return a
)").with_outputs, 0);
  // lerp_ takes its weight as a Scalar (measured: no allocation).
  EXPECT_EQ(ScratchOfFirstCall(R"(def f(a, b):
  # a: "cpu f32[4]"
  # b: "cpu f32[4]"
  torch.Tensor.lerp_(a, b, 0.1)
  return a
)").with_outputs, 0);
}

TEST(Scratch, NumbersTakenAsScalarsAreNotWrapped) {
  // pow(x, 1.0) and clamp(x, 0.0, 1.0) take their numbers as Scalars
  // (measured: only the output is allocated); pow(2.0, x) wraps its base
  // (measured: 64 for the output, then 8 and its cast 4).
  EXPECT_EQ(ScratchOfFirstCall(R"(def f(a):
  # a: "cpu f32[16]"
  t0 = torch.pow(a, 1.0)  # t0: "cpu f32[16]"
  return t0
)").with_outputs, 0);
  EXPECT_EQ(ScratchOfFirstCall(R"(def f(a):
  # a: "cpu f32[16]"
  t0 = torch.clamp(a, 0.0, 1.0)  # t0: "cpu f32[16]"
  return t0
)").with_outputs, 0);
  EXPECT_EQ(ScratchOfFirstCall(R"(def f(a):
  # a: "cpu f32[16]"
  t0 = torch.pow(2.0, a)  # t0: "cpu f32[16]"
  return t0
)").with_outputs, 12);
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

TEST(Scratch, ATensorOperandOfAnotherDtypeIsCastFirst) {
  // bf16[4] * f32[4]: both dimensioned, so they compute in f32; the bf16
  // operand is copied to f32 first (4 elements * 4 bytes = 16).
  EXPECT_EQ(ScratchOfFirstCall(R"(def f(a, b):
  # a: "cpu bf16[4]"
  # b: "cpu f32[4]"
  t0 = torch.mul(a, b)  # t0: "cpu f32[4]"
  return t0
)")
                .with_outputs,
            16);
  // f32 0-d / i64 0-d (cross_entropy's mean): f32, the i64 count cast (4).
  EXPECT_EQ(ScratchOfFirstCall(R"(def f(a, b):
  # a: "cpu f32[]"
  # b: "cpu i64[]"
  t0 = torch.true_divide(a, b)  # t0: "cpu f32[]"
  return t0
)")
                .with_outputs,
            4);
  // bf16[4] + f32 0-d: a zero-dim tensor of the same category does not
  // raise bf16; the 0-d f32 is cast to bf16 (2 bytes).
  EXPECT_EQ(ScratchOfFirstCall(R"(def f(a, b):
  # a: "cpu bf16[4]"
  # b: "cpu f32[]"
  t0 = torch.add(a, b)  # t0: "cpu bf16[4]"
  return t0
)")
                .with_outputs,
            2);
}

TEST(Scratch, TypedRulesSizeFromTheStatementsTypes) {
  // sum of b8[8, 6] into i64: the mask cast to int64 first (48 * 8 = 384).
  EXPECT_EQ(ScratchOfFirstCall(R"(def f(m):
  # m: "cpu b8[8, 6]"
  t0 = torch.sum(m, None, False, dtype=None)  # t0: "cpu i64[]"
  return t0
)")
                .with_outputs,
            384);
  // take_along_dim to f32[8, 3]: int64 indices of that shape (24 * 8 = 192).
  EXPECT_EQ(ScratchOfFirstCall(R"(def f(a, i):
  # a: "cpu f32[8, 6]"
  # i: "cpu i64[8, 3]"
  t0 = torch.take_along_dim(a, i, 1)  # t0: "cpu f32[8, 3]"
  return t0
)")
                .with_outputs,
            192);
  // sort of f32[8, 6] along dim 0: an int64 buffer of 8 (64 bytes).
  EXPECT_EQ(ScratchOfFirstCall(R"(def f(a):
  # a: "cpu f32[8, 6]"
  (t0, t1) = torch.sort(a, dim=0, descending=False, stable=False)
  return t0, t1
)")
                .with_outputs,
            64);
  // Interior padding of f32[4, 3] by ((0, 4, 0), (1, 0, 1)): the dilated
  // intermediate is [4, 3 + 2 * 1] = 20 elements, 80 bytes.
  EXPECT_EQ(ScratchOfFirstCall(R"(def f(a):
  # a: "cpu f32[4, 3]"
  t0 = torch_pad_prim_impl(a, 0.0, ((0, 4, 0), (1, 0, 1)))  # t0: "cpu f32[8, 6]"
  return t0
)")
                .with_outputs,
            80);
  // Without interior padding it is F.pad alone: nothing more.
  EXPECT_EQ(ScratchOfFirstCall(R"(def f(a):
  # a: "cpu f32[4, 3]"
  t0 = torch_pad_prim_impl(a, 0.0, ((0, 4, 0), (1, 0, 0)))  # t0: "cpu f32[8, 4]"
  return t0
)")
                .with_outputs,
            0);
  // nll_loss backward with an i64 total_weight and f32 log-probabilities:
  // total_weight.to(f32), 4 bytes.
  EXPECT_EQ(ScratchOfFirstCall(R"(def f(g, a, t, w):
  # g: "cpu f32[]"
  # a: "cpu f32[8, 10]"
  # t: "cpu i64[8]"
  # w: "cpu i64[]"
  t0 = torch_nll_loss_backward_impl(g, a, t, None, 'mean', -100, w)  # t0: "cpu f32[8, 10]"
  return t0
)")
                .with_outputs,
            4);
}

TEST(Scratch, HalfGatherMakesAFloat32Buffer) {
  // Measured torch.gather of bf16 [64, 48] by [64, 3] indices: the result
  // (384), then 768 = 4 * 192 inside; take_along_dim adds its int64 indices
  // (8 * 192); f32 makes neither buffer but the indices.
  const char* gather = R"(def f(x, i):
  # x: "cpu bf16[64, 48]"
  # i: "cpu i64[64, 3]"
  t0 = torch.gather(x, 1, i)  # t0: "cpu bf16[64, 3]"
  return t0
)";
  EXPECT_EQ(ScratchOfFirstCall(gather).with_outputs, 768);
  EXPECT_EQ(ScratchOfFirstCall(R"(def f(x, i):
  # x: "cpu bf16[64, 48]"
  # i: "cpu i64[64, 3]"
  t0 = torch.take_along_dim(x, i, 1)  # t0: "cpu bf16[64, 3]"
  return t0
)").with_outputs, 1536 + 768);
  EXPECT_EQ(ScratchOfFirstCall(R"(def f(x, i):
  # x: "cpu f32[64, 48]"
  # i: "cpu i64[64, 3]"
  t0 = torch.gather(x, 1, i)  # t0: "cpu f32[64, 3]"
  return t0
)").with_outputs, 0);
}

TEST(Scratch, GlobalAveragePoolingIsAMean) {
  // Measured F.adaptive_avg_pool2d(x, 1): f32 [4,128,8,8] allocates the
  // result, then 8 (the count, wrapped) and 4 (its f32 cast) inside.
  EXPECT_EQ(ScratchOfFirstCall(R"(def f(x):
  # x: "cpu f32[4, 128, 8, 8]"
  t0 = torch.nn.functional.adaptive_avg_pool2d(x, 1)  # t0: "cpu f32[4, 128, 1, 1]"
  return t0
)")
                .with_outputs,
            12);
  // bf16: a float32 copy of the input (131072) and a float32 result (2048).
  EXPECT_EQ(ScratchOfFirstCall(R"(def f(x):
  # x: "cpu bf16[4, 128, 8, 8]"
  t0 = torch.nn.functional.adaptive_avg_pool2d(x, 1)  # t0: "cpu bf16[4, 128, 1, 1]"
  return t0
)")
                .with_outputs,
            131072 + 2048);
  // To 2x2 it pools without scratch (measured: the result alone).
  EXPECT_EQ(ScratchOfFirstCall(R"(def f(x):
  # x: "cpu f32[4, 128, 8, 8]"
  t0 = torch.nn.functional.adaptive_avg_pool2d(x, 2)  # t0: "cpu f32[4, 128, 2, 2]"
  return t0
)")
                .with_outputs,
            0);
}

}  // namespace
}  // namespace peakmem
