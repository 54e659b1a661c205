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
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "peakmem/string_hash.h"

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
  // Parses `type_text` as a Thunder type string and gives it to `id`
  // (each distinct string is parsed once).
  void SetType(ValueId id, std::string_view type_text, SourceLocation type_at);
  // A view of `text` that lives as long as the trace: `text` itself when it
  // lies inside the source (which the trace keeps alive), else a copy in the
  // trace's arena.
  std::string_view Keep(std::string_view text);
  // Like Keep, but equal strings share one copy: for callees, symbols and
  // keyword names, which repeat on every statement.
  std::string_view Intern(std::string_view text);
  // Sets the statement's callee, symbol and id (interned) and its
  // call_symbol index (equal triples share one).
  void SetCallSymbol(Statement* s, std::string_view callee, std::string_view symbol,
                     std::string_view symbol_id);

  Trace& trace() { return trace_; }
  const SourceFile& source() const { return *source_; }

 private:
  // Keys are views kept by Keep(): no allocation per name.
  template <typename V>
  using NameMap = absl::flat_hash_map<std::string_view, V, StringHash>;

  std::shared_ptr<const SourceFile> source_;
  Trace trace_;
  // Every name the trace has bound, to its latest value and, once that value
  // is deleted, the line of its `del` (kLive while live). Names are never
  // erased: a `del` only marks the entry, and a name defined again after its
  // `del` takes the entry over. (Erasing made the table churn: tombstones
  // and rehashes cost more than the bigger table.) The marks give the
  // "used after 'del'" and "deleted twice" messages their line.
  static constexpr int kLive = -1;
  struct NameEntry {
    ValueId value = kNoValue;
    int deleted_at = kLive;
  };
  NameMap<NameEntry> names_;
  NameMap<std::string_view> interned_;
  absl::flat_hash_map<std::tuple<std::string_view, std::string_view, std::string_view>,
                      std::uint32_t>
      call_symbols_;
};

}  // namespace peakmem
