#include "peakmem/ir/trace_builder.h"

#include <iterator>
#include <system_error>
#include <thread>

namespace peakmem {

TraceBuilder::TraceBuilder(std::shared_ptr<const SourceFile> source) : source_(std::move(source)) {
  trace_.source_name = source_->name();
  trace_.backing = source_;
}

TraceBuilder::TraceBuilder(std::shared_ptr<const SourceFile> source, Chunk)
    : TraceBuilder(std::move(source)) {
  chunk_ = true;
}

namespace {
// Thrown inside a chunk when it meets a name whose meaning depends on text
// before the chunk in a way it cannot assume; the chunk is then read again
// in one pass with the rest (see AppendChunk's caller).
struct ChunkAssumptionFailed {};
}  // namespace

void TraceBuilder::AbortChunk() const { throw ChunkAssumptionFailed{}; }

namespace {
constexpr std::size_t kParallelAppendStatements = 4096;

// Runs `a` here and `b` on another thread when `parallel` (and a thread can
// be had), else one after the other.
template <typename A, typename B>
void OnTwoThreads(bool parallel, const A& a, const B& b) {
  if (parallel) {
    try {
      std::jthread other(b);
      a();
      return;
    } catch (const std::system_error&) {
      // No thread: both here.
    }
  }
  a();
  b();
}

// Calls `f` on every ValueId a statement holds, to renumber them.
template <typename F>
void RenumberExpr(Expr* e, const F& f) {
  if (e->kind == Expr::Kind::kValue) f(e);
  for (Expr& item : e->items) RenumberExpr(&item, f);
}
template <typename F>
void RenumberPattern(Pattern* p, const F& f) {
  if (p->kind == Pattern::Kind::kValue) f(p->value);
  for (Pattern& item : p->items) RenumberPattern(&item, f);
}
template <typename F, typename G>
void RenumberValues(Statement* s, const F& f, const G& expr) {
  RenumberPattern(&s->outputs, f);
  for (Expr& e : s->args) RenumberExpr(&e, expr);
  for (auto& kw : s->kwargs) RenumberExpr(&kw.second, expr);
  f(s->source);
  for (ValueId& id : s->deleted) f(id);
  if (s->kind == StatementKind::kReturn) RenumberExpr(&s->returned.Mutable(), expr);
}
}  // namespace

ValueId TraceBuilder::External(std::string_view name, int deleted_at, bool required) {
  const ValueId id = kExternalBit | static_cast<ValueId>(externals_.size());
  if ((id & ~kExternalBit) != externals_.size() || id >= kConstantName) AbortChunk();
  externals_.push_back(name);
  external_required_.push_back(required);
  names_.Insert(name, NameEntry{id, deleted_at});
  return id;
}

void TraceBuilder::RequireBound(ValueId id) {
  if (IsExternal(id)) external_required_[id & ~kExternalBit] = true;
}

void TraceBuilder::MarkPending(ValueId id) {
  if (IsExternal(id) || id == kNoValue) return;
  if (pending_.size() <= id) pending_.resize(static_cast<std::size_t>(id) + 1, false);
  pending_[id] = true;
}

void TraceBuilder::DeferFinishCall(std::uint32_t statement) {
  // Members set one by one: GCC 12 warns (-Wmissing-field-initializers) on
  // a designated initializer that leaves members to their defaults.
  Deferred d;
  d.kind = Deferred::Kind::kFinishCall;
  d.statement = statement;
  deferred_.push_back(d);
}

std::string_view TraceBuilder::Keep(std::string_view text) {
  const std::string_view source = source_->text();
  const std::less_equal<const char*> le;
  if (le(source.data(), text.data()) && le(text.data() + text.size(), source.data() + source.size())) {
    return text;
  }
  return trace_.Save(text);
}

std::string_view TraceBuilder::Intern(std::string_view text) {
  auto it = interned_.find(text);
  if (it != interned_.end()) return it->second;
  const std::string_view kept = Keep(text);
  interned_.emplace(kept, kept);
  return kept;
}

std::uint32_t TraceBuilder::InternCallSymbol(std::string_view callee, std::string_view symbol,
                                             std::string_view symbol_id) {
  auto it = call_symbols_.find(std::make_tuple(callee, symbol, symbol_id));
  if (it == call_symbols_.end()) {
    const CallSymbol kept{Intern(callee), Intern(symbol), Intern(symbol_id)};
    const auto index = static_cast<std::uint32_t>(trace_.call_symbols.size());
    trace_.call_symbols.push_back(kept);
    it = call_symbols_.emplace(std::make_tuple(kept.callee, kept.symbol, kept.symbol_id), index)
             .first;
  }
  return it->second;
}

ValueId TraceBuilder::Define(std::string_view name, SourceLocation at) {
  const auto id = static_cast<ValueId>(trace_.values.size());
  Value v;
  v.name = Keep(name);
  v.defined_at = at;
  // The key views the kept name, which lives as long as the trace.
  auto [found, inserted] = names_.Insert(v.name, NameEntry{id, kLive});
  if (inserted && chunk_) unbound_.push_back(v.name);  // not live before the chunk either
  if (!inserted) {
    NameEntry& entry = *found;
    if (entry.deleted_at == kLive) {
      if (IsExternal(entry.value)) AbortChunk();  // (the line is in an earlier chunk)
      Fail(at, "'" + std::string(name) + "' is already defined at line " +
                   std::to_string(trace_.value(entry.value).defined_at.line));
    }
    entry = NameEntry{id, kLive};  // bound again after its `del`
  }
  trace_.values.push_back(std::move(v));
  return id;
}

ValueId TraceBuilder::Lookup(std::string_view name) const {
  const NameEntry* it = names_.Find(name);
  if (it == nullptr || it->deleted_at != kLive) return kNoValue;
  return it->value;
}

ValueId TraceBuilder::LookupCallee(std::string_view name) {
  const NameEntry* it = names_.Find(name);
  if (it == nullptr) {
    if (chunk_) {
      // A global function, assumed: checked when the chunk is appended.
      unbound_.push_back(name);
      names_.Insert(name, NameEntry{kNoValue, kAssumedUnbound});
    }
    return kNoValue;
  }
  if (it->deleted_at != kLive) return kNoValue;
  // Called as a value: a name the chunk took for a value bound before it
  // must be one (were it never bound, one pass would call it as a global).
  RequireBound(it->value);
  return it->value;
}

ValueId TraceBuilder::LookupLive(std::string_view name) {
  const NameEntry* it = names_.Find(name);
  if (it == nullptr) return chunk_ ? External(name, kLive, /*required=*/true) : kNoValue;
  return it->deleted_at == kLive ? it->value : kNoValue;
}

ValueId TraceBuilder::LookupForUse(std::string_view name, SourceLocation at) {
  const NameEntry* it = names_.Find(name);
  if (it == nullptr) return chunk_ ? External(name, kLive, /*required=*/false) : kNoValue;
  if (it->deleted_at == kAssumedUnbound) AbortChunk();  // a name read as a constant
  if (it->deleted_at != kLive) {
    Fail(at, "'" + std::string(name) + "' is used after 'del' at line " +
                 std::to_string(it->deleted_at));
  }
  return it->value;
}

ValueId TraceBuilder::Delete(std::string_view name, SourceLocation at, int del_line) {
  NameEntry* it = names_.Find(name);
  if (it == nullptr) {
    if (chunk_) return External(name, del_line, /*required=*/true);
    Fail(at, "'del' of unknown name '" + std::string(name) + "'");
  }
  NameEntry& entry = *it;
  if (entry.deleted_at == kAssumedUnbound) AbortChunk();
  RequireBound(entry.value);
  if (entry.deleted_at != kLive) {
    Fail(at, "'" + std::string(name) + "' is deleted twice (first at line " +
                 std::to_string(entry.deleted_at) + ")");
  }
  entry.deleted_at = del_line;
  return entry.value;
}

void TraceBuilder::SetType(ValueId id, std::string_view type_text, SourceLocation type_at) {
  if (IsExternal(id)) {
    Deferred d;
    d.kind = Deferred::Kind::kSetType;
    d.value = id;
    d.type_text = type_text;
    d.at = type_at;
    deferred_.push_back(d);
    return;
  }
  if (const ValueType* known = trace_.FindType(type_text)) {
    trace_.value(id).type = known;
    return;
  }
  TypeStringError error;
  std::optional<ValueType> type = ParseTypeString(type_text, &error, rank_, dtensor_layout_);
  if (!type) {
    Fail({type_at.line, type_at.column + static_cast<int>(error.offset)},
         error.names_value ? "'" + std::string(trace_.value(id).name) + "': " + error.message
                           : error.message);
  }
  trace_.value(id).type = trace_.InternType(std::move(*type));
}

const ValueType* TraceBuilder::TypeOrNull(std::string_view type_text, Trace* into) const {
  if (const ValueType* known = into->FindType(type_text)) return known;
  TypeStringError error;
  std::optional<ValueType> type = ParseTypeString(type_text, &error, rank_, dtensor_layout_);
  return type ? into->InternType(std::move(*type)) : nullptr;
}

void TraceBuilder::SetTypeOfName(std::string_view name, std::string_view type_text,
                                 SourceLocation type_at) {
  const NameEntry* it = names_.Find(name);
  if (it == nullptr) {
    if (chunk_) {
      // Bound before the chunk, or a plain comment: known when appended.
      deferred_.push_back({.kind = Deferred::Kind::kSetTypeOfName,
                           .name = name,
                           .type_text = type_text,
                           .at = type_at});
    }
    return;
  }
  if (it->deleted_at != kLive) return;
  SetType(it->value, type_text, type_at);
}

// A chunk's value ids as this builder numbers them: the chunk's own values
// follow this trace's; a name taken for a value bound before the chunk is
// the value it resolved to (or kConstantName).
struct TraceBuilder::ChunkRenumbering {
  const std::vector<ValueId>& resolved;
  ValueId value_base;
  void operator()(ValueId& id) const {
    if (id == kNoValue) return;
    id = IsExternal(id) ? resolved[id & ~kExternalBit] : id + value_base;
  }
};

bool TraceBuilder::AppendChunk(TraceBuilder&& chunk, bool more_follow,
                               const std::function<void(std::uint32_t)>& finish_call) {
  // A big chunk is checked and renumbered on two threads (the threads that
  // read the chunks are idle by now); both only read what they share.
  const bool two_threads = chunk.trace_.statements.size() >= kParallelAppendStatements;
  // 1. Check every assumption against the names bound here, changing nothing.
  std::vector<ValueId> resolved(chunk.externals_.size());
  if (!ResolveChunkAssumptions(chunk, two_threads, &resolved)) return false;
  // 2. Append, renumbering.
  const ChunkRenumbering renumber{resolved, static_cast<ValueId>(trace_.values.size())};
  const auto statement_base = static_cast<std::uint32_t>(trace_.statements.size());
  MoveChunkStatements(chunk, renumber, two_threads);
  // 3. The work the chunk put off, in text order.
  RunDeferred(chunk, renumber, statement_base, finish_call);
  // 4. The names the chunk leaves bound (or deleted), for the next chunk.
  if (more_follow) {
    for (const auto& [key, entry] : chunk.names_.entries()) {
      if (entry.deleted_at == kAssumedUnbound) continue;
      ValueId id = entry.value;
      renumber(id);
      if (id == kConstantName) continue;  // (still never bound)
      names_.InsertOrAssign(key.view(), NameEntry{id, entry.deleted_at});
    }
  }
  trace_.AdoptStorage(std::move(chunk.trace_));
  return true;
}

bool TraceBuilder::ResolveChunkAssumptions(const TraceBuilder& chunk, bool two_threads,
                                           std::vector<ValueId>* resolved) const {
  bool externals_hold = true;
  bool unbound_hold = true;
  OnTwoThreads(
      two_threads,
      [&] {
        for (std::size_t i = 0; i < chunk.externals_.size() && externals_hold; ++i) {
          const NameEntry* it = names_.Find(chunk.externals_[i]);
          if (it != nullptr && it->deleted_at == kLive) {
            (*resolved)[i] = it->value;
          } else if (it == nullptr && !chunk.external_required_[i]) {
            (*resolved)[i] = kConstantName;  // never bound: one pass reads the name as a constant
          } else {
            externals_hold = false;
          }
        }
      },
      [&] {
        for (std::string_view name : chunk.unbound_) {
          const NameEntry* it = names_.Find(name);
          if (it != nullptr && it->deleted_at == kLive) {
            unbound_hold = false;
            return;
          }
        }
      });
  return externals_hold && unbound_hold;
}

void TraceBuilder::MoveChunkStatements(TraceBuilder& chunk, const ChunkRenumbering& renumber,
                                       bool two_threads) {
  Trace& from = chunk.trace_;
  const auto statement_base = static_cast<std::uint32_t>(trace_.statements.size());
  const auto subsymbol_base = static_cast<std::uint32_t>(trace_.subsymbols.size());
  // An expression naming a value; or, for a name never bound, the constant
  // one pass reads it as.
  auto renumber_expr = [&](Expr* e) {
    const ValueId id = e->value;
    renumber(e->value);
    if (e->value == kConstantName) {
      e->value = kNoValue;
      e->SetConstant(chunk.externals_[id & ~kExternalBit]);
    }
  };
  std::vector<std::uint32_t> call_symbols(from.call_symbols.size());
  for (std::size_t i = 0; i < from.call_symbols.size(); ++i) {
    const CallSymbol& c = from.call_symbols[i];
    call_symbols[i] = InternCallSymbol(c.callee, c.symbol, c.symbol_id);
  }
  auto renumber_statements = [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      Statement& s = from.statements[i];
      RenumberValues(&s, renumber, renumber_expr);
      if (s.call_symbol != kNoCallSymbol) s.call_symbol = call_symbols[s.call_symbol];
      if (!s.subsymbols.empty()) s.subsymbols.begin += subsymbol_base;
    }
  };
  // Each thread renumbers half the statements, then copies the values or
  // the subsymbols over (a chunk's statements are appended as a segment of
  // their own: see segmented_vector.h).
  const std::size_t half = from.statements.size() / 2;
  OnTwoThreads(
      two_threads,
      [&] {
        renumber_statements(0, half);
        trace_.values.insert(trace_.values.end(), from.values.begin(), from.values.end());
      },
      [&] {
        renumber_statements(half, from.statements.size());
        trace_.subsymbols.insert(trace_.subsymbols.end(), from.subsymbols.begin(),
                                 from.subsymbols.end());
      });
  trace_.statements.Append(std::move(from.statements));
  for (std::uint32_t u : from.unpacks) trace_.unpacks.push_back(u + statement_base);
  for (SubSymbolCall call : from.subsymbol_calls) {
    call.subsymbol += subsymbol_base;
    trace_.subsymbol_calls.push_back(call);
  }
}

void TraceBuilder::RunDeferred(const TraceBuilder& chunk, const ChunkRenumbering& renumber,
                               std::uint32_t statement_base,
                               const std::function<void(std::uint32_t)>& finish_call) {
  for (const Deferred& d : chunk.deferred_) {
    switch (d.kind) {
      case Deferred::Kind::kSetType: {
        ValueId id = d.value;
        renumber(id);
        if (id != kConstantName) SetType(id, d.type_text, d.at);
        break;
      }
      case Deferred::Kind::kSetTypeOfName: {
        // The name had no entry in the chunk before this comment: what it
        // means is what it meant where the chunk starts.
        const NameEntry* it = names_.Find(d.name);
        if (it != nullptr && it->deleted_at == kLive) {
          SetType(it->value, d.type_text, d.at);
        }
        break;
      }
      case Deferred::Kind::kFinishCall:
        finish_call(d.statement + statement_base);
        break;
    }
  }
}

}  // namespace peakmem
