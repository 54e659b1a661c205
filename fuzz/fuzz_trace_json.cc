// libFuzzer target: the bytes are always read by the JSON reader
// (peakmem::ReadTraceJson), whatever their first byte, then go through both
// models and both renderings. The seed corpus is peakmem's JSON trace form
// (docs/trace-json.md).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "fuzz_common.h"
#include "peakmem/frontend/trace_json_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto source = std::make_shared<const peakmem::SourceFile>(
      "fuzz.json", std::string(reinterpret_cast<const char*>(data), size));
  peakmem::ParsedTrace parsed;
  try {
    parsed = peakmem::ReadTraceJson(source);
  } catch (const peakmem::TraceError& e) {
    peakmem_fuzz::CheckError(e, *source);
    return 0;
  } catch (const std::invalid_argument&) {
    return 0;
  }
  peakmem_fuzz::RunPipeline(parsed);
  return 0;
}
