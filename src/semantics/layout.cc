#include "peakmem/semantics/layout.h"

#include <algorithm>
#include <numeric>

namespace peakmem {

Dims ContiguousStrides(const Dims& shape) {
  Dims strides(shape.size(), 1);
  std::int64_t next = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = next;
    next *= std::max<std::int64_t>(shape[i], 1);
  }
  return strides;
}

bool IsContiguous(const Dims& shape, const Dims& strides) {
  // TensorImpl::compute_contiguous: size-1 dims are ignored; empty is contiguous.
  std::int64_t expected = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 0) return true;
    if (shape[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

bool IsNonOverlappingAndDense(const Dims& shape, const Dims& strides) {
  // TensorImpl::compute_non_overlapping_and_dense.
  const std::size_t n = shape.size();
  if (n == 1) return shape[0] < 2 || strides[0] == 1;
  // Contiguous implies it (and is what almost every tensor is): no sort.
  if (IsContiguous(shape, strides)) return true;
  absl::InlinedVector<std::size_t, 8> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  // Dimensions of size < 2 last, the others by increasing stride (the order
  // of equal keys does not change the answer). An insertion sort: n is small.
  auto before = [&](std::size_t a, std::size_t b) {
    if (shape[a] < 2) return false;
    if (shape[b] < 2) return true;
    return strides[a] < strides[b];
  };
  for (std::size_t i = 1; i < n; ++i) {
    for (std::size_t j = i; j > 0 && before(perm[j], perm[j - 1]); --j) std::swap(perm[j], perm[j - 1]);
  }
  std::int64_t require = 1;
  for (std::size_t i : perm) {
    if (shape[i] < 2) return true;
    if (strides[i] != require) return false;
    require *= shape[i];
  }
  return true;
}

std::optional<Dims> ComputeViewStrides(const Dims& old_shape, const Dims& old_strides,
                                       const Dims& new_shape) {
  std::int64_t old_numel = 1;
  for (auto d : old_shape) old_numel *= d;
  if (old_numel == 0) {
    if (old_shape == new_shape) return old_strides;
    return ContiguousStrides(new_shape);
  }
  Dims new_strides(new_shape.size(), 0);
  if (old_shape.empty()) {
    // A 0-d tensor views as any all-ones shape.
    std::fill(new_strides.begin(), new_strides.end(), 1);
    return new_strides;
  }
  std::int64_t view_d = static_cast<std::int64_t>(new_shape.size()) - 1;
  std::int64_t chunk_base_stride = old_strides.back();
  std::int64_t tensor_numel = 1;
  std::int64_t view_numel = 1;
  for (std::int64_t tensor_d = static_cast<std::int64_t>(old_shape.size()) - 1; tensor_d >= 0;
       --tensor_d) {
    tensor_numel *= old_shape[tensor_d];
    if (tensor_d == 0 || (old_shape[tensor_d - 1] != 1 &&
                          old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        new_strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = old_strides[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

Dims PreserveFormatStrides(const Dims& shape, const Dims& like_strides) {
  if (like_strides.size() == shape.size() && IsNonOverlappingAndDense(shape, like_strides)) {
    return like_strides;
  }
  return ContiguousStrides(shape);
}

Dims ElementwiseOutputStrides(const Dims& out_shape, const std::vector<Operand>& inputs) {
  const std::size_t ndim = out_shape.size();
  if (ndim == 0) return {};
  // Fast setup: every input has the output's shape and all share one layout.
  bool same_shape = !inputs.empty();
  for (const Operand& op : inputs) same_shape = same_shape && *op.shape == out_shape;
  if (same_shape) {
    bool all_contiguous = true;
    for (const Operand& op : inputs) {
      all_contiguous = all_contiguous && (op.contiguous || IsContiguous(out_shape, *op.strides));
    }
    if (all_contiguous) return ContiguousStrides(out_shape);
    const Dims& first = *inputs.front().strides;
    bool all_same = true;
    for (const Operand& op : inputs) all_same = all_same && *op.strides == first;
    if (all_same && IsNonOverlappingAndDense(out_shape, first)) return first;
  }
  // Also decided at once: when the first input has the output's shape, is
  // contiguous, and no dimension has size < 2, its strides are non-zero and
  // strictly decreasing, so in reorder_dimensions it decides every
  // comparison (the first input with non-zero strides does) and the order
  // stays as it is: the output is contiguous. (The common `x * w.expand(..)`.)
  if (!inputs.empty() && *inputs.front().shape == out_shape &&
      (inputs.front().contiguous || IsContiguous(out_shape, *inputs.front().strides)) &&
      std::all_of(out_shape.begin(), out_shape.end(), [](std::int64_t d) { return d >= 2; })) {
    return ContiguousStrides(out_shape);
  }
  // General path: broadcast strides (0 where an input is broadcast), then
  // TensorIterator::reorder_dimensions' insertion sort.
  absl::InlinedVector<Dims, 4> strides;
  for (const Operand& op : inputs) {
    Dims s(ndim, 0);
    const std::size_t offset = ndim - op.shape->size();
    for (std::size_t i = 0; i < op.shape->size(); ++i) {
      const std::int64_t size = (*op.shape)[i];
      s[offset + i] = (size == 1 && out_shape[offset + i] != 1) ? 0 : (*op.strides)[i];
    }
    strides.push_back(std::move(s));
  }
  // perm[0] is the fastest-moving dimension.
  absl::InlinedVector<std::size_t, 8> perm(ndim);
  for (std::size_t i = 0; i < ndim; ++i) perm[i] = ndim - 1 - i;
  auto should_swap = [&](std::size_t dim0, std::size_t dim1) -> int {
    for (const Dims& s : strides) {
      const std::int64_t s0 = s[dim0];
      const std::int64_t s1 = s[dim1];
      if (s0 == 0 || s1 == 0) continue;
      if (s0 < s1) return -1;
      if (s0 > s1) return 1;
      if (out_shape[dim0] > out_shape[dim1]) return 1;
    }
    return 0;
  };
  for (std::size_t i = 1; i < ndim; ++i) {
    std::size_t dim1 = i;
    for (std::size_t dim0 = i; dim0-- > 0;) {
      const int c = should_swap(perm[dim0], perm[dim1]);
      if (c > 0) {
        std::swap(perm[dim0], perm[dim1]);
        dim1 = dim0;
      } else if (c < 0) {
        break;
      }
    }
  }
  Dims out(ndim, 0);
  std::int64_t next = 1;
  for (std::size_t i = 0; i < ndim; ++i) {
    out[perm[i]] = next;
    next *= out_shape[perm[i]];
  }
  return out;
}

std::uint64_t StorageSpan(const Dims& shape, const Dims& strides) {
  std::uint64_t span = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return 0;
    span += static_cast<std::uint64_t>(shape[i] - 1) * static_cast<std::uint64_t>(strides[i]);
  }
  return span;
}

}  // namespace peakmem
