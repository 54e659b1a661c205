// Every kind of error peakmem reports about its input, with the exact full
// message: "file:line:col: message", the offending line, a caret under the
// column. Columns are 1-based bytes.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "peakmem/analyze.h"
#include "peakmem/ir/source.h"
#include "test_util.h"

namespace peakmem {
namespace {

using testing_util::ErrorOf;
using testing_util::Parse;

// Reading alone (no model).
std::string ReadError(const std::string& text) { return ErrorOf(text, ""); }

std::string Spaces(int n) { return std::string(static_cast<std::size_t>(n), ' '); }

// ---------------------------------------------------------------- rendering

TEST(TraceError, CarriesItsPartsAndRendersThreeLines) {
  try {
    Parse("def f(a):\n  # a: \"cpu f32[4]\"\n  del q\n  return a\n");
    FAIL() << "no error";
  } catch (const TraceError& e) {
    EXPECT_EQ(e.file(), "t.trace");
    EXPECT_EQ(e.location().line, 3);
    EXPECT_EQ(e.location().column, 7);
    EXPECT_EQ(e.message(), "'del' of unknown name 'q'");
    EXPECT_EQ(e.line_text(), "  del q");
    EXPECT_EQ(std::string(e.what()), "t.trace:3:7: 'del' of unknown name 'q'\n  del q\n      ^");
  }
}

TEST(TraceError, WithoutALineHasOnlyTheFirstLine) {
  const TraceError e("x.trace", {0, 0}, "cannot open file", "");
  EXPECT_EQ(std::string(e.what()), "x.trace:0:0: cannot open file");
}

TEST(TraceError, CaretKeepsTabsSoItAligns) {
  const TraceError e("x.trace", {1, 3}, "here", "\tab");
  EXPECT_EQ(std::string(e.what()), "x.trace:1:3: here\n\tab\n\t ^");
}

// ---------------------------------------------------------------- malformed input

TEST(Errors, UnbalancedClosingBracket) {
  EXPECT_EQ(ReadError(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.neg(a))  # t0: "cpu f32[4]"
  return t0
)"),
            "t.trace:3:3: unbalanced closing bracket\n"
            "  t0 = torch.neg(a))  # t0: \"cpu f32[4]\"\n"
            "  ^");
}

TEST(Errors, UnclosedBracketAtEndOfInput) {
  // Line 3 is 18 bytes long: the error points just past its end.
  EXPECT_EQ(ReadError("def f(a):\n  # a: \"cpu f32[4]\"\n  t0 = torch.neg(a\n"),
            "t.trace:3:19: unexpected end of input inside a statement\n"
            "  t0 = torch.neg(a\n" +
                Spaces(18) + "^");
}

TEST(Errors, UnterminatedString) {
  EXPECT_EQ(ReadError("def f(a):\n  # a: \"cpu f32[4]\"\n  t0 = foo('abc)\n  return a\n"),
            "t.trace:3:3: unterminated string literal\n"
            "  t0 = foo('abc)\n"
            "  ^");
}

TEST(Errors, MissingAssignmentTarget) {
  EXPECT_EQ(ReadError(R"(def f(a):
  # a: "cpu f32[4]"
  = torch.neg(a)
  return a
)"),
            "t.trace:3:3: expected a name to assign to\n"
            "  = torch.neg(a)\n"
            "  ^");
}

TEST(Errors, GarbageBeforeDef) {
  EXPECT_EQ(ReadError("hello world\ndef f():\n  return None\n"),
            "t.trace:1:1: expected 'def', 'import', a decorator or a comment before the function "
            "body\n"
            "hello world\n"
            "^");
}

TEST(Errors, IndentedLineBeforeDef) {
  EXPECT_EQ(ReadError("  def f():\n  return None\n"),
            "t.trace:1:3: unexpected indentation before 'def'\n"
            "  def f():\n"
            "  ^");
}

TEST(Errors, GarbageAtTopLevelInsideTheBody) {
  EXPECT_EQ(ReadError(R"(def f(a):
  # a: "cpu f32[4]"
garbage
  return a
)"),
            "t.trace:3:1: expected an indented statement in the function body\n"
            "garbage\n"
            "^");
}

TEST(Errors, GarbageAtTopLevelAfterTheBody) {
  EXPECT_EQ(ReadError(R"(def f(a):
  # a: "cpu f32[4]"
  return a
garbage
)"),
            "t.trace:4:1: unexpected text after the function body\n"
            "garbage\n"
            "^");
}

TEST(Errors, GarbageStatement) {
  // "hello" reads as a name; the error is at "world" (column 9).
  EXPECT_EQ(ReadError("def f(a):\n  # a: \"cpu f32[4]\"\n  hello world\n  return a\n"),
            "t.trace:3:9: unexpected text after the expression\n"
            "  hello world\n" +
                Spaces(8) + "^");
}

TEST(Errors, ExpressionThatIsNotAStatement) {
  EXPECT_EQ(ReadError("def f(a):\n  # a: \"cpu f32[4]\"\n  42\n  return a\n"),
            "t.trace:3:3: expected a statement: an op call, 'del' or 'return'\n"
            "  42\n"
            "  ^");
}

TEST(Errors, MissingParenthesisAfterFunctionName) {
  EXPECT_EQ(ReadError("def f:\n  return None\n"),
            "t.trace:1:6: expected '(' after the function name\n"
            "def f:\n" +
                Spaces(5) + "^");
}

TEST(Errors, StatementAfterReturn) {
  EXPECT_EQ(ReadError(R"(def f(a):
  # a: "cpu f32[4]"
  return a
  t0 = torch.neg(a)  # t0: "cpu f32[4]"
)"),
            "t.trace:4:3: statement after 'return'\n"
            "  t0 = torch.neg(a)  # t0: \"cpu f32[4]\"\n"
            "  ^");
}

TEST(Errors, TruncatedFileWithoutReturn) {
  EXPECT_EQ(ReadError(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.neg(a)  # t0: "cpu f32[4]"
)"),
            "t.trace:3:1: the trace ends without a 'return' (truncated?)\n"
            "  t0 = torch.neg(a)  # t0: \"cpu f32[4]\"\n"
            "^");
}

TEST(Errors, EmptyFile) {
  EXPECT_EQ(ReadError(""), "t.trace:1:1: empty trace: expected 'def name(...):'\n\n^");
}

TEST(Errors, FileWithOnlyComments) {
  EXPECT_EQ(ReadError("# Constructed by Delete Last Used (took 0 milliseconds)\n"),
            "t.trace:1:1: no 'def' line: expected 'def name(...):'\n"
            "# Constructed by Delete Last Used (took 0 milliseconds)\n"
            "^");
}

TEST(Errors, MissingFile) {
  const std::string path = PEAKMEM_TEST_DATA_DIR "/no_such_file.trace";
  try {
    LoadTrace(path);
    FAIL() << "no error";
  } catch (const TraceError& e) {
    EXPECT_EQ(std::string(e.what()), path + ":0:0: cannot open file");
  }
}

// ---------------------------------------------------------------- types

TEST(Errors, UnknownDTypeInArgumentComment) {
  // The type string starts at column 9; "q7" is 4 bytes into it.
  EXPECT_EQ(ReadError("def f(a):\n  # a: \"cpu q7[4]\"\n  return a\n"),
            "t.trace:2:13: unknown dtype 'q7'\n"
            "  # a: \"cpu q7[4]\"\n" +
                Spaces(12) + "^");
}

TEST(Errors, UnknownDTypeInOpLineComment) {
  // The type string starts at column 29.
  EXPECT_EQ(ReadError(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.neg(a)  # t0: "cpu q7[4]"
  return t0
)"),
            "t.trace:3:33: unknown dtype 'q7'\n"
            "  t0 = torch.neg(a)  # t0: \"cpu q7[4]\"\n" +
                Spaces(32) + "^");
}

TEST(Errors, UnknownDTypeInSubSymbolComment) {
  // The subsymbol's type string starts at column 33.
  EXPECT_EQ(ReadError(R"(def f(a):
  # a: "cpu f32[4]"
  [t1] = nvFusion0(a)
    # t1 = prims.neg(a)  # t1: "cpu q7[4]"
  return t1
)"),
            "t.trace:4:37: unknown dtype 'q7'\n"
            "    # t1 = prims.neg(a)  # t1: \"cpu q7[4]\"\n" +
                Spaces(36) + "^");
}

TEST(Errors, SymbolicDimension) {
  EXPECT_EQ(ReadError("def f(a):\n  # a: \"cpu f32[i0, 4]\"\n  return a\n"),
            "t.trace:2:17: symbolic dimension 'i0': peakmem needs concrete shapes\n"
            "  # a: \"cpu f32[i0, 4]\"\n" +
                Spaces(16) + "^");
}

TEST(Errors, NegativeDimension) {
  EXPECT_EQ(ReadError("def f(a):\n  # a: \"cpu f32[-1]\"\n  return a\n"),
            "t.trace:2:17: negative dimension -1\n"
            "  # a: \"cpu f32[-1]\"\n" +
                Spaces(16) + "^");
}

TEST(Errors, ByteSizeOverflow) {
  // 2^32 * 2^32 elements; the error points at the shape's '['.
  EXPECT_EQ(ReadError("def f(a):\n  # a: \"cpu f32[4294967296, 4294967296]\"\n  return a\n"),
            "t.trace:2:16: tensor size overflows 64 bits\n"
            "  # a: \"cpu f32[4294967296, 4294967296]\"\n" +
                Spaces(15) + "^");
}

TEST(Errors, SumOfTensorSizesOverflowIsAnErrorNotAWrappedNumber) {
  // Each argument is 2^61 - 1 bytes (the largest size a type string allows is
  // under 2^61). Five of them sum to 5 * (2^61 - 1) > 2^63 - 1, which the
  // report's int64 fields cannot hold: the analysis must say so instead of
  // wrapping to a negative number (or overflowing a signed integer).
  std::string text = "def f(a, b, c, d, e):\n";
  for (const char* name : {"a", "b", "c", "d", "e"}) {
    text += std::string("  # ") + name + ": \"cpu b8[2305843009213693951]\"\n";
  }
  text += "  return (a, b, c, d, e)\n";
  const ParsedTrace parsed = Parse(text);
  try {
    const Report report = Analyze(parsed, "thunder");
    ADD_FAILURE() << "no error; final_bytes = " << report.final_bytes;
  } catch (const TraceError&) {
    SUCCEED();
  }
}

// ---------------------------------------------------------------- sizes

TEST(Errors, OutputSizeCannotBeDetermined) {
  const std::string text = R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.neg(a)
  return t0
)";
  EXPECT_EQ(ReadError(text), "");
  EXPECT_EQ(ErrorOf(text),
            "t.trace:3:3: cannot determine the size of 't0': no type comment and no subsymbol "
            "defines it\n"
            "  t0 = torch.neg(a)\n"
            "  ^");
}

TEST(Errors, FusionOutputSizeCannotBeDetermined) {
  EXPECT_EQ(ErrorOf(R"(def f(a):
  # a: "cpu f32[4]"
  [t1, t2] = nvFusion0(a)
    # t3 = prims.neg(a)  # t3: "cpu f32[4]"
  return (t1, t2)
)"),
            "t.trace:3:4: cannot determine the size of 't1': no type comment and no subsymbol "
            "defines it\n"
            "  [t1, t2] = nvFusion0(a)\n"
            "   ^");
}

TEST(Errors, ArgumentWithoutTypeThatIsUsed) {
  EXPECT_EQ(ErrorOf(R"(def f(a):
  t0 = torch.neg(a)  # t0: "cpu f32[4]"
  return t0
)"),
            "t.trace:1:7: argument 'a' has no type comment\n"
            "def f(a):\n" +
                Spaces(6) + "^");
}

// An older printer's backward unpacks saved tensors from a collection with
// no type comments: every size from there on is unknown, and the error says
// which (t1 and t2 unpacked, t4 made from t1).
TEST(Errors, UnpackOfAnUntypedCollectionNamesTheTensorsOfUnknownSize) {
  const std::string trace = R"(def backward_fn(saved_for_backward, cotangents):
  # saved_for_backward: "Collection"
  # cotangents: "Collection"
  C0, _, = saved_for_backward
  t0, = cotangents
  # t0: "cpu f32[4, 8]"
  t1, t2, = C0
  t3 = torch.mul(t0, t2)  # t3: "cpu f32[4, 8]"
  t4 = torch.mul(t1, t3)
  return (t4,)
)";
  const std::string expected =
      "t.trace:7:3: cannot unpack 'C0' into 2 targets: the trace never says what it holds (no type "
      "comments on what is unpacked from it, as an older Thunder printer writes a backward), so the "
      "sizes of t1, t2, t4 are unknown. Print the trace with a newer Thunder, or export the live "
      "TraceCtx (peakmem.to_json_export), which carries every type\n"
      "  t1, t2, = C0\n" +
      Spaces(2) + "^";
  EXPECT_EQ(ErrorOf(trace, "runtime"), expected);
  // The thunder model counts C0 as an argument of unknown size; it names the same tensors.
  EXPECT_EQ(ErrorOf(trace, "thunder"), expected);
}

TEST(Errors, AliasOfAValueThunderNeverCounted) {
  EXPECT_EQ(ErrorOf(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.unsqueeze(2, 0)  # t0: "cpu f32[1]"
  return t0
)"),
            "t.trace:3:3: alias op 'unsqueeze' on a value Thunder never counted (its "
            "get_alloc_memory asserts here)\n"
            "  t0 = torch.unsqueeze(2, 0)  # t0: \"cpu f32[1]\"\n"
            "  ^");
}

TEST(Errors, DelOfATensorThunderNeverCounted) {
  // t0 comes out of a collection made inside the trace, not an argument.
  EXPECT_EQ(ErrorOf(R"(def f(a):
  # a: "cpu f32[4]"
  C0 = make_list(a)  # C0: "Collection"
  t0, = C0
  # t0: "cpu f32[4]"
  del t0
  return a
)"),
            "t.trace:6:3: Thunder's get_alloc_memory never counted tensor 't0' (it asserts "
            "here); was it unpacked from a collection that is not an argument?\n"
            "  del t0\n"
            "  ^");
}

// ---------------------------------------------------------------- indentation

TEST(Errors, DeeperIndentation) {
  EXPECT_EQ(ReadError(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.neg(a)  # t0: "cpu f32[4]"
    t1 = torch.neg(a)  # t1: "cpu f32[4]"
  return t0
)"),
            "t.trace:4:5: unexpected indentation\n"
            "    t1 = torch.neg(a)  # t1: \"cpu f32[4]\"\n"
            "    ^");
}

TEST(Errors, ShallowerIndentation) {
  EXPECT_EQ(ReadError(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.neg(a)  # t0: "cpu f32[4]"
 t1 = torch.neg(a)  # t1: "cpu f32[4]"
  return t0
)"),
            "t.trace:4:2: unindent does not match the function body\n"
            " t1 = torch.neg(a)  # t1: \"cpu f32[4]\"\n"
            " ^");
}

TEST(Errors, CommentIndentedLessThanTheBody) {
  EXPECT_EQ(ReadError("def f(a):\n  # a: \"cpu f32[4]\"\n # x\n  return a\n"),
            "t.trace:3:2: comment indented less than the function body\n"
            " # x\n"
            " ^");
}

// ---------------------------------------------------------------- names

TEST(Errors, DelOfUnknownName) {
  EXPECT_EQ(ReadError("def f(a):\n  # a: \"cpu f32[4]\"\n  del q\n  return a\n"),
            "t.trace:3:7: 'del' of unknown name 'q'\n"
            "  del q\n" +
                Spaces(6) + "^");
}

TEST(Errors, DelWithoutAName) {
  EXPECT_EQ(ReadError("def f(a):\n  # a: \"cpu f32[4]\"\n  del\n  return a\n"),
            "t.trace:3:6: expected a name after 'del'\n"
            "  del\n" +
                Spaces(5) + "^");
}

TEST(Errors, DelTwice) {
  EXPECT_EQ(ReadError(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.neg(a)  # t0: "cpu f32[4]"
  del t0
  del t0
  return a
)"),
            "t.trace:5:7: 't0' is deleted twice (first at line 4)\n"
            "  del t0\n" +
                Spaces(6) + "^");
}

TEST(Errors, NameUsedAfterDel) {
  EXPECT_EQ(ReadError(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.neg(a)  # t0: "cpu f32[4]"
  del t0
  t1 = torch.exp(t0)  # t1: "cpu f32[4]"
  return t1
)"),
            "t.trace:5:18: 't0' is used after 'del' at line 4\n"
            "  t1 = torch.exp(t0)  # t1: \"cpu f32[4]\"\n" +
                Spaces(17) + "^");
}

TEST(Errors, NameReturnedAfterDel) {
  EXPECT_EQ(ReadError(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.neg(a)  # t0: "cpu f32[4]"
  del t0
  return t0
)"),
            "t.trace:5:10: 't0' is used after 'del' at line 4\n"
            "  return t0\n" +
                Spaces(9) + "^");
}

TEST(Errors, DuplicateDefinition) {
  EXPECT_EQ(ReadError(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.neg(a)  # t0: "cpu f32[4]"
  t0 = torch.exp(a)  # t0: "cpu f32[4]"
  return t0
)"),
            "t.trace:4:3: 't0' is already defined at line 3\n"
            "  t0 = torch.exp(a)  # t0: \"cpu f32[4]\"\n"
            "  ^");
}

TEST(Errors, DuplicateParameter) {
  EXPECT_EQ(ReadError("def f(a, a):\n  return None\n"),
            "t.trace:1:10: 'a' is already defined at line 1\n"
            "def f(a, a):\n" +
                Spaces(9) + "^");
}

TEST(Errors, ClearWithTwoArguments) {
  EXPECT_EQ(ReadError(R"(def f(a, b):
  # a: "Collection"
  # b: "Collection"
  clear_mutable_collection(a, b)
  return None
)"),
            "t.trace:4:3: clear_mutable_collection expects one collection name\n"
            "  clear_mutable_collection(a, b)\n"
            "  ^");
}

// ---------------------------------------------------------------- line endings

TEST(Errors, WindowsLineEndingsGiveTheSameMessage) {
  EXPECT_EQ(ReadError("def f(a):\r\n  # a: \"cpu f32[4]\"\r\n  del q\r\n  return a\r\n"),
            "t.trace:3:7: 'del' of unknown name 'q'\n"
            "  del q\n" +
                Spaces(6) + "^");
}

// ---------------------------------------------------------------- models

TEST(Errors, UnknownModelName) {
  const ParsedTrace parsed = Parse("def f(a):\n  # a: \"cpu f32[4]\"\n  return a\n");
  try {
    Analyze(parsed, "bogus");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "unknown model 'bogus'; available models: runtime, thunder");
  }
}

TEST(Errors, AvailableModelsListsBoth) {
  EXPECT_EQ(AvailableModels(), (std::vector<std::string>{"runtime", "thunder"}));
}

}  // namespace
}  // namespace peakmem
