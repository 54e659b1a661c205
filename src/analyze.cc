#include "peakmem/analyze.h"

#include <stdexcept>

#include "peakmem/thunder_model.h"

namespace peakmem {

const std::vector<std::string>& AvailableModels() {
  static const std::vector<std::string> models = {"thunder"};
  return models;
}

ParsedTrace ParseTrace(const std::string& name, std::string text) {
  return ReadTraceText(name, std::move(text));
}

ParsedTrace LoadTrace(const std::string& path) { return ReadTraceText(LoadSourceFile(path)); }

Report Analyze(const ParsedTrace& trace, const std::string& model) {
  if (model == "thunder") return RunThunderModel(trace);
  if (model == "runtime") {
    throw std::invalid_argument(
        "model 'runtime' does not exist yet (it is planned: issue 4); available models: thunder");
  }
  throw std::invalid_argument("unknown model '" + model + "'; available models: thunder");
}

}  // namespace peakmem
