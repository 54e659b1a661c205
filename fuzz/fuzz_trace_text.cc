// libFuzzer target: the bytes are a trace file. They go through
// peakmem::ParseTrace (the CLI's path: JSON when the first non-blank byte is
// '{', else the printed-text reader), then both models and both renderings.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_common.h"
#include "peakmem/frontend/trace_json_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  peakmem::ParsedTrace parsed;
  try {
    parsed = peakmem::ParseTrace("fuzz.trace", text);
  } catch (const peakmem::TraceError& e) {
    peakmem_fuzz::CheckError(e, peakmem::SourceFile("fuzz.trace", text));
    return 0;
  } catch (const std::invalid_argument&) {
    return 0;
  }
  peakmem_fuzz::RunPipeline(parsed);
  return 0;
}
