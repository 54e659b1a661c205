// libFuzzer target, differential: the bytes are a printed trace, read once in
// one pass and again in chunks (the parallel reader, split at two lines the
// input itself picks). Both readings must agree exactly: the same error, or
// the same IR (peakmem::DebugString) and the same reports from both models.
// Read a third time in the same chunks keeping only fusion regions'
// subsymbols (TextReadOptions::fusion_subsymbols_only, the CLI's reading),
// the error or the reports must still be the same. A difference is a
// finding (abort), as is any crash under ASan/UBSan.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "peakmem/analyze.h"
#include "peakmem/report/report.h"
#include "peakmem/frontend/trace_text_reader.h"

namespace {

std::string Outcome(const std::function<peakmem::ParsedTrace()>& read, bool with_ir = true) {
  try {
    const peakmem::ParsedTrace parsed = read();
    std::string out = with_ir ? peakmem::DebugString(parsed.trace) : std::string();
    for (const char* model : {"thunder", "runtime"}) {
      try {
        out += peakmem::ReportToJson(peakmem::Analyze(parsed, model), 0);
      } catch (const peakmem::TraceError& e) {
        out += e.what();
      }
    }
    return out;
  } catch (const peakmem::TraceError& e) {
    return std::string("error: ") + e.what();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto source = std::make_shared<const peakmem::SourceFile>(
      "fuzz.trace", std::string(reinterpret_cast<const char*>(data), size));
  const std::string_view text = source->text();
  std::vector<std::size_t> line_starts;
  for (std::size_t i = 0; i + 1 < text.size(); ++i) {
    if (text[i] == '\n') line_starts.push_back(i + 1);
  }
  if (line_starts.size() < 2) return 0;
  // Two split lines, picked by the first bytes (so the fuzzer explores them).
  const std::size_t a = (size > 0 ? data[0] : 0) % line_starts.size();
  const std::size_t b = (size > 1 ? data[1] : 1) % line_starts.size();
  std::vector<std::size_t> begins{line_starts[std::min(a, b)], line_starts[std::max(a, b)]};
  peakmem::TextReadOptions one_pass;
  one_pass.threads = 1;
  const std::string expected = Outcome([&] { return peakmem::ReadTraceText(source, one_pass); });
  const std::string chunked = Outcome([&] { return peakmem::ReadTraceTextInChunks(source, begins); });
  if (chunked != expected) {
    peakmem_fuzz::Finding("chunked reading differs from one pass (splits at bytes " +
                          std::to_string(begins[0]) + ", " + std::to_string(begins[1]) +
                          ")\n--- one pass:\n" + expected + "\n--- chunks:\n" + chunked);
  }
  peakmem::TextReadOptions lean;
  lean.fusion_subsymbols_only = true;
  const std::string reports = Outcome([&] { return peakmem::ReadTraceText(source, one_pass); }, false);
  const std::string lean_reports =
      Outcome([&] { return peakmem::ReadTraceTextInChunks(source, begins, lean); }, false);
  if (lean_reports != reports) {
    peakmem_fuzz::Finding("reading only fusion subsymbols changes the outcome (splits at bytes " +
                          std::to_string(begins[0]) + ", " + std::to_string(begins[1]) +
                          ")\n--- all subsymbols:\n" + reports + "\n--- fusion only:\n" +
                          lean_reports);
  }
  return 0;
}
