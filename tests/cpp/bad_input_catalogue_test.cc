// A catalogue of bad inputs: one row per case, each with the exact outcome it
// must have. For an error that is the full TraceError text
//   file:line:col: message
//   <the offending line, non-printable bytes shown as '?', cut at 200 bytes>
//   <caret under the column>
// and for input that is fine, "REPORT peak_bytes=N final_bytes=M".
//
// Every row runs in a child process (fork) with a time limit, so a case that
// crashes, hangs or throws something other than TraceError fails that row
// with "CRASH: ...", "TIMEOUT ..." or "UNEXPECTED ..." instead of taking the
// whole test binary down. Rows whose comment starts with "FINDING" assert the
// correct behaviour that peakmem does not have yet: they fail until src/ is
// fixed (see the findings list in fuzz/README.md).
//
// tests/cpp/errors_test.cc holds one case per kind of error; this file adds
// the variants a fuzzer or a truncated download would produce and does not
// repeat those cases (each section names the ones it builds on).
//
// Last, BadInputRegressions loads every file in fuzz/regressions/ (the
// minimised inputs the fuzzers found) and requires a report or a TraceError.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "peakmem/analyze.h"
#include "peakmem/ir/source.h"
#include "peakmem/frontend/trace_json_reader.h"
#include "peakmem/frontend/trace_text_reader.h"

namespace peakmem {
namespace {

// ---------------------------------------------------------------- isolation

// Runs `body` in a forked child and returns what it returned, or a line
// saying how the child failed: "CRASH: ..." (a signal or a non-zero exit,
// e.g. a sanitizer report) or "TIMEOUT ..." after `seconds`.
std::string RunIsolated(const std::function<std::string()>& body, int seconds) {
  int fds[2];
  if (pipe(fds) != 0) return std::string("HARNESS: pipe failed: ") + std::strerror(errno);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) return std::string("HARNESS: fork failed: ") + std::strerror(errno);
  if (pid == 0) {
    close(fds[0]);
    std::string out;
    try {
      out = body();
    } catch (...) {
      out = "UNEXPECTED exception of an unknown type";
    }
    std::size_t done = 0;
    while (done < out.size()) {
      const ssize_t n = write(fds[1], out.data() + done, out.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    _exit(0);
  }
  close(fds[1]);
  // Drain the pipe while the child runs (its answer may be larger than the
  // pipe buffer), up to the deadline.
  std::string result;
  bool timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  std::vector<char> buffer(1 << 16);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      timed_out = true;
      break;
    }
    const ssize_t n = read(fds[0], buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the child closed its end: done (or died)
    result.append(buffer.data(), static_cast<std::size_t>(n));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) return "TIMEOUT: no answer within " + std::to_string(seconds) + " s";
  if (WIFSIGNALED(status)) {
    return "CRASH: killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return "CRASH: exit status " + std::to_string(WEXITSTATUS(status)) +
           " (a sanitizer report is on stderr)";
  }
  return result;
}

// Long strings (100 MB inputs, deep nesting) are cut when a mismatch is shown.
std::string Shown(const std::string& s) {
  constexpr std::size_t kMax = 1500;
  if (s.size() <= kMax) return s;
  return s.substr(0, kMax) + "\n... [" + std::to_string(s.size() - kMax) + " more bytes, " +
         std::to_string(s.size()) + " in all]";
}

// ---------------------------------------------------------------- reading

enum class Reader {
  kText,  // ReadTraceText, file "t.trace"
  kJson,  // ReadTraceJson, file "t.json" (whatever the first byte)
  kAuto,  // ParseTrace, file "t.json" (the CLI's path: JSON if it starts with '{')
};

std::string ReportLine(const Report& r) {
  return "REPORT peak_bytes=" + std::to_string(r.peak_bytes) +
         " final_bytes=" + std::to_string(r.final_bytes);
}

// Reads `text` and runs `model` on it; returns the TraceError text, a REPORT
// line, or "UNEXPECTED <type>: <what>" for any other exception.
std::string Outcome(Reader reader, const std::string& model, std::string text) {
  try {
    ParsedTrace parsed;
    switch (reader) {
      case Reader::kText: parsed = ReadTraceText("t.trace", std::move(text)); break;
      case Reader::kJson:
        parsed = ReadTraceJson(std::make_shared<const SourceFile>("t.json", std::move(text)));
        break;
      case Reader::kAuto: parsed = ParseTrace("t.json", std::move(text)); break;
    }
    return ReportLine(Analyze(parsed, model));
  } catch (const TraceError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("UNEXPECTED ") + typeid(e).name() + ": " + e.what();
  }
}

// ---------------------------------------------------------------- rows

struct Case {
  std::string name;
  Reader reader;
  // "both": the thunder and runtime models must give the same outcome (every
  // reading error); otherwise the one model the row is about.
  std::string model;
  std::function<std::string()> input;  // called in the child
  std::string expected;
  int seconds = 10;
};

std::function<std::string()> Fixed(std::string text) {
  return [text = std::move(text)] { return text; };
}

std::string Spaces(std::size_t n) { return std::string(n, ' '); }

// The echoed line as TraceError shows it: cut at 200 bytes, then "...".
std::string Echo(const std::string& line) {
  return line.size() > 200 ? line.substr(0, 200) + "..." : line;
}

// The full expected error text for a line without tabs. A column past the
// echoed (cut) line gets its caret right after the echo (finding F6).
std::string Err(const std::string& file, int line, int col, const std::string& message,
                const std::string& line_text) {
  const std::size_t caret_col = std::min<std::size_t>(col, Echo(line_text).size() + 1);
  return file + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " + message + "\n" +
         Echo(line_text) + "\n" + Spaces(caret_col - 1) + "^";
}
std::string TErr(int line, int col, const std::string& message, const std::string& line_text) {
  return Err("t.trace", line, col, message, line_text);
}
std::string JErr(int line, int col, const std::string& message, const std::string& line_text) {
  return Err("t.json", line, col, message, line_text);
}

std::string Repeat(const std::string& s, std::size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (std::size_t i = 0; i < n; ++i) out += s;
  return out;
}

// A one-argument signature, as most rows start.
const std::string kHead = "def f(a):\n  # a: \"cpu f32[4]\"\n";
const std::string kNeg = "  t0 = torch.neg(a)  # t0: \"cpu f32[4]\"";

// The JSON form: a header line with one parameter `a`, and statement lines.
const std::string kJsonHead =
    "{\"format\": \"peakmem.trace\", \"version\": 1, \"function\": \"f\", \"params\": "
    "[{\"kind\": \"positional\", \"value\": {\"name\": \"a\", \"type\": \"cpu f32[4]\"}}], "
    "\"statements\": [";
const std::string kJsonNeg =
    "{\"kind\": \"call\", \"callee\": \"torch.neg\", \"args\": [{\"ref\": \"a\"}], "
    "\"outputs\": {\"name\": \"t0\", \"type\": \"cpu f32[4]\"}}";
const std::string kJsonReturnA = "{\"kind\": \"return\", \"value\": {\"ref\": \"a\"}}";
std::string JsonTrace(const std::vector<std::string>& statements,
                      const std::string& head = kJsonHead) {
  std::string out = head + "\n";
  for (std::size_t i = 0; i < statements.size(); ++i) {
    out += statements[i] + (i + 1 < statements.size() ? ",\n" : "\n");
  }
  return out + "]}\n";
}
std::string WithParamType(const std::string& type) {
  std::string head = kJsonHead;
  head.replace(head.find("cpu f32[4]"), 10, type);
  return head;
}

constexpr std::size_t k100MB = 100u * 1000u * 1000u;

std::vector<Case> Catalogue() {
  std::vector<Case> rows;
  auto add = [&](std::string name, Reader reader, std::string model,
                 std::function<std::string()> input, std::string expected, int seconds = 10) {
    rows.push_back(Case{std::move(name), reader, std::move(model), std::move(input),
                        std::move(expected), seconds});
  };
  const Reader T = Reader::kText;
  const Reader J = Reader::kJson;
  const Reader A = Reader::kAuto;

  // ------------------------------------------------------------ truncated files
  // (errors_test: UnclosedBracketAtEndOfInput cuts inside a call before a
  // final newline; TruncatedFileWithoutReturn cuts right before `return`.)
  add("TruncatedMidIdentifier", T, "both", Fixed(kHead + "  t0 = torch.ne"),
      TErr(3, 8, "expected an op call or a name after '='", "  t0 = torch.ne"));
  add("TruncatedInsideCallWithoutNewline", T, "both", Fixed(kHead + "  t0 = torch.neg("),
      TErr(3, 18, "unexpected end of input inside a statement", "  t0 = torch.neg("));
  add("TruncatedInsideTypeComment", T, "both",
      Fixed(kHead + "  t0 = torch.neg(a)  # t0: \"cpu f3"),
      TErr(3, 1, "the trace ends without a 'return' (truncated?)",
           "  t0 = torch.neg(a)  # t0: \"cpu f3"));
  add("TruncatedInsideBackslashContinuation", T, "both",
      Fixed("def f(C):\n  # C: \"Collection\"\n  C0, \\\n"),
      TErr(3, 8, "unexpected end of input inside a statement", "  C0, \\"));
  add("TruncatedInsideSignature", T, "both", Fixed("def f(a, b"),
      TErr(1, 11, "expected ',' or ')' in the parameter list, got end of line", "def f(a, b"));
  add("TruncatedRightAfterDef", T, "both", Fixed("def f(a):\n"),
      TErr(1, 1, "the trace ends without a 'return' (truncated?)", "def f(a):"));
  add("TruncatedAfterDelBeforeReturn", T, "both",
      Fixed(kHead + kNeg + "\n    # t0 = ltorch.neg(a)\n  del t0\n"),
      TErr(5, 1, "the trace ends without a 'return' (truncated?)", "  del t0"));
  add("TruncatedAfterSubsymbolsPointsAtTheirOp", T, "both",
      Fixed(kHead + kNeg + "\n    # t0 = ltorch.neg(a)\n      # t0 = prims.neg(a)\n"),
      TErr(3, 1, "the trace ends without a 'return' (truncated?)", kNeg));
  add("TruncatedInsideReturnTuple", T, "both", Fixed(kHead + "  return (a, "),
      TErr(3, 14, "unexpected end of input inside a statement", "  return (a, "));
  add("TruncatedMidReturnKeyword", T, "both", Fixed(kHead + "  retu"),
      TErr(3, 3, "expected a statement: an op call, 'del' or 'return'", "  retu"));

  // ------------------------------------------------------------ indentation
  // (errors_test: DeeperIndentation, ShallowerIndentation,
  // CommentIndentedLessThanTheBody, IndentedLineBeforeDef,
  // GarbageAtTopLevelInsideTheBody.)
  add("TabIndentedStatementUnderASpaceBody", T, "both",
      Fixed(kHead + "\treturn a\n"),
      "t.trace:3:2: unindent does not match the function body\n\treturn a\n\t^");
  add("OverIndentedReturnAfterSubsymbols", T, "both",
      Fixed(kHead + kNeg + "\n    # t0 = ltorch.neg(a)\n    return t0\n"),
      TErr(5, 5, "unexpected indentation", "    return t0"));
  add("UnderIndentedCommentInsideTheBody", T, "both",
      Fixed("def f(a):\n    # a: \"cpu f32[4]\"\n    t0 = torch.neg(a)  # t0: \"cpu f32[4]\"\n"
            "  # t0 = ltorch.neg(a)\n    return t0\n"),
      TErr(4, 3, "comment indented less than the function body", "  # t0 = ltorch.neg(a)"));
  // Python allows any indentation on a continuation line; so does peakmem.
  add("ContinuationLineAtColumnOneIsAccepted", T, "thunder",
      Fixed(kHead + "  t0 = torch.add(a,\na)  # t0: \"cpu f32[4]\"\n  return t0\n"),
      "REPORT peak_bytes=32 final_bytes=32");

  // ------------------------------------------------------------ dtypes and devices
  // (errors_test: UnknownDTypeInArgumentComment / InOpLineComment /
  // InSubSymbolComment, all with "q7".)
  add("EmptyDType", T, "both", Fixed("def f(a):\n  # a: \"cpu [4]\"\n  return a\n"),
      TErr(2, 13, "unknown dtype ''", "  # a: \"cpu [4]\""));
  add("TorchDTypeNameInsteadOfThunders", T, "both",
      Fixed("def f(a):\n  # a: \"cpu float32[4]\"\n  return a\n"),
      TErr(2, 13, "unknown dtype 'float32'", "  # a: \"cpu float32[4]\""));
  add("UnknownDTypeInAFutureTensor", T, "both",
      Fixed("def f(a):\n  # a: \"FUTURE cuda:0 q7[4]\"\n  return a\n"),
      TErr(2, 23, "unknown dtype 'q7'", "  # a: \"FUTURE cuda:0 q7[4]\""));
  add("UnknownDevice", T, "both", Fixed("def f(a):\n  # a: \"tpu f32[4]\"\n  return a\n"),
      TErr(2, 9, "unknown device 'tpu'", "  # a: \"tpu f32[4]\""));

  // ------------------------------------------------------------ negative dimensions
  // (errors_test: NegativeDimension, "-1" as the only dimension of an argument.)
  add("NegativeSecondDimension", T, "both",
      Fixed("def f(a):\n  # a: \"cpu f32[4, -2]\"\n  return a\n"),
      TErr(2, 20, "negative dimension -2", "  # a: \"cpu f32[4, -2]\""));
  add("NegativeDimensionOfAnOpOutput", T, "both",
      Fixed(kHead + "  t0 = torch.neg(a)  # t0: \"cpu f32[-4]\"\n  return t0\n"),
      TErr(3, 37, "negative dimension -4", "  t0 = torch.neg(a)  # t0: \"cpu f32[-4]\""));
  add("MinusSignWithoutDigits", T, "both", Fixed("def f(a):\n  # a: \"cpu f32[-]\"\n  return a\n"),
      TErr(2, 17, "expected an integer dimension", "  # a: \"cpu f32[-]\""));

  // ------------------------------------------------------------ sizes past 64 bits
  // (errors_test: ByteSizeOverflow, 2^32 x 2^32 f32 elements;
  // SumOfTensorSizesOverflowIsAnErrorNotAWrappedNumber, five arguments.)
  add("DimensionPastInt64", T, "both",
      Fixed("def f(a):\n  # a: \"cpu f32[99999999999999999999]\"\n  return a\n"),
      TErr(2, 17, "dimension 99999999999999999999 overflows 64 bits",
           "  # a: \"cpu f32[99999999999999999999]\""));
  add("ElementCountFitsButBitCountOverflows", T, "both",
      Fixed("def f(a):\n  # a: \"cpu f64[2305843009213693952]\"\n  return a\n"),
      TErr(2, 16, "tensor size overflows 64 bits", "  # a: \"cpu f64[2305843009213693952]\""));
  add("FiveDimensionsOf65536InAnOpOutput", T, "both",
      Fixed(kHead + "  t0 = torch.neg(a)  # t0: \"cpu f32[65536, 65536, 65536, 65536, 65536]\"\n"
            "  return t0\n"),
      TErr(3, 36, "tensor size overflows 64 bits",
           "  t0 = torch.neg(a)  # t0: \"cpu f32[65536, 65536, 65536, 65536, 65536]\""));
  {
    // Four arguments of 2^61 - 1 bytes hold 2^63 - 4 bytes; mul(a, 2.0) on
    // b8 computes in float32 (a bool tensor times a float), so its scratch
    // is the wrapped double, its cast and a's float32 copy (2^63 - 4 bytes
    // more): the runtime model's peak is past what an int64 can hold.
    // FINDING F4: the runtime model saturates the peak to INT64_MAX
    // (RuntimeModel::NotePeak, src/models/runtime_model.cc) and reports
    // peak_bytes=9223372036854775807, a number nothing allocates; it must fail
    // like every other overflow does, at the statement.
    std::string text = "def f(a, b, c, d):\n";
    for (const char* n : {"a", "b", "c", "d"}) {
      text += std::string("  # ") + n + ": \"cpu b8[2305843009213693951]\"\n";
    }
    text += "  t0 = torch.mul(a, 2.0)  # t0: \"cpu b8[0]\"\n  return t0\n";
    add("RuntimeScratchPastInt64IsAnErrorNotASaturatedPeak", T, "runtime", Fixed(text),
        TErr(6, 3, "total tensor bytes overflow 64 bits",
             "  t0 = torch.mul(a, 2.0)  # t0: \"cpu b8[0]\""));
  }

  // ------------------------------------------------------------ deep nesting
  add("TenThousandNestedParentheses", T, "both",
      [] {
        return kHead + "  t0 = foo(" + std::string(10000, '(') + "a" + std::string(10000, ')') +
               ")  # t0: \"cpu f32[4]\"\n  return t0\n";
      },
      TErr(3, 212, "expression nested too deeply",
           "  t0 = foo(" + std::string(300, '(')));
  add("TenThousandNestedBracketsOnOneLine", T, "both",
      [] {
        return kHead + "  t0 = foo(" + std::string(10000, '[') + std::string(10000, ']') +
               ")\n  return t0\n";
      },
      TErr(3, 212, "expression nested too deeply", "  t0 = foo(" + std::string(300, '[')));
  add("TenThousandNestedBracketsOnePerLine", T, "both",
      [] {
        return kHead + "  t0 = foo(" + Repeat("[\n", 10000) + "a" + std::string(10000, ']') +
               ")\n  return t0\n";
      },
      // Line 3 opens two brackets; the 199 lines after it bring the depth to
      // 201 at line 202.
      TErr(202, 1, "brackets nested too deeply", "["));
  add("TenThousandNestedAssignmentTargets", T, "both",
      [] {
        return kHead + "  " + std::string(10000, '(') + "t0" + std::string(10000, ')') +
               " = foo(a)\n  return t0\n";
      },
      TErr(3, 203, "assignment target nested too deeply", "  " + std::string(300, '(')));
  add("TenThousandNestedSubsymbolComments", T, "both",
      [] {
        std::string text = kHead + "  t0 = foo(a)  # t0: \"cpu f32[4]\"\n";
        for (int i = 0; i < 10000; ++i) text += Spaces(3 + i) + "# x\n";
        return text + "  return t0\n";
      },
      // The subsymbol at line 204 would be the 201st level.
      TErr(204, 204, "subsymbols nested too deeply", Spaces(203) + "# x"));
  add("JsonTenThousandNestedArraysAsOutputs", J, "both",
      [] {
        return JsonTrace({"{\"kind\": \"call\", \"callee\": \"f\", \"outputs\": " +
                              std::string(10000, '[') + std::string(10000, ']') + "}",
                          kJsonReturnA});
      },
      JErr(2, 245, "assignment target nested too deeply",
           "{\"kind\": \"call\", \"callee\": \"f\", \"outputs\": " + std::string(300, '[')));
  add("JsonTenThousandNestedTupleExpressions", J, "both",
      [] {
        return JsonTrace({"{\"kind\": \"call\", \"callee\": \"f\", \"args\": [" +
                              Repeat("{\"tuple\": [", 10000) + Repeat("]}", 10000) + "]}",
                          kJsonReturnA});
      },
      JErr(2, 2242, "expression nested too deeply",
           "{\"kind\": \"call\", \"callee\": \"f\", \"args\": [" + Repeat("{\"tuple\": [", 30)));
  add("JsonTenThousandNestedSubsymbols", J, "both",
      [] {
        return JsonTrace({"{\"kind\": \"call\", \"callee\": \"f\", \"subsymbols\": " +
                              Repeat("[{\"text\": \"x\", \"children\": ", 10000) + "[]" +
                              Repeat("}]", 10000) + "}",
                          kJsonReturnA});
      },
      JErr(2, 5474, "subsymbols nested too deeply",
           "{\"kind\": \"call\", \"callee\": \"f\", \"subsymbols\": " +
               Repeat("[{\"text\": \"x\", \"children\": ", 10)));
  // Other top-level keys are metadata (docs/trace-json.md): skipped, however deep.
  add("JsonTenThousandNestedArraysInMetadataAreSkipped", J, "thunder",
      [] {
        std::string head = kJsonHead;
        head.insert(1, "\"meta\": " + std::string(10000, '[') + std::string(10000, ']') + ", ");
        return JsonTrace({kJsonReturnA}, head);
      },
      "REPORT peak_bytes=0 final_bytes=16");
  // FINDING F7: a "const" is "a string or a JSON number" (docs/trace-json.md);
  // an array is accepted and its first token kept as the constant's text.
  add("JsonTenThousandNestedArraysAsAConstant", J, "both",
      [] {
        return JsonTrace({"{\"kind\": \"return\", \"value\": {\"const\": " +
                          std::string(10000, '[') + std::string(10000, ']') + "}}"});
      },
      JErr(2, 39, "'const' must be a string or a number",
           "{\"kind\": \"return\", \"value\": {\"const\": " + std::string(300, '[')));

  // ------------------------------------------------------------ duplicate names
  // (errors_test: DuplicateDefinition, DuplicateParameter.)
  add("DuplicateNameInOneUnpack", T, "both",
      Fixed("def f(C0):\n  # C0: \"Collection\"\n  a0, a0, = C0\n  return a0\n"),
      TErr(3, 7, "'a0' is already defined at line 3", "  a0, a0, = C0"));
  add("DuplicateNameInAListTarget", T, "both",
      Fixed(kHead + "  [t0, t0] = nvFusion0(a)\n  return t0\n"),
      TErr(3, 8, "'t0' is already defined at line 3", "  [t0, t0] = nvFusion0(a)"));
  add("VarArgsNamedLikeAParameter", T, "both", Fixed("def f(a, *a):\n  return None\n"),
      TErr(1, 11, "'a' is already defined at line 1", "def f(a, *a):"));
  add("JsonDuplicateOpOutput", J, "both", Fixed(JsonTrace({kJsonNeg, kJsonNeg, kJsonReturnA})),
      JErr(3, 76, "'t0' is already defined at line 2", kJsonNeg + ","));
  {
    std::string head = kJsonHead;
    head.replace(head.find("}}]"), 3,
                 "}}, {\"kind\": \"positional\", \"value\": {\"name\": \"a\"}}]");
    add("JsonDuplicateParameter", J, "both", Fixed(JsonTrace({kJsonReturnA}, head)),
        JErr(1, 173, "'a' is already defined at line 1", head));
  }

  // ------------------------------------------------------------ del
  // (errors_test: DelOfUnknownName, DelWithoutAName, DelTwice.)
  add("DelOfAnUnknownSecondName", T, "both", Fixed(kHead + "  del a, q\n  return None\n"),
      TErr(3, 10, "'del' of unknown name 'q'", "  del a, q"));
  add("DelOfAnAttribute", T, "both", Fixed(kHead + "  del a.b\n  return None\n"),
      TErr(3, 8, "expected ',' between names in 'del'", "  del a.b"));
  add("DelOfAParenthesisedName", T, "both", Fixed(kHead + "  del (a)\n  return None\n"),
      TErr(3, 7, "expected a name after 'del'", "  del (a)"));
  add("JsonDelOfUnknownName", J, "both",
      Fixed(JsonTrace({"{\"kind\": \"del\", \"names\": [\"q\"]}", kJsonReturnA})),
      JErr(2, 27, "'del' of unknown name 'q'", "{\"kind\": \"del\", \"names\": [\"q\"]},"));

  // ------------------------------------------------------------ use after del
  // (errors_test: NameUsedAfterDel as a positional argument,
  // NameReturnedAfterDel.)
  add("UsedAfterDelAsAKeywordArgument", T, "both",
      Fixed(kHead + "  del a\n  t0 = torch.sum(x=a)\n  return t0\n"),
      TErr(4, 20, "'a' is used after 'del' at line 3", "  t0 = torch.sum(x=a)"));
  add("UsedAfterDelInsideASubscript", T, "both",
      Fixed("def f(a, b):\n  # a: \"cpu f32[4]\"\n  # b: \"Collection\"\n  del a\n"
            "  t0 = foo(b[a])\n  return t0\n"),
      TErr(5, 14, "'a' is used after 'del' at line 4", "  t0 = foo(b[a])"));
  add("CollectionClearedAfterDel", T, "both",
      Fixed("def f(b):\n  # b: \"Collection\"\n  del b\n  clear_mutable_collection(b)\n"
            "  return None\n"),
      TErr(4, 28, "'b' is used after 'del' at line 3", "  clear_mutable_collection(b)"));
  add("NameDefinedAgainAfterDelIsANewValue", T, "thunder",
      Fixed(kHead + kNeg + "\n  del t0\n" + kNeg + "\n  return t0\n"),
      "REPORT peak_bytes=32 final_bytes=32");
  add("JsonReturnedAfterDel", J, "both",
      Fixed(JsonTrace({"{\"kind\": \"del\", \"names\": [\"a\"]}", kJsonReturnA})),
      JErr(3, 37, "'a' is used after 'del' at line 2", kJsonReturnA));
  add("JsonUnpackedAfterDel", J, "both",
      Fixed(JsonTrace({"{\"kind\": \"del\", \"names\": [\"a\"]}",
                       "{\"kind\": \"unpack\", \"source\": \"a\", \"outputs\": []}",
                       "{\"kind\": \"return\", \"value\": {\"const\": \"None\"}}"})),
      JErr(3, 30, "'a' is used after 'del' at line 2",
           "{\"kind\": \"unpack\", \"source\": \"a\", \"outputs\": []},"));

  // ------------------------------------------------------------ bytes that are not UTF-8
  // The echoed line shows them as '?'. FINDING F2: the message itself copies
  // the raw bytes (a 0xFF, a NUL, an ESC) into what(), which is then not
  // UTF-8 (the Python extension cannot turn it into a str) and can drive a
  // terminal; the rows below expect them escaped as \xHH, as Python's repr does.
  add("NonUtf8ByteInAName", T, "both",
      Fixed(kHead + "  t\xff" "0 = torch.neg(a)  # t0: \"cpu f32[4]\"\n  return a\n"),
      TErr(3, 4, "expected ',' or '=' after an assignment target",
           "  t?0 = torch.neg(a)  # t0: \"cpu f32[4]\""));
  add("NonUtf8ByteAsAnArgument", T, "both",
      Fixed(kHead + "  t0 = torch.neg(\xff)  # t0: \"cpu f32[4]\"\n  return t0\n"),
      TErr(3, 18, "unexpected character '\\xff'", "  t0 = torch.neg(?)  # t0: \"cpu f32[4]\""));
  add("NulByteAsAnArgument", T, "both",
      Fixed(kHead + "  t0 = torch.neg(" + std::string(1, '\0') +
            ")  # t0: \"cpu f32[4]\"\n  return t0\n"),
      TErr(3, 18, "unexpected character '\\x00'", "  t0 = torch.neg(?)  # t0: \"cpu f32[4]\""));
  add("NonUtf8BytesInACommentAreIgnored", T, "runtime",
      Fixed(kHead + "  # caf\xe9 \xff\xfe\n  return a\n"), "REPORT peak_bytes=16 final_bytes=16");
  add("NonUtf8ByteInADType", T, "both", Fixed("def f(a):\n  # a: \"cpu f\xff" "32[4]\"\n  return a\n"),
      TErr(2, 13, "unknown dtype 'f\\xff32'", "  # a: \"cpu f?32[4]\""));
  add("NonUtf8ByteInADevice", T, "both", Fixed("def f(a):\n  # a: \"c\xffu f32[4]\"\n  return a\n"),
      TErr(2, 9, "unknown device 'c\\xffu'", "  # a: \"c?u f32[4]\""));
  add("EscapeByteInADType", T, "both", Fixed("def f(a):\n  # a: \"cpu f\x1b" "32[4]\"\n  return a\n"),
      TErr(2, 13, "unknown dtype 'f\\x1b32'", "  # a: \"cpu f?32[4]\""));
  // FINDING F1: when simdjson's first pass rejects the input (bytes that are
  // not UTF-8, an unclosed string, no JSON at all), JsonReader::Read's catch
  // block calls current_location() on a document that was never iterated
  // (src/frontend/trace_json_reader.cc) and reads through a null pointer: SIGSEGV.
  // ParseTrace routes any text starting with '{' there, so the CLI crashes on
  // such a file. Expected: the "invalid JSON" error, at the offending byte
  // (not UTF-8) or at the end of the input (cut inside a string, empty).
  {
    const std::string head = WithParamType("cpu f32[4]");
    std::string bad = head;
    bad.replace(bad.find("\"name\": \"a\"") + 10, 0, "\xff");  // after the 'a'
    const int col = static_cast<int>(bad.find('\xff')) + 1;
    std::string shown = bad;
    shown[static_cast<std::size_t>(col - 1)] = '?';
    add("JsonNonUtf8ByteInAName", A, "both", Fixed(JsonTrace({kJsonReturnA}, bad)),
        JErr(1, col, "invalid JSON: The input is not valid UTF-8", shown));
  }
  {
    const std::string cut = kJsonHead + "\n" + kJsonNeg.substr(0, 30);
    add("JsonCutInsideAString", A, "both", Fixed(cut),
        // Located at the opening quote of the string that never closes.
        JErr(2, 28, "invalid JSON: A string is opened, but never closed.", kJsonNeg.substr(0, 30)));
  }
  add("JsonEmptyInputGivenToTheJsonReader", J, "both", Fixed(""),
      "t.json:1:1: invalid JSON: Empty: no JSON found\n\n^");

  // ------------------------------------------------------------ 100 MB on one line
  // Decision: a huge line is read in linear time; an error on it is located
  // and echoed like any other (the echo cut at 200 bytes); a huge comment is
  // just a comment. Each must finish well inside the limit (it takes about a
  // second in a Release build).
  add("HundredMegabyteLineBeforeDef", T, "both",
      [] { return std::string(k100MB, 'x') + "\ndef f():\n  return None\n"; },
      TErr(1, 1, "expected 'def', 'import', a decorator or a comment before the function body",
           std::string(300, 'x')),
      60);
  add("HundredMegabyteCommentInTheBody", T, "runtime",
      [] { return kHead + "  # " + std::string(k100MB, 'x') + "\n  return a\n"; },
      "REPORT peak_bytes=16 final_bytes=16", 60);
  add("JsonHundredMegabyteMetadataLine", J, "thunder",
      [] {
        std::string head = kJsonHead;
        head.insert(1, "\"producer\": \"" + std::string(k100MB, 'x') + "\", ");
        return JsonTrace({kJsonReturnA}, head);
      },
      "REPORT peak_bytes=0 final_bytes=16", 60);

  // ------------------------------------------------------------ long statements
  // FINDING F5: a statement spread over many physical lines takes quadratic
  // time: LogicalLine::At (src/frontend/text_lines.h) scans every piece of
  // the logical line for each token: 40,000 continuation lines take about
  // 3 s in a Release build, these 300,000 several minutes (linear: well under
  // a second). Backward traces unpack thousands of saved tensors this way.
  add("ThreeHundredThousandLineArgumentList", T, "thunder",
      [] {
        return kHead + "  t0 = torch.cat([\n" + Repeat("a,\n", 300000) +
               "])  # t0: \"cpu f32[4]\"\n  return t0\n";
      },
      "REPORT peak_bytes=32 final_bytes=32", 10);

  // ------------------------------------------------------------ symbolic shapes
  // (errors_test: SymbolicDimension, "i0" first in an argument's type.)
  add("SymbolicDimensionOfAnOpOutput", T, "both",
      Fixed(kHead + "  t0 = torch.neg(a)  # t0: \"cpu f32[4, s1]\"\n  return t0\n"),
      TErr(3, 40, "symbolic dimension 's1': peakmem needs concrete shapes",
           "  t0 = torch.neg(a)  # t0: \"cpu f32[4, s1]\""));
  add("SymbolicDimensionOfAFutureTensor", T, "both",
      Fixed("def f(a):\n  # a: \"FUTURE cuda:0 f32[i0]\"\n  return a\n"),
      TErr(2, 27, "symbolic dimension 'i0': peakmem needs concrete shapes",
           "  # a: \"FUTURE cuda:0 f32[i0]\""));

  // ------------------------------------------------------------ JSON form
  // The JSON equivalents of the text cases above; file "t.json".
  add("JsonMissingCommaBetweenStatements", J, "both",
      Fixed(kJsonHead + "\n" + kJsonNeg + "\n" + kJsonReturnA + "\n]}\n"),
      JErr(3, 1,
           "invalid JSON: The JSON document has an improper structure: missing or superfluous "
           "commas, braces, missing keys, etc.",
           kJsonReturnA));
  add("JsonSingleQuotes", J, "both", Fixed(JsonTrace({"{'kind': 'return'}"})),
      JErr(2, 2,
           "invalid JSON: The JSON document has an improper structure: missing or superfluous "
           "commas, braces, missing keys, etc.",
           "{'kind': 'return'}"));
  add("JsonTrailingCommaAfterTheLastStatement", J, "both",
      Fixed(kJsonHead + "\n" + kJsonReturnA + ",\n]}\n"),
      JErr(3, 1, "expected a statement object", "]}"));
  add("JsonCutBetweenTwoTokens", A, "both", Fixed(kJsonHead + "\n" + kJsonNeg),
      JErr(2, static_cast<int>(kJsonNeg.size()) + 1,
           "invalid JSON: The JSON document has an improper structure: missing or superfluous "
           "commas, braces, missing keys, etc.",
           kJsonNeg));
  // FINDING F3: a document cut right after "statements": [ is reported as
  // "expected a JSON object" at 1:1: any failure of the root get_object()
  // (src/frontend/trace_json_reader.cc) is taken for a root that is not an
  // object. It is an object, cut short: the error belongs at the end.
  add("JsonCutRightAfterTheStatementsBracket", A, "both", Fixed(kJsonHead + "\n"),
      JErr(1, static_cast<int>(kJsonHead.size()) + 1,
           "invalid JSON: JSON document ended early in the middle of an object or array.",
           kJsonHead));
  add("JsonUnknownKeyInAStatement", J, "both",
      Fixed(JsonTrace({"{\"kind\": \"call\", \"callee\": \"torch.neg\", \"argz\": []}",
                       kJsonReturnA})),
      JErr(2, 49, "unknown key 'argz' in a statement",
           "{\"kind\": \"call\", \"callee\": \"torch.neg\", \"argz\": []},"));
  add("JsonKindIsNotTheFirstKey", J, "both",
      Fixed(JsonTrace({"{\"callee\": \"torch.neg\", \"kind\": \"call\"}", kJsonReturnA})),
      JErr(2, 12, "'kind' must be the first key of a statement",
           "{\"callee\": \"torch.neg\", \"kind\": \"call\"},"));
  add("JsonUnknownKeyInAnExpression", J, "both",
      Fixed(JsonTrace({"{\"kind\": \"return\", \"value\": {\"reff\": \"a\"}}"})),
      JErr(2, 38, "unknown key 'reff' in an expression",
           "{\"kind\": \"return\", \"value\": {\"reff\": \"a\"}}"));
  {
    std::string head = kJsonHead;
    head.insert(head.find("\"value\""), "\"typo\": 1, ");
    add("JsonUnknownKeyInAParameter", J, "both", Fixed(JsonTrace({kJsonReturnA}, head)),
        JErr(1, 102, "unknown key 'typo' in a parameter", head));
  }
  add("JsonUnknownKeyInAValueDefinition", J, "both",
      Fixed(JsonTrace({"{\"kind\": \"call\", \"callee\": \"f\", \"outputs\": {\"name\": \"t0\", "
                       "\"shape\": [4]}}",
                       kJsonReturnA})),
      JErr(2, 68, "unknown key 'shape' in a value definition",
           "{\"kind\": \"call\", \"callee\": \"f\", \"outputs\": {\"name\": \"t0\", \"shape\": "
           "[4]}},"));
  add("JsonUnknownKeyInASubsymbol", J, "both",
      Fixed(JsonTrace({"{\"kind\": \"call\", \"callee\": \"f\", \"subsymbols\": [{\"txt\": \"x\"}]}",
                       kJsonReturnA})),
      JErr(2, 56, "unknown key 'txt' in a subsymbol",
           "{\"kind\": \"call\", \"callee\": \"f\", \"subsymbols\": [{\"txt\": \"x\"}]},"));
  add("JsonUnknownRef", J, "both",
      Fixed(JsonTrace({"{\"kind\": \"return\", \"value\": {\"ref\": \"nope\"}}"})),
      JErr(2, 37, "unknown name 'nope'", "{\"kind\": \"return\", \"value\": {\"ref\": \"nope\"}}"));
  add("JsonUnknownUnpackSource", J, "both",
      Fixed(JsonTrace({"{\"kind\": \"unpack\", \"source\": \"nope\", \"outputs\": []}",
                       kJsonReturnA})),
      JErr(2, 30, "unknown name 'nope'",
           "{\"kind\": \"unpack\", \"source\": \"nope\", \"outputs\": []},"));
  {
    const std::string bad =
        "{\"kind\": \"call\", \"callee\": \"torch.neg\", \"args\": [{\"ref\": \"a\"}], "
        "\"outputs\": {\"name\": \"t0\", \"type\": \"cpu q7[4]\"}}";
    add("JsonUnknownDTypeInAnOutputType", J, "both", Fixed(JsonTrace({bad, kJsonReturnA})),
        JErr(2, 104, "unknown dtype 'q7'", bad + ","));
  }
  add("JsonSymbolicDimensionInAParameterType", J, "both",
      Fixed(JsonTrace({kJsonReturnA}, WithParamType("cpu f32[i0, 4]"))),
      JErr(1, 134, "symbolic dimension 'i0': peakmem needs concrete shapes",
           WithParamType("cpu f32[i0, 4]")));
  add("JsonNegativeDimensionInAParameterType", J, "both",
      Fixed(JsonTrace({kJsonReturnA}, WithParamType("cpu f32[-3]"))),
      JErr(1, 134, "negative dimension -3", WithParamType("cpu f32[-3]")));
  add("JsonSizePastInt64InAParameterType", J, "both",
      Fixed(JsonTrace({kJsonReturnA}, WithParamType("cpu f32[4294967296, 4294967296]"))),
      JErr(1, 133, "tensor size overflows 64 bits",
           WithParamType("cpu f32[4294967296, 4294967296]")));
  // FINDING F8: the error points at whatever token the reader located last
  // (here the type string of t0's definition, column 99). Like the text
  // reader, it must point at the start of the last statement.
  add("JsonMissingReturn", J, "both", Fixed(JsonTrace({kJsonNeg})),
      JErr(2, 1, "the trace ends without a 'return' statement", kJsonNeg));

  return rows;
}

// gtest names a row by its name (not a byte dump of the struct).
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class BadInputCatalogue : public ::testing::TestWithParam<Case> {};

TEST_P(BadInputCatalogue, GivesItsExactOutcome) {
  const Case& c = GetParam();
  const std::string outcome = RunIsolated(
      [&c] {
        const std::string text = c.input();
        if (c.model != "both") return Outcome(c.reader, c.model, text);
        const std::string thunder = Outcome(c.reader, "thunder", text);
        const std::string runtime = Outcome(c.reader, "runtime", text);
        if (thunder == runtime) return thunder;
        return "MODELS DISAGREE\n-- thunder:\n" + Shown(thunder) + "\n-- runtime:\n" +
               Shown(runtime);
      },
      c.seconds);
  if (outcome != c.expected) {
    ADD_FAILURE() << "case " << c.name << "\n--- expected (" << c.expected.size()
                  << " bytes):\n"
                  << Shown(c.expected) << "\n--- got (" << outcome.size() << " bytes):\n"
                  << Shown(outcome);
  }
}

INSTANTIATE_TEST_SUITE_P(BadInput, BadInputCatalogue, ::testing::ValuesIn(Catalogue()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

TEST(BadInputCatalogueSize, HasOneRowPerCaseWithUniqueNames) {
  const std::vector<Case> rows = Catalogue();
  std::vector<std::string> names;
  for (const Case& c : rows) names.push_back(c.name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end());
  EXPECT_GE(rows.size(), 60u);
}

// ---------------------------------------------------------------- error size

// FINDING F6: an error far along a huge line. The echo is cut at 200 bytes,
// but the caret line is padded out to the column (src/ir/source.cc): a
// 100 MB line with an error at its end gives a 100 MB error message (three
// copies in memory, 100 MB printed to the terminal). The message must stay
// small: the first line exact, the echo cut as usual, and the caret line no
// longer than the echo plus the caret.
TEST(BadInputLimits, ErrorAtTheEndOfAHundredMegabyteLineStaysSmall) {
  const std::string outcome = RunIsolated(
      [] {
        std::string text = kHead + "  t0 = torch.neg(a, '" + std::string(k100MB, 'x') +
                           "') @\n  return t0\n";
        return Outcome(Reader::kText, "thunder", std::move(text));
      },
      60);
  const std::string line3 = "  t0 = torch.neg(a, '" + std::string(300, 'x');
  const std::string first = "t.trace:3:" + std::to_string(k100MB + 25) +
                            ": unexpected text after the expression\n" + Echo(line3) + "\n";
  ASSERT_EQ(outcome.substr(0, first.size()), first) << Shown(outcome);
  const std::string caret = outcome.substr(first.size());
  EXPECT_LE(caret.size(), Echo(line3).size() + 1) << "caret line of " << caret.size() << " bytes";
  EXPECT_TRUE(!caret.empty() && caret.back() == '^');
}

// ---------------------------------------------------------------- fuzz regressions

// Every file in fuzz/regressions/ is an input a fuzzer once failed on. Files
// named json-* are given to the JSON reader (the JSON target's input), the
// others to ParseTrace (the text target's); either way both models run. Each
// must give a report or a TraceError: nothing else, no crash, no hang.
TEST(BadInputRegressions, EveryFuzzRegressionGivesAReportOrATraceError) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(PEAKMEM_TEST_DATA_DIR) / ".." / ".." / "fuzz" / "regressions";
  ASSERT_TRUE(fs::is_directory(dir)) << "no " << dir << " (the fuzz regressions belong to the repository)";
  int files = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    const std::string name = entry.path().filename().string();
    if (name == "README.md") continue;
    ++files;
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream buffer;
    buffer << in.rdbuf();
    const std::string text = buffer.str();
    const bool json = name.rfind("json-", 0) == 0;
    const std::string outcome = RunIsolated(
        [&] {
          std::string result;
          for (const char* model : {"thunder", "runtime"}) {
            try {
              ParsedTrace parsed =
                  json ? ReadTraceJson(std::make_shared<const SourceFile>(name, text))
                       : ParseTrace(name, text);
              const Report report = Analyze(parsed, model);
              ReportToJson(report);
              ReportToText(report);
              result += std::string(model) + ": report\n";
            } catch (const TraceError&) {
              result += std::string(model) + ": TraceError\n";
            } catch (const std::exception& e) {
              result += std::string(model) + ": UNEXPECTED " + typeid(e).name() + ": " +
                        e.what() + "\n";
            }
          }
          return result;
        },
        30);
    const bool ok = (outcome.find("thunder: report\n") == 0 ||
                     outcome.find("thunder: TraceError\n") == 0) &&
                    (outcome.find("runtime: report\n") != std::string::npos ||
                     outcome.find("runtime: TraceError\n") != std::string::npos) &&
                    outcome.find("UNEXPECTED") == std::string::npos;
    EXPECT_TRUE(ok) << "fuzz/regressions/" << name << ":\n" << Shown(outcome);
  }
  EXPECT_GT(files, 0) << "fuzz/regressions/ holds no inputs";
}

}  // namespace
}  // namespace peakmem
