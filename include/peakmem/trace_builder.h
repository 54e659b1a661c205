// Builds a Trace statement by statement, the way Python binds names.
//
// Both readers (printed text and JSON) feed a TraceBuilder: it keeps the live
// names, gives each definition a fresh ValueId, rejects a second definition
// of a live name, `del` of an unknown name and a use after `del`, and parses
// type strings. Every rejection is a TraceError at the offending location.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "peakmem/source.h"
#include "peakmem/trace.h"

namespace peakmem {

class TraceBuilder {
 public:
  explicit TraceBuilder(std::shared_ptr<const SourceFile> source);

  [[noreturn]] void Fail(SourceLocation at, const std::string& message) const {
    ThrowAt(*source_, at, message);
  }

  // Binds `name` to a new value. Fails if `name` is live.
  ValueId Define(std::string_view name, SourceLocation at);
  // The live value bound to `name`, or kNoValue.
  ValueId Lookup(std::string_view name) const;
  // Like Lookup, but fails with "used after 'del'" when `name` was deleted.
  ValueId LookupForUse(std::string_view name, SourceLocation at) const;
  // Unbinds a live name (for `del`). Fails for unknown or already deleted names.
  ValueId Delete(std::string_view name, SourceLocation at, int del_line);
  // Parses `type_text` as a Thunder type string and gives it to `id`.
  void SetType(ValueId id, std::string_view type_text, SourceLocation type_at);

  Trace& trace() { return trace_; }
  const SourceFile& source() const { return *source_; }

 private:
  // Hash and equality that accept std::string and std::string_view alike,
  // so that looking a name up never allocates.
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  template <typename V>
  using NameMap = std::unordered_map<std::string, V, NameHash, std::equal_to<>>;

  std::shared_ptr<const SourceFile> source_;
  Trace trace_;
  NameMap<ValueId> live_;
  NameMap<int> deleted_;  // name -> line of its `del`
};

}  // namespace peakmem
