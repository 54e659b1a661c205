#include "peakmem/semantics/scratch.h"

#include "absl/container/inlined_vector.h"

#include <algorithm>
#include <vector>

#include "peakmem/semantics/op_registry.h"
#include "peakmem/semantics/type_promotion.h"
#include "peakmem/semantics/view_strides.h"

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

// An integer or bool dtype (what true division computes in float).
bool IsIntegral(const DType* dtype) {
  const std::string_view name = dtype->short_name;
  return !name.empty() && (name[0] == 'i' || name[0] == 'u' || name == "b8");
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

// div without a rounding mode and true_divide promote integer inputs to the
// default float dtype (TensorIterator's promote_integer_inputs_to_float).
bool PromotesIntegersToFloat(const Statement& s, const OpInfo& op) {
  if (op.name == "true_divide") return true;
  if (op.name != "div") return false;  // prims.div (torch_div_prim_impl) truncates integers
  for (const KeywordArg& kw : s.kwargs) {
    if (kw.first == "rounding_mode")
      return kw.second.kind == Expr::Kind::kConstant && kw.second.text == "None";
  }
  return s.args.size() < 3;
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

namespace {

const ValueType* TensorArg(const Trace& trace, const Statement& s, std::size_t i) {
  if (i >= s.args.size() || s.args[i].kind != Expr::Kind::kValue) return nullptr;
  const ValueType* t = trace.value(s.args[i].value).type;
  return IsTensorKind(t->kind) && t->dtype != nullptr ? t : nullptr;
}

const ValueType* FirstOutput(const Trace& trace, const Statement& s) {
  const std::vector<ValueId> outputs = FlatOutputs(s);
  if (outputs.empty()) return nullptr;
  const ValueType* t = trace.value(outputs[0]).type;
  return IsTensorKind(t->kind) && t->dtype != nullptr ? t : nullptr;
}

// Scratch sizes saturate at INT64_MAX instead of overflowing: the model
// then fails at the statement, as for any total past 64 bits.
std::int64_t SaturatingBytes(std::uint64_t numel, int bits) {
  const unsigned __int128 bytes = static_cast<unsigned __int128>(numel) * static_cast<unsigned>(bits) / 8;
  return bytes > static_cast<unsigned __int128>(INT64_MAX) ? INT64_MAX : static_cast<std::int64_t>(bytes);
}

std::int64_t SaturatingAdd(std::int64_t a, std::int64_t b) {
  std::int64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? INT64_MAX : sum;
}

std::int64_t Bytes(std::uint64_t numel, const DType* dtype) { return SaturatingBytes(numel, dtype->bits); }

// gather (and take_along_dim, which gathers) in float16 or bfloat16 makes a
// float32 buffer of the output's size inside the op (measured bf16 and f16
// [64, 48] gathering [64, 3] and [64, 1]: result, then 4 bytes per output
// element, freed; f32, f64, int8 and int16: the result alone).
std::int64_t HalfGatherBuffer(const ValueType& result) {
  const std::string_view dtype = result.dtype->short_name;
  return dtype == "bf16" || dtype == "f16" ? Bytes(result.numel, FindDType("f32")) : 0;
}

// The measured rules of ops whose scratch follows from types alone (the op
// audit, docs/op-audit.md, checks each against the profiler):
//   - sum/prod to another dtype (sum of a bool mask is int64; sum(x,
//     dtype=torch.float32) of bf16): the reduction casts its input to the
//     output dtype first (ReduceOps.cpp make_reduction on the CPU);
//   - take_along_dim: the indices, broadcast to the output's shape, as a
//     contiguous int64 tensor (measured: 8 bytes per output element);
//   - Thunder's pad with interior padding (torchex.py _pad_prim_impl): a
//     `torch.full` of the dilated shape, copied into, then padded into the
//     output;
//   - sort and argsort: an int64 buffer as long as the sorted dimension
//     (measured on f32 [8, 6], [8, 12], [16, 6] and [4, 100], either
//     dimension, 1 and 2 threads: 8 bytes per element of that dimension;
//     argsort, which is sort keeping the indices, also makes the sorted
//     values: argsort of f32[2], found by the differential run, 16 + 8);
//   - Thunder's nll_loss backward (torchex.py _nll_loss_backward_impl):
//     `total_weight.to(a.dtype)` when its dtype differs, else a f64 0-d
//     tensor when it is None.
// (One case per rule: the switch is as long as the rules it sizes.)
ScratchEstimate TypedScratch(const Trace& trace, const Statement& s, ScratchRule rule) {
  ScratchEstimate out;
  const ValueType* result = FirstOutput(trace, s);
  const ValueType* input = TensorArg(trace, s, 0);
  if (result == nullptr || input == nullptr) return out;
  switch (rule) {
    case ScratchRule::kReductionCast:
      if (input->dtype != result->dtype) out.with_outputs = Bytes(input->numel, result->dtype);
      break;
    case ScratchRule::kGatherIndexCopy:
      out.with_outputs = SaturatingAdd(Bytes(result->numel, FindDType("i64")), HalfGatherBuffer(*result));
      break;
    case ScratchRule::kHalfGather:
      out.with_outputs = HalfGatherBuffer(*result);
      break;
    case ScratchRule::kInteriorPadding: {
      if (s.args.size() < 3) break;
      const Expr& config = s.args[2];
      if ((config.kind != Expr::Kind::kTuple && config.kind != Expr::Kind::kList) ||
          config.items.size() != input->shape.size()) {
        break;
      }
      unsigned __int128 numel = 1;
      bool interior = false;
      for (std::size_t d = 0; d < config.items.size(); ++d) {
        const Expr& dim = config.items[d];
        if (dim.items.size() != 3 || !dim.items[2].has_int) return out;
        const std::int64_t dilation = dim.items[2].int_value;
        const std::int64_t length = input->shape[d];
        interior = interior || dilation > 0;
        if (dilation < 0 || dilation > INT64_MAX / std::max<std::int64_t>(1, 2 * length)) return out;
        numel *= static_cast<std::uint64_t>(length + std::max<std::int64_t>(0, length - 1) * dilation);
        if (numel > UINT64_MAX) numel = UINT64_MAX;
      }
      if (interior) out.with_outputs = Bytes(static_cast<std::uint64_t>(numel), input->dtype);
      break;
    }
    case ScratchRule::kNllTotalWeight: {
      const ValueType* a = TensorArg(trace, s, 1);
      if (a == nullptr) break;
      if (s.args.size() > 6 && s.args[6].kind == Expr::Kind::kConstant &&
          s.args[6].text == "None") {
        out.with_outputs = 8;
      } else if (const ValueType* w = TensorArg(trace, s, 6);
                 w != nullptr && w->dtype != a->dtype) {
        out.with_outputs = Bytes(w->numel, a->dtype);
      }
      break;
    }
    case ScratchRule::kSortDimBuffer: {
      const Expr* dim_arg = ArgOrKeyword(s, 1, "dim");
      std::int64_t dim = -1;
      if (dim_arg != nullptr) {
        auto d = IntConstant(*dim_arg);
        if (!d) break;
        dim = *d;
      }
      const std::int64_t d = input->shape.empty() ? -1 : NormalizeDim(dim, input->shape.size());
      if (d >= 0) out.with_outputs = SaturatingBytes(static_cast<std::uint64_t>(input->shape[d]), 64);
      if (FlatOutputs(s).size() == 1) {  // argsort
        out.with_outputs = SaturatingAdd(out.with_outputs, static_cast<std::int64_t>(input->bytes));
      }
      break;
    }
    case ScratchRule::kGlobalMean: {
      // ATen's adaptive_avg_pool2d to an output of 1x1 is
      // `input.mean({-1, -2}, keepdim=True)`: the sum into the result, then
      // `div_` by the count, a wrapped int64 cast to the result's dtype
      // (measured f32 [4,128,8,8]: result, then 8 + 4 inside; f64: 8 + 8).
      // A bf16 or f16 mean sums a float32 copy of the input into a float32
      // result first (measured bf16 [4,128,8,8]: 1024, then 2048 and
      // 131072 inside). Other output sizes pool without scratch.
      const std::size_t rank = result->shape.size();
      if (rank < 2 || result->shape[rank - 1] != 1 || result->shape[rank - 2] != 1) break;
      const std::string_view dtype = input->dtype->short_name;
      if (dtype == "bf16" || dtype == "f16") {
        const DType* f32 = FindDType("f32");
        out.with_outputs = SaturatingAdd(Bytes(input->numel, f32), Bytes(result->numel, f32));
      } else {
        out.with_outputs = 8 + input->dtype->bits / 8;
      }
      break;
    }
    default:
      break;
  }
  return out;
}

}  // namespace

ScratchEstimate ElementwiseOperandScratch(std::span<const ValueType* const> tensors,
                                          std::span<const NumberKind> numbers, bool integers_to_float) {
  ScratchEstimate out;
  // Most calls: tensors of one dtype and no number. They compute in that
  // dtype (result_type of equal dtypes is that dtype), so nothing is copied
  // or wrapped, unless true division turns integers to float.
  if (numbers.empty() && !tensors.empty() && tensors[0]->dtype != nullptr) {
    const DType* only = tensors[0]->dtype;
    const bool same = std::all_of(tensors.begin(), tensors.end(),
                                  [only](const ValueType* t) { return t->dtype == only; });
    if (same && !(integers_to_float && IsIntegral(only))) return out;
  }
  const DType* common = ResultType({tensors, numbers});
  if (common == nullptr) return out;  // no promotion PyTorch accepts: nothing to say
  if (integers_to_float && common->bits > 0 && IsIntegral(common)) {
    common = FindDType("f32");  // true division of integers computes in the default dtype
  }
  // Each tensor operand of another dtype is copied to the computation dtype.
  for (const ValueType* t : tensors) {
    if (t->dtype != common) {
      out.with_outputs = SaturatingAdd(out.with_outputs, SaturatingBytes(t->numel, common->bits));
    }
  }
  // Each number is wrapped (and cast when its wrapped dtype is not the computation's).
  for (NumberKind kind : numbers) {
    out.with_outputs = SaturatingAdd(out.with_outputs, WrappedBytes(kind));
    if (!SameDType(kind, common->short_name)) {
      out.with_outputs = SaturatingAdd(out.with_outputs, common->bits / 8);
    }
  }
  return out;
}

ScratchEstimate EstimateScratch(const Trace& trace, const Statement& s, const OpInfo* op) {
  ScratchEstimate out;
  if (s.kind != StatementKind::kCall || op == nullptr) return out;
  if (op->scratch == ScratchRule::kRecomputedForward) return VjpScratch(trace, s);
  if (op->scratch == ScratchRule::kReductionCast || op->scratch == ScratchRule::kGatherIndexCopy ||
      op->scratch == ScratchRule::kInteriorPadding || op->scratch == ScratchRule::kNllTotalWeight ||
      op->scratch == ScratchRule::kSortDimBuffer || op->scratch == ScratchRule::kGlobalMean ||
      op->scratch == ScratchRule::kHalfGather) {
    return TypedScratch(trace, s, op->scratch);
  }
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
  // (Inline: this runs for every elementwise call of a trace.)
  absl::InlinedVector<const ValueType*, 4> tensors;
  absl::InlinedVector<NumberKind, 4> numbers;
  bool one_dtype = true;
  for (std::size_t i = 0; i < s.args.size(); ++i) {
    const Expr& a = s.args[i];
    if (a.kind == Expr::Kind::kValue && IsTensorKind(trace.value(a.value).type->kind)) {
      tensors.push_back(trace.value(a.value).type);
      one_dtype = one_dtype && tensors.back()->dtype == tensor->type->dtype;
    } else if (i < wrapped_args) {
      const NumberKind kind = ClassifyConstant(a);
      if (kind != NumberKind::kNone) numbers.push_back(kind);
    }
  }
  // Tensors of one floating dtype and no number compute in that dtype:
  // nothing to copy or wrap (ElementwiseOperandScratch says the same,
  // after asking whether the op divides integers, a name compare).
  if (one_dtype && numbers.empty() && !IsIntegral(tensor->type->dtype)) return out;
  return ElementwiseOperandScratch(tensors, numbers, PromotesIntegersToFloat(s, *op));
}

}  // namespace peakmem
