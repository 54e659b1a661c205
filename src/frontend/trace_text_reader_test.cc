// The reader for printed Thunder traces (peakmem/trace_text_reader.h): every
// printed statement form, on small inline traces (comments, subsymbols and
// line endings: trace_text_comments_test.cc).
#include "peakmem/frontend/trace_text_reader.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "text_reader_test_util.h"

namespace peakmem {
namespace {

using testing_util::FindValue;
using testing_util::OutputNames;
using testing_util::Parse;
using text_reader_test::BytesOf;
using text_reader_test::Kinds;
using text_reader_test::Names;
using text_reader_test::ReplaceAll;

// ---------------------------------------------------------------- preamble

TEST(TraceTextReader, ReadsConstructedByLineImportsAndDecorators) {
  const ParsedTrace parsed = Parse(R"(# Constructed by Delete Last Used (took 0 milliseconds)
import torch
from thunder.executors.torchex import no_autocast

@torch.no_grad()
@no_autocast
def computation(a):
  # a: "cpu f32[4]"
  return a
)");
  const Trace& trace = parsed.trace;
  EXPECT_EQ(trace.source_name, "t.trace");
  EXPECT_EQ(trace.function_name, "computation");
  EXPECT_EQ(trace.decorators, (std::vector<std::string>{"torch.no_grad()", "no_autocast"}));
  ASSERT_EQ(trace.params.size(), 1u);
  EXPECT_EQ(trace.value(trace.params[0].value).name, "a");
  EXPECT_EQ(BytesOf(trace, "a"), 16);
  ASSERT_EQ(trace.statements.size(), 1u);
  EXPECT_EQ(trace.statements[0].kind, StatementKind::kReturn);
  EXPECT_EQ(trace.statements[0].source_line, 9);
}

TEST(TraceTextReader, ReadsATraceThatStartsAtDef) {
  const ParsedTrace parsed = Parse(R"(def f(a):
  # a: "cuda:0 f16[8]"
  return a
)");
  EXPECT_EQ(parsed.trace.function_name, "f");
  EXPECT_TRUE(parsed.trace.decorators.empty());
  EXPECT_EQ(BytesOf(parsed.trace, "a"), 16);
}

TEST(TraceTextReader, KeepsTheSourceForLaterMessages) {
  const ParsedTrace parsed = Parse("def f(a):\n  # a: \"cpu f32[4]\"\n  return a\n");
  ASSERT_NE(parsed.source, nullptr);
  EXPECT_EQ(parsed.source->name(), "t.trace");
  EXPECT_EQ(parsed.source->Line(3), "  return a");
}

// ---------------------------------------------------------------- argument types

TEST(TraceTextReader, ReadsArgumentTypeComments) {
  const ParsedTrace parsed = Parse(R"(def f(a, b):
  # a: "cpu f32[4]"
  # b: "cuda:0 bf16[2, 3]"
  return (a, b)
)");
  const Value* a = FindValue(parsed.trace, "a");
  const Value* b = FindValue(parsed.trace, "b");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a->type->kind, ValueKind::kTensor);
  EXPECT_EQ(a->type->device, "cpu");
  EXPECT_EQ(a->type->bytes, 16u);
  EXPECT_EQ(b->type->device, "cuda:0");
  EXPECT_EQ(b->type->shape, (Dims{2, 3}));
  EXPECT_EQ(b->type->bytes, 12u);
  EXPECT_EQ(a->defined_at.line, 1);
  EXPECT_EQ(a->defined_at.column, 7);
}

TEST(TraceTextReader, ReadsArgumentTypeCommentWithTrailingSpace) {
  const ParsedTrace parsed = Parse("def f(a):\n  # a: \"cpu f32[4]\" \n  return a\n");
  EXPECT_EQ(BytesOf(parsed.trace, "a"), 16);
}

TEST(TraceTextReader, ReadsArgumentTypeCommentWithTrailingTab) {
  const ParsedTrace parsed = Parse("def f(a):\n  # a: \"cpu f32[4]\"\t\n  return a\n");
  EXPECT_EQ(BytesOf(parsed.trace, "a"), 16);
}

TEST(TraceTextReader, IgnoresUnusedMarkers) {
  const ParsedTrace parsed = Parse(R"(def f(a, b):
  # a: "cpu f32[4]"
  # _ (unused)
  # b (unused)
  return a
)");
  EXPECT_EQ(BytesOf(parsed.trace, "a"), 16);
  const Value* b = FindValue(parsed.trace, "b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->type->kind, ValueKind::kUnknown);
  EXPECT_EQ(FindValue(parsed.trace, "_"), nullptr);
  EXPECT_EQ(parsed.trace.statements.size(), 1u);
}

// ---------------------------------------------------------------- unpacking

TEST(TraceTextReader, ReadsAnUnpack) {
  const ParsedTrace parsed = Parse(R"(def backward_fn(saved_for_backward, cotangents):
  # saved_for_backward: "Collection"
  # cotangents: "Collection"
  C0, C1, = saved_for_backward
  # C0: "Collection"
  # C1: "Collection"
  return None
)");
  const Trace& trace = parsed.trace;
  ASSERT_EQ(trace.statements.size(), 2u);
  const Statement& unpack = trace.statements[0];
  EXPECT_EQ(unpack.kind, StatementKind::kUnpack);
  EXPECT_EQ(trace.value(unpack.source).name, "saved_for_backward");
  EXPECT_EQ(unpack.outputs.kind, Pattern::Kind::kTuple);
  EXPECT_EQ(OutputNames(trace, unpack), (std::vector<std::string>{"C0", "C1"}));
  EXPECT_EQ(FindValue(trace, "C0")->type->kind, ValueKind::kCollection);
  EXPECT_EQ(FindValue(trace, "C1")->type->kind, ValueKind::kCollection);
  EXPECT_EQ(parsed.trace.SymbolName(unpack), "unpack_sequence");
}

TEST(TraceTextReader, ReadsASingleElementUnpack) {
  const ParsedTrace parsed = Parse(R"(def f(cotangents):
  # cotangents: "Collection"
  t7, = cotangents
  # t7: "cpu f32[4]"
  return t7
)");
  const Statement& unpack = parsed.trace.statements[0];
  EXPECT_EQ(unpack.kind, StatementKind::kUnpack);
  EXPECT_EQ(OutputNames(parsed.trace, unpack), (std::vector<std::string>{"t7"}));
  EXPECT_EQ(BytesOf(parsed.trace, "t7"), 16);
}

TEST(TraceTextReader, ReadsABackslashContinuedUnpack) {
  // Thunder wraps a long unpack at 80 columns with backslashes.
  const ParsedTrace parsed = Parse(R"(def backward_fn(C0):
  # C0: "Collection"
  t0, t1, t2, t3, t4, \
  t5, t6, = C0
  # t0: "cpu f32[1]"
  # t1: "cpu f32[2]"
  # t2: "cpu f32[3]"
  # t3: "cpu f32[4]"
  # t4: "cpu f32[5]"
  # t5: "cpu f32[6]"
  # t6: "cpu f32[7]"
  return (t0, t6)
)");
  const Trace& trace = parsed.trace;
  ASSERT_EQ(trace.statements.size(), 2u);
  const Statement& unpack = trace.statements[0];
  EXPECT_EQ(unpack.kind, StatementKind::kUnpack);
  EXPECT_EQ(unpack.source_line, 3);
  EXPECT_EQ(OutputNames(trace, unpack),
            (std::vector<std::string>{"t0", "t1", "t2", "t3", "t4", "t5", "t6"}));
  EXPECT_EQ(BytesOf(trace, "t0"), 4);
  EXPECT_EQ(BytesOf(trace, "t5"), 24);
  EXPECT_EQ(BytesOf(trace, "t6"), 28);
  // t5 is defined on the continuation line, at its own column.
  EXPECT_EQ(FindValue(trace, "t5")->defined_at.line, 4);
  EXPECT_EQ(FindValue(trace, "t5")->defined_at.column, 3);
  EXPECT_EQ(trace.statements[1].source_line, 12);
}

TEST(TraceTextReader, ReadsAOneNamePerLineContinuedUnpack) {
  const ParsedTrace parsed = Parse(R"(def backward_fn(C0):
  # C0: "Collection"
  t0, \
  t1, \
  t2, = C0
  # t0: "cpu f32[4]"
  # t1: "cpu f32[4]"
  # t2: "cpu f32[4]"
  return None
)");
  EXPECT_EQ(OutputNames(parsed.trace, parsed.trace.statements[0]),
            (std::vector<std::string>{"t0", "t1", "t2"}));
  EXPECT_EQ(BytesOf(parsed.trace, "t2"), 16);
}

TEST(TraceTextReader, ReadsAnEmptySequence) {
  const ParsedTrace parsed = Parse(R"(def backward_fn(saved_for_backward):
  # saved_for_backward: "Collection"
  C0, C1, = saved_for_backward
  # C0: "Collection"
  # C1: "Collection"
  # C1 (empty sequence)
  return None
)");
  const Trace& trace = parsed.trace;
  ASSERT_EQ(trace.statements.size(), 3u);
  const Statement& empty = trace.statements[1];
  EXPECT_EQ(empty.kind, StatementKind::kUnpack);
  EXPECT_EQ(trace.value(empty.source).name, "C1");
  EXPECT_TRUE(empty.outputs.items.empty());
  EXPECT_EQ(empty.source_line, 6);
  EXPECT_EQ(parsed.source->text().substr(empty.text_offset, empty.text_length),
            "# C1 (empty sequence)");
  const std::vector<const Pattern*> contents = CollectionContents(trace);
  ASSERT_NE(contents[empty.source], nullptr);
  EXPECT_TRUE(contents[empty.source]->items.empty());
}

TEST(TraceTextReader, IgnoresNoneComment) {
  const ParsedTrace parsed = Parse(R"(def f(a):
  # a: "cpu f32[4]"
  # None
  return None
)");
  ASSERT_EQ(parsed.trace.statements.size(), 1u);
  EXPECT_EQ(parsed.trace.statements[0].returned->kind, Expr::Kind::kConstant);
  EXPECT_EQ(parsed.trace.statements[0].returned->text, "None");
}

TEST(TraceTextReader, CollectionContentsFollowsTheFirstUnpack) {
  const ParsedTrace parsed = Parse(R"(def f(saved):
  # saved: "Collection"
  C0, = saved
  # C0: "Collection"
  a, b, = C0
  # a: "cpu f32[4]"
  # b: "cpu f32[4]"
  return None
)");
  const Trace& trace = parsed.trace;
  const std::vector<const Pattern*> contents = CollectionContents(trace);
  const ValueId saved = trace.params[0].value;
  ASSERT_NE(contents[saved], nullptr);
  std::vector<ValueId> inside;
  FlattenValues(*contents[saved], &inside);
  EXPECT_EQ(Names(trace, inside), (std::vector<std::string>{"C0"}));
  const ValueId c0 = inside[0];
  ASSERT_NE(contents[c0], nullptr);
  inside.clear();
  FlattenValues(*contents[c0], &inside);
  EXPECT_EQ(Names(trace, inside), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(contents[FindValue(trace, "a") - trace.values.data()], nullptr);
}

// ---------------------------------------------------------------- op lines

TEST(TraceTextReader, ReadsTypeCommentOnOpLine) {
  const ParsedTrace parsed = Parse(R"(def f(a, b):
  # a: "cpu f32[4]"
  # b: "cpu f32[4]"
  t0 = torch.mul(a, b)  # t0: "cpu f32[4]"
  return t0
)");
  const Trace& trace = parsed.trace;
  const Statement& mul = trace.statements[0];
  EXPECT_EQ(mul.kind, StatementKind::kCall);
  EXPECT_EQ(parsed.trace.CalleeOf(mul), "torch.mul");
  EXPECT_EQ(parsed.trace.SymbolName(mul), "mul");
  EXPECT_EQ(mul.source_line, 4);
  EXPECT_EQ(Names(trace, FlatArgs(mul)), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(OutputNames(trace, mul), (std::vector<std::string>{"t0"}));
  EXPECT_EQ(mul.outputs.kind, Pattern::Kind::kValue);
  EXPECT_EQ(BytesOf(trace, "t0"), 16);
  EXPECT_EQ(FindValue(trace, "t0")->defined_at.line, 4);
  EXPECT_EQ(FindValue(trace, "t0")->defined_at.column, 3);
}

TEST(TraceTextReader, ReadsThunderSymbolNameAndId) {
  // The symbol name is the callee's last dotted component; the id is the same
  // for executor ops and empty for prims/ltorch symbols (their ids are enum
  // values or qualified names).
  const ParsedTrace parsed = Parse(R"(def f(x, w):
  # x: "cpu f32[2, 3]"
  # w: "cpu f32[4, 3]"
  t0 = torch.nn.functional.linear(x, w, None)  # t0: "cpu f32[2, 4]"
  t1 = prims.reshape(t0, (8,))  # t1: "cpu f32[8]"
  t2 = ltorch.reshape(t0, (8,))  # t2: "cpu f32[8]"
  t3 = torch_prims_reshape_impl(t0, (8,))  # t3: "cpu f32[8]"
  t4 = Tensor.expand(t0, (2, 2, 4))  # t4: "cpu f32[2, 2, 4]"
  return (t1, t2, t3, t4)
)");
  const SegmentedVector<Statement>& s = parsed.trace.statements;
  EXPECT_EQ(parsed.trace.SymbolOf(s[0]), "linear");
  EXPECT_EQ(parsed.trace.SymbolIdOf(s[0]), "linear");
  EXPECT_EQ(parsed.trace.SymbolName(s[0]), "linear");
  EXPECT_EQ(parsed.trace.SymbolOf(s[1]), "reshape");
  EXPECT_EQ(parsed.trace.SymbolIdOf(s[1]), "");
  EXPECT_EQ(parsed.trace.SymbolOf(s[2]), "reshape");
  EXPECT_EQ(parsed.trace.SymbolIdOf(s[2]), "");
  EXPECT_EQ(parsed.trace.SymbolIdOf(s[3]), "torch_prims_reshape_impl");
  EXPECT_EQ(parsed.trace.SymbolOf(s[4]), "expand");
  EXPECT_EQ(parsed.trace.SymbolIdOf(s[4]), "expand");
}

TEST(TraceTextReader, ReadsTypeCommentOnOpLineWithTrailingSpace) {
  const ParsedTrace parsed = Parse(
      "def f(a):\n  # a: \"cpu f32[4]\"\n  t0 = torch.neg(a)  # t0: \"cpu f32[4]\"  \n"
      "  return t0\n");
  EXPECT_EQ(BytesOf(parsed.trace, "t0"), 16);
}

TEST(TraceTextReader, LeavesAnUntypedOutputUnknown) {
  const ParsedTrace parsed = Parse(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.neg(a)
  return t0
)");
  EXPECT_EQ(FindValue(parsed.trace, "t0")->type->kind, ValueKind::kUnknown);
}

TEST(TraceTextReader, ReadsACallWithoutOutputs) {
  const ParsedTrace parsed = Parse(R"(def f(a):
  # a: "cpu f32[4]"
  torch._C._set_grad_enabled(False)
  return a
)");
  const Statement& call = parsed.trace.statements[0];
  EXPECT_EQ(call.kind, StatementKind::kCall);
  EXPECT_EQ(parsed.trace.CalleeOf(call), "torch._C._set_grad_enabled");
  EXPECT_EQ(parsed.trace.SymbolName(call), "_set_grad_enabled");
  EXPECT_TRUE(FlatOutputs(call).empty());
  ASSERT_EQ(call.args.size(), 1u);
  EXPECT_EQ(call.args[0].text, "False");
}

TEST(TraceTextReader, ReadsKeywordArguments) {
  const ParsedTrace parsed = Parse(R"(def f(t):
  # t: "cpu f64[4]"
  t1 = Tensor.to(t, copy=False, dtype=torch.float32)  # t1: "cpu f32[4]"
  return t1
)");
  const Trace& trace = parsed.trace;
  const Statement& to = trace.statements[0];
  EXPECT_EQ(parsed.trace.CalleeOf(to), "Tensor.to");
  EXPECT_EQ(parsed.trace.SymbolName(to), "to");
  ASSERT_EQ(to.args.size(), 1u);
  EXPECT_EQ(to.args[0].kind, Expr::Kind::kValue);
  ASSERT_EQ(to.kwargs.size(), 2u);
  EXPECT_EQ(to.kwargs[0].first, "copy");
  EXPECT_EQ(to.kwargs[0].second.kind, Expr::Kind::kConstant);
  EXPECT_EQ(to.kwargs[0].second.text, "False");
  EXPECT_EQ(to.kwargs[1].first, "dtype");
  EXPECT_EQ(to.kwargs[1].second.text, "torch.float32");
  EXPECT_EQ(Names(trace, FlatArgs(to)), (std::vector<std::string>{"t"}));
}

TEST(TraceTextReader, KeywordArgumentValuesCountAsArguments) {
  const ParsedTrace parsed = Parse(R"(def f(a, b):
  # a: "cpu f32[4]"
  # b: "cpu f32[4]"
  t0 = torch.add(a, other=b, alpha=2)  # t0: "cpu f32[4]"
  return t0
)");
  EXPECT_EQ(Names(parsed.trace, FlatArgs(parsed.trace.statements[0])),
            (std::vector<std::string>{"a", "b"}));
}

TEST(TraceTextReader, ReadsNestedLiteralArguments) {
  const ParsedTrace parsed = Parse(R"(def f(x):
  # x: "cpu f32[2, 4]"
  t0 = torch.reshape(x, (-1, 4))  # t0: "cpu f32[2, 4]"
  t1 = torch.cat([x, t0], 0)  # t1: "cpu f32[4, 4]"
  t2 = torch.full((2,), 1e-05, device=torch.device("cpu"), dtype=torch.float32)  # t2: "cpu f32[2]"
  return (t1, t2)
)");
  const Trace& trace = parsed.trace;
  const Statement& reshape = trace.statements[0];
  ASSERT_EQ(reshape.args.size(), 2u);
  const Expr& shape = reshape.args[1];
  EXPECT_EQ(shape.kind, Expr::Kind::kTuple);
  ASSERT_EQ(shape.items.size(), 2u);
  EXPECT_EQ(shape.items[0].text, "-1");
  EXPECT_EQ(shape.items[1].text, "4");

  const Statement& cat = trace.statements[1];
  EXPECT_EQ(cat.args[0].kind, Expr::Kind::kList);
  EXPECT_EQ(Names(trace, FlatArgs(cat)), (std::vector<std::string>{"x", "t0"}));

  const Statement& full = trace.statements[2];
  ASSERT_EQ(full.args.size(), 2u);
  EXPECT_EQ(full.args[0].kind, Expr::Kind::kTuple);
  ASSERT_EQ(full.args[0].items.size(), 1u);
  EXPECT_EQ(full.args[1].text, "1e-05");
  ASSERT_EQ(full.kwargs.size(), 2u);
  EXPECT_EQ(full.kwargs[0].second.kind, Expr::Kind::kCall);
  EXPECT_EQ(full.kwargs[0].second.text, "torch.device");
  EXPECT_TRUE(FlatArgs(full).empty());
  EXPECT_EQ(BytesOf(trace, "t2"), 8);
}

// ---------------------------------------------------------------- output patterns

TEST(TraceTextReader, ReadsParenthesisedTupleOutputs) {
  const ParsedTrace parsed = Parse(R"(def f(a):
  # a: "cpu f32[4]"
  (t0, t1) = torch.var_mean(a)
  # t0: "cpu f32[]"
  # t1: "cpu f32[]"
  return (t0, t1)
)");
  const Statement& s = parsed.trace.statements[0];
  EXPECT_EQ(s.outputs.kind, Pattern::Kind::kTuple);
  EXPECT_EQ(OutputNames(parsed.trace, s), (std::vector<std::string>{"t0", "t1"}));
  EXPECT_EQ(BytesOf(parsed.trace, "t1"), 4);
}

TEST(TraceTextReader, ReadsListOutputs) {
  const ParsedTrace parsed = Parse(R"(def f(a):
  # a: "cpu f32[4]"
  [t0] = nvFusion0(a)
    # t0 = prims.neg(a)  # t0: "cpu f32[4]"
  return t0
)");
  const Statement& s = parsed.trace.statements[0];
  EXPECT_EQ(s.outputs.kind, Pattern::Kind::kList);
  EXPECT_EQ(OutputNames(parsed.trace, s), (std::vector<std::string>{"t0"}));
  EXPECT_EQ(parsed.trace.SymbolName(s), "nvFusion0");
}

TEST(TraceTextReader, ReadsIgnoredOutputs) {
  const ParsedTrace parsed = Parse(R"(def f(a):
  # a: "cpu f32[4]"
  _ = torch.neg(a)
  (t0, _) = torch.var_mean(a)  # t0: "cpu f32[]"
  return t0
)");
  const Trace& trace = parsed.trace;
  EXPECT_EQ(trace.statements[0].outputs.kind, Pattern::Kind::kIgnore);
  EXPECT_TRUE(FlatOutputs(trace.statements[0]).empty());
  const Pattern& pair = trace.statements[1].outputs;
  ASSERT_EQ(pair.items.size(), 2u);
  EXPECT_EQ(pair.items[1].kind, Pattern::Kind::kIgnore);
  EXPECT_EQ(OutputNames(trace, trace.statements[1]), (std::vector<std::string>{"t0"}));
}

TEST(TraceTextReader, ReadsNestedTupleOutputs) {
  const ParsedTrace parsed = Parse(R"(def f(a):
  # a: "cpu f32[4]"
  ((t0, t1), [t2]) = my_op(a)
  # t0: "cpu f32[1]"
  # t1: "cpu f32[2]"
  # t2: "cpu f32[3]"
  return (t0, t1, t2)
)");
  const Statement& s = parsed.trace.statements[0];
  ASSERT_EQ(s.outputs.items.size(), 2u);
  EXPECT_EQ(s.outputs.items[0].kind, Pattern::Kind::kTuple);
  EXPECT_EQ(s.outputs.items[1].kind, Pattern::Kind::kList);
  EXPECT_EQ(OutputNames(parsed.trace, s), (std::vector<std::string>{"t0", "t1", "t2"}));
  EXPECT_EQ(BytesOf(parsed.trace, "t2"), 12);
}

// ---------------------------------------------------------------- del and clears

TEST(TraceTextReader, ReadsDel) {
  const ParsedTrace parsed = Parse(R"(def f(a, b):
  # a: "cpu f32[4]"
  # b: "cpu f32[4]"
  t0 = torch.mul(a, b)  # t0: "cpu f32[4]"
  del a, b
  return t0
)");
  const Statement& del = parsed.trace.statements[1];
  EXPECT_EQ(del.kind, StatementKind::kDel);
  EXPECT_EQ(Names(parsed.trace, std::vector<ValueId>(del.deleted.begin(), del.deleted.end())), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(parsed.trace.SymbolName(del), "python_del");
  EXPECT_EQ(Names(parsed.trace, FlatArgs(del)), (std::vector<std::string>{"a", "b"}));
}

TEST(TraceTextReader, ANameDefinedAgainAfterDelIsANewValue) {
  const ParsedTrace parsed = Parse(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.neg(a)  # t0: "cpu f32[4]"
  del t0
  t0 = torch.neg(a)  # t0: "cpu f32[8]"
  return t0
)");
  const Trace& trace = parsed.trace;
  const ValueId first = FlatOutputs(trace.statements[0])[0];
  const ValueId second = FlatOutputs(trace.statements[2])[0];
  EXPECT_NE(first, second);
  EXPECT_EQ(trace.value(first).type->bytes, 16u);
  EXPECT_EQ(trace.value(second).type->bytes, 32u);
  EXPECT_EQ(std::vector<ValueId>(trace.statements[1].deleted.begin(), trace.statements[1].deleted.end()), (std::vector<ValueId>{first}));
  EXPECT_EQ(FlatArgs(trace.statements[3]), (std::vector<ValueId>{second}));
}

TEST(TraceTextReader, ReadsClearMutableCollection) {
  const ParsedTrace parsed = Parse(R"(def f(saved):
  # saved: "Collection"
  clear_mutable_collection(saved)
  return None
)");
  const Statement& clear = parsed.trace.statements[0];
  EXPECT_EQ(clear.kind, StatementKind::kClear);
  EXPECT_EQ(parsed.trace.CalleeOf(clear), "clear_mutable_collection");
  EXPECT_FALSE(clear.legacy_clear);
  EXPECT_EQ(parsed.trace.value(clear.source).name, "saved");
  EXPECT_EQ(parsed.trace.SymbolName(clear), "clear_mutable_collection");
}

TEST(TraceTextReader, ReadsLegacyClearCollection) {
  const ParsedTrace parsed = Parse(R"(def f(saved):
  # saved: "Collection"
  clear_collection(saved)
  return None
)");
  const Statement& clear = parsed.trace.statements[0];
  EXPECT_EQ(clear.kind, StatementKind::kClear);
  EXPECT_EQ(parsed.trace.CalleeOf(clear), "clear_collection");
  EXPECT_TRUE(clear.legacy_clear);
  EXPECT_EQ(parsed.trace.value(clear.source).name, "saved");
}

TEST(TraceTextReader, ReadsAPlainRebinding) {
  const ParsedTrace parsed = Parse(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = a
  return t0
)");
  const Statement& assign = parsed.trace.statements[0];
  EXPECT_EQ(assign.kind, StatementKind::kAssign);
  EXPECT_EQ(parsed.trace.value(assign.source).name, "a");
  EXPECT_EQ(OutputNames(parsed.trace, assign), (std::vector<std::string>{"t0"}));
}

// ---------------------------------------------------------------- return

TEST(TraceTextReader, ReadsNestedDictReturn) {
  const ParsedTrace parsed = Parse(R"(def f(a, b):
  # a: "cpu f32[4]"
  # b: "cpu f32[4]"
  t14 = torch.neg(a)  # t14: "cpu f32[4]"
  t15 = torch.neg(b)  # t15: "cpu f32[4]"
  return {'output': (t14, t15), 'flat_args': [a, b]}, ((), ())
)");
  const Trace& trace = parsed.trace;
  const Statement& ret = trace.statements.back();
  EXPECT_EQ(ret.kind, StatementKind::kReturn);
  EXPECT_EQ(parsed.trace.SymbolName(ret), "python_return");
  const Expr& top = *ret.returned;
  ASSERT_EQ(top.kind, Expr::Kind::kTuple);
  ASSERT_EQ(top.items.size(), 2u);
  const Expr& dict = top.items[0];
  ASSERT_EQ(dict.kind, Expr::Kind::kDict);
  ASSERT_EQ(dict.items.size(), 4u);  // key, value, key, value
  EXPECT_EQ(dict.items[0].text, "'output'");
  EXPECT_EQ(dict.items[1].kind, Expr::Kind::kTuple);
  EXPECT_EQ(dict.items[2].text, "'flat_args'");
  EXPECT_EQ(dict.items[3].kind, Expr::Kind::kList);
  const Expr& empties = top.items[1];
  ASSERT_EQ(empties.kind, Expr::Kind::kTuple);
  ASSERT_EQ(empties.items.size(), 2u);
  EXPECT_EQ(empties.items[0].kind, Expr::Kind::kTuple);
  EXPECT_TRUE(empties.items[0].items.empty());
  EXPECT_EQ(Names(trace, FlatArgs(ret)), (std::vector<std::string>{"t14", "t15", "a", "b"}));
}

TEST(TraceTextReader, ReadsTupleReturn) {
  const ParsedTrace parsed = Parse(R"(def f(t1, t2):
  # t1: "cpu f32[4]"
  # t2: "cpu f32[4]"
  return (t1, t2)
)");
  const Expr& returned = *parsed.trace.statements[0].returned;
  EXPECT_EQ(returned.kind, Expr::Kind::kTuple);
  EXPECT_EQ(Names(parsed.trace, FlatArgs(parsed.trace.statements[0])),
            (std::vector<std::string>{"t1", "t2"}));
}

TEST(TraceTextReader, ReadsSingleValueReturn) {
  const ParsedTrace parsed = Parse(R"(def f(t1):
  # t1: "cpu f32[4]"
  return t1
)");
  const Expr& returned = *parsed.trace.statements[0].returned;
  EXPECT_EQ(returned.kind, Expr::Kind::kValue);
  EXPECT_EQ(parsed.trace.value(returned.value).name, "t1");
}

TEST(TraceTextReader, ReadsBareTupleReturn) {
  const ParsedTrace parsed = Parse(R"(def f(t1, t2):
  # t1: "cpu f32[4]"
  # t2: "cpu f32[4]"
  return t1, t2
)");
  const Expr& returned = *parsed.trace.statements[0].returned;
  EXPECT_EQ(returned.kind, Expr::Kind::kTuple);
  EXPECT_EQ(returned.items.size(), 2u);
}

TEST(TraceTextReader, ReadsBareReturn) {
  const ParsedTrace parsed = Parse("def f():\n  return\n");
  const Expr& returned = *parsed.trace.statements[0].returned;
  EXPECT_EQ(returned.kind, Expr::Kind::kConstant);
  EXPECT_EQ(returned.text, "None");
}

// ---------------------------------------------------------------- signatures

TEST(TraceTextReader, ReadsPositionalParameters) {
  const ParsedTrace parsed = Parse("def f(a, b, c):\n  return None\n");
  ASSERT_EQ(parsed.trace.params.size(), 3u);
  for (const Parameter& p : parsed.trace.params) {
    EXPECT_EQ(p.kind, Parameter::Kind::kPositional);
    EXPECT_FALSE(p.default_value.has_value());
  }
  EXPECT_EQ(parsed.trace.value(parsed.trace.params[2].value).name, "c");
}

TEST(TraceTextReader, ReadsNoParameters) {
  const ParsedTrace parsed = Parse("def f():\n  return None\n");
  EXPECT_TRUE(parsed.trace.params.empty());
}

TEST(TraceTextReader, ReadsDefaults) {
  const ParsedTrace parsed = Parse(R"(def f(a, b=2):
  # a: "cpu f32[4]"
  # b: "int 2"
  return a
)");
  const Trace& trace = parsed.trace;
  ASSERT_EQ(trace.params.size(), 2u);
  EXPECT_FALSE(trace.params[0].default_value.has_value());
  ASSERT_TRUE(trace.params[1].default_value.has_value());
  EXPECT_EQ(trace.params[1].default_value->kind, Expr::Kind::kConstant);
  EXPECT_EQ(trace.params[1].default_value->text, "2");
  EXPECT_EQ(FindValue(trace, "b")->type->kind, ValueKind::kNumber);
}

TEST(TraceTextReader, ReadsVarArgsAndVarKwargs) {
  const ParsedTrace parsed = Parse("def f(a, *args, **kwargs):\n  return None\n");
  const Trace& trace = parsed.trace;
  ASSERT_EQ(trace.params.size(), 3u);
  EXPECT_EQ(trace.params[0].kind, Parameter::Kind::kPositional);
  EXPECT_EQ(trace.params[1].kind, Parameter::Kind::kVarArgs);
  EXPECT_EQ(trace.value(trace.params[1].value).name, "args");
  EXPECT_EQ(trace.params[2].kind, Parameter::Kind::kVarKwargs);
  EXPECT_EQ(trace.value(trace.params[2].value).name, "kwargs");
}

TEST(TraceTextReader, ReadsKeywordOnlyMarker) {
  const ParsedTrace parsed = Parse("def f(a, *, b, c=None):\n  return None\n");
  const Trace& trace = parsed.trace;
  ASSERT_EQ(trace.params.size(), 3u);
  EXPECT_EQ(trace.value(trace.params[1].value).name, "b");
  EXPECT_EQ(trace.params[1].kind, Parameter::Kind::kPositional);
  ASSERT_TRUE(trace.params[2].default_value.has_value());
  EXPECT_EQ(trace.params[2].default_value->text, "None");
}

}  // namespace
}  // namespace peakmem
