// What one op call does to the runtime model's heap: the objects its
// outputs are bound to (an input, a view of an input's storage, or a new
// storage laid out by the op's layout rule) and the scratch it allocates and
// frees inside the call, all by the op registry's declarations (see
// runtime_interpreter.h).
#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <thread>

#include "peakmem/semantics/blas_operands.h"
#include "peakmem/ir/dtensor_layout.h"
#include "peakmem/semantics/convolution_scratch.h"
#include "peakmem/semantics/cuda_scratch_rules.h"
#include "peakmem/semantics/fusion.h"
#include "peakmem/semantics/scratch.h"
#include "peakmem/semantics/view_strides.h"
#include "runtime_interpreter.h"

namespace peakmem {
namespace runtime_detail {

ObjectId RuntimeModel::ArgObject(const Statement& s, std::size_t index) const {
  if (index >= s.args.size() || s.args[index].kind != Expr::Kind::kValue) return kNone;
  const ValueId v = s.args[index].value;
  return bound_[v] ? object_of_[v] : kNone;
}

namespace {

bool IsTrue(const Expr& e) { return e.kind == Expr::Kind::kConstant && e.text == "True"; }

bool KeywordIsTrue(const Statement& s, std::string_view keyword) {
  for (const auto& [name, e] : s.kwargs) {
    if (name == keyword) return IsTrue(e);
  }
  return false;
}

// OpInfo::returns_input_if_true: the call passes True there.
bool ReturnsInputByArgument(const Statement& s, const OpInfo* op) {
  if (op == nullptr || op->returns_input_if_true < 0) return false;
  const auto at = static_cast<std::size_t>(op->returns_input_if_true);
  if (at < s.args.size()) return IsTrue(s.args[at]);
  return KeywordIsTrue(s, op->returns_input_keyword);
}

}  // namespace

ObjectId RuntimeModel::FirstTensorArg(const Statement& s) {
  auto tensor = [&](ValueId v) {
    return bound_[v] && IsTensorKind(ValueOf(v).type->kind) &&
           objects_[object_of_[v]].kind == Object::Kind::kTensor;
  };
  // Usually the first positional argument: no flattening needed.
  if (!s.args.empty() && s.args[0].kind == Expr::Kind::kValue && tensor(s.args[0].value)) {
    return object_of_[s.args[0].value];
  }
  FlatArgs(s, &flat_args_);
  for (ValueId v : flat_args_) {
    if (tensor(v)) return object_of_[v];
  }
  return kNone;
}

Dims RuntimeModel::ViewStrides(const Statement& s, const OpInfo& op, const Object& input,
                               const Value& out, bool* known) {
  const Dims& in_shape = input.type->shape;
  const Dims& in_strides = StridesOf(input);
  const Dims& out_shape = out.type->shape;
  *known = input.layout_known;
  std::string error;
  if (auto strides = ViewOutputStrides(op.layout, s, in_shape, in_strides, out_shape, &error)) {
    return std::move(*strides);
  }
  if (!error.empty()) Fail(s.at, error);
  if (out_shape == in_shape) return in_strides;
  if (IsContiguous(in_shape, in_strides)) return ContiguousStrides(out_shape);
  *known = false;
  Diagnose("line " + std::to_string(s.source_line) + ": the strides of view op '" + std::string(trace_.SymbolOf(s)) +
           "' are not followed; its output is assumed contiguous");
  return ContiguousStrides(out_shape);
}

namespace {

// Bytes of a contiguous copy of `numel` elements of `dtype`.
std::int64_t CopyBytes(std::int64_t numel, const DType* dtype) { return numel * dtype->bits / 8; }

}  // namespace

// CPU matrix products hand BLAS only operands laid out as a row- or
// column-major matrix (ATen's addmm_impl_cpu_: unit stride in one dimension
// and a leading dimension at least the other's size); any other operand (an
// expanded view with stride 0, a strided slice) is cloned contiguous first,
// after the output is allocated, and freed when the op returns (found by
// the differential tester: `v = x.unsqueeze(0).expand(2, 3); v @ v.t()`
// measures two 24-byte clones on top of the output). ATen's matmul on the
// CPU (LinearAlgebra.cpp, _matmul_impl):
//   - 2-D @ 2-D is mm, with those clones;
//   - 1-D @ 2-D is a.unsqueeze(0).mm(b): the vector is cloned unless its
//     stride is 1 (found by the differential tester: `F.linear(v, w)` of a
//     1-D v and an expanded w clones w); 2-D @ 1-D is mv, which clones only
//     a matrix BLAS cannot take (measured: a strided or stride-0 vector is
//     taken as it is);
//   - N-D (N >= 3) @ 1-D or 2-D (or the reverse, on b transposed) folds
//     the larger operand's leading dimensions into one when they view as
//     one (should_fold), then mm; 2-D @ N-D then copies the transposed
//     product into a contiguous output (the mm result is scratch);
//   - linear(x, w, bias) is the product x @ w.t() (addmm, or matmul and an
//     in-place bias add), with the same copies;
//   - otherwise both operands are broadcast over the batch dimensions
//     (`expand`, a view) and reshaped to 3-D [batch, n, k] / [batch, k, m]:
//     a contiguous copy of the expanded operand when no view exists; bmm
//     takes the reshaped operands as they are.
// The copies live until the product returns, alongside the output.
// Measured by the model zoo (tests/data/zoo/bert: q @ k^T of permuted
// [2, 4, 128, 64] heads copies both operands) and the op audit.
namespace {

// A matrix-product operand as the product sees it: linear's weight is
// taken transposed. Its shape and strides are views (of the tensor's, or
// of the transposed weight's): products are a tenth of a model's calls.
struct ProductOperand {
  std::span<const std::int64_t> shape;
  std::span<const std::int64_t> strides;
  std::int64_t bytes = 0;  // of the tensor (a contiguous copy's size)
  const DType* dtype = nullptr;
};

// N-D (N >= 3) @ 1-D or 2-D, or the reverse: should_fold folds the larger
// operand (b transposed when it is the larger) to 2-D when its leading
// dimensions view as one, then mm. The copies, or nothing when it does not
// fold (the batched path then). `out`: the product's type, when known.
std::optional<std::int64_t> FoldedProductCopies(const ProductOperand& a, const ProductOperand& b,
                                                const ValueType* out) {
  {
    const bool transpose = b.shape.size() > a.shape.size();
    const ProductOperand& big = transpose ? b : a;
    Dims shape(big.shape.begin(), big.shape.end());
    Dims strides(big.strides.begin(), big.strides.end());
    if (transpose) {
      std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
      std::swap(strides[strides.size() - 1], strides[strides.size() - 2]);
    }
    bool folds = true;
    std::int64_t numel = 1;
    for (std::int64_t d : shape) numel *= d;
    for (std::size_t i = 0; i + 2 < shape.size(); ++i) {
      folds = folds && strides[i] == strides[i + 1] * shape[i + 1];
    }
    if (folds || numel == 0) {
      const std::int64_t k = shape.back();
      const std::int64_t rows = k == 0 ? 0 : numel / k;
      std::int64_t bytes = 0;
      if (auto folded = ComputeViewStrides(shape, strides, Dims{rows, k});
          folded && !BlasTakes(rows, k, (*folded)[0], (*folded)[1])) {
        bytes += big.bytes;
      }
      const ProductOperand& small = transpose ? a : b;
      const std::span<const std::int64_t> ss = small.shape;
      if (ss.size() == 2) {
        const std::span<const std::int64_t> st = small.strides;
        // 2-D @ N-D multiplies by a.t(): its strides swap.
        const bool takes = transpose ? BlasTakes(ss[1], ss[0], st[1], st[0])
                                     : BlasTakes(ss[0], ss[1], st[0], st[1]);
        if (!takes) bytes += small.bytes;
        // The product of b^T a^T is transposed back by a contiguous copy:
        // the mm result is scratch beside the output.
        if (transpose && out != nullptr) {
          const Dims& os = out->shape;
          if (os.size() >= 2 && os[os.size() - 1] != 1 && os[os.size() - 2] != 1) {
            bytes += static_cast<std::int64_t>(out->bytes);
          }
        }
      }
      return bytes;
    }
  }
  return std::nullopt;
}

// Batched: both operands broadcast over the batch dimensions, then
// reshaped to 3-D for bmm; the copies of those that do not view so, or
// that BLAS cannot take.
std::int64_t BatchedProductCopies(const ProductOperand (&operands)[2]) {
  const ProductOperand& a = operands[0];
  const ProductOperand& b = operands[1];
  const std::size_t da = a.shape.size(), db = b.shape.size();
  const Dims ba(a.shape.begin(), a.shape.end() - (da >= 2 ? 2 : 1));
  const Dims bb(b.shape.begin(), b.shape.end() - (db >= 2 ? 2 : 1));
  Dims batch(std::max(ba.size(), bb.size()), 1);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const std::int64_t x = i + ba.size() >= batch.size() ? ba[i + ba.size() - batch.size()] : 1;
    const std::int64_t y = i + bb.size() >= batch.size() ? bb[i + bb.size() - batch.size()] : 1;
    if (x != y && x != 1 && y != 1) return 0;  // not broadcastable: PyTorch raises
    batch[i] = x == 1 ? y : x;
  }
  std::int64_t batch_numel = 1;
  for (std::int64_t d : batch) batch_numel *= d;
  // contraction * rows * cols of each batch's product
  const std::int64_t rows = da >= 2 ? a.shape[da - 2] : 1, inner = a.shape[da - 1];
  const std::int64_t cols = db >= 2 ? b.shape[db - 1] : 1;
  const std::int64_t product_size = rows * inner * cols;
  std::int64_t bytes = 0;
  for (int which = 0; which < 2; ++which) {
    const std::span<const std::int64_t> shape = operands[which].shape;
    const std::span<const std::int64_t> strides = operands[which].strides;
    // The matrix dims: a 1-D a is a row [1, k]; a 1-D b a column [k, 1].
    Dims matrix;
    Dims matrix_strides;
    if (shape.size() == 1) {
      matrix = which == 0 ? Dims{1, shape[0]} : Dims{shape[0], 1};
      matrix_strides = which == 0 ? Dims{0, strides[0]} : Dims{strides[0], 0};
    } else {
      matrix = {shape[shape.size() - 2], shape[shape.size() - 1]};
      matrix_strides = {strides[strides.size() - 2], strides[strides.size() - 1]};
    }
    // The expanded operand: batch dims (stride 0 where broadcast) then the matrix.
    const std::size_t own_batch = shape.size() >= 2 ? shape.size() - 2 : 0;
    Dims expanded = batch;
    Dims expanded_strides(batch.size(), 0);
    for (std::size_t i = 0; i < own_batch; ++i) {
      const std::size_t at = batch.size() - own_batch + i;
      if (shape[i] == batch[at]) expanded_strides[at] = strides[i];
    }
    expanded.insert(expanded.end(), matrix.begin(), matrix.end());
    expanded_strides.insert(expanded_strides.end(), matrix_strides.begin(), matrix_strides.end());
    const auto viewed = ComputeViewStrides(expanded, expanded_strides, Dims{batch_numel, matrix[0], matrix[1]});
    // bmm hands each batch's matrices to BLAS, which takes only row- or
    // column-major ones: another layout (a row broadcast with stride 0) is
    // copied contiguous, except by the naive kernel of small products
    // (ATen's bmm_out_or_baddbmm_: contraction * rows * cols < 400). Found
    // by the op audit: SDPA on an expanded [64, 48] operand copies it
    // (12288 bytes in f32, 6144 in bf16); at [8, 6] nothing.
    const bool blas_copies = viewed && product_size >= 400 &&
                             !BlasTakes(matrix[0], matrix[1], (*viewed)[1], (*viewed)[2]);
    if (!viewed || blas_copies) {
      bytes += CopyBytes(batch_numel * matrix[0] * matrix[1], operands[which].dtype);
    }
  }
  return bytes;
}

}  // namespace

namespace {

// The copies of a product of `a` and `b` (see above), `out` its type when
// known. Takes its operands by value: linear's weight is transposed here.
std::int64_t ProductCopies(bool linear, bool matmul, ProductOperand a, ProductOperand b,
                           const ValueType* out) {
  std::int64_t transposed_shape[2];
  std::int64_t transposed_strides[2];
  if (linear) {  // input @ weight.t()
    if (b.shape.size() != 2 || b.strides.size() != 2) return 0;
    transposed_shape[0] = b.shape[1];
    transposed_shape[1] = b.shape[0];
    transposed_strides[0] = b.strides[1];
    transposed_strides[1] = b.strides[0];
    b.shape = transposed_shape;
    b.strides = transposed_strides;
  }
  const std::size_t da = a.shape.size(), db = b.shape.size();
  if (da == 2 && db == 2) {
    std::int64_t bytes = 0;
    for (const ProductOperand* o : {&a, &b}) {
      if (!BlasTakes(o->shape[0], o->shape[1], o->strides[0], o->strides[1])) bytes += o->bytes;
    }
    return bytes;
  }
  if ((linear || matmul) && da == 1 && db == 2) {
    // a.unsqueeze(0).mm(b): the row [1, k] is cloned unless its elements
    // are adjacent (a stride-0 or strided vector is), the matrix unless it
    // has a unit stride.
    const bool row_taken = a.shape[0] <= 1 || a.strides[0] == 1;
    return (row_taken ? 0 : a.bytes) +
           (BlasTakesWithUnitStride(b.shape[0], b.shape[1], b.strides[0], b.strides[1]) ? 0 : b.bytes);
  }
  if (matmul && da == 2 && db == 1) {
    // mv: the matrix unless it has a unit stride; gemv takes the vector at any stride.
    return BlasTakesWithUnitStride(a.shape[0], a.shape[1], a.strides[0], a.strides[1]) ? 0 : a.bytes;
  }
  if ((!linear && !matmul) || da == 0 || db == 0 || (da < 3 && db < 3)) return 0;
  if ((da >= 3 && db <= 2) || (db >= 3 && da <= 2)) {
    if (const auto folded = FoldedProductCopies(a, b, out)) return *folded;
  }
  const ProductOperand operands[2] = {a, b};
  return BatchedProductCopies(operands);
}

bool SameDims(const Dims& d, std::span<const std::int64_t> s) {
  return std::equal(d.begin(), d.end(), s.begin(), s.end());
}

}  // namespace

std::int64_t RuntimeModel::MatmulOperandClones(const Statement& s, const OpInfo* op) const {
  if (op == nullptr || op->scratch != ScratchRule::kBlasOperandClones) return 0;
  const bool linear = op->form == CallForm::kLinear;
  const bool matmul = op->form == CallForm::kMatmul;
  ProductOperand operands[2];
  const ValueType* types[2] = {};
  int n = 0;
  for (const Expr& e : s.args) {
    if (e.kind != Expr::Kind::kValue || !bound_[e.value]) continue;
    const Object& o = objects_[object_of_[e.value]];
    if (o.kind != Object::Kind::kTensor) continue;
    if (n == 2) {
      if (linear) break;  // the bias: added to the product, copies nothing
      return 0;
    }
    if (o.type->dtype == nullptr) return 0;
    const Dims& strides = StridesOf(o);
    types[n] = o.type;
    operands[n++] = {{o.type->shape.data(), o.type->shape.size()}, {strides.data(), strides.size()},
                     static_cast<std::int64_t>(o.type->bytes), o.type->dtype};
  }
  if (n != 2) return 0;
  const ValueType* out = s.outputs.kind == Pattern::Kind::kValue ? ValueOf(s.outputs.value).type : nullptr;
  // The answer is a function of the op, the operands' types (shape, bytes,
  // dtype) and strides, and the output's type: asked again, it is looked up.
  for (const ProductAnswer& known : product_answers_) {
    if (known.op == op && known.a == types[0] && known.b == types[1] && known.out == out &&
        SameDims(known.a_strides, operands[0].strides) && SameDims(known.b_strides, operands[1].strides)) {
      return known.bytes;
    }
  }
  const std::int64_t bytes = ProductCopies(linear, matmul, operands[0], operands[1], out);
  ProductAnswer& slot = product_answers_[next_product_answer_++ % product_answers_.size()];
  slot = {op, types[0], types[1], out, Dims(operands[0].strides.begin(), operands[0].strides.end()),
          Dims(operands[1].strides.begin(), operands[1].strides.end()), bytes};
  return bytes;
}

bool RuntimeModel::HasTensorAfterFirst(const Statement& s) {
  FlatArgs(s, &flat_args_);
  int tensors = 0;
  for (ValueId v : flat_args_) tensors += IsTensorKind(ValueOf(v).type->kind) ? 1 : 0;
  return tensors > 1;
}

std::int64_t RuntimeModel::ContiguousArgumentCopy(const Statement& s, const OpInfo* op) const {
  if (op == nullptr || op->contiguous_copy_arguments == 0) return 0;
  std::int64_t bytes = 0;
  for (std::size_t at = 0; at < s.args.size() && at < 32; ++at) {
    if ((op->contiguous_copy_arguments >> at & 1u) == 0) continue;
    if (s.args[at].kind != Expr::Kind::kValue || !bound_[s.args[at].value]) continue;
    const Object& o = objects_[object_of_[s.args[at].value]];
    if (o.kind == Object::Kind::kTensor && !o.contiguous)
      bytes += static_cast<std::int64_t>(o.type->bytes);
  }
  return bytes;
}

Dims RuntimeModel::AllocatedStrides(const Statement& s, const OpInfo* op, const Value& out) {
  const Dims& shape = out.type->shape;
  if (op == nullptr) return ContiguousStrides(shape);
  switch (op->layout) {
    case LayoutRule::kElementwise: {
      std::vector<Operand>& operands = operands_;
      operands.clear();
      FlatArgs(s, &flat_args_);
      for (ValueId v : flat_args_) {
        if (!IsTensorKind(ValueOf(v).type->kind) || !bound_[v]) continue;
        const Object& o = objects_[object_of_[v]];
        if (o.kind != Object::Kind::kTensor || o.type->shape.size() > shape.size()) continue;
        operands.push_back({&o.type->shape, &StridesOf(o), o.contiguous});
      }
      if (operands.empty()) return ContiguousStrides(shape);
      return ElementwiseOutputStrides(shape, operands);
    }
    case LayoutRule::kStrideOrder: {
      std::optional<Dims> order;
      if (s.args.size() >= 2) order = IntList(s.args[1]);
      if (!order || order->size() != shape.size()) return ContiguousStrides(shape);
      std::vector<std::size_t> dims(shape.size());
      for (std::size_t d = 0; d < dims.size(); ++d) dims[d] = d;
      std::stable_sort(dims.begin(), dims.end(),
                       [&](std::size_t a, std::size_t b) { return (*order)[a] < (*order)[b]; });
      Dims strides(shape.size(), 1);
      std::int64_t next = 1;
      for (std::size_t d : dims) {
        strides[d] = next;
        next *= std::max<std::int64_t>(shape[d], 1);
      }
      return strides;
    }
    case LayoutRule::kPreserve: {
      const ObjectId in = FirstTensorArg(s);
      if (in != kNone && objects_[in].type->shape == shape) {
        return PreserveFormatStrides(shape, StridesOf(objects_[in]));
      }
      return ContiguousStrides(shape);
    }
    default:
      return ContiguousStrides(shape);
  }
}

ObjectId RuntimeModel::ReturnedInput(const Statement& s, const OpInfo& op, ValueId out,
                                     std::size_t index) {
  ObjectId in = kNone;
  if (op.returned_arg >= 0) {
    in = ArgObject(s, static_cast<std::size_t>(op.returned_arg));
  } else {
    FlatArgs(s, &flat_args_);
    if (index < flat_args_.size() && bound_[flat_args_[index]]) in = object_of_[flat_args_[index]];
  }
  if (in != kNone && objects_[in].kind == Object::Kind::kTensor) return in;
  Diagnose("line " + std::to_string(s.source_line) + ": '" + std::string(trace_.SymbolOf(s)) +
           "' should return an input tensor, but its argument is not a live tensor; "
           "counted as allocating");
  return NewAllocatedTensor(out, ContiguousStrides(ValueOf(out).type->shape), Role::kIntermediate);
}

// to / type_as: the input itself when dtype, device and shape do not change
// and no copy is asked; else a copy in the input's memory format.
ObjectId RuntimeModel::ConversionResult(const Statement& s, ObjectId in, ValueId out) {
  const Value& v = ValueOf(out);
  const Object& input = objects_[in];
  const Value* in_value = &v;
  FlatArgs(s, &flat_args_);
  for (ValueId a : flat_args_) {
    if (bound_[a] && object_of_[a] == in) {
      in_value = &ValueOf(a);
      break;
    }
  }
  if (!KeywordIsTrue(s, "copy") && in_value->type->dtype == v.type->dtype &&
      in_value->type->device == v.type->device && input.type->shape == v.type->shape) {
    return in;
  }
  return NewAllocatedTensor(out, PreserveFormatStrides(v.type->shape, StridesOf(input)),
                            Role::kIntermediate);
}

// Ops that return a view or a copy depending on the input's layout.
ObjectId RuntimeModel::MaybeViewResult(const Statement& s, const OpInfo& op, ObjectId in,
                                       ValueId out) {
  const Value& v = ValueOf(out);
  const Object& input = objects_[in];
  if (!input.layout_known) {
    Diagnose("line " + std::to_string(s.source_line) + ": whether '" + std::string(trace_.SymbolOf(s)) +
             "' copies depends on strides peakmem did not follow; assumed a view");
  }
  if (op.layout == LayoutRule::kReshape) {
    if (auto strides = ComputeViewStrides(input.type->shape, StridesOf(input), v.type->shape)) {
      return NewTensor(out, input.storage, std::move(*strides), input.layout_known);
    }
    return NewAllocatedTensor(out, ContiguousStrides(v.type->shape), Role::kIntermediate);
  }
  if (op.layout == LayoutRule::kContiguous) {  // contiguous(): self when already contiguous
    if (input.contiguous) return in;
    return NewAllocatedTensor(out, ContiguousStrides(v.type->shape), Role::kIntermediate);
  }
  return ConversionResult(s, in, out);
}

ObjectId RuntimeModel::CallResult(const Statement& s, const OpInfo* op, ValueId out,
                                  std::size_t index) {
  const Value& v = ValueOf(out);
  if (v.type->kind == ValueKind::kUnknown) {
    Fail(v.defined_at, "cannot determine the size of '" + std::string(v.name) +
                           "': no type comment and no subsymbol defines it");
  }
  if (!IsTensorKind(v.type->kind)) return MakeValueObject(out, Role::kIntermediate, true, 0);
  if (ReturnsInputByArgument(s, op)) return ReturnedInput(s, *op, out, index);
  switch (op == nullptr ? OpEffect::kAllocates : op->effect) {
    case OpEffect::kReturnsInput:
    case OpEffect::kInPlace:
      return ReturnedInput(s, *op, out, index);
    case OpEffect::kViewOfInput: {
      const ObjectId in = FirstTensorArg(s);
      if (in == kNone) break;
      if (op->allocates_with_tensor_argument && HasTensorAfterFirst(s)) break;
      bool known = true;
      const Object& input = objects_[in];
      Dims strides = ViewStrides(s, *op, input, v, &known);
      return NewTensor(out, input.storage, std::move(strides), known);
    }
    case OpEffect::kMaybeView: {
      const ObjectId in = FirstTensorArg(s);
      if (in == kNone) break;
      return MaybeViewResult(s, *op, in, out);
    }
    case OpEffect::kFusion: {
      const StorageId storage = NewStorage(FusionOutputBytes(trace_, s, out), out, Role::kIntermediate);
      return NewTensor(out, storage, ContiguousStrides(v.type->shape), true);
    }
    default:
      break;
  }
  return NewAllocatedTensor(out, AllocatedStrides(s, op, v), Role::kIntermediate);
}

// A DTensor op whose operands are placed differently redistributes them to
// its output's placements before the local computation. Modelled: an
// operand replicated on every mesh dimension, of the output's global shape,
// becomes the output's shard by a copy of its local chunk (torch's
// Replicate -> Shard: `_split_tensor` then a contiguous chunk), alive with
// the output until the op returns; measured on 2 and 4 ranks
// (tests/data/dtensor, mixed-placements). Any other mix (Shard(0) with
// Shard(1): an all-gather and a copy) is said in the diagnostics, its
// buffers not counted.
std::int64_t RuntimeModel::DTensorRedistribution(const Statement& s) {
  FlatArgs(s, &flat_args_);
  const std::vector<ValueId> outs = FlatOutputs(s);  // flat_outs_ holds the call's outputs
  const ValueType* out = outs.empty() ? nullptr : ValueOf(outs[0]).type;
  if (out == nullptr || out->dtensor_layout.empty()) return 0;
  // Operands placed alike need nothing (linear of two Shard(1) operands
  // makes a Partial result from their shards as they are).
  const std::string* first = nullptr;
  bool alike = true;
  for (ValueId v : flat_args_) {
    const std::string& layout = ValueOf(v).type->dtensor_layout;
    if (layout.empty()) continue;
    if (first == nullptr) first = &layout;
    alike = alike && layout == *first;
  }
  if (alike) return 0;
  std::int64_t bytes = 0;
  for (ValueId v : flat_args_) {
    const ValueType* t = ValueOf(v).type;
    if (t->dtensor_layout.empty() || t->dtensor_layout == out->dtensor_layout) continue;
    DTensorLayout layout;
    TypeStringError ignored;
    bool replicated = ParseDTensorLayout(t->dtensor_layout, &layout, &ignored);
    for (const DTensorPlacement& p : layout.placements) {
      replicated = replicated && p.kind == DTensorPlacement::Kind::kReplicate;
    }
    if (replicated && t->global_shape == out->global_shape && t->dtype != nullptr) {
      bytes += static_cast<std::int64_t>(out->numel) * t->dtype->bits / 8;
      continue;
    }
    Diagnose("line " + std::to_string(s.source_line) + ": the DTensor operands of '" +
             std::string(trace_.SymbolOf(s)) + "' are placed differently (" +
             t->dtensor_layout.substr(1) + ", the result " + out->dtensor_layout.substr(1) +
             "): DTensor redistributes inside the op, memory peakmem does not model");
    return bytes;
  }
  return bytes;
}

// A float16/bfloat16 sum over every dimension of a tensor that is not
// non-overlapping and dense (expanded, sliced) reduces a float32 copy of it
// into a float32 accumulator, then casts: measured bf16 [64, 48] expanded
// from [1, 48] or sliced: [2 (result), 4, 12288, -12288, -4]; f16 alike; a
// transposed (dense) input, a reduction over some dimensions, another dtype
// or prod: nothing. (sum to another dtype is the reduction cast, scratch.cc.)
std::int64_t RuntimeModel::HalfFullReductionCopy(const Statement& s, const OpInfo& op) const {
  const ObjectId in = ArgObject(s, 0);
  const std::vector<ValueId> outs = FlatOutputs(s);
  if (in == kNone || outs.empty() || !op.half_full_reduction_copy) return 0;
  const Object& input = objects_[in];
  const ValueType& result = *ValueOf(outs[0]).type;
  if (input.kind != Object::Kind::kTensor || input.type->dtype == nullptr || result.dtype != input.type->dtype) return 0;
  const std::string_view dtype = input.type->dtype->short_name;
  if (dtype != "bf16" && dtype != "f16") return 0;
  if (result.numel != 1 || input.type->numel <= 1) return 0;  // not a reduction over every dimension
  if (IsNonOverlappingAndDense(input.type->shape, StridesOf(input))) return 0;
  return static_cast<std::int64_t>(input.type->numel) * 4 + 4;
}

int RuntimeModel::CpuThreads() const {
  return options_.cpu_threads > 0 ? options_.cpu_threads
                                  : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// torch.index_add(self, dim, index, source) in bfloat16/float16 on the CPU
// (index_add_cpu_out, torch 2.13, measured with the profiler for bf16 and
// f16, 1 to 8 threads, 2-, 3- and 4-d self): with self of 2 or more
// dimensions, dim 0 or the last, an int64 index and alpha 1, ATen forwards
// to scatter_add_ with the index expanded (a stride-0 view, no buffer), and
// scatter_add accumulates half types in float32:
//   - dim 0, K = self.numel() / self.size(0) >= 16 and a contiguous source:
//     the expanded-index kernel's per-thread rows, zeros({threads, K}, f32):
//     4 * threads * K bytes ([64, 48]: 192, 384, 1536 at 1, 2, 8 threads);
//   - otherwise (K < 16, the last dim, a strided source): a float32 copy of
//     the result, 4 * self.numel() ([8, 6]: 192; [64, 48] dim 1: 12,288);
//   - a strided index is made contiguous first (8 bytes an element), alive
//     until the op returns ([64, 48], index[::2] of 20: +160 +384 -384 -160).
// Both alive beside the output. Other cases (float32, a middle dim, a 1-d
// self, an int32 index, alpha != 1) allocate nothing inside.
std::int64_t RuntimeModel::HalfIndexAddBuffer(const Statement& s) const {
  const ObjectId self = ArgObject(s, 0), index = ArgObject(s, 2), source = ArgObject(s, 3);
  if (self == kNone || index == kNone || source == kNone || s.args.size() < 4) return 0;
  const Object& a = objects_[self];
  const Object& i = objects_[index];
  const Object& src = objects_[source];
  if (a.kind != Object::Kind::kTensor || i.kind != Object::Kind::kTensor || src.kind != Object::Kind::kTensor ||
      a.type->dtype == nullptr || i.type->dtype == nullptr) {
    return 0;
  }
  if (a.type->device.rfind("cpu", 0) != 0 && a.type->device != "meta") return 0;
  const std::string_view dtype = a.type->dtype->short_name;
  if ((dtype != "bf16" && dtype != "f16") || i.type->dtype->short_name != "i64") return 0;
  for (const auto& [name, e] : s.kwargs) {
    if (name == "alpha" && !(e.kind == Expr::Kind::kConstant && (e.text == "1" || e.text == "1.0"))) return 0;
  }
  const auto rank = static_cast<std::int64_t>(a.type->shape.size());
  const Expr& dim_arg = s.args[1];
  if (rank < 2 || dim_arg.kind != Expr::Kind::kConstant || !dim_arg.has_int) return 0;
  const std::int64_t dim = dim_arg.int_value < 0 ? dim_arg.int_value + rank : dim_arg.int_value;
  if (dim != 0 && dim != rank - 1) return 0;
  const auto numel = static_cast<std::int64_t>(a.type->numel);
  const std::int64_t row = a.type->shape[0] > 0 ? numel / a.type->shape[0] : 0;
  const bool per_thread_rows = dim == 0 && row >= 16 && IsContiguous(src.type->shape, StridesOf(src));
  const std::int64_t buffer = per_thread_rows ? 4 * static_cast<std::int64_t>(CpuThreads()) * row : 4 * numel;
  const std::int64_t index_copy =
      IsContiguous(i.type->shape, StridesOf(i)) ? 0 : 8 * static_cast<std::int64_t>(i.type->numel);
  return buffer + index_copy;
}

// On the CPU, and on `meta`, which stands for the CPU when a step is
// estimated without allocating (peakmem.estimate_step on meta inputs).
ScratchEstimate RuntimeModel::ConvolutionScratch(const Statement& s, const OpInfo& op) {
  const ObjectId input = ArgObject(s, 0), weight = ArgObject(s, 1);
  const std::vector<ValueId> outs = FlatOutputs(s);
  if (input == kNone || weight == kNone || outs.empty()) return {};
  const Object& in = objects_[input];
  const Object& w = objects_[weight];
  if (in.kind != Object::Kind::kTensor || w.kind != Object::Kind::kTensor ||
      (in.type->device.rfind("cpu", 0) != 0 && in.type->device != "meta")) {
    return {};  // GPU convolutions' workspaces are not modelled (no CPU scratch either)
  }
  ConvolutionCall call;
  call.input = {in.type->shape, StridesOf(in), in.type->dtype};
  call.weight = {w.type->shape, StridesOf(w), w.type->dtype};
  call.output_shape = ValueOf(outs[0]).type->shape;
  call.threads = CpuThreads();
  std::string why_not;
  if (ReadConvolutionArguments(s, op, &call, &why_not)) {
    if (auto scratch = CpuConvolutionScratch(call, &why_not)) return *scratch;
  }
  Diagnose("line " + std::to_string(s.source_line) + ": what '" + std::string(trace_.SymbolOf(s)) +
           "' allocates inside the op is not counted: " + why_not);
  return {};
}

bool RuntimeModel::RunsOnCuda(const Statement& s) const {
  if (options_.context.target) return *options_.context.target == KernelDevice::kCuda;
  for (const Expr& e : s.args) {
    if (e.kind != Expr::Kind::kValue) continue;
    const ValueType& t = *ValueOf(e.value).type;
    if (IsTensorKind(t.kind)) return options_.context.KernelsFor(t.device) == KernelDevice::kCuda;
  }
  const std::vector<ValueId> outs = FlatOutputs(s);
  return !outs.empty() && IsTensorKind(ValueOf(outs[0]).type->kind) &&
         options_.context.KernelsFor(ValueOf(outs[0]).type->device) == KernelDevice::kCuda;
}

void RuntimeModel::DiagnoseCpuOnlyRule(const Statement& s, std::string_view rule) {
  Diagnose("line " + std::to_string(s.source_line) + ": '" + std::string(trace_.SymbolOf(s)) +
           "' on CUDA: " + std::string(rule) + " is not counted (what CUDA's kernel allocates inside is not "
           "modelled yet)");
}

// CUDA's kernels (cuda_scratch_rules.h says what each rule is there).
ScratchEstimate RuntimeModel::CudaScratch(const Statement& s, const OpInfo* op) {
  if (!said_cpu_trace_on_cuda_ && options_.note_cpu_trace_on_cuda && options_.context.target) {
    const ObjectId first = ArgObject(s, 0);
    if (first != kNone && objects_[first].kind == Object::Kind::kTensor &&
        objects_[first].type->device.rfind("cpu", 0) == 0) {
      said_cpu_trace_on_cuda_ = true;
      Diagnose("the trace's tensors are on the CPU: its program is predicted with CUDA's kernels, but a program "
               "traced for a CUDA device can differ (Thunder picks executors and decompositions by device)");
    }
  }
  ScratchEstimate out;
  out.with_outputs = ContiguousArgumentCopy(s, op);  // the kernels' own .contiguous(): CUDA's too
  if (op == nullptr) return out;
  switch (CudaScratchOf(op->scratch)) {
    case CudaScratch::kNone:
      return out;
    case CudaScratch::kAsOnTheCpu: {
      const ScratchEstimate rule = EstimateScratch(trace_, s, op);
      out.before_outputs += rule.before_outputs;
      out.with_outputs += rule.with_outputs + MatmulOperandClones(s, op);
      return out;
    }
    case CudaScratch::kCudnnWorkspace:
      DiagnoseCpuOnlyRule(s, "cuDNN's workspace");
      return out;
    case CudaScratch::kFusedAttention:
      DiagnoseCpuOnlyRule(s, "the fused attention kernel's workspace");
      return out;
    case CudaScratch::kLayerNormBackward:
      return out;  // (ATen's op only: Thunder's traces decompose layer norm)
    case CudaScratch::kNotModelled: {
      const ScratchEstimate cpu = EstimateScratch(trace_, s, op);
      if (cpu.before_outputs + cpu.with_outputs > 0) DiagnoseCpuOnlyRule(s, "the CPU kernel's scratch rule");
      return out;
    }
  }
  return out;
}

void RuntimeModel::ExecuteCall(const Statement& s) {
  const OpInfo* op = ops_.Find(s);
  unknown_.Note(trace_, s, op);
  std::vector<ValueId>& outputs = flat_outs_;
  FlatOutputs(s, &outputs);

  // Scratch the op allocates and frees before it returns, on top of its
  // inputs (and, per the rule, its outputs).
  ScratchEstimate scratch;
  if (options_.model_scratch && RunsOnCuda(s)) {
    scratch = CudaScratch(s, op);
  } else if (options_.model_scratch) {
    scratch = EstimateScratch(trace_, s, op);
    scratch.with_outputs += MatmulOperandClones(s, op) + ContiguousArgumentCopy(s, op);
    if (op != nullptr && op->scratch == ScratchRule::kConvolution) scratch = ConvolutionScratch(s, *op);
    if (op != nullptr && op->scratch == ScratchRule::kReductionCast) scratch.with_outputs += HalfFullReductionCopy(s, *op);
    if (op != nullptr && op->scratch == ScratchRule::kHalfIndexAdd) scratch.with_outputs += HalfIndexAddBuffer(s);
  }
  if (op != nullptr && op->redistributes_operands) {
    const std::int64_t redistributed = DTensorRedistribution(s);  // diagnoses what it cannot size
    if (options_.model_scratch) scratch.with_outputs += redistributed;
  }
  if (scratch.before_outputs > 0) Scratch(scratch.before_outputs);

  // Outputs are created in order, each held by the call's result, then
  // bound (Python binds after the call returns).
  std::vector<ObjectId>& results = results_;
  results.clear();
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const ObjectId o = CallResult(s, op, outputs[i], i);
    IncRef(o);
    results.push_back(o);
  }
  if (scratch.with_outputs > 0) Scratch(scratch.with_outputs);
  for (std::size_t i = 0; i < outputs.size(); ++i) Bind(outputs[i], results[i]);
  for (ObjectId o : results) DecRef(o);
}

}  // namespace runtime_detail
}  // namespace peakmem
