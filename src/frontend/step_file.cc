#include "peakmem/frontend/step_file.h"

#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "peakmem/frontend/frontend.h"

namespace peakmem {
namespace {

using Json = nlohmann::json;

// Reads fields of one JSON object, naming the file and the field's path in
// every error.
class Fields {
 public:
  Fields(const std::string& file, const Json& object, std::string path)
      : file_(file), object_(object), path_(std::move(path)) {
    if (!object_.is_object()) Fail("", "must be an object");
  }

  [[noreturn]] void Fail(const std::string& key, const std::string& why) const {
    std::string where = path_;
    if (!key.empty()) where += (where.empty() ? "" : ".") + key;
    throw StepFileError(file_ + ": " + (where.empty() ? "the step file" : "'" + where + "'") + " " + why);
  }

  const Json& Get(const std::string& key) const {
    auto it = object_.find(key);
    if (it == object_.end()) Fail(key, "is missing");
    return *it;
  }
  bool Has(const std::string& key) const {
    auto it = object_.find(key);
    return it != object_.end() && !it->is_null();
  }

  std::int64_t Bytes(const std::string& key) const {
    const Json& v = Get(key);
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0) Fail(key, "must be a non-negative integer");
    return v.get<std::int64_t>();
  }
  int Int(const std::string& key, int low) const {
    const Json& v = Get(key);
    if (!v.is_number_integer() || v.get<std::int64_t>() < low ||
        v.get<std::int64_t>() > std::numeric_limits<int>::max()) {
      Fail(key, "must be an integer >= " + std::to_string(low));
    }
    return v.get<int>();
  }
  bool Bool(const std::string& key) const {
    const Json& v = Get(key);
    if (!v.is_boolean()) Fail(key, "must be true or false");
    return v.get<bool>();
  }
  std::string String(const std::string& key) const {
    const Json& v = Get(key);
    if (!v.is_string()) Fail(key, "must be a string");
    return v.get<std::string>();
  }
  // A list of names; `null_as_empty`: null items read as "".
  std::vector<std::string> Names(const std::string& key, bool null_as_empty = false) const {
    const Json& v = Get(key);
    if (!v.is_array()) Fail(key, "must be a list of names");
    std::vector<std::string> out;
    for (const Json& item : v) {
      if (item.is_string()) {
        out.push_back(item.get<std::string>());
      } else if (item.is_null() && null_as_empty) {
        out.emplace_back();
      } else {
        Fail(key, null_as_empty ? "must hold names or null" : "must hold names");
      }
    }
    return out;
  }
  std::map<std::string, std::string, std::less<>> NameMap(const std::string& key) const {
    const Json& v = Get(key);
    if (!v.is_object()) Fail(key, "must be an object of name -> module path");
    std::map<std::string, std::string, std::less<>> out;
    for (const auto& [name, module] : v.items()) {
      if (!module.is_string()) Fail(key + "." + name, "must be a module path");
      out.emplace(name, module.get<std::string>());
    }
    return out;
  }
  Fields Object(const std::string& key) const { return Fields(file_, Get(key), Sub(key)); }
  const Json& json() const { return object_; }
  std::string Sub(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  const std::string& file() const { return file_; }

 private:
  const std::string& file_;
  const Json& object_;
  std::string path_;
};

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
  const Fields fw = top.Object("forward");
  const Fields bw = top.Object("backward");
  // A distributed step's rank: its DTensor values are read as that rank's
  // shards (optional; 0 of the world size the traces say).
  TextReadOptions read;
  if (top.Has("rank")) read.rank = top.Int("rank", 0);
  if (top.Has("world_size")) read.world_size = top.Int("world_size", 0);
  if (read.world_size > 0 && read.rank >= read.world_size) {
    top.Fail("rank", "is " + std::to_string(read.rank) + ", not below the world size " +
                         std::to_string(read.world_size));
  }
  StepFile out{TraceField(fw, "trace", read), TraceField(bw, "trace", read), std::nullopt, std::nullopt, {}, ""};
  TrainingStepSpec& spec = out.spec;
  spec.saved = fw.Names("saved");
  spec.outputs = fw.Names("outputs");
  spec.flat_args = fw.Names("flat_args");
  spec.cotangents = bw.Names("cotangents");
  spec.grads = bw.Names("grads", true);
  if (spec.grads.size() != spec.flat_args.size()) {
    bw.Fail("grads", "has " + std::to_string(spec.grads.size()) + " entries for the forward's " +
                         std::to_string(spec.flat_args.size()) + " flat_args");
  }
  spec.cotangent_bytes = top.Bytes("cotangent_bytes");
  spec.parameter_bytes = top.Bytes("parameter_bytes");
  spec.input_bytes = top.Bytes("input_bytes");
  if (top.Has("input_storages")) {
    const Json& inputs = top.Get("input_storages");
    if (!inputs.is_array()) top.Fail("input_storages", "must be a list of byte counts");
    std::int64_t sum = 0;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i].is_number_integer() || inputs[i].get<std::int64_t>() < 0) {
        top.Fail("input_storages", "must be a list of byte counts (entry " + std::to_string(i) + " is " +
                                       inputs[i].dump() + ")");
      }
      spec.input_storages.push_back(inputs[i].get<std::int64_t>());
      sum += spec.input_storages.back();
    }
    if (sum != spec.input_bytes) {
      top.Fail("input_storages", "sums to " + std::to_string(sum) + " bytes, not input_bytes " +
                                     std::to_string(spec.input_bytes));
    }
  }
  spec.steps = top.Int("steps", 1);
  spec.zero_grad = top.Bool("zero_grad");
  spec.cpu_threads = top.Int("torch_threads", 0);
  if (top.Has("optimizer")) {
    const Fields opt = top.Object("optimizer");
    spec.optimizer_name = opt.String("name");
    out.optimizer = opt.String("description");
    spec.trainable_bytes = opt.Bytes("trainable_bytes");
    spec.optimizer_state = opt.Names("state");
    out.optimizer_first = TraceField(opt, "first_step");
    out.optimizer_later = TraceField(opt, "later_step");
    if (opt.Has("modules")) spec.optimizer_modules = opt.NameMap("modules");
  }
  if (top.Has("modules")) {
    const Fields modules = top.Object("modules");
    spec.value_modules = modules.NameMap("values");
    const Json& held = modules.Get("held");
    if (!held.is_array()) modules.Fail("held", "must be a list");
    for (std::size_t i = 0; i < held.size(); ++i) {
      const Fields t(name, held[i], modules.Sub("held") + "[" + std::to_string(i) + "]");
      spec.held.push_back({t.String("module"), t.Bytes("bytes"), t.Bool("trainable")});
    }
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

}  // namespace peakmem
