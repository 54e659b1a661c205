// The text reader's comments and line structure (peakmem/trace_text_reader.h):
// subsymbol trees under an op, type comments in them, header and
// source-location comments, line endings and each statement's text span.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "peakmem/frontend/trace_text_reader.h"
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

// ---------------------------------------------------------------- subsymbols

TEST(TraceTextReader, KeepsSubSymbolsAsATreeByIndentation) {
  const ParsedTrace parsed = Parse(R"(def f(a, b):
  # a: "cpu f32[4]"
  # b: "cpu f32[4]"
  t0 = torch.mul(a, b)  # t0: "cpu f32[4]"
    # t0 = ltorch.mul(a, b)  # t0: "cpu f32[4]"
      # t0 = prims.mul(a, b)  # t0: "cpu f32[4]"
    # t9 = ltorch.other(a)
          # t10 = prims.deep(a)
      # t11 = prims.back(a)
  return t0
)");
  // The tree, in print order with depths:
  //   t0 = ltorch.mul        depth 0, line 5
  //     t0 = prims.mul       depth 1, line 6
  //   t9 = ltorch.other      depth 0, line 7
  //     t10 = prims.deep     depth 1 (indented further, still a child), line 8
  //     t11 = prims.back     depth 1, line 9
  const Statement& mul = parsed.trace.statements[0];
  const auto subs = parsed.trace.SubSymbolsOf(mul);
  ASSERT_EQ(subs.size(), 5u);
  EXPECT_EQ(subs[0].text, "t0 = ltorch.mul(a, b)  # t0: \"cpu f32[4]\"");
  EXPECT_EQ(subs[0].line, 5);
  EXPECT_EQ(subs[0].depth, 0);
  EXPECT_EQ(subs[1].text, "t0 = prims.mul(a, b)  # t0: \"cpu f32[4]\"");
  EXPECT_EQ(subs[1].line, 6);
  EXPECT_EQ(subs[1].depth, 1);
  EXPECT_EQ(subs[2].text, "t9 = ltorch.other(a)");
  EXPECT_EQ(subs[2].depth, 0);
  EXPECT_EQ(subs[3].text, "t10 = prims.deep(a)");
  EXPECT_EQ(subs[3].depth, 1);
  EXPECT_EQ(subs[4].text, "t11 = prims.back(a)");
  EXPECT_EQ(subs[4].depth, 1);
  EXPECT_EQ(subs[4].line, 9);
  // Names inside subsymbols are text, not trace values.
  EXPECT_EQ(FindValue(parsed.trace, "t9"), nullptr);
}

TEST(TraceTextReader, KeepsManySiblingSubSymbolsAndTheirChildren) {
  // Many siblings, each with a child.
  std::string text = "def f(a):\n  # a: \"cpu f32[4]\"\n  [t0] = nvFusion0(a)\n";
  for (int i = 0; i < 40; ++i) {
    text += "    # s" + std::to_string(i) + " = ltorch.op(a)\n";
    text += "      # c" + std::to_string(i) + " = prims.op(a)\n";
  }
  text += "    # t0 = prims.neg(a)  # t0: \"cpu f32[4]\"\n  return t0\n";
  const ParsedTrace parsed = Parse(text);
  // 40 (sibling, child) pairs then the last sibling: 81 lines in print order.
  const auto subs = parsed.trace.SubSymbolsOf(parsed.trace.statements[0]);
  ASSERT_EQ(subs.size(), 81u);
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(subs[2 * i].text, "s" + std::to_string(i) + " = ltorch.op(a)");
    EXPECT_EQ(subs[2 * i].depth, 0);
    EXPECT_EQ(subs[2 * i + 1].text, "c" + std::to_string(i) + " = prims.op(a)");
    EXPECT_EQ(subs[2 * i + 1].depth, 1);
  }
  EXPECT_EQ(subs[80].depth, 0);
  EXPECT_EQ(BytesOf(parsed.trace, "t0"), 16);
}

TEST(TraceTextReader, TypesAnOutputFromANestedSubSymbol) {
  const ParsedTrace parsed = Parse(R"(def f(t99):
  # t99: "cpu f32[4, 3]"
  [t100, t101] = torch.split(t99, 2, 0)
    # [t100, t101] = ltorch.split(t99, 2, 0)
      # t100 = prims.slice_prim(t99, [0, 0], [2, 3], [1, 1])  # t100: "cpu f32[2, 3]"
      # t101 = prims.slice_prim(t99, [2, 0], [4, 3], [1, 1])  # t101: "cpu f32[2, 3]"
  return (t100, t101)
)");
  const Trace& trace = parsed.trace;
  const Statement& split = trace.statements[0];
  EXPECT_EQ(split.outputs.kind, Pattern::Kind::kList);
  EXPECT_EQ(OutputNames(trace, split), (std::vector<std::string>{"t100", "t101"}));
  // One ltorch.split line with two prims children.
  const auto subs = trace.SubSymbolsOf(split);
  ASSERT_EQ(subs.size(), 3u);
  EXPECT_EQ(subs[0].depth, 0);
  EXPECT_EQ(subs[1].depth, 1);
  EXPECT_EQ(subs[2].depth, 1);
  const Value* t100 = FindValue(trace, "t100");
  const Value* t101 = FindValue(trace, "t101");
  ASSERT_NE(t100, nullptr);
  ASSERT_NE(t101, nullptr);
  EXPECT_EQ(t100->type->kind, ValueKind::kTensor);
  EXPECT_EQ(t100->type->shape, (Dims{2, 3}));
  EXPECT_EQ(t100->type->bytes, 24u);
  EXPECT_EQ(t101->type->bytes, 24u);
}

TEST(TraceTextReader, TypesFusionOutputsFromSubSymbols) {
  const ParsedTrace parsed = Parse(R"(def f(a):
  # a: "cuda:0 f32[4]"
  [t1, t10] = nvFusion0(a)
    # t1 = prims.neg(a)  # t1: "cuda:0 f32[4]"
    # t10 = prims.exp(t1)  # t10: "cuda:0 f32[2, 4]"
  return (t1, t10)
)");
  // "t1" must not pick up the type written for "t10".
  EXPECT_EQ(BytesOf(parsed.trace, "t1"), 16);
  EXPECT_EQ(BytesOf(parsed.trace, "t10"), 32);
}

TEST(TraceTextReader, ParsesAFusionRegionsSubSymbolCalls) {
  const ParsedTrace parsed = Parse(R"(def f(a, b):
  # a: "cuda:0 f32[4]"
  # b: "cuda:0 f32[2, 2]"
  [t5, t6] = nvFusion0(a, b)
    # t0 = prims.broadcast_in_dim(a, [1, 4], (1,))  # t0: "cuda:0 f32[1, 4]"
    # t5 = ltorch.add(t0, b, alpha=2)  # t5: "cuda:0 f32[2, 4]"
      # t5 = prims.add(t0, b)  # t5: "cuda:0 f32[2, 4]"
    # (t7, t8) = prims.var_mean(t5)
    # t6 = prims.neg(t5
    # t6 = prims.neg(t5) extra  # t6: "cuda:0 f32[2, 4]"
    # t6 = prims.neg(t5)  # t6: "cuda:0 f99[2, 4]"
    # a header comment
  t9 = torch.neg(a)  # t9: "cuda:0 f32[4]"
    # t9 = prims.neg(a)  # t9: "cuda:0 f32[4]"
  return (t5, t6, t9)
)");
  const Trace& trace = parsed.trace;
  const auto calls = trace.SubSymbolCallsOf(trace.statements[0]);
  // Lines 0, 1, 2 and 6 (of 8) are calls with one output; the tuple target
  // (3), the unclosed bracket (4), the text after the call (5) and the
  // plain comment (7) stay text only, without an error.
  ASSERT_EQ(calls.size(), 4u);
  const std::uint32_t first = trace.statements[0].subsymbols.begin;
  EXPECT_EQ(calls[0].subsymbol - first, 0u);
  EXPECT_EQ(calls[0].out, "t0");
  EXPECT_EQ(calls[0].callee, "prims.broadcast_in_dim");
  ASSERT_EQ(calls[0].args.size(), 3u);
  // Names are the region's: text, never trace values (`a` is one).
  EXPECT_EQ(calls[0].args[0].kind, Expr::Kind::kConstant);
  EXPECT_EQ(calls[0].args[0].text, "a");
  EXPECT_EQ(calls[0].args[1].kind, Expr::Kind::kList);
  ASSERT_EQ(calls[0].args[2].kind, Expr::Kind::kTuple);
  ASSERT_EQ(calls[0].args[2].items.size(), 1u);
  EXPECT_EQ(calls[0].args[2].items[0].int_value, 1);
  ASSERT_NE(calls[0].out_type, nullptr);
  EXPECT_EQ(calls[0].out_type->shape, (Dims{1, 4}));
  EXPECT_EQ(calls[1].subsymbol - first, 1u);
  EXPECT_EQ(calls[1].callee, "ltorch.add");
  ASSERT_EQ(calls[1].args.size(), 3u);
  ASSERT_EQ(calls[1].args.keyword_count(), 1u);
  EXPECT_EQ(calls[1].args.keywords()[0], "alpha");
  EXPECT_EQ(calls[2].subsymbol - first, 2u);
  EXPECT_EQ(calls[2].callee, "prims.add");
  EXPECT_EQ(calls[2].out_type->text, "cuda:0 f32[2, 4]");
  EXPECT_EQ(calls[3].subsymbol - first, 6u);
  EXPECT_EQ(calls[3].out, "t6");
  EXPECT_EQ(calls[3].out_type, nullptr);  // f99: no such dtype
  // An op that is no fusion region: its lines are not parsed.
  EXPECT_TRUE(trace.SubSymbolCallsOf(trace.statements[1]).empty());
  EXPECT_EQ(trace.SubSymbolsOf(trace.statements[1]).size(), 1u);
}

TEST(TraceTextReader, OpLineTypeWinsOverSubSymbolType) {
  const ParsedTrace parsed = Parse(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.neg(a)  # t0: "cpu f32[4]"
    # t0 = ltorch.neg(a)  # t0: "cpu f32[8]"
  return t0
)");
  EXPECT_EQ(BytesOf(parsed.trace, "t0"), 16);
}

TEST(TraceTextReader, IgnoresHeaderAndSourceLocationComments) {
  // The source-location comment holds a backslash-t and a real tab.
  const ParsedTrace parsed = Parse(
      "def f(x, y):\n"
      "  # x: \"cpu f32[4]\"\n"
      "  # y: \"cpu f32[4]\"\n"
      "  # Executor: torch\n"
      "  # /tmp/x.py:11: \\t    return x * y\n"
      "  # /tmp/x.py:12: \t    return x * y\n"
      "  t0 = torch.mul(x, y)  # t0: \"cpu f32[4]\"\n"
      "  # /tmp/x.py:13: \\t    return t0\n"
      "  return t0\n");
  EXPECT_EQ(Kinds(parsed.trace),
            (std::vector<StatementKind>{StatementKind::kCall, StatementKind::kReturn}));
  EXPECT_TRUE(parsed.trace.statements[0].subsymbols.empty());
  EXPECT_EQ(parsed.trace.statements[0].source_line, 7);
}

TEST(TraceTextReader, IgnoresAnIndentedCommentWithNoOpAbove) {
  const ParsedTrace parsed = Parse(R"(def f(a):
  # a: "cpu f32[4]"
    # a stray deeper comment
  return a
)");
  EXPECT_EQ(parsed.trace.statements.size(), 1u);
}

TEST(TraceTextReader, IgnoresCommentsAfterTheBody) {
  const ParsedTrace parsed = Parse("def f(a):\n  # a: \"cpu f32[4]\"\n  return a\n# the end\n\n");
  EXPECT_EQ(parsed.trace.statements.size(), 1u);
}

// ---------------------------------------------------------------- line endings

constexpr const char* kCrlfTrace = R"(# Constructed by Delete Last Used (took 0 milliseconds)
import torch

@torch.no_grad()
def backward_fn(saved, a):
  # saved: "Collection"
  # a: "cpu f32[4]" 
  t0, t1, \
  t2, = saved
  # t0: "cpu f32[4]"
  # t1: "cpu f32[4]"
  # t2: "cpu f32[4]"
  clear_mutable_collection(saved)
  [t5, t6] = torch.split(t0, 2, 0)
    # [t5, t6] = ltorch.split(t0, 2, 0)
      # t5 = prims.slice_prim(t0, [0], [2], [1])  # t5: "cpu f32[2]"
      # t6 = prims.slice_prim(t0, [2], [4], [1])  # t6: "cpu f32[2]"
  t7 = torch.mul(a, t1)  # t7: "cpu f32[4]"
  del t0
  return {'output': (t5, t6, t7), 'flat_args': [a]}, ((t2,), ())
)";

TEST(TraceTextReader, ReadsWindowsLineEndings) {
  const ParsedTrace unix_parsed = Parse(kCrlfTrace);
  const ParsedTrace parsed = Parse(ReplaceAll(kCrlfTrace, "\n", "\r\n"));
  const Trace& trace = parsed.trace;
  EXPECT_EQ(trace.function_name, "backward_fn");
  EXPECT_EQ(trace.decorators, (std::vector<std::string>{"torch.no_grad()"}));
  EXPECT_EQ(Kinds(trace), Kinds(unix_parsed.trace));
  EXPECT_EQ(BytesOf(trace, "a"), 16);
  EXPECT_EQ(BytesOf(trace, "t2"), 16);
  EXPECT_EQ(BytesOf(trace, "t5"), 8);
  EXPECT_EQ(BytesOf(trace, "t7"), 16);
  EXPECT_EQ(OutputNames(trace, trace.statements[0]),
            (std::vector<std::string>{"t0", "t1", "t2"}));
  const Statement& split = trace.statements[2];
  // ltorch.split (depth 0) with two prims.slice_prim children (depth 1).
  const auto subs = trace.SubSymbolsOf(split);
  ASSERT_EQ(subs.size(), 3u);
  EXPECT_EQ(subs[0].text, "[t5, t6] = ltorch.split(t0, 2, 0)");
  EXPECT_EQ(subs[0].depth, 0);
  EXPECT_EQ(subs[2].depth, 1);
  EXPECT_EQ(subs[2].text, "t6 = prims.slice_prim(t0, [2], [4], [1])  # t6: \"cpu f32[2]\"");
  for (std::size_t i = 0; i < trace.statements.size(); ++i) {
    EXPECT_EQ(trace.statements[i].source_line, unix_parsed.trace.statements[i].source_line);
  }
  EXPECT_EQ(parsed.source->Line(18), "  t7 = torch.mul(a, t1)  # t7: \"cpu f32[4]\"");
}

// Statement::text_offset is where the statement's text starts in the source
// (its first line after the indentation) and text_length how long that text
// is to the end of the line (without "\r\n"): the line Thunder printed,
// without its indentation, so reports quote it without reading the source.
// A text of 65,536 bytes or more has text_length 0 (its end is searched).
// Checked with Unix and Windows line ends, a backslash-continued statement
// (its first line), and a 70,000-byte line.
TEST(TraceTextReader, TextOffsetAndLengthGiveTheStatementsLine) {
  const std::string long_name(70000, 'x');
  const std::string text = std::string(kCrlfTrace) +
                           "def g(a, b):\n  # a: \"cpu f32[4]\"\n  # b: \"cpu f32[4]\"\n"
                           "  t0 = torch.add(a, \\\n      b)  # t0: \"cpu f32[4]\"\n"
                           "  " + long_name + " = torch.neg(t0)  # " + long_name + ": \"cpu f32[4]\"\n"
                           "  return " + long_name + "\n";
  for (const std::string& variant : {text.substr(0, std::string(kCrlfTrace).size()),
                                     ReplaceAll(std::string(kCrlfTrace), "\n", "\r\n"),
                                     text.substr(std::string(kCrlfTrace).size())}) {
    const ParsedTrace parsed = Parse(variant);
    int long_lines = 0;
    for (const Statement& s : parsed.trace.statements) {
      ASSERT_NE(s.text_offset, kNoOffset);
      std::string_view line = parsed.source->Line(s.source_line);
      while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
      EXPECT_EQ(parsed.source->LineAt(s.text_offset), line);
      if (line.size() > UINT16_MAX) {
        EXPECT_EQ(s.text_length, 0u);
        ++long_lines;
      } else {
        EXPECT_EQ(s.text_length, line.size()) << line;
      }
    }
    if (variant.find(long_name) != std::string::npos) EXPECT_EQ(long_lines, 2);
  }
}

TEST(TraceTextReader, TreatsAStrayCarriageReturnAsWhiteSpace) {
  // Only "\n" and "\r\n" end lines; this is just a guard that a lone "\r"
  // inside a line is treated as trailing white space, not a new statement.
  const ParsedTrace parsed = Parse("def f(a):\r\n  # a: \"cpu f32[4]\"\r\r\n  return a\r\n");
  EXPECT_EQ(BytesOf(parsed.trace, "a"), 16);
}

// The reader classifies each constant once (Expr::SetConstant), so models read
// numbers without going back to the source text. Expected kinds are Python's:
// 2 is an int, 2.0 / 1e-3 / inf floats, 1j complex, True a bool, 'a' and None
// no number; 99999999999999999999 is an int that does not fit int64.
TEST(TraceTextReader, ClassifiesConstantsOnce) {
  const std::string text =
      "def f(x):\n"
      "  # x: \"cpu f32[2]\"\n"
      "  t0 = foo(x, 2, -3, 2.0, 1e-3, -inf, 1j, True, 'a', None, 99999999999999999999)"
      "  # t0: \"cpu f32[2]\"\n"
      "  return t0\n";
  const ParsedTrace parsed = Parse(text);
  const auto& args = parsed.trace.statements[0].args;
  ASSERT_EQ(args.size(), 11u);
  EXPECT_EQ(args[0].kind, Expr::Kind::kValue);
  EXPECT_EQ(args[1].number, NumberKind::kInt);
  EXPECT_TRUE(args[1].has_int);
  EXPECT_EQ(args[1].int_value, 2);
  EXPECT_TRUE(args[2].has_int);
  EXPECT_EQ(args[2].int_value, -3);
  EXPECT_EQ(args[3].number, NumberKind::kFloat);
  EXPECT_FALSE(args[3].has_int);
  EXPECT_EQ(args[4].number, NumberKind::kFloat);
  EXPECT_EQ(args[5].number, NumberKind::kFloat);
  EXPECT_EQ(args[6].number, NumberKind::kComplex);
  EXPECT_EQ(args[7].number, NumberKind::kBool);
  EXPECT_EQ(args[8].number, NumberKind::kNone);
  EXPECT_EQ(args[9].number, NumberKind::kNone);
  EXPECT_EQ(args[10].number, NumberKind::kInt);
  EXPECT_FALSE(args[10].has_int);
}

}  // namespace
}  // namespace peakmem
