#include "peakmem/frontend/recorded_step_file.h"

#include <algorithm>
#include <limits>
#include <string_view>
#include <nlohmann/json.hpp>

#include "peakmem/frontend/step_file.h"

namespace peakmem {
namespace {

using Json = nlohmann::json;

// Reads a recorded step's JSON, naming the file and the entry in every error.
class RecordedReader {
 public:
  RecordedReader(const std::string& file, const Json& root) : file_(file), root_(root) {}

  RecordedStep Read() const {
    const Json& version = Get(root_, "peakmem_recorded_step", "");
    if (!version.is_number_integer() || version.get<std::int64_t>() != kRecordedStepFileVersion) {
      Fail("peakmem_recorded_step", "must be " + std::to_string(kRecordedStepFileVersion));
    }
    constexpr std::string_view kKeys[] = {"peakmem_recorded_step", "optimizer", "storages",    "held",
                                           "statements",            "phases",    "diagnostics", "device"};
    for (const auto& [key, value] : root_.items()) {
      if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys)) {
        throw StepFileError(file_ + ": unknown key '" + key + "'");
      }
    }
    RecordedStep step;
    if (root_.contains("optimizer") && !root_["optimizer"].is_null()) step.optimizer = String(root_["optimizer"], "optimizer");
    if (root_.contains("device") && !root_["device"].is_null()) step.device = String(root_["device"], "device");
    const Json& storages = Array(root_, "storages");
    for (std::size_t i = 0; i < storages.size(); ++i) step.storages.push_back(Storage(storages[i], i));
    for (const Json& h : Array(root_, "held")) step.held.push_back(Integer(h, "held", 0));
    const Json& statements = Array(root_, "statements");
    for (std::size_t i = 0; i < statements.size(); ++i) {
      const std::string where = "statements[" + std::to_string(i) + "]";
      const Json& s = Tuple(statements[i], where, 3);
      RecordedStatement statement{String(s[0], where), String(s[1], where), {}};
      if (!s[2].is_array()) Fail(where, "must end with a list of events");
      for (const Json& e : s[2]) statement.events.push_back(Integer(e, where, std::numeric_limits<std::int64_t>::min()));
      step.statements.push_back(std::move(statement));
    }
    const Json& phases = Array(root_, "phases");
    for (std::size_t i = 0; i < phases.size(); ++i) {
      const std::string where = "phases[" + std::to_string(i) + "]";
      const Json& p = Tuple(phases[i], where, 4);
      step.phases.push_back({String(p[0], where), static_cast<int>(Integer(p[1], where, 1)),
                             static_cast<std::int32_t>(Integer(p[2], where, 0)),
                             static_cast<std::int32_t>(Integer(p[3], where, 0))});
    }
    if (root_.contains("diagnostics")) {
      for (const Json& d : Array(root_, "diagnostics")) step.diagnostics.push_back(String(d, "diagnostics"));
    }
    return step;
  }

 private:
  [[noreturn]] void Fail(const std::string& where, const std::string& why) const {
    throw StepFileError(file_ + ": '" + where + "' " + why);
  }
  const Json& Get(const Json& object, const std::string& key, const std::string& where) const {
    auto it = object.find(key);
    if (it == object.end()) Fail(where.empty() ? key : where + "." + key, "is missing");
    return *it;
  }
  const Json& Array(const Json& object, const std::string& key) const {
    const Json& v = Get(object, key, "");
    if (!v.is_array()) Fail(key, "must be a list");
    return v;
  }
  const Json& Tuple(const Json& v, const std::string& where, std::size_t size) const {
    if (!v.is_array() || v.size() != size) Fail(where, "must be a list of " + std::to_string(size) + " entries");
    return v;
  }
  std::string String(const Json& v, const std::string& where) const {
    if (!v.is_string()) Fail(where, "must hold a string there");
    return v.get<std::string>();
  }
  std::int64_t Integer(const Json& v, const std::string& where, std::int64_t low) const {
    if (!v.is_number_integer() || v.get<std::int64_t>() < low) {
      Fail(where, "must hold an integer >= " + std::to_string(low) + " there");
    }
    return v.get<std::int64_t>();
  }
  RecordedStorage Storage(const Json& v, std::size_t i) const {
    const std::string where = "storages[" + std::to_string(i) + "]";
    const Json& s = Tuple(v, where, 6);
    if (!s[5].is_boolean()) Fail(where, "must end with whether it is scratch (true or false)");
    const std::int64_t category = Integer(s[2], where, 0);
    if (category > 255) Fail(where, "has a category out of range");
    return {Integer(s[0], where, 0), String(s[1], where), static_cast<std::uint8_t>(category), String(s[3], where),
            String(s[4], where), s[5].get<bool>()};
  }

  const std::string& file_;
  const Json& root_;
};

}  // namespace

nlohmann::ordered_json RecordedStepToJson(const RecordedStep& step) {
  nlohmann::ordered_json out = {{"peakmem_recorded_step", kRecordedStepFileVersion}};
  out["optimizer"] = nullptr;
  if (!step.optimizer.empty()) out["optimizer"] = step.optimizer;
  nlohmann::ordered_json& storages = out["storages"] = nlohmann::ordered_json::array();
  for (const RecordedStorage& s : step.storages) {
    storages.push_back({s.bytes, s.name, s.category, s.module, s.device, s.scratch});
  }
  out["held"] = step.held;
  nlohmann::ordered_json& statements = out["statements"] = nlohmann::ordered_json::array();
  for (const RecordedStatement& s : step.statements) statements.push_back({s.op, s.source, s.events});
  nlohmann::ordered_json& phases = out["phases"] = nlohmann::ordered_json::array();
  for (const RecordedPhase& p : step.phases) phases.push_back({p.name, p.iteration, p.first, p.end});
  out["diagnostics"] = step.diagnostics;
  if (!step.device.empty()) out["device"] = step.device;
  return out;
}

std::optional<RecordedStep> ParseRecordedStepFile(const std::string& name, const std::string& text) {
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::parse_error& e) {
    throw StepFileError(name + ": not JSON: " + e.what());
  }
  if (!root.is_object() || !root.contains("peakmem_recorded_step")) return std::nullopt;
  return RecordedReader(name, root).Read();
}

}  // namespace peakmem
