// Reading one object of a JSON file peakmem writes (the step file, its
// spec): every error names the file and the field's path in it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "peakmem/frontend/step_spec_json.h"

namespace peakmem::json_fields {

using Json = nlohmann::ordered_json;

// The fields of one JSON object at `path` ("" for the file's top) of `file`.
// Throws StepFileError "FILE: 'PATH.KEY' WHY".
class Fields {
 public:
  Fields(const std::string& file, const Json& object, std::string path)
      : file_(file), object_(object), path_(std::move(path)) {
    if (!object_.is_object()) Fail("", "must be an object");
  }

  [[noreturn]] void Fail(const std::string& key, const std::string& why) const {
    const std::string where = Sub(key);
    throw StepFileError(file_ + ": " + (where.empty() ? "the step file" : "'" + where + "'") + " " + why);
  }
  // Throws for the first key of the object not in `known`, naming it.
  template <typename Known>
  void OnlyKeys(const Known& known) const {
    for (const auto& [key, value] : object_.items()) {
      if (std::find(std::begin(known), std::end(known), key) == std::end(known)) {
        throw StepFileError(file_ + ": unknown key '" + Sub(key) + "'");
      }
    }
  }

  const Json& Get(const std::string& key) const {
    auto it = object_.find(key);
    if (it == object_.end()) Fail(key, "is missing");
    return *it;
  }
  // Present and not null.
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
  std::string Sub(const std::string& key) const {
    if (key.empty()) return path_;
    return path_.empty() ? key : path_ + "." + key;
  }
  const std::string& file() const { return file_; }

 private:
  const std::string& file_;
  const Json& object_;
  std::string path_;
};

}  // namespace peakmem::json_fields
