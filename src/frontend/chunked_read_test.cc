// Reading a printed trace in chunks on parallel threads must give exactly
// what one pass gives: the same IR (every statement, value, type, subsymbol
// and location), the same reports, and for bad input the same error.
//
// The truth here is the one-pass reader, which the rest of the suite checks
// against measured and hand-derived numbers; these tests compare the chunked
// reader with it, on the real corpus traces and on small traces built to put
// a chunk boundary between a name's definition and its uses, `del`s, type
// comments and type inference, at every line. They also check that the
// chunks are really joined on real traces (the fast path is taken), and
// not joined where the one-pass meaning cannot be known inside a chunk.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "peakmem/analyze.h"
#include "peakmem/report/report.h"
#include "peakmem/ir/source.h"
#include "peakmem/ir/trace.h"
#include "peakmem/frontend/trace_text_reader.h"
#include "test_util.h"

namespace peakmem {
namespace {

// The IR and both models' reports, or the error.
std::string Outcome(const std::function<ParsedTrace()>& read, int* joined = nullptr) {
  try {
    const ParsedTrace parsed = read();
    if (joined != nullptr) *joined = parsed.chunks_joined;
    // The joined chunks' statements are segments of one sequence (at most
    // one per chunk): iterating it and indexing it must meet the same
    // statements, in order.
    const SegmentedVector<Statement>& statements = parsed.trace.statements;
    EXPECT_LE(statements.segment_count(),
              static_cast<std::size_t>(std::max(1, parsed.chunks_joined)));
    std::size_t index = 0;
    for (const Statement& s : statements) EXPECT_EQ(&s, &statements[index++]);
    EXPECT_EQ(index, statements.size());
    std::string result = DebugString(parsed.trace);
    for (const char* model : {"thunder", "runtime"}) {
      try {
        result += ReportToJson(Analyze(parsed, model), 0);
      } catch (const TraceError& e) {
        result += std::string(model) + " error: " + e.what();
      }
      result += "\n";
    }
    return result;
  } catch (const TraceError& e) {
    return std::string("read error: ") + e.what();
  }
}

std::shared_ptr<const SourceFile> Source(std::string text) {
  return std::make_shared<const SourceFile>("t.trace", std::move(text));
}

std::string OnePass(const std::shared_ptr<const SourceFile>& source) {
  TextReadOptions one;
  one.threads = 1;
  return Outcome([&] { return ReadTraceText(source, one); });
}

// Byte offsets of the starts of lines 2.. of `text`.
std::vector<std::size_t> LineStarts(std::string_view text) {
  std::vector<std::size_t> starts;
  for (std::size_t i = 0; i + 1 < text.size(); ++i) {
    if (text[i] == '\n') starts.push_back(i + 1);
  }
  return starts;
}

// Reads `text` split in two at every line, and in three at every pair of
// lines; each must equal one pass. Returns how many splits were joined.
int ExpectSameAtEverySplit(const std::string& text) {
  const auto source = Source(text);
  const std::string expected = OnePass(source);
  const std::vector<std::size_t> starts = LineStarts(text);
  int joined_splits = 0;
  for (std::size_t i = 0; i < starts.size(); ++i) {
    int joined = 0;
    EXPECT_EQ(Outcome([&] { return ReadTraceTextInChunks(source, {starts[i]}); }, &joined),
              expected)
        << "split at line " << i + 2 << " of\n"
        << text;
    joined_splits += joined > 1;
    for (std::size_t j = i + 1; j < starts.size(); ++j) {
      EXPECT_EQ(Outcome([&] {
                  return ReadTraceTextInChunks(source, {starts[i], starts[j]});
                }),
                expected)
          << "split at lines " << i + 2 << " and " << j + 2 << " of\n"
          << text;
    }
  }
  return joined_splits;
}

// Reads `text` split before its line `line` (1-based), expects one pass's
// outcome, and returns how many chunks were joined.
int JoinedSplitAtLine(const std::string& text, int line) {
  const auto source = Source(text);
  int joined = 0;
  const std::size_t at = LineStarts(text)[static_cast<std::size_t>(line) - 2];
  EXPECT_EQ(Outcome([&] { return ReadTraceTextInChunks(source, {at}); }, &joined), OnePass(source))
      << "split before line " << line << " of\n"
      << text;
  return joined;
}

// ---------------------------------------------------------------- real traces

std::vector<std::filesystem::path> CorpusTraces() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(PEAKMEM_TEST_DATA_DIR)) {
    if (entry.is_regular_file() && entry.path().extension() == ".trace") {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ChunkedRead, CorpusTracesReadTheSameInAnyNumberOfChunks) {
  const auto files = CorpusTraces();
  ASSERT_GE(files.size(), 20u);
  for (const auto& path : files) {
    const auto source = Source(ReadFile(path));
    const std::string expected = OnePass(source);
    for (int threads : {2, 3, 4, 7, 16}) {
      TextReadOptions options;
      options.threads = threads;
      options.min_chunk_bytes = 1;
      int joined = 0;
      EXPECT_EQ(Outcome([&] { return ReadTraceText(source, options); }, &joined), expected)
          << path << " in " << threads << " chunks";
      // Real Thunder traces split at statement lines: the chunks join (a
      // trace with fewer statements than chunks gets fewer chunks).
      if (expected.rfind("read error", 0) != 0 && threads == 2) {
        EXPECT_EQ(joined, 2) << path;
      }
    }
  }
}

TEST(ChunkedRead, CorpusTracesReadTheSameSplitAtEveryStatement) {
  // Every split of the forward and backward llama block, one at a time.
  for (const char* name : {"corpus/llama_block/fw.trace", "corpus/llama_block/bw.trace",
                           "nvfusion_broadcast_fw.trace"}) {
    const std::string text = ReadFile(std::filesystem::path(PEAKMEM_TEST_DATA_DIR) / name);
    const auto source = Source(text);
    const std::string expected = OnePass(source);
    int joined_splits = 0;
    const std::vector<std::size_t> starts = LineStarts(text);
    // About 150 splits per trace, spread over it.
    const std::size_t stride = std::max<std::size_t>(1, starts.size() / 150);
    for (std::size_t i = 0; i < starts.size(); i += stride) {
      const std::size_t start = starts[i];
      int joined = 0;
      EXPECT_EQ(Outcome([&] { return ReadTraceTextInChunks(source, {start}); }, &joined), expected)
          << name << " split at byte " << start;
      joined_splits += joined > 1;
    }
    // Most lines start a statement (the others are subsymbol and type
    // comment lines, where the chunks must not join).
    EXPECT_GT(joined_splits, 0) << name;
  }
}

TEST(ChunkedRead, BigTracesJoinOnTwoThreads) {
  // A 40,000-statement chain (big enough that appending a chunk checks and
  // renumbers it on two threads).
  const std::string text = testing_util::ChainTrace(20000);
  const auto source = Source(text);
  const std::string expected = OnePass(source);
  ASSERT_EQ(expected.rfind("read error", 0), std::string::npos) << expected.substr(0, 300);
  for (int threads : {2, 3, 5}) {
    TextReadOptions options;
    options.threads = threads;
    options.min_chunk_bytes = 1;
    int joined = 0;
    EXPECT_EQ(Outcome([&] { return ReadTraceText(source, options); }, &joined), expected)
        << threads << " chunks";
    EXPECT_EQ(joined, threads);
  }
}

// ---------------------------------------------------------------- boundaries

// A boundary between a name's definition and its uses, `del`, a later
// definition and type comments.
TEST(ChunkedRead, NamesBoundBeforeAChunk) {
  const std::string text =
      "def f(a, b):\n"
      "  # a: \"cpu f32[4]\"\n"
      "  # b: \"cpu f32[4]\"\n"
      "  t0 = torch.add(a, b)  # t0: \"cpu f32[4]\"\n"
      "  t1 = torch.mul(t0, 2.0)  # t1: \"cpu f32[4]\"\n"
      "  del t0\n"
      "  t0 = torch.neg(t1)  # t0: \"cpu f32[4]\"\n"
      "  (t2,) = update_aliases((t1,))\n"
      "  t3 = torch.sub(t2, a)\n"
      "  # t3: \"cpu f32[2, 2]\"\n"
      "  del t1\n"
      "  t4 = torch.reshape(t0, (2, 2))  # t4: \"cpu f32[2, 2]\"\n"
      "  del t0, t2\n"
      "  return (t3, t4)\n";
  EXPECT_GT(ExpectSameAtEverySplit(text), 8);
}

TEST(ChunkedRead, TypesInferredFromValuesBoundBeforeAChunk) {
  // t1 takes a's type through update_aliases (no type printed), and t2 takes
  // t1's through a second one: a chunk starting after `a`'s type comment
  // must put both off until it is joined.
  const std::string text =
      "def f(a):\n"
      "  # a: \"cpu f32[8]\"\n"
      "  t0 = torch.neg(a)  # t0: \"cpu f32[8]\"\n"
      "  (t1,) = update_aliases((a,))\n"
      "  (t2,) = update_aliases((t1,))\n"
      "  t3 = torch.add(t2, t0)  # t3: \"cpu f32[8]\"\n"
      "  return t3\n";
  EXPECT_GT(ExpectSameAtEverySplit(text), 3);
  const auto parsed = ReadTraceTextInChunks(Source(text), {LineStarts(text)[3]});
  EXPECT_EQ(parsed.chunks_joined, 2);
  // Joined as two segments: the second chunk's statements were not moved.
  EXPECT_EQ(parsed.trace.statements.segment_count(), 2u);
  EXPECT_EQ(parsed.trace.statements.segment(0).size(), 2u);
  EXPECT_EQ(parsed.trace.statements[1].outputs.items[0].kind, Pattern::Kind::kValue);
  const ValueId t2 = parsed.trace.statements[2].outputs.items[0].value;
  EXPECT_EQ(parsed.trace.value(t2).type->text, "cpu f32[8]");
}

TEST(ChunkedRead, SubsymbolsAndMultiLineStatements) {
  const std::string text =
      "import torch\n"
      "@torch.no_grad()\n"
      "def f(x):\n"
      "  # x: \"cpu f32[2, 3]\"\n"
      "  [t0] = nvFusion0(x)\n"
      "    # t0 = prims.mul(x, 2.0)  # t0: \"cpu f32[2, 3]\"\n"
      "      # t5 = prims.mul(x, 2.0)  # t5: \"cpu f32[2, 3]\"\n"
      "\n"
      "    # t1 = prims.add(t0, 1.0)\n"
      "  C0, \\\n"
      "  C1, \\\n"
      "  = torch.split(t0, [1, 1])\n"
      "  t2 = torch.cat((C0,\n"
      "  C1), 0)  # t2: \"cpu f32[2, 3]\"\n"
      "  del t0\n"
      "# a comment in column 1\n"
      "    # a deeper comment\n"
      "  return t2\n"
      "# after the body\n";
  ExpectSameAtEverySplit(text);
}

TEST(ChunkedRead, FusionSubSymbolCallsInALaterChunk) {
  // Two fusion regions: the second's parsed subsymbol lines, read by a later
  // chunk, are renumbered with the lines before it (DebugString lists each
  // statement's calls), at every split.
  const std::string text = R"(def f(x):
  # x: "cpu f32[2, 3]"
  [t0] = nvFusion0(x)
    # t0 = prims.mul(x, 2.0)  # t0: "cpu f32[2, 3]"
  t1 = torch.neg(t0)  # t1: "cpu f32[2, 3]"
    # t1 = ltorch.neg(t0)  # t1: "cpu f32[2, 3]"
  [t2, t3] = nvFusion1(t1, x)
    # t4 = prims.broadcast_in_dim(x, [2, 3], [0, 1])  # t4: "cpu f32[2, 3]"
    # t2 = prims.add(t1, t4)  # t2: "cpu f32[2, 3]"
    # t3 = prims.exp(t2)  # t3: "cpu f32[2, 3]"
  return (t2, t3)
)";
  EXPECT_GT(ExpectSameAtEverySplit(text), 1);
  const auto parsed = ReadTraceTextInChunks(Source(text), {LineStarts(text)[5]});
  EXPECT_EQ(parsed.chunks_joined, 2);
  const auto calls = parsed.trace.SubSymbolCallsOf(parsed.trace.statements[2]);
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0].out, "t4");
  EXPECT_EQ(calls[2].callee, "prims.exp");
  EXPECT_EQ(parsed.trace.subsymbols[calls[2].subsymbol].text,
            "t3 = prims.exp(t2)  # t3: \"cpu f32[2, 3]\"");
}

// Where a chunk cannot know what one pass would do, it is not joined: the
// first reader reads on, and the result (or the error) is still one pass's.
TEST(ChunkedRead, BadInputGivesTheSameErrorAtEverySplit) {
  const std::vector<std::string> cases = {
      // used after del, the del in an earlier chunk
      "def f(a):\n  t0 = torch.neg(a)\n  del t0\n  t1 = torch.neg(a)\n  t2 = torch.neg(t0)\n"
      "  return t2\n",
      // deleted twice; del of an unknown name
      "def f(a):\n  t0 = torch.neg(a)\n  del t0\n  t1 = torch.neg(a)\n  del t0\n  return t1\n",
      "def f(a):\n  t0 = torch.neg(a)\n  t1 = torch.neg(a)\n  del zz\n  return t1\n",
      // a live name bound again (also after a use in the later chunk: a
      // crash the differential fuzzer found)
      "def f(a):\n  t0 = torch.neg(a)\n  t1 = torch.neg(a)\n  t0 = torch.neg(a)\n  return t0\n",
      "def f(a):\n  t0 = torch.neg(a)\n  t1 = torch.neg(t0)\n  t0 = torch.neg(a)\n  return t0\n",
      // a statement after return; text after the body; no return
      "def f(a):\n  t0 = torch.neg(a)\n  return t0\n  t1 = torch.neg(a)\n",
      "def f(a):\n  t0 = torch.neg(a)\n  return t0\nx = 1\n",
      "def f(a):\n  t0 = torch.neg(a)\n  t1 = torch.neg(t0)\n",
      // ... where the last chunks hold only comments (the error names the
      // last statement: found by the differential fuzzer)
      "def f(a):\n  t0 = torch.neg(a)\n  # t0: \"cpu f32[4]\"\n  # a comment\n  # another\n",
      // a bad type string in a type comment for a value of an earlier chunk,
      // and in a subsymbol
      "def f(a):\n  t0 = torch.neg(a)\n  t1 = torch.neg(a)\n  # t0: \"cpu f32[4\"\n  return t1\n",
      "def f(a):\n  t0 = torch.neg(a)\n  t1 = torch.neg(t0)\n    # t1 = prims.neg(t0)  # t1: \"cpu "
      "q[4]\"\n"
      "  return t1\n",
      // a value called as a function; an undefined name read as a constant
      "def f(a):\n  t0 = torch.neg(a)\n  t1 = torch.neg(a)\n  t2 = t0(a)\n  return t2\n",
      "def f(a):\n  t0 = torch.neg(a)\n  t1 = torch.add(t0, undefined_name)\n  return t1\n",
      "def f(a):\n  t0 = torch.neg(a)\n  t1 = g(a)\n  g = torch.neg(a)\n  t2 = g(a)\n  return t2\n",
      // unbalanced brackets, an empty sequence of an unknown name
      "def f(a):\n  t0 = torch.neg(a)\n  t1 = torch.neg((a)\n  return t1\n",
      "def f(a):\n  t0 = torch.neg(a)\n  # C9 (empty sequence)\n  return t0\n",
  };
  for (const std::string& text : cases) ExpectSameAtEverySplit(text);
}

TEST(ChunkedRead, AssumptionsThatFailAreNotJoined) {
  // The second chunk calls `g` and takes it for a global function; the first
  // binds it to a value, so one pass reads `g(a)` as a call of that value:
  // the chunk is not joined, and is read again in one pass.
  const std::string text =
      "def f(a):\n  g = torch.neg(a)\n  t1 = torch.add(g(a), a)\n  return t1\n";
  EXPECT_EQ(JoinedSplitAtLine(text, 3), 1);
}

TEST(ChunkedRead, NamesNeverBoundAreConstantsAsInOnePass) {
  // `zz` is never bound: one pass reads it as a constant (Thunder prints
  // globals such as `_torch_memory_format_1` this way). The second chunk
  // takes it for a value bound before it; when joined it becomes the same
  // constant.
  const std::string text =
      "def f(a):\n  t0 = torch.neg(a)\n  t1 = torch.add(t0, zz)\n  # zz: \"cpu f32[4]\"\n"
      "  return t1, zz\n";
  EXPECT_EQ(JoinedSplitAtLine(text, 3), 2);
  // An op that returns its input takes the input's type: with the constant
  // counted out, as one pass does (update_aliases returns all its inputs).
  const std::string aliases =
      "def f(a):\n  # a: \"cpu f32[4]\"\n  t0 = torch.neg(a)  # t0: \"cpu f32[4]\"\n"
      "  (t1,) = update_aliases((t0, zz))\n  return t1\n";
  EXPECT_EQ(JoinedSplitAtLine(aliases, 4), 2);
  // A name used as a value and then called: one pass calls the global `zz`
  // (no value is bound to it); the chunk cannot, and is not joined.
  const std::string called =
      "def f(a):\n  t0 = torch.neg(a)\n  t1 = torch.add(t0, zz)\n"
      "  t2 = torch.add(zz(a), t1)\n  return t2\n";
  EXPECT_EQ(JoinedSplitAtLine(called, 3), 1);
  // Where the chunk needs a value (an assignment's source, a del), it is not
  // joined: one pass gives the error.
  for (const std::string& needs_value :
       {std::string("def f(a):\n  t0 = torch.neg(a)\n  t1 = zz\n  return t1\n"),
        std::string("def f(a):\n  t0 = torch.neg(a)\n  t1 = torch.add(t0, zz)\n  del zz\n"
                    "  return t1\n")}) {
    const std::string one_pass = OnePass(Source(needs_value));
    EXPECT_EQ(one_pass.rfind("read error", 0), 0u) << one_pass;
    JoinedSplitAtLine(needs_value, 3);
  }
  ExpectSameAtEverySplit(text);
}

}  // namespace
}  // namespace peakmem
