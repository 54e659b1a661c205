// Builds a Trace statement by statement, the way Python binds names.
//
// Both readers (printed text and JSON) feed a TraceBuilder: it keeps the live
// names, gives each definition a fresh ValueId, rejects a second definition
// of a live name, `del` of an unknown name and a use after `del`, and parses
// type strings. Every rejection is a TraceError at the offending location.
//
// A builder can also build one chunk of a trace whose chunks are read in
// parallel (see src/frontend/text_chunks.cc): a chunk starts in the middle of the
// body, so it cannot know the names bound before it. Such a builder makes
// optimistic assumptions about them and records each one; AppendChunk
// checks the assumptions against the names bound before the chunk and, only
// if every one holds, appends the chunk with its ids renumbered. Then the
// result is what reading the whole text in one pass gives; if one does not
// hold, the caller reads that part again in one pass.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "peakmem/ir/huge_page_allocator.h"
#include "peakmem/ir/name_table.h"
#include "peakmem/ir/source.h"
#include "peakmem/ir/string_hash.h"
#include "peakmem/ir/trace.h"

namespace peakmem {

class TraceBuilder {
 public:
  explicit TraceBuilder(std::shared_ptr<const SourceFile> source);
  // A builder for a chunk that starts after the names in the text before it
  // were bound (see the file comment).
  struct Chunk {};
  TraceBuilder(std::shared_ptr<const SourceFile> source, Chunk);

  [[noreturn]] void Fail(SourceLocation at, const std::string& message) const {
    ThrowAt(*source_, at, message);
  }

  // Binds `name` to a new value. Fails if `name` is live.
  ValueId Define(std::string_view name, SourceLocation at);
  // The live value bound to `name`, or kNoValue.
  ValueId Lookup(std::string_view name) const;
  // Lookup for a name called as a function (`f(...)`): a global function
  // unless a value is bound to it. (A chunk assumes an unknown callee is
  // not a value.)
  ValueId LookupCallee(std::string_view name);
  // Like Lookup, but fails with "used after 'del'" when `name` was deleted.
  // (A chunk takes an unknown name for a value bound before it.)
  ValueId LookupForUse(std::string_view name, SourceLocation at);
  // The live value of a name that must have one (`# C1 (empty sequence)`),
  // or kNoValue. (A chunk takes an unknown name for a value bound before it.)
  ValueId LookupLive(std::string_view name);
  // Unbinds a live name (for `del`). Fails for unknown or already deleted names.
  ValueId Delete(std::string_view name, SourceLocation at, int del_line);
  // The rank DTensor types are read for (ParseTypeString); 0 by default.
  void SetRank(int rank) { rank_ = rank; }
  int rank() const { return rank_; }
  // The mesh and placements of DTensor types that print none (ParseTypeString).
  void SetDTensorLayout(std::string layout) { dtensor_layout_ = std::move(layout); }
  const std::string& dtensor_layout() const { return dtensor_layout_; }
  // Parses `type_text` as a Thunder type string and gives it to `id`
  // (each distinct string is parsed once).
  void SetType(ValueId id, std::string_view type_text, SourceLocation type_at);
  // The type `type_text` spells, read as SetType reads it and interned in
  // `into` (this builder's trace or another); nullptr, without an error,
  // when it does not parse: for type comments that are informational
  // (a fusion region's subsymbols).
  const ValueType* TypeOrNull(std::string_view type_text, Trace* into) const;
  // SetType for the live value bound to `name` (a type comment); nothing if
  // there is none.
  void SetTypeOfName(std::string_view name, std::string_view type_text, SourceLocation type_at);
  // A view of `text` that lives as long as the trace: `text` itself when it
  // lies inside the source (which the trace keeps alive), else a copy in the
  // trace's arena.
  std::string_view Keep(std::string_view text);
  // Like Keep, but equal strings share one copy: for callees, symbols and
  // keyword names, which repeat on every statement.
  std::string_view Intern(std::string_view text);
  // The index in Trace::call_symbols of (callee, symbol, id), interned
  // (equal triples share one): a call's or clear's Statement::call_symbol.
  std::uint32_t InternCallSymbol(std::string_view callee, std::string_view symbol,
                                 std::string_view symbol_id);

  Trace& trace() { return trace_; }
  // Room for `n` names in the name table.
  void ReserveNames(std::size_t n) { names_.Reserve(n); }
  const SourceFile& source() const { return *source_; }

  // ---- chunks (see the file comment)
  bool is_chunk() const { return chunk_; }
  // A value of a chunk that was bound before it: its final id is known
  // only when the chunk is appended.
  static constexpr ValueId kExternalBit = 0x80000000u;
  static bool IsExternal(ValueId id) { return id != kNoValue && (id & kExternalBit) != 0; }
  // Whether the value's type may still change when the chunk is appended:
  // a value bound before the chunk, or one marked pending (an output whose
  // type inference the chunk had to put off).
  bool TypePending(ValueId id) const {
    return IsExternal(id) || (id < pending_.size() && pending_[id]);
  }
  void MarkPending(ValueId id);
  // Notes that the statement needs `id` to be a value, not a constant (the
  // source of an assignment, an unpack or a clear): if it is a name the
  // chunk took for a value bound before it, one must be.
  void RequireBound(ValueId id);
  // What a chunk puts off until it is appended, in text order: type
  // comments for values bound before it, and statements whose output types
  // follow from such values (the reader's `FinishCall`).
  struct Deferred {
    enum class Kind : std::uint8_t { kSetType, kSetTypeOfName, kFinishCall };
    Kind kind = Kind::kSetType;
    ValueId value = kNoValue;    // kSetType
    std::string_view name;       // kSetTypeOfName
    std::string_view type_text;  // kSetType, kSetTypeOfName
    SourceLocation at;
    std::uint32_t statement = 0;  // kFinishCall: index in the chunk
  };
  void DeferFinishCall(std::uint32_t statement);
  // Appends `chunk` (built by a chunk builder over the text that follows
  // this builder's) if every assumption it made holds for the names bound
  // here, renumbering its values, statements, subsymbols and op names, and
  // then runs its deferred work in order (`finish_call` for kFinishCall,
  // given the statement's new index). Returns false, and changes nothing,
  // if an assumption fails. `more_follow`: whether another chunk will be
  // appended after this one (the names it binds are then entered here).
  bool AppendChunk(TraceBuilder&& chunk, bool more_follow,
                   const std::function<void(std::uint32_t)>& finish_call);

 private:
  // Keys are views kept by Keep(): no allocation per name.
  // (On huge pages: at 10^6 statements the table is tens of MB, probed at
  // random; see huge_page_allocator.h.)
  template <typename V>
  using NameMap =
      absl::flat_hash_map<std::string_view, V, StringHash, std::equal_to<std::string_view>,
                          HugePageAllocator<std::pair<const std::string_view, V>>>;

  std::shared_ptr<const SourceFile> source_;
  int rank_ = 0;
  std::string dtensor_layout_;
  Trace trace_;
  // Every name the trace has bound, to its latest value and, once that value
  // is deleted, the line of its `del` (kLive while live). Names are never
  // erased: a `del` only marks the entry, and a name defined again after its
  // `del` takes the entry over. (Erasing made the table churn: tombstones
  // and rehashes cost more than the bigger table.) The marks give the
  // "used after 'del'" and "deleted twice" messages their line.
  static constexpr int kLive = -1;
  // A chunk's entry for a name it called as a function without knowing it:
  // assumed not bound to a live value before the chunk.
  static constexpr int kAssumedUnbound = -2;
  struct NameEntry {
    ValueId value = kNoValue;
    int deleted_at = kLive;
  };
  // (Entries in the order names first appear: see name_table.h.)
  NameTable<NameEntry> names_;
  // Chunks only: the names taken for values bound before the chunk (external
  // id i is externals_[i]), the names assumed unbound then, the work put
  // off, and which values' types are pending (see TypePending).
  bool chunk_ = false;
  std::vector<std::string_view> externals_;
  // Whether the chunk needs externals_[i] bound: it deleted it, or used it
  // where a constant would not do. A name used only in expressions and
  // never bound before the chunk is read as a constant, as one pass does.
  std::vector<bool> external_required_;
  static constexpr ValueId kConstantName = 0xFFFFFFFEu;  // AppendChunk: resolved to a constant
  std::vector<std::string_view> unbound_;
  std::vector<Deferred> deferred_;
  std::vector<bool> pending_;
  [[noreturn]] void AbortChunk() const;
  // AppendChunk's steps.
  struct ChunkRenumbering;
  bool ResolveChunkAssumptions(const TraceBuilder& chunk, bool two_threads,
                               std::vector<ValueId>* resolved) const;
  void MoveChunkStatements(TraceBuilder& chunk, const ChunkRenumbering& renumber,
                           bool two_threads);
  void RunDeferred(const TraceBuilder& chunk, const ChunkRenumbering& renumber,
                   std::uint32_t statement_base,
                   const std::function<void(std::uint32_t)>& finish_call);
  ValueId External(std::string_view name, int deleted_at, bool required);
  NameMap<std::string_view> interned_;
  absl::flat_hash_map<std::tuple<std::string_view, std::string_view, std::string_view>,
                      std::uint32_t>
      call_symbols_;
};

}  // namespace peakmem
