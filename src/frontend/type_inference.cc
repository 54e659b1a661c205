#include "peakmem/frontend/type_inference.h"

#include <algorithm>
#include <string_view>
#include <vector>

#include "peakmem/semantics/op_registry.h"

namespace peakmem {
namespace {

// Sets each kUnknown output to its source's type (sources and outputs pair
// up in order).
void TakeTypes(Trace* trace, const std::vector<ValueId>& outputs,
               const std::vector<ValueId>& sources) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    Value& out = trace->value(outputs[i]);
    if (out.type->kind == ValueKind::kUnknown) out.type = trace->value(sources[i]).type;
  }
}

bool IsFallbackGradient(std::string_view symbol) {
  return symbol.size() > 4 && symbol.compare(symbol.size() - 4, 4, "_vjp") == 0;
}

// Whether any output of the pattern has no type yet.
bool AnyUntyped(const Trace& trace, const Pattern& p) {
  switch (p.kind) {
    case Pattern::Kind::kValue:
      return p.value != kNoValue && trace.value(p.value).type->kind == ValueKind::kUnknown;
    case Pattern::Kind::kTuple:
    case Pattern::Kind::kList:
      return std::any_of(p.items.begin(), p.items.end(),
                         [&](const Pattern& item) { return AnyUntyped(trace, item); });
    default:
      return false;
  }
}

}  // namespace

bool InferAliasTypes(Trace* trace, const Statement& s, absl::FunctionRef<bool(ValueId)> pending) {
  auto any_pending = [&](const std::vector<ValueId>& ids) {
    return std::any_of(ids.begin(), ids.end(), pending);
  };
  const std::string_view symbol = trace->SymbolOf(s);
  if (IsFallbackGradient(symbol) && !s.args.empty()) {
    std::vector<ValueId> inputs;
    FlattenValues(s.args[0], &inputs);
    if (any_pending(inputs)) return false;
    std::erase_if(inputs, [&](ValueId v) { return !IsTensorKind(trace->value(v).type->kind); });
    const std::vector<ValueId> outputs = FlatOutputs(s);
    if (inputs.size() == outputs.size()) TakeTypes(trace, outputs, inputs);
    return true;
  }
  const OpInfo* op = FindOp(symbol);
  if (op == nullptr || op->effect != OpEffect::kReturnsInput) return true;
  // Which arguments count depends on which are values (a name a chunk took
  // for a value may turn out to be a constant): a pending one puts it off.
  std::vector<ValueId> args = FlatArgs(s);
  if (any_pending(args)) return false;
  const std::vector<ValueId> outputs = FlatOutputs(s);
  std::vector<ValueId> sources;
  if (op->returned_arg < 0) {
    sources = std::move(args);
  } else if (static_cast<std::size_t>(op->returned_arg) < s.args.size() &&
             s.args[op->returned_arg].kind == Expr::Kind::kValue) {
    sources.push_back(s.args[op->returned_arg].value);
  }
  if (sources.size() == outputs.size()) TakeTypes(trace, outputs, sources);
  return true;
}

bool InferAliasTypes(Trace* trace, const Statement& s) {
  return InferAliasTypes(trace, s, [](ValueId) { return false; });
}

void InferAliasTypes(Trace* trace) {
  for (const Statement& s : trace->statements) {
    // Only untyped outputs are ever set: a call whose outputs all have
    // types is skipped without looking its op up.
    if (s.kind == StatementKind::kCall && AnyUntyped(*trace, s.outputs)) InferAliasTypes(trace, s);
  }
}

}  // namespace peakmem
