#include "peakmem/frontend/step_spec_json.h"

#include <algorithm>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "json_fields.h"

namespace peakmem {
namespace {

using json_fields::Fields;
using json_fields::Json;

// One key of the schema: its object ("" the top, else "forward",
// "backward", "optimizer" or "modules"), whether a file may leave it out,
// and how it is read into the spec and written from it (nullopt: not
// written, for an optional key at its default).
struct Key {
  std::string_view object;
  std::string_view key;
  bool optional;
  void (*read)(const Fields& in, const std::string& key, RankedStepSpec& out);
  std::optional<Json> (*write)(const RankedStepSpec& in);
};

Json NullForEmpty(const std::vector<std::string>& names) {
  Json out = Json::array();
  for (const std::string& n : names) out.push_back(n.empty() ? Json(nullptr) : Json(n));
  return out;
}

std::vector<std::int64_t> ByteCounts(const Fields& in, const std::string& key) {
  const Json& v = in.Get(key);
  if (!v.is_array()) in.Fail(key, "must be a list of byte counts");
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number_integer() || v[i].get<std::int64_t>() < 0) {
      in.Fail(key, "must be a list of byte counts (entry " + std::to_string(i) + " is " + v[i].dump() + ")");
    }
    out.push_back(v[i].get<std::int64_t>());
  }
  return out;
}

std::vector<TrainingStepSpec::HeldTensor> HeldTensors(const Fields& in, const std::string& key) {
  const Json& held = in.Get(key);
  if (!held.is_array()) in.Fail(key, "must be a list");
  constexpr std::string_view kHeldKeys[] = {"module", "bytes", "trainable"};
  std::vector<TrainingStepSpec::HeldTensor> out;
  for (std::size_t i = 0; i < held.size(); ++i) {
    const Fields t(in.file(), held[i], in.Sub(key) + "[" + std::to_string(i) + "]");
    t.OnlyKeys(kHeldKeys);
    out.push_back({t.String("module"), t.Bytes("bytes"), t.Bool("trainable")});
  }
  return out;
}

Json HeldJson(const std::vector<TrainingStepSpec::HeldTensor>& held) {
  Json out = Json::array();
  for (const auto& h : held) out.push_back({{"module", h.module}, {"bytes", h.bytes}, {"trainable", h.trainable}});
  return out;
}

// Readers of one key's value, for Member below.
std::int64_t ReadBytes(const Fields& f, const std::string& k) { return f.Bytes(k); }
bool ReadBool(const Fields& f, const std::string& k) { return f.Bool(k); }
std::string ReadString(const Fields& f, const std::string& k) { return f.String(k); }
std::vector<std::string> ReadNames(const Fields& f, const std::string& k) { return f.Names(k); }
std::map<std::string, std::string, std::less<>> ReadNameMap(const Fields& f, const std::string& k) {
  return f.NameMap(k);
}
template <int kLow>
int ReadInt(const Fields& f, const std::string& k) {
  return f.Int(k, kLow);
}

// A key that is one member of TrainingStepSpec, read by `read` and written
// as it is.
template <auto kMember, auto kRead>
constexpr Key Member(std::string_view object, std::string_view key, bool optional = false) {
  return {object, key, optional,
          [](const Fields& f, const std::string& k, RankedStepSpec& o) { o.spec.*kMember = kRead(f, k); },
          [](const RankedStepSpec& s) -> std::optional<Json> { return s.spec.*kMember; }};
}

using S = TrainingStepSpec;

// The schema, in the order the step file lists it (docs/step-file.md).
// Each member of TrainingStepSpec is here once.
const Key kKeys[] = {
    Member<&S::steps, ReadInt<1>>("", "steps"),
    Member<&S::zero_grad, ReadBool>("", "zero_grad"),
    Member<&S::cpu_threads, ReadInt<0>>("", "torch_threads"),
    {"", "device", true, [](const Fields& f, const std::string& k, RankedStepSpec& o) { o.spec.device = f.String(k); },
     [](const RankedStepSpec& s) -> std::optional<Json> {
       if (s.spec.device.empty()) return std::nullopt;
       return s.spec.device;
     }},
    {"", "rank", true, [](const Fields& f, const std::string& k, RankedStepSpec& o) { o.rank = f.Int(k, 0); },
     [](const RankedStepSpec& s) -> std::optional<Json> { return s.rank; }},
    {"", "world_size", true,
     [](const Fields& f, const std::string& k, RankedStepSpec& o) { o.world_size = f.Int(k, 0); },
     [](const RankedStepSpec& s) -> std::optional<Json> { return s.world_size; }},
    Member<&S::parameter_bytes, ReadBytes>("", "parameter_bytes"),
    Member<&S::input_bytes, ReadBytes>("", "input_bytes"),
    {"", "input_storages", true,
     [](const Fields& f, const std::string& k, RankedStepSpec& o) { o.spec.input_storages = ByteCounts(f, k); },
     [](const RankedStepSpec& s) -> std::optional<Json> {
       if (s.spec.input_storages.empty()) return std::nullopt;
       return s.spec.input_storages;
     }},
    Member<&S::cotangent_bytes, ReadBytes>("", "cotangent_bytes"),
    Member<&S::saved, ReadNames>("forward", "saved"),
    Member<&S::outputs, ReadNames>("forward", "outputs"),
    Member<&S::flat_args, ReadNames>("forward", "flat_args"),
    {"forward", "tied", true,
     [](const Fields& f, const std::string& k, RankedStepSpec& o) { o.spec.tied_args = ReadNameMap(f, k); },
     [](const RankedStepSpec& s) -> std::optional<Json> {
       if (s.spec.tied_args.empty()) return std::nullopt;
       return s.spec.tied_args;
     }},
    Member<&S::cotangents, ReadNames>("backward", "cotangents"),
    {"backward", "grads", false,
     [](const Fields& f, const std::string& k, RankedStepSpec& o) { o.spec.grads = f.Names(k, true); },
     [](const RankedStepSpec& s) -> std::optional<Json> { return NullForEmpty(s.spec.grads); }},
    Member<&S::optimizer_name, ReadString>("optimizer", "name"),
    Member<&S::trainable_bytes, ReadBytes>("optimizer", "trainable_bytes"),
    Member<&S::optimizer_state, ReadNames>("optimizer", "state"),
    Member<&S::optimizer_modules, ReadNameMap>("optimizer", "modules", true),
    Member<&S::value_modules, ReadNameMap>("modules", "values"),
    {"modules", "held", false,
     [](const Fields& f, const std::string& k, RankedStepSpec& o) { o.spec.held = HeldTensors(f, k); },
     [](const RankedStepSpec& s) -> std::optional<Json> { return HeldJson(s.spec.held); }},
};

// The objects beside the top: whether a file may leave one out (or give
// null for it).
struct Object {
  std::string_view name;
  bool optional;
};
constexpr Object kObjects[] = {{"forward", false}, {"backward", false}, {"optimizer", true}, {"modules", true}};

// The keys allowed in `object` ("" the top): the schema's and `also`'s.
std::vector<std::string> KnownKeys(std::string_view object, const std::vector<std::string_view>& also) {
  std::vector<std::string> known;
  if (object.empty()) {
    for (const Object& o : kObjects) known.emplace_back(o.name);
  }
  for (const Key& k : kKeys) {
    if (k.object == object) known.emplace_back(k.key);
  }
  for (std::string_view path : also) {
    const std::size_t dot = path.find('.');
    if (dot == std::string_view::npos ? object.empty() : path.substr(0, dot) == object) {
      known.emplace_back(dot == std::string_view::npos ? path : path.substr(dot + 1));
    }
  }
  return known;
}

void ReadKeys(const Fields& in, std::string_view object, RankedStepSpec& out) {
  for (const Key& k : kKeys) {
    if (k.object != object) continue;
    const std::string key(k.key);
    if (k.optional && !in.Has(key)) continue;
    k.read(in, key, out);
  }
}

// What holds the keys together, checked once all are read.
void CheckAcross(const Fields& top, const RankedStepSpec& out) {
  const TrainingStepSpec& spec = out.spec;
  if (spec.grads.size() != spec.flat_args.size()) {
    top.Fail("backward.grads", "has " + std::to_string(spec.grads.size()) + " entries for the forward's " +
                                   std::to_string(spec.flat_args.size()) + " flat_args");
  }
  if (out.world_size > 0 && out.rank >= out.world_size) {
    top.Fail("rank", "is " + std::to_string(out.rank) + ", not below the world size " +
                         std::to_string(out.world_size));
  }
  if (top.Has("input_storages")) {
    std::int64_t sum = 0;
    for (std::int64_t bytes : spec.input_storages) sum += bytes;
    if (sum != spec.input_bytes) {
      top.Fail("input_storages", "sums to " + std::to_string(sum) + " bytes, not input_bytes " +
                                     std::to_string(spec.input_bytes));
    }
  }
}

}  // namespace

nlohmann::ordered_json StepSpecToJson(const RankedStepSpec& spec) {
  Json out = Json::object();
  for (const Key& k : kKeys) {
    if (!k.object.empty()) continue;
    if (std::optional<Json> value = k.write(spec)) out[std::string(k.key)] = std::move(*value);
  }
  for (const Object& o : kObjects) {
    const std::string name(o.name);
    if (name == "optimizer" && spec.spec.optimizer_name.empty()) {
      out[name] = nullptr;
      continue;
    }
    Json object = Json::object();
    for (const Key& k : kKeys) {
      if (k.object != o.name) continue;
      if (std::optional<Json> value = k.write(spec)) object[std::string(k.key)] = std::move(*value);
    }
    out[name] = std::move(object);
  }
  return out;
}

RankedStepSpec StepSpecFromJson(const nlohmann::ordered_json& json, const std::string& file,
                                const std::vector<std::string_view>& also) {
  const Fields top(file, json, "");
  // Unknown keys first: a misspelt key is named as such, not as the
  // schema's key it leaves missing.
  top.OnlyKeys(KnownKeys("", also));
  for (const Object& o : kObjects) {
    const std::string name(o.name);
    if (top.Has(name) && top.Get(name).is_object()) top.Object(name).OnlyKeys(KnownKeys(o.name, also));
  }
  RankedStepSpec out;
  ReadKeys(top, "", out);
  for (const Object& o : kObjects) {
    const std::string name(o.name);
    if (o.optional && !top.Has(name)) continue;
    ReadKeys(top.Object(name), o.name, out);
  }
  CheckAcross(top, out);
  return out;
}

}  // namespace peakmem
