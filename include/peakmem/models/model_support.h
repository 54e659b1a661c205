// Pieces every model shares: raising errors located in the trace's source,
// finding each call's registry entry, and collecting the ops the registry
// does not know for the diagnostics (report rows: report/step_maker.h).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "peakmem/ir/string_hash.h"

#include "peakmem/semantics/op_registry.h"
#include "peakmem/report/report.h"
#include "peakmem/report/step_maker.h"
#include "peakmem/ir/parsed_trace.h"

namespace peakmem {

// A model's loop over a big trace waits on memory at every 4 KiB page of
// the statement array (every ~20 statements: the hardware prefetcher stops
// at page boundaries, and in a VM a TLB miss is a long walk). Each model
// calls this at statement i to start loading statement i + 28 whole (the
// runtime model's simulation of 10^6 statements: ~12% faster; the thunder
// model's loop, which reads less of each statement, did not gain).
// Prefetches change no state.
inline constexpr std::size_t kStatementPrefetchDistance = 28;
inline void PrefetchStatementAhead(const SegmentedVector<Statement>& statements, std::size_t i) {
  if (i + kStatementPrefetchDistance >= statements.size()) return;
  const char* p = reinterpret_cast<const char*>(&statements[i + kStatementPrefetchDistance]);
  for (std::size_t line = 0; line < sizeof(Statement); line += 64) __builtin_prefetch(p + line);
}

// Raises TraceError at a location of the parsed trace's source.
class ModelErrors {
 public:
  explicit ModelErrors(const ParsedTrace& parsed) : parsed_(parsed) {}
  [[noreturn]] void Fail(SourceLocation at, const std::string& message) const;

 private:
  const ParsedTrace& parsed_;
};

// The error for unpacking `unpack.source`, a collection whose contents the
// trace never types (an older Thunder printer writes a backward so): it
// names every value of unknown size from that statement on, the unpacked
// tensors and what is made from them. Both models raise it.
std::string UntypedUnpackMessage(const Trace& trace, const Statement& unpack);

// The first statement that unpacks `collection` (nullptr: none does).
const Statement* FirstUnpackOf(const Trace& trace, ValueId collection);

// The op registry entry of each call, found once per distinct call symbol
// (Trace::call_symbols) rather than by hashing the name on every statement.
class OpLookup {
 public:
  explicit OpLookup(const Trace& trace);
  const OpInfo* Find(const Statement& s) const {
    return s.call_symbol < ops_.size() ? ops_[s.call_symbol] : FindOp(std::string_view());
  }
  // Whether any call of the trace is to an op `pred` holds for.
  template <typename Pred>
  bool AnyOp(Pred pred) const {
    for (const OpInfo* op : ops_) {
      if (op != nullptr && pred(*op)) return true;
    }
    return false;
  }

 private:
  std::vector<const OpInfo*> ops_;
};

// Ops missing from the op registry, with where they first appear.
class UnknownOps {
 public:
  // `op` is the statement's registry entry (nullptr: unknown).
  void Note(const Trace& trace, const Statement& statement, const OpInfo* op);
  // One line per unknown op: "op 'foo' (line 12, 3 calls) is not in ...; <consequence>".
  // With `peak_line` (the line of the statement at the peak, >= 0), each
  // line also says which numbers the op could make wrong: the peak when its
  // first call is not after the peak's statement, else only what follows
  // the peak (later live bytes, the final bytes).
  void AppendDiagnostics(std::vector<std::string>* out, const std::string& consequence,
                         int peak_line = -1) const;

 private:
  struct Seen {
    int first_line;
    int calls;
  };
  std::map<std::string, Seen> ops_;
};

}  // namespace peakmem
