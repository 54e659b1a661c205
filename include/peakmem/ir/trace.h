// The IR of a straight-line tensor program (a Thunder execution trace).
//
// A Trace is what every reader produces and every model consumes:
//   - a signature (positional parameters, defaults, *args, **kwargs);
//   - a table of values, one per definition of a name, each with its type;
//   - statements in program order: op calls, unpacks, `del`, collection
//     clears and the final `return`;
//   - for each op call, the subsymbols Thunder printed under it (indented
//     comment lines), kept as a tree of text; a fusion region's lines that
//     are calls are parsed too (SubSymbolCall).
// Names are resolved to ValueIds by the reader, so models never look names up.
// A name defined again after `del` is a new value with a new id.
//
// The IR is built for traces of millions of statements: text is held as
// std::string_view (into the printed source, which the Trace keeps alive, or
// into the Trace's StringArena), and each distinct type string is parsed
// once and shared (Value::type points at it).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "peakmem/ir/arena_span.h"
#include "peakmem/ir/segmented_vector.h"
#include "peakmem/ir/source.h"
#include "peakmem/ir/string_arena.h"
#include "peakmem/ir/string_hash.h"
#include "peakmem/ir/value_type.h"

namespace peakmem {

using ValueId = std::uint32_t;
inline constexpr ValueId kNoValue = 0xFFFFFFFFu;

// What kind of Python container a collection value is, where known. The
// printed trace only says "Collection"; a live trace (or its JSON export)
// says which.
enum class ContainerKind : std::uint8_t { kUnknown, kList, kTuple, kDict, kSet };
const char* ContainerKindName(ContainerKind kind);

struct Value {
  std::string_view name;
  const ValueType* type = &UnknownValueType();  // never null; shared by equal types
  ContainerKind container = ContainerKind::kUnknown;  // collections only
  SourceLocation defined_at;
};

// A value kept on the heap, copied deeply: for a member that only a few
// statements use (only `return` needs an Expr), so that the rest do not
// carry it. An empty Box reads as a default T.
template <typename T>
class Box {
 public:
  Box() = default;
  Box(const Box& other) : p_(other.p_ ? std::make_unique<T>(*other.p_) : nullptr) {}
  Box(Box&&) noexcept = default;
  Box& operator=(const Box& other) {
    p_ = other.p_ ? std::make_unique<T>(*other.p_) : nullptr;
    return *this;
  }
  Box& operator=(Box&&) noexcept = default;
  Box& operator=(T value) {
    p_ = std::make_unique<T>(std::move(value));
    return *this;
  }
  const T& operator*() const { return p_ ? *p_ : Empty(); }
  const T* operator->() const { return &**this; }
  T& Mutable() {
    if (!p_) p_ = std::make_unique<T>();
    return *p_;
  }

 private:
  static const T& Empty() {
    static const T empty;
    return empty;
  }
  std::unique_ptr<T> p_;
};

// What number a constant's source text spells, as Python reads it: a bool
// (True/False), an int, a float (with '.', 'e', inf, nan), a complex (ending
// in 'j'), or none (strings, None, dotted names). Models need it for wrapped
// scalars and integer arguments (dims); readers classify each constant once
// (Expr::SetConstant), so a model never goes back to the source text, which on
// a big trace lies far away in memory.
enum class NumberKind : std::uint8_t { kNone, kBool, kInt, kFloat, kComplex };
NumberKind ClassifyNumber(std::string_view text);

struct Expr;

// The items of a container or call expression (see Expr::items), in the
// trace's arena: for a call, its positional arguments then its keyword
// arguments' values; the names of those last keyword_count() items are
// stored right after the items (keywords()).
class ExprList : public ArenaSpan<Expr> {
 public:
  ExprList() = default;
  ExprList(Expr* data, std::size_t size, std::size_t keyword_count)
      : ArenaSpan<Expr>(data, size) {
    extra_ = static_cast<std::uint32_t>(keyword_count);
  }
  std::size_t keyword_count() const { return extra_; }
  // The keyword names (a call's), in order: names of the last
  // keyword_count() items.
  std::span<const std::string_view> keywords() const;
};

// An expression in an argument list or a return: a reference to a trace value,
// a constant (number, string, None, a dotted global such as `dtypes.float32`),
// a container literal, or a nested call. Trivially copyable (56 bytes): a
// trace holds millions, and its nested lists live in the trace's arena.
struct Expr {
  enum class Kind : std::uint8_t { kValue, kConstant, kTuple, kList, kDict, kSet, kCall };
  Kind kind = Kind::kConstant;
  NumberKind number = NumberKind::kNone;  // kConstant: what number `text` spells
  bool has_int = false;  // kConstant: `text` is a base-10 integer that fits int_value
  ValueId value = kNoValue;  // kValue
  std::string_view text;     // kConstant: its source text; kCall: the callee
  // kTuple/kList/kSet: elements; kDict: key, value, key, value, ...;
  // kCall: positional arguments then keyword argument values (their names:
  // keywords()). Made by Trace::SaveExprs.
  ExprList items;
  SourceLocation at;
  std::int64_t int_value = 0;  // kConstant with has_int

  // kCall: names of the trailing keyword items.
  std::span<const std::string_view> keywords() const { return items.keywords(); }
  // Makes this a constant spelled `text` (a view that outlives the trace),
  // with its number classified.
  void SetConstant(std::string_view constant_text);
};

inline std::span<const std::string_view> ExprList::keywords() const {
  if (extra_ == 0) return {};
  return {reinterpret_cast<const std::string_view*>(data_ + size_), extra_};
}

// A call's keyword argument: its name and value.
using KeywordArg = std::pair<std::string_view, Expr>;

// An assignment target: `t0`, `_`, `(a, b)`, `[a, b]`, nested. Trivially
// copyable; its items live in the trace's arena (Trace::SaveArray).
struct Pattern {
  enum class Kind : std::uint8_t { kValue, kIgnore, kTuple, kList };
  Kind kind = Kind::kTuple;
  ValueId value = kNoValue;  // kValue
  ArenaSpan<Pattern> items;  // kTuple, kList
  SourceLocation at;
};

// A comment line printed under an op at deeper indentation: the op's
// decomposition, kept as text. The lines form a tree by indentation; a trace
// stores every statement's lines in one flat vector, in print order (a
// pre-order walk of the tree), each with its depth in the tree: a node's
// children are the nodes after it that are deeper, up to the next node that
// is not. (A vector per node cost two allocations per op on big traces.)
struct SubSymbol {
  std::string_view text;  // without the leading "# "
  int line = 0;
  int depth = 0;  // 0: printed directly under the op
};

// A subsymbol line of a fusion region (semantics/fusion.h: UsesSubSymbols)
// that is a call with one output, as the reader parsed it with its
// expression parser: `t15 = prims.add(t13, t5)  # t15: "cuda:0 f32[2, 3, 4]"`.
// The region's names are its own (its intermediates are no trace values),
// so a name in `args` is not resolved: it is a constant Expr whose text is
// the name. Lines that are no such call are kept as text only.
struct SubSymbolCall {
  std::uint32_t subsymbol = 0;  // its line: Trace::subsymbols[subsymbol]
  std::string_view out;         // "t15"
  std::string_view callee;      // "prims.add"
  ExprList args;                // positional arguments, then keyword values
  // The type the line's comment gives `out` (`# t15: "..."`); nullptr when
  // it gives none or one that does not parse.
  const ValueType* out_type = nullptr;
};

// A statement's subsymbols: Trace::subsymbols[begin, begin + count).
struct SubSymbolRange {
  std::uint32_t begin = 0;
  std::uint32_t count = 0;
  bool empty() const { return count == 0; }
  std::size_t size() const { return count; }
};

// What an op call names: the printed callee, Thunder's symbol name and id.
// Equal triples are stored once per trace (Trace::call_symbols), so models
// can keep per-op facts (the registry entry, ...) in a vector indexed by
// Statement::call_symbol instead of hashing names on every statement.
struct CallSymbol {
  std::string_view callee;
  std::string_view symbol;
  std::string_view symbol_id;
};
inline constexpr std::uint32_t kNoCallSymbol = 0xFFFFFFFFu;
inline constexpr std::uint64_t kNoOffset = ~std::uint64_t{0};

enum class StatementKind : std::uint8_t {
  kCall,    // outputs = callee(args, kwargs)   (outputs may be empty)
  kUnpack,  // a, b, = source   (also `# C1 (empty sequence)`)
  kAssign,  // a = source       (plain rebinding)
  kDel,     // del a, b
  kClear,   // clear_mutable_collection(source) / clear_collection(source)
  kReturn,  // return expr
};
const char* StatementKindName(StatementKind kind);

// The symbol names Thunder prints for what the IR holds as statements rather
// than calls: the readers turn them into StatementKinds and
// Trace::SymbolName gives them back. They are syntax, not ops with memory
// rules (semantics/op_registry.h lists them as allocating nothing).
inline constexpr std::string_view kDelSymbol = "python_del";
inline constexpr std::string_view kReturnSymbol = "python_return";
inline constexpr std::string_view kUnpackSymbol = "unpack_sequence";
inline constexpr std::string_view kAssignSymbol = "assign";
inline constexpr std::string_view kClearSymbol = "clear_mutable_collection";
inline constexpr std::string_view kLegacyClearSymbol = "clear_collection";  // older Thunder
bool IsStatementSymbol(std::string_view symbol);

// Fields are ordered so that little padding is left between them (128
// bytes): a trace holds one Statement per statement, 10^7 of them on the
// largest. Its lists (args, kwargs, deleted, the outputs' items) live in the
// trace's arena.
struct Statement {
  // The first 32 bytes are what a report row reads (StepMaker): the kind,
  // op, line and where the line is.
  StatementKind kind = StatementKind::kCall;
  bool legacy_clear = false;      // kClear spelled `clear_collection` (older Thunder)
  // The length of the text at text_offset up to the end of its line
  // (without the line break), when under 65,536 bytes; 0 when not known
  // (then the source is searched for the line's end). Reports quote a
  // statement without reading its source text (on a big trace, a cache miss
  // per statement).
  std::uint16_t text_length = 0;
  // kCall, kClear: the index of its (callee, symbol, symbol_id) in
  // Trace::call_symbols (Trace::CalleeOf and the like read them); every
  // reader sets it. kNoCallSymbol for the other kinds.
  std::uint32_t call_symbol = kNoCallSymbol;
  SourceLocation at;
  int source_line = 0;    // 1-based line in the input where the statement starts
  ValueId source = kNoValue;      // kUnpack, kAssign, kClear
  // Byte offset in a printed trace's source where the statement's text
  // starts: its first line after the indentation (kNoOffset when the
  // statement was not read from one), so reports quote it without a line index.
  std::uint64_t text_offset = kNoOffset;
  Pattern outputs;        // kCall, kUnpack, kAssign
  ArenaSpan<Expr> args;           // kCall, kClear: positional arguments (Trace::SaveExprs)
  ArenaSpan<KeywordArg> kwargs;   // kCall (Trace::SaveKeywordArgs)
  ArenaSpan<ValueId> deleted;     // kDel (Trace::SaveArray)
  Box<Expr> returned;             // kReturn
  SubSymbolRange subsymbols;          // kCall: see Trace::SubSymbolsOf
};
static_assert(sizeof(Statement) == 128);

struct Parameter {
  // kKeyword: keyword-only (after `*` or `*args`).
  enum class Kind : std::uint8_t { kPositional, kKeyword, kVarArgs, kVarKwargs };
  Kind kind = Kind::kPositional;
  ValueId value = kNoValue;
  std::optional<Expr> default_value;
};

// Move-only: its views point into its own arena and type table.
struct Trace {
  std::string source_name;  // file name or "<string>", for messages
  std::string function_name;
  std::vector<std::string> decorators;
  std::vector<Parameter> params;
  std::vector<Value> values;
  // One segment per chunk a big printed trace was read in (see
  // segmented_vector.h); indexed and iterated as one sequence.
  SegmentedVector<Statement> statements;
  std::vector<CallSymbol> call_symbols;  // distinct op names (see CallSymbol)
  std::vector<SubSymbol> subsymbols;     // every statement's, in order (see SubSymbol)
  // The fusion regions' subsymbol lines that are calls, parsed (see
  // SubSymbolCall), in the order of `subsymbols`.
  std::vector<SubSymbolCall> subsymbol_calls;
  // The indices of the kUnpack statements, in order, when unpacks_listed
  // (the text and JSON readers list them as they go): what models need to
  // learn what each collection holds (CollectionContents) without walking
  // every statement of a big trace. Without the list they walk.
  std::vector<std::uint32_t> unpacks;
  bool unpacks_listed = false;

  // A call's or clear's printed callee ("torch.mul"), Thunder's
  // `bsym.sym.name` (the printed text gives the callee's last dotted
  // component: `torch.nn.functional.linear` -> `linear`) and `bsym.sym.id`
  // where it is a string (empty for prims/ltorch symbols, whose ids are enum
  // values or qualified names). Empty for statements of other kinds.
  std::string_view CalleeOf(const Statement& s) const { return CallSymbolOf(s).callee; }
  std::string_view SymbolOf(const Statement& s) const { return CallSymbolOf(s).symbol; }
  std::string_view SymbolIdOf(const Statement& s) const { return CallSymbolOf(s).symbol_id; }
  // SymbolOf for calls and clears; Thunder's names for the other kinds
  // (python_del, python_return, unpack_sequence).
  std::string_view SymbolName(const Statement& s) const;

  const Value& value(ValueId id) const { return values[id]; }
  Value& value(ValueId id) { return values[id]; }
  std::span<const SubSymbol> SubSymbolsOf(const Statement& s) const {
    return std::span<const SubSymbol>(subsymbols).subspan(s.subsymbols.begin, s.subsymbols.count);
  }

  // The parsed calls among SubSymbolsOf(s) (a fusion region's), in order.
  std::span<const SubSymbolCall> SubSymbolCallsOf(const Statement& s) const;

  const CallSymbol& CallSymbolOf(const Statement& s) const {
    static const CallSymbol kNone;
    return s.call_symbol < call_symbols.size() ? call_symbols[s.call_symbol] : kNone;
  }

  // What views into outside text (the printed source) keep alive.
  std::shared_ptr<const void> backing;
  // Copies `text` into the trace's arena and returns the stable view.
  std::string_view Save(std::string_view text) { return strings_.Save(text); }
  // Copies `items` (and the names of the last keywords.size() of them, for
  // a call) into the trace's arena: an Expr's items or a Statement's args.
  ExprList SaveExprs(std::span<const Expr> items, std::span<const std::string_view> keywords = {});
  ArenaSpan<KeywordArg> SaveKeywordArgs(std::span<const KeywordArg> kwargs) {
    return SaveArray(kwargs);
  }
  // Copies `items` into the trace's arena (their type trivially copied and
  // destroyed: the arena never runs destructors).
  template <typename T>
  ArenaSpan<T> SaveArray(std::span<const T> items) {
    static_assert(std::is_trivially_copy_constructible_v<T> && std::is_trivially_destructible_v<T>);
    if (items.empty()) return {};
    CheckArraySize(items.size());
    auto* data = static_cast<T*>(strings_.Allocate(items.size_bytes(), alignof(T)));
    std::uninitialized_copy(items.begin(), items.end(), data);
    return ArenaSpan<T>(data, items.size());
  }
  template <typename T>
  ArenaSpan<T> SaveArray(const std::vector<T>& items) {
    return SaveArray(std::span<const T>(items));
  }
  // The shared copy of `type`: equal type strings are stored once.
  const ValueType* InternType(ValueType type);
  // The shared type printed as `text`, or nullptr if none was interned yet.
  const ValueType* FindType(std::string_view text) const {
    auto it = types_by_text_.find(text);
    return it == types_by_text_.end() ? nullptr : it->second;
  }
  // Keeps `other`'s strings and types alive as long as this trace, for
  // values and statements moved over from it (a chunk read in parallel).
  // Its types stay distinct from equal ones here: types are compared by
  // content, never by address.
  void AdoptStorage(Trace&& other);

 private:
  // Fails (std::length_error) past 2^32 items (an ArenaSpan's size).
  static void CheckArraySize(std::size_t n);
  StringArena strings_;
  std::deque<ValueType> types_;  // stable addresses
  // Adopted from other traces (moving a deque keeps its elements in place).
  std::vector<StringArena> adopted_strings_;
  std::vector<std::deque<ValueType>> adopted_types_;
  absl::flat_hash_map<std::string_view, const ValueType*, StringHash> types_by_text_;
};

// Flattening helpers, in Thunder's order (depth first, left to right).
// Values referenced by an expression list (args then kwargs).
void FlattenValues(const Expr& expr, std::vector<ValueId>* out);
void FlattenValues(const Pattern& pattern, std::vector<ValueId>* out);
// A call's arguments, flattened: Thunder's `bsym.flat_proxy_args`.
std::vector<ValueId> FlatArgs(const Statement& statement);
// The same into `out` (cleared first), for loops that reuse one buffer.
void FlatArgs(const Statement& statement, std::vector<ValueId>* out);
// A statement's outputs, flattened: Thunder's `bsym.flat_proxy_outs`.
std::vector<ValueId> FlatOutputs(const Statement& statement);
void FlatOutputs(const Statement& statement, std::vector<ValueId>* out);

// The statement as Python source, as Thunder would print it (without type
// comments): `t0 = torch.mul(x, 2.0)`, `del a, b`, `return (t1, t2)`.
std::string FormatStatement(const Trace& trace, const Statement& statement);

// Everything a reader put in the trace, one line per value and statement
// (ids, kinds, locations, types, subsymbols, op names): for tests and
// fuzzers that compare two readings of one trace.
std::string DebugString(const Trace& trace);

// The elements a collection value was unpacked into, per collection: the
// targets of the first `unpack` whose source is that value. Indexed by
// ValueId; nullptr when a value was never unpacked.
std::vector<const Pattern*> CollectionContents(const Trace& trace);
// The same into `out` (reusing its memory).
void CollectionContents(const Trace& trace, std::vector<const Pattern*>* out);

}  // namespace peakmem
