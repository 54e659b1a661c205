#include "peakmem/frontend/type_inference.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "peakmem/semantics/op_registry.h"
#include "peakmem/semantics/view_strides.h"

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

// A constant int or tuple/list of ints (IntList), read where the call has
// the argument.
std::optional<Dims> Ints(const Expr* e) {
  if (e == nullptr) return std::nullopt;
  return IntList(*e);
}

// The i-th of a pooling parameter given as one int or one per dimension.
std::int64_t Ith(const Dims& v, std::size_t i) { return v.size() == 1 ? v[0] : v[i]; }

// torch.topk(a, k, dim=-1, ...) / torch.sort(a, dim=-1, ...): the shape of
// both outputs; nullopt when the arguments are not constants peakmem reads.
std::optional<Dims> SortedShape(const Statement& s, const Dims& in, bool topk) {
  Dims shape = in;
  const auto dim = Ints(ArgOrKeyword(s, topk ? 2 : 1, "dim"));
  const std::int64_t rank = static_cast<std::int64_t>(in.size());
  std::int64_t d = dim ? (*dim)[0] : -1;
  if (dim && dim->size() != 1) return std::nullopt;
  if (rank == 0)
    d = 0;
  else if (d < 0)
    d += rank;
  if (d < 0 || (rank > 0 && d >= rank)) return std::nullopt;
  if (!topk || rank == 0) return shape;
  const auto k = Ints(ArgOrKeyword(s, 1, "k"));
  if (!k || k->size() != 1 || (*k)[0] < 0 || (*k)[0] > shape[d]) return std::nullopt;
  shape[d] = (*k)[0];
  return shape;
}

// max_pool{N}d_with_indices(a, kernel_size, stride, padding, dilation,
// ceil_mode): ATen's pooling_output_shape per spatial dimension.
std::optional<Dims> PooledShape(const Statement& s, const Dims& in, std::size_t n) {
  const auto kernel = Ints(ArgOrKeyword(s, 1, "kernel_size"));
  auto stride = Ints(ArgOrKeyword(s, 2, "stride"));
  const auto padding = Ints(ArgOrKeyword(s, 3, "padding"));
  const auto dilation = Ints(ArgOrKeyword(s, 4, "dilation"));
  const Expr* ceil = ArgOrKeyword(s, 5, "ceil_mode");
  if (!kernel || !padding || !dilation || ceil == nullptr || ceil->kind != Expr::Kind::kConstant) {
    return std::nullopt;
  }
  if (!stride || stride->empty()) stride = kernel;  // stride None or (): the kernel size
  const bool ceil_mode = ceil->text == "True";
  for (const Dims* v : {&*kernel, &*padding, &*dilation, &*std::as_const(stride)}) {
    if (v->size() != 1 && v->size() != n) return std::nullopt;
  }
  if (in.size() < n) return std::nullopt;
  Dims shape = in;
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t size = in[in.size() - n + i], k = Ith(*kernel, i), st = Ith(*stride, i),
                       pad = Ith(*padding, i), dil = Ith(*dilation, i);
    if (k <= 0 || st <= 0 || pad < 0 || dil <= 0) return std::nullopt;
    const std::int64_t span = size + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? st - 1 : 0);
    if (span < 0) return std::nullopt;
    std::int64_t out = span / st + 1;
    // With ceil_mode the last window must start inside the input or its left padding.
    if (ceil_mode && (out - 1) * st >= size + pad) --out;
    shape[in.size() - n + i] = out;
  }
  return shape;
}

// The spatial dimensions of a max pooling form (0: not one).
std::size_t PooledDims(CallForm form) {
  switch (form) {
    case CallForm::kMaxPool1d: return 1;
    case CallForm::kMaxPool2d: return 2;
    case CallForm::kMaxPool3d: return 3;
    default: return 0;
  }
}

// Types the (values, indices) outputs of topk, sort and max pooling; the
// indices are int64 except where Thunder types them like the input
// (OpInfo::int64_indices_output).
void InferValuesAndIndices(Trace* trace, const Statement& s, const OpInfo& op) {
  const std::vector<ValueId> outputs = FlatOutputs(s);
  if (outputs.size() != 2 || s.args.empty() || s.args[0].kind != Expr::Kind::kValue) return;
  const ValueType& in = *trace->value(s.args[0].value).type;
  if (in.kind != ValueKind::kTensor || in.dtype == nullptr) return;
  std::optional<Dims> shape;
  if (op.form == CallForm::kSort || op.form == CallForm::kTopK) {
    shape = SortedShape(s, in.shape, op.form == CallForm::kTopK);
  } else if (const std::size_t n = PooledDims(op.form); n > 0) {
    shape = PooledShape(s, in.shape, n);
  }
  if (!shape) return;
  const bool typed_like_input = op.int64_indices_output >= 0;
  TypeStringError ignored;
  auto values = MakeTensorType(in.device, in.dtype->short_name, *shape, false, &ignored);
  auto indices =
      MakeTensorType(in.device, typed_like_input ? in.dtype->short_name : "i64", *shape, false, &ignored);
  if (!values || !indices) return;
  const ValueType* types[2] = {trace->InternType(std::move(*values)),
                               trace->InternType(std::move(*indices))};
  for (std::size_t i = 0; i < 2; ++i) {
    Value& out = trace->value(outputs[i]);
    if (out.type->kind == ValueKind::kUnknown) out.type = types[i];
  }
}

}  // namespace

bool InferAliasTypes(Trace* trace, const Statement& s, absl::FunctionRef<bool(ValueId)> pending) {
  auto any_pending = [&](const std::vector<ValueId>& ids) {
    return std::any_of(ids.begin(), ids.end(), pending);
  };
  const OpInfo* op = FindOp(trace->SymbolOf(s));
  if (op != nullptr && op->output_types == OutputTypes::kForwardInputs && !s.args.empty()) {
    std::vector<ValueId> inputs;
    FlattenValues(s.args[0], &inputs);
    if (any_pending(inputs)) return false;
    std::erase_if(inputs, [&](ValueId v) { return !IsTensorKind(trace->value(v).type->kind); });
    const std::vector<ValueId> outputs = FlatOutputs(s);
    if (inputs.size() == outputs.size()) TakeTypes(trace, outputs, inputs);
    return true;
  }
  if (op != nullptr && op->output_types == OutputTypes::kValuesAndIndices) {
    if (!s.args.empty() && s.args[0].kind == Expr::Kind::kValue && pending(s.args[0].value)) {
      return false;
    }
    InferValuesAndIndices(trace, s, *op);
    return true;
  }
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
