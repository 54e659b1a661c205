// The shared output-type inference pass (type_inference.h) on small traces
// built by hand: which outputs take which input's type follows from the op
// registry's entry for each op (op_registry.cc: copy_ returns argument 1,
// shallow_copy argument 0, update_aliases flat argument i as output i) and
// from Thunder's fallback gradients (`*_vjp`: one output per tensor forward
// input in the first argument).
#include "peakmem/frontend/type_inference.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "peakmem/ir/source.h"
#include "peakmem/ir/trace_builder.h"

namespace peakmem {
namespace {

class TypeInferenceTest : public ::testing::Test {
 protected:
  TypeInferenceTest()
      : builder_(std::make_shared<const SourceFile>("t.trace", std::string())) {}

  Trace& trace() { return builder_.trace(); }

  // A value named `name`, typed `type` unless that is empty.
  ValueId Value(const std::string& name, const std::string& type = "") {
    const ValueId id = builder_.Define(name, {1, 1});
    if (!type.empty()) builder_.SetType(id, type, {1, 1});
    return id;
  }
  static Expr Ref(ValueId id) {
    Expr e;
    e.kind = Expr::Kind::kValue;
    e.value = id;
    return e;
  }
  static Expr Constant(const std::string& text) {
    Expr e;
    e.SetConstant(text);
    return e;
  }
  Expr Tuple(const std::vector<Expr>& items) {
    Expr e;
    e.kind = Expr::Kind::kTuple;
    e.items = trace().SaveExprs(items);
    return e;
  }
  static Pattern Target(ValueId id) {
    Pattern p;
    p.kind = Pattern::Kind::kValue;
    p.value = id;
    return p;
  }
  Pattern Targets(const std::vector<ValueId>& ids) {
    std::vector<Pattern> items;
    for (ValueId id : ids) items.push_back(Target(id));
    Pattern p;
    p.kind = Pattern::Kind::kTuple;
    p.items = trace().SaveArray(items);
    return p;
  }
  // `outputs = symbol(args...)`, appended to the trace.
  Statement& Call(const std::string& symbol, const std::vector<Expr>& args, Pattern outputs) {
    Statement& s = trace().statements.emplace_back();
    s.kind = StatementKind::kCall;
    s.call_symbol = builder_.InternCallSymbol("torch." + symbol, symbol, symbol);
    s.args = trace().SaveExprs(args);
    s.outputs = outputs;
    return s;
  }
  const ValueType* TypeOf(ValueId id) { return trace().value(id).type; }
  ValueKind KindOf(ValueId id) { return trace().value(id).type->kind; }
  std::string TextOf(ValueId id) { return trace().value(id).type->text; }

  TraceBuilder builder_;
};

TEST_F(TypeInferenceTest, UpdateAliasesOutputsTakeTheirInputsTypesInOrder) {
  const ValueId a = Value("a", "cpu f32[4]");
  const ValueId b = Value("b", "cpu bf16[2, 3]");
  const ValueId x = Value("x");
  const ValueId y = Value("y");
  const Statement& s = Call("update_aliases", {Tuple({Ref(a), Ref(b)})}, Targets({x, y}));
  EXPECT_TRUE(InferAliasTypes(&trace(), s));
  EXPECT_EQ(TypeOf(x), TypeOf(a));
  EXPECT_EQ(TypeOf(y), TypeOf(b));
}

TEST_F(TypeInferenceTest, CopyOutputTakesTheDestinationsType) {
  const ValueId src = Value("src", "cpu f32[4]");
  const ValueId dst = Value("dst", "cpu f16[4]");
  const ValueId out = Value("out");
  const Statement& s = Call("copy_", {Ref(src), Ref(dst)}, Target(out));
  EXPECT_TRUE(InferAliasTypes(&trace(), s));
  EXPECT_EQ(TypeOf(out), TypeOf(dst));
}

TEST_F(TypeInferenceTest, AStatedTypeIsKept) {
  const ValueId src = Value("src", "cpu f32[4]");
  const ValueId dst = Value("dst", "cpu f16[4]");
  const ValueId out = Value("out", "cpu f64[4]");
  const ValueType* stated = TypeOf(out);
  const Statement& s = Call("copy_", {Ref(src), Ref(dst)}, Target(out));
  EXPECT_TRUE(InferAliasTypes(&trace(), s));
  EXPECT_EQ(TypeOf(out), stated);
}

TEST_F(TypeInferenceTest, MismatchedCountsSetNothing) {
  const ValueId a = Value("a", "cpu f32[4]");
  const ValueId x = Value("x");
  const ValueId y = Value("y");
  const Statement& s = Call("update_aliases", {Tuple({Ref(a)})}, Targets({x, y}));
  EXPECT_TRUE(InferAliasTypes(&trace(), s));
  EXPECT_EQ(KindOf(x), ValueKind::kUnknown);
  EXPECT_EQ(KindOf(y), ValueKind::kUnknown);
}

TEST_F(TypeInferenceTest, OtherOpsAreLeftUntyped) {
  const ValueId a = Value("a", "cpu f32[4]");
  const ValueId out = Value("out");
  const Statement& s = Call("mul", {Ref(a), Constant("2.0")}, Target(out));
  EXPECT_TRUE(InferAliasTypes(&trace(), s));
  EXPECT_EQ(KindOf(out), ValueKind::kUnknown);
}

TEST_F(TypeInferenceTest, FallbackGradientsTakeTheirTensorForwardInputsTypes) {
  // half_vjp(((x, n), {}), g) -> (gx,): of the forward inputs x and n, only
  // the tensor x has a gradient.
  const ValueId x = Value("x", "cpu f32[4, 4]");
  const ValueId n = Value("n", "int 3");
  const ValueId g = Value("g", "cpu f16[4, 4]");
  const ValueId gx = Value("gx");
  Expr kwargs;
  kwargs.kind = Expr::Kind::kDict;
  const Statement& s =
      Call("half_vjp", {Tuple({Tuple({Ref(x), Ref(n)}), kwargs}), Ref(g)}, Targets({gx}));
  EXPECT_TRUE(InferAliasTypes(&trace(), s));
  EXPECT_EQ(TypeOf(gx), TypeOf(x));
}

TEST_F(TypeInferenceTest, APendingInputPutsItOffChangingNothing) {
  const ValueId src = Value("src", "cpu f32[4]");
  const ValueId dst = Value("dst", "cpu f16[4]");
  const ValueId out = Value("out");
  const Statement& s = Call("copy_", {Ref(src), Ref(dst)}, Target(out));
  EXPECT_FALSE(InferAliasTypes(&trace(), s, [&](ValueId id) { return id == src; }));
  EXPECT_EQ(KindOf(out), ValueKind::kUnknown);
  // A pending value the op does not read puts nothing off.
  const ValueId other = Value("other", "cpu f32[1]");
  EXPECT_TRUE(InferAliasTypes(&trace(), s, [&](ValueId id) { return id == other; }));
  EXPECT_EQ(TypeOf(out), TypeOf(dst));
}

TEST_F(TypeInferenceTest, TheWholeTracePassFollowsAliasesOfAliases) {
  // y = shallow_copy(x) after (x,) = update_aliases((a,)): y has a's type
  // only if x got it first.
  const ValueId a = Value("a", "cpu f32[8]");
  const ValueId x = Value("x");
  Call("update_aliases", {Tuple({Ref(a)})}, Targets({x}));
  const ValueId y = Value("y");
  Call("shallow_copy", {Ref(x)}, Target(y));
  InferAliasTypes(&trace());
  EXPECT_EQ(TypeOf(x), TypeOf(a));
  EXPECT_EQ(TypeOf(y), TypeOf(a));
}

TEST_F(TypeInferenceTest, TopkAndSortTypeValuesAndInt64Indices) {
  // torch.topk(a, 3, 1, True, True) on f32[5, 8]: both outputs [5, 3]
  // (dimension 1 becomes k), values f32, indices i64.
  const ValueId a = Value("a", "cpu f32[5, 8]");
  const ValueId v = Value("v"), i = Value("i");
  EXPECT_TRUE(InferAliasTypes(
      &trace(),
      Call("topk", {Ref(a), Constant("3"), Constant("1"), Constant("True"), Constant("True")},
           Targets({v, i}))));
  EXPECT_EQ(TextOf(v), "cpu f32[5, 3]");
  EXPECT_EQ(TextOf(i), "cpu i64[5, 3]");
  // torch.sort(a, 0): the input's shape.
  const ValueId sv = Value("sv"), si = Value("si");
  InferAliasTypes(&trace(), Call("sort", {Ref(a), Constant("0")}, Targets({sv, si})));
  EXPECT_EQ(TextOf(sv), "cpu f32[5, 8]");
  EXPECT_EQ(TextOf(si), "cpu i64[5, 8]");
  // k larger than the dimension: no type (the model reports the value).
  const ValueId bv = Value("bv"), bi = Value("bi");
  InferAliasTypes(&trace(),
                  Call("topk", {Ref(a), Constant("9"), Constant("-1")}, Targets({bv, bi})));
  EXPECT_EQ(KindOf(bv), ValueKind::kUnknown);
}

TEST_F(TypeInferenceTest, MaxPoolOutputShapesFollowATensPoolingFormula) {
  // max_pool2d_with_indices(a, 3, 2, 1, 1, False) on f32[4, 64, 64, 64]:
  // floor((64 + 2*1 - 1*(3-1) - 1) / 2) + 1 = 32 per spatial dimension.
  // Both outputs typed f32 (as Thunder's meta types the indices; the
  // runtime model sizes them int64).
  const ValueId a = Value("a", "cpu f32[4, 64, 64, 64]");
  const ValueId v = Value("v"), i = Value("i");
  InferAliasTypes(&trace(), Call("max_pool2d_with_indices",
                                 {Ref(a), Constant("3"), Constant("2"), Constant("1"),
                                  Constant("1"), Constant("False")},
                                 Targets({v, i})));
  EXPECT_EQ(TextOf(v), "cpu f32[4, 64, 32, 32]");
  EXPECT_EQ(TextOf(i), "cpu f32[4, 64, 32, 32]");
  // ceil_mode on f32[1, 1, 5, 5], kernel 2, stride 2, no padding:
  // (5 - 1 - 1 + 1) / 2 + 1 = 3; the last window starts at 4 < 5: kept.
  // stride () means the kernel size; per-dimension tuples are read.
  const ValueId b = Value("b", "cpu f32[1, 1, 5, 5]");
  const ValueId bv = Value("bv"), bi = Value("bi");
  InferAliasTypes(&trace(),
                  Call("max_pool2d_with_indices",
                       {Ref(b), Tuple({Constant("2"), Constant("2")}), Tuple({}),
                        Tuple({Constant("0"), Constant("0")}), Constant("1"), Constant("True")},
                       Targets({bv, bi})));
  EXPECT_EQ(TextOf(bv), "cpu f32[1, 1, 3, 3]");
  // Padding 1 with ceil_mode on size 4, kernel 2, stride 2:
  // (4 + 2 - 1 - 1 + 1) / 2 + 1 = 3, and (3 - 1) * 2 = 4 < 4 + 1: kept.
  const ValueId c = Value("c", "cpu f32[1, 4, 4]");
  const ValueId cv = Value("cv"), ci = Value("ci");
  InferAliasTypes(&trace(), Call("max_pool1d_with_indices",
                                 {Ref(c), Constant("2"), Constant("2"), Constant("1"),
                                  Constant("1"), Constant("True")},
                                 Targets({cv, ci})));
  EXPECT_EQ(TextOf(cv), "cpu f32[1, 4, 3]");
}

}  // namespace
}  // namespace peakmem
