// The JSON writer (peakmem/frontend/trace_json_writer.h). The expected texts
// are written by hand in the form docs/trace-json.md describes, spaced as
// Python's json.dumps spaces it; reading one and writing it again must give
// it back byte for byte.
#include "peakmem/frontend/trace_json_writer.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "peakmem/analyze.h"
#include "peakmem/frontend/trace_json_reader.h"
#include "peakmem/semantics/fusion.h"

namespace peakmem {
namespace {

std::string RoundTrip(const std::string& json) {
  const ParsedTrace parsed = ParseTrace("<test>", json);
  return TraceToJson(parsed.trace);
}

TEST(TraceJsonWriter, WritesBackEveryStatementKind) {
  const std::string json =
      R"({"format": "peakmem.trace", "version": 1, "function": "backward_fn", "params": [{"kind": "positional", "value": {"name": "saved", "type": "Collection", "container": "list"}}, {"kind": "positional", "value": {"name": "x", "type": "cpu f32[4]"}}, {"kind": "positional", "value": {"name": "n"}, "default": {"const": "2"}}], "statements": [
{"kind": "unpack", "source": "saved", "outputs": [{"name": "a", "type": "cpu f32[2, 3]"}, {"list": [{"name": "b", "type": "cuda:0 bf16[8]"}]}]},
{"kind": "clear", "source": "saved"},
{"kind": "call", "callee": "torch.mul", "symbol": "mul", "id": "mul", "args": [{"ref": "x"}, {"const": "2.0"}], "kwargs": [["alpha", {"const": "'s\u00e9'"}]], "outputs": {"name": "t0", "type": "cpu f32[4]"}},
{"kind": "call", "callee": "f", "symbol": "f", "id": null, "args": [{"tuple": [{"ref": "a"}, {"const": "None"}]}, {"list": []}, {"dict": [[{"const": "'k'"}, {"ref": "b"}]]}, {"set": [{"const": "1"}]}], "outputs": "_"},
{"kind": "call", "callee": "g", "symbol": "g", "id": "g", "args": [], "outputs": []},
{"kind": "assign", "source": "t0", "outputs": {"name": "t1", "type": "cpu f32[4]"}},
{"kind": "del", "names": ["a", "x"]},
{"kind": "return", "value": {"tuple": [{"ref": "t1"}, {"ref": "b"}]}}
]}
)";
  EXPECT_EQ(RoundTrip(json), json);
}

TEST(TraceJsonWriter, EscapesAsJsonDumps) {
  // json.dumps('a"b\\c\n\x01\x7fé😀') == '"a\\"b\\\\c\\n\\u0001\\u007f\\u00e9\\ud83d\\ude00"'
  const std::string json =
      R"({"format": "peakmem.trace", "version": 1, "function": "f", "params": [], "statements": [
{"kind": "call", "callee": "g", "symbol": "g", "id": "g", "args": [{"const": "a\"b\\c\n\u0001\u007f\u00e9\ud83d\ude00"}], "outputs": []},
{"kind": "return", "value": {"const": "None"}}
]}
)";
  EXPECT_EQ(RoundTrip(json), json);
}

TEST(TraceJsonWriter, PrintedTraceReadsBackWithTheSameAnalysis) {
  // A printed trace, written as JSON and read back: each model gives the
  // report it gives on the text. Thunder's count (f32[4] is 16 bytes):
  // argument x 16, t0 +16 = 32, t1 +16 = 48 (the peak), del t0 -16 = 32.
  const std::string text =
      "def f(x):\n"
      "  # x: \"cpu f32[4]\"\n"
      "  t0 = torch.mul(x, 2.0)  # t0: \"cpu f32[4]\"\n"
      "  t1 = torch.add(t0, x)  # t1: \"cpu f32[4]\"\n"
      "  del t0\n"
      "  return t1\n";
  const ParsedTrace from_text = ParseTrace("<text>", text);
  const std::string json = TraceToJson(from_text.trace);
  const ParsedTrace from_json = ParseTrace("<json>", json);
  EXPECT_EQ(TraceToJson(from_json.trace), json);
  for (const char* model : {"runtime", "thunder"}) {
    const Report a = Analyze(from_text, model);
    const Report b = Analyze(from_json, model);
    EXPECT_EQ(a.peak_bytes, b.peak_bytes) << model;
    EXPECT_EQ(a.final_bytes, b.final_bytes) << model;
    EXPECT_EQ(a.breakdown.items(), b.breakdown.items()) << model;
  }
  EXPECT_EQ(Analyze(from_json, "thunder").peak_bytes, 48);
  EXPECT_EQ(Analyze(from_json, "thunder").final_bytes, 32);
}

TEST(TraceJsonWriter, FusionRegionReadsBackWithTheSameSubSymbolCalls) {
  // The bundled nvFuser trace (tests/data/nvfusion_broadcast_fw.md): the
  // JSON reader parses the region's subsymbol texts as the text reader
  // parses its lines, so t15 [2, 3, 4], broadcast from [1, 1, 4] in dims 0
  // and 1, is 4 floats (16 bytes, not the dense 96) read either way.
  const ParsedTrace from_text = LoadTrace(PEAKMEM_TEST_DATA_DIR "/nvfusion_broadcast_fw.trace");
  const ParsedTrace from_json = ParseTrace("<json>", TraceToJson(from_text.trace));
  const Statement& text_fusion = from_text.trace.statements[0];
  const Statement& json_fusion = from_json.trace.statements[0];
  const auto text_calls = from_text.trace.SubSymbolCallsOf(text_fusion);
  const auto json_calls = from_json.trace.SubSymbolCallsOf(json_fusion);
  ASSERT_EQ(text_calls.size(), 9u);  // every line of the region is a call
  ASSERT_EQ(json_calls.size(), text_calls.size());
  for (std::size_t i = 0; i < text_calls.size(); ++i) {
    EXPECT_EQ(json_calls[i].subsymbol - json_fusion.subsymbols.begin,
              text_calls[i].subsymbol - text_fusion.subsymbols.begin);
    EXPECT_EQ(json_calls[i].out, text_calls[i].out);
    EXPECT_EQ(json_calls[i].callee, text_calls[i].callee);
    EXPECT_EQ(json_calls[i].args.size(), text_calls[i].args.size());
    ASSERT_NE(json_calls[i].out_type, nullptr);
    EXPECT_EQ(json_calls[i].out_type->text, text_calls[i].out_type->text);
  }
  ValueId t15 = kNoValue;
  for (ValueId id = 0; id < from_json.trace.values.size(); ++id) {
    if (from_json.trace.value(id).name == "t15") t15 = id;
  }
  ASSERT_NE(t15, kNoValue);
  EXPECT_EQ(FusionOutputBytes(from_json.trace, json_fusion, t15), 16);
  for (const char* model : {"runtime", "thunder"}) {
    EXPECT_EQ(Analyze(from_text, model).peak_bytes, Analyze(from_json, model).peak_bytes) << model;
  }
}

}  // namespace
}  // namespace peakmem
