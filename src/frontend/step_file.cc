#include "peakmem/frontend/step_file.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "json_fields.h"
#include "peakmem/frontend/frontend.h"

namespace peakmem {
namespace {

using json_fields::Fields;
using json_fields::Json;

// The step file's keys beside its spec's (StepSpecFromJson's `also`).
const std::vector<std::string_view> kTraceKeys = {
    "peakmem_step",          "forward.trace",        "backward.trace",
    "optimizer.description", "optimizer.first_step", "optimizer.later_step"};

ParsedTrace TraceField(const Fields& f, const std::string& key, const TextReadOptions& options = {}) {
  return ParseTrace(f.file() + "#" + f.Sub(key), f.String(key), options);
}

}  // namespace

StepFile ParseStepFile(const std::string& name, const std::string& text) {
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::parse_error& e) {
    throw StepFileError(name + ": not JSON: " + e.what());
  }
  const Fields top(name, root, "");
  if (!root.contains("peakmem_step")) top.Fail("", "is not a peakmem step file (no 'peakmem_step' field)");
  if (top.Int("peakmem_step", 0) != kStepFileVersion) {
    top.Fail("peakmem_step", "is version " + root["peakmem_step"].dump() + "; this peakmem reads version " +
                                 std::to_string(kStepFileVersion));
  }
  RankedStepSpec ranked = StepSpecFromJson(root, name, kTraceKeys);
  // A distributed step's rank: its DTensor values are read as that rank's shards.
  TextReadOptions read;
  read.rank = ranked.rank;
  read.world_size = ranked.world_size;
  StepFile out{TraceField(top.Object("forward"), "trace", read), TraceField(top.Object("backward"), "trace", read),
               std::nullopt, std::nullopt, std::move(ranked.spec), ""};
  if (top.Has("optimizer")) {
    const Fields opt = top.Object("optimizer");
    out.optimizer = opt.String("description");
    out.optimizer_first = TraceField(opt, "first_step");
    out.optimizer_later = TraceField(opt, "later_step");
  }
  return out;
}

StepFile LoadStepFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw StepFileError(path + ": cannot read the file");
  std::ostringstream text;
  text << in.rdbuf();
  return ParseStepFile(path, text.str());
}

nlohmann::ordered_json StepFileToJson(const StepFileText& file) {
  const bool optimizer = !file.spec.spec.optimizer_name.empty();
  if (optimizer != (file.optimizer_first.has_value() && file.optimizer_later.has_value())) {
    throw std::invalid_argument(optimizer ? "the step's optimizer " + file.spec.spec.optimizer_name +
                                                " needs its first and later step() programs"
                                          : "the step has optimizer programs but no optimizer name");
  }
  const Json spec = StepSpecToJson(file.spec);
  Json out = {{"peakmem_step", kStepFileVersion}};
  for (const auto& [key, value] : spec.items()) {
    // Each object starts with what the step file adds to the spec's.
    if (key == "forward" || key == "backward") {
      out[key] = {{"trace", key == "forward" ? file.forward : file.backward}};
      out[key].update(value);
    } else if (key == "optimizer" && optimizer) {
      out[key] = {{"name", value["name"]},
                  {"description", file.optimizer},
                  {"first_step", *file.optimizer_first},
                  {"later_step", *file.optimizer_later}};
      out[key].update(value);
    } else {
      out[key] = value;
    }
  }
  return out;
}

}  // namespace peakmem
