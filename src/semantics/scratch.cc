#include "peakmem/semantics/scratch.h"

#include "peakmem/semantics/op_registry.h"

#include <algorithm>

namespace peakmem {
namespace {

// The number a constant argument spells (classified by the reader).
NumberKind ClassifyConstant(const Expr& e) {
  return e.kind == Expr::Kind::kConstant ? e.number : NumberKind::kNone;
}

// The dtype a wrapped number gets: double, int64, bool, complex double.
int WrappedBytes(NumberKind kind) {
  switch (kind) {
    case NumberKind::kBool: return 1;
    case NumberKind::kInt: return 8;
    case NumberKind::kFloat: return 8;
    case NumberKind::kComplex: return 16;
    case NumberKind::kNone: return 0;
  }
  return 0;
}

bool SameDType(NumberKind kind, std::string_view dtype) {
  switch (kind) {
    case NumberKind::kBool: return dtype == "b8";
    case NumberKind::kInt: return dtype == "i64";
    case NumberKind::kFloat: return dtype == "f64";
    case NumberKind::kComplex: return dtype == "c128";
    case NumberKind::kNone: return true;
  }
  return true;
}

}  // namespace

// Thunder's fallback gradient `{op}_vjp(((inputs...), {kwargs}), cotangents...)`
// re-runs the torch op under autograd: its forward result (shaped like the
// cotangent) lives while the gradient is computed, then is dropped.
// Measured: half_vjp on a f16[4, 4] cotangent allocates 32 bytes, then its
// f32 output, then frees the 32.
ScratchEstimate VjpScratch(const Trace& trace, const Statement& s) {
  ScratchEstimate out;
  std::vector<ValueId> cotangents;
  for (std::size_t i = 1; i < s.args.size(); ++i) FlattenValues(s.args[i], &cotangents);
  for (ValueId v : cotangents) {
    const Value& value = trace.value(v);
    if (IsTensorKind(value.type->kind)) out.with_outputs += static_cast<std::int64_t>(value.type->bytes);
  }
  return out;
}

ScratchEstimate EstimateScratch(const Trace& trace, const Statement& s) {
  return EstimateScratch(trace, s, FindOp(trace.SymbolOf(s)));
}

ScratchEstimate EstimateScratch(const Trace& trace, const Statement& s, const OpInfo* op) {
  ScratchEstimate out;
  if (s.kind != StatementKind::kCall || op == nullptr) return out;
  if (op->scratch == ScratchRule::kRecomputedForward) return VjpScratch(trace, s);
  if (op->scratch != ScratchRule::kWrappedScalars && op->scratch != ScratchRule::kWrappedBase &&
      op->scratch != ScratchRule::kWhereScalar) {
    return out;
  }
  // The dtype the op computes in: that of its first tensor argument.
  const Value* tensor = nullptr;
  for (const Expr& a : s.args) {
    if (a.kind == Expr::Kind::kValue && IsTensorKind(trace.value(a.value).type->kind)) {
      tensor = &trace.value(a.value);
      break;
    }
  }
  if (tensor == nullptr || tensor->type->dtype == nullptr) return out;
  if (op->scratch == ScratchRule::kWhereScalar) {
    // where(cond, x, 2.0) takes the ScalarOther overload, which makes a 0-d
    // `scalar_tensor` of the result's dtype (measured: 4 bytes for f32), not
    // a wrapped double.
    const std::vector<ValueId> outs = FlatOutputs(s);
    if (outs.empty() || !IsTensorKind(trace.value(outs[0]).type->kind)) return out;
    const int itemsize = trace.value(outs[0]).type->dtype->bits / 8;
    for (const Expr& a : s.args) {
      if (ClassifyConstant(a) != NumberKind::kNone) out.with_outputs += itemsize;
    }
    return out;
  }
  // pow's exponent is a Scalar: only its base (argument 0) can be wrapped.
  const std::size_t wrapped_args = op->scratch == ScratchRule::kWrappedBase ? 1 : s.args.size();
  for (std::size_t i = 0; i < std::min(wrapped_args, s.args.size()); ++i) {
    const Expr& a = s.args[i];
    const NumberKind kind = ClassifyConstant(a);
    if (kind == NumberKind::kNone) continue;
    out.with_outputs += WrappedBytes(kind);
    if (!SameDType(kind, tensor->type->dtype->short_name)) {
      out.with_outputs += tensor->type->dtype->bits / 8;
    }
  }
  return out;
}

}  // namespace peakmem
