#include "peakmem/semantics/view_strides.h"

#include <algorithm>

#include "peakmem/semantics/layout.h"

namespace peakmem {

std::optional<std::int64_t> IntConstant(const Expr& e) {
  if (e.kind != Expr::Kind::kConstant || !e.has_int) return std::nullopt;
  return e.int_value;
}

std::optional<Dims> IntList(const Expr& e) {
  if (auto v = IntConstant(e)) return Dims{*v};
  if (e.kind != Expr::Kind::kTuple && e.kind != Expr::Kind::kList) return std::nullopt;
  Dims out;
  for (const Expr& item : e.items) {
    auto v = IntConstant(item);
    if (!v) return std::nullopt;
    out.push_back(*v);
  }
  return out;
}

const Expr* ArgOrKeyword(const Statement& s, std::size_t index, std::string_view keyword) {
  if (index < s.args.size()) return &s.args[index];
  for (const KeywordArg& kw : s.kwargs) {
    if (kw.first == keyword) return &kw.second;
  }
  return nullptr;
}

std::int64_t NormalizeDim(std::int64_t dim, std::size_t rank) {
  const auto r = static_cast<std::int64_t>(rank);
  if (dim < -r || dim >= r) return -1;
  return dim < 0 ? dim + r : dim;
}

namespace {

std::optional<Dims> Error(std::string* error, std::string message) {
  *error = std::move(message);
  return std::nullopt;
}

// One function per view rule; each returns nullopt when it cannot follow
// the call (see ViewOutputStrides).

std::optional<Dims> PermuteStrides(const Statement& s, const Dims& in_shape, const Dims& in_strides,
                                   std::string* error) {
  std::optional<Dims> dims;
  if (s.args.size() >= 2) dims = IntList(s.args[1]);
  if (!dims && s.args.size() > 2) {  // permute(x, 1, 0, 2): the dims as separate arguments
    Dims collected;
    for (std::size_t i = 1; i < s.args.size(); ++i) {
      auto d = IntConstant(s.args[i]);
      if (!d) break;
      collected.push_back(*d);
    }
    if (collected.size() == in_shape.size()) dims = collected;
  }
  if (!dims || dims->size() != in_shape.size()) return std::nullopt;
  Dims strides;
  for (std::int64_t d : *dims) {
    const std::int64_t n = NormalizeDim(d, in_shape.size());
    if (n < 0) {
      return Error(error, "permute dimension " + std::to_string(d) + " out of range for a " +
                              std::to_string(in_shape.size()) + "-d tensor");
    }
    strides.push_back(in_strides[n]);
  }
  return strides;
}

std::optional<Dims> TransposeStrides(const Statement& s, const Dims& in_shape,
                                     const Dims& in_strides, std::string* error) {
  Dims strides = in_strides;
  if (in_shape.size() < 2) return strides;
  std::int64_t d0 = 0, d1 = 1;
  if (s.args.size() >= 3) {
    auto a = IntConstant(s.args[1]);
    auto b = IntConstant(s.args[2]);
    if (!a || !b) return std::nullopt;
    d0 = NormalizeDim(*a, in_shape.size());
    d1 = NormalizeDim(*b, in_shape.size());
    if (d0 < 0 || d1 < 0) {
      return Error(error, "transpose dimensions out of range for a " +
                              std::to_string(in_shape.size()) + "-d tensor");
    }
  }
  std::swap(strides[d0], strides[d1]);
  return strides;
}

std::optional<Dims> UnsqueezeStrides(const Statement& s, const Dims& in_shape,
                                     const Dims& in_strides, std::string* error) {
  if (s.args.size() < 2) return std::nullopt;
  auto d = IntConstant(s.args[1]);
  if (!d) return std::nullopt;
  const std::int64_t dim = NormalizeDim(*d, in_shape.size() + 1);
  if (dim < 0) {
    return Error(error, "unsqueeze dimension " + std::to_string(*d) + " out of range for a " +
                            std::to_string(in_shape.size()) + "-d tensor");
  }
  Dims strides = in_strides;
  const std::int64_t stride =
      dim >= static_cast<std::int64_t>(in_shape.size()) ? 1 : in_shape[dim] * in_strides[dim];
  strides.insert(strides.begin() + dim, stride);
  return strides;
}

std::optional<Dims> DropDimsStrides(const Statement& s, const Dims& in_shape,
                                    const Dims& in_strides, const Dims& out_shape,
                                    std::string* error) {
  std::optional<std::int64_t> dim;
  if (s.args.size() >= 2) dim = IntConstant(s.args[1]);
  for (const auto& [name, e] : s.kwargs) {
    if (name == "dim") dim = IntConstant(e);
  }
  if (out_shape.size() + 1 == in_shape.size() && dim) {
    const std::int64_t n = NormalizeDim(*dim, in_shape.size());
    if (n < 0) {
      return Error(error, "dimension " + std::to_string(*dim) + " out of range for a " +
                              std::to_string(in_shape.size()) + "-d tensor");
    }
    Dims strides = in_strides;
    strides.erase(strides.begin() + n);
    return strides;
  }
  // No single constant dim: align output dims with input dims, dropping the removed ones.
  Dims strides;
  std::size_t j = 0;
  for (std::size_t i = 0; i < in_shape.size(); ++i) {
    if (j < out_shape.size() && in_shape[i] == out_shape[j] &&
        !(in_shape[i] == 1 && in_shape.size() - i > out_shape.size() - j)) {
      strides.push_back(in_strides[i]);
      ++j;
    }
  }
  if (strides.size() == out_shape.size()) return strides;
  return std::nullopt;
}

// broadcast_in_dim(x, shape, broadcast_dimensions) maps input dim i onto
// output dim broadcast_dimensions[i]; expand aligns the trailing dims. A
// broadcast dim (size 1 in, not 1 out) and every new dim get stride 0.
std::optional<Dims> BroadcastStrides(LayoutRule rule, const Statement& s, const Dims& in_shape,
                                     const Dims& in_strides, const Dims& out_shape,
                                     std::string* error) {
  Dims strides(out_shape.size(), 0);
  if (rule == LayoutRule::kBroadcastInDim && s.args.size() >= 3) {
    auto bdims = IntList(s.args[2]);
    if (!bdims || bdims->size() != in_shape.size()) return std::nullopt;
    for (std::size_t i = 0; i < in_shape.size(); ++i) {
      const std::int64_t bdim = (*bdims)[i];
      if (bdim < 0 || bdim >= static_cast<std::int64_t>(out_shape.size())) {
        return Error(error, "broadcast dimension " + std::to_string(bdim) + " out of range");
      }
      const auto o = static_cast<std::size_t>(bdim);
      strides[o] = (in_shape[i] == 1 && out_shape[o] != 1) ? 0 : in_strides[i];
    }
    return strides;
  }
  const std::size_t offset = out_shape.size() - std::min(out_shape.size(), in_shape.size());
  for (std::size_t i = 0; i < in_shape.size() && offset + i < out_shape.size(); ++i) {
    strides[offset + i] = (in_shape[i] == 1 && out_shape[offset + i] != 1) ? 0 : in_strides[i];
  }
  return strides;
}

// prims.slice_prim(x, start_indices, end_indices, strides=None): each
// dimension's stride times its step (found by the differential tester:
// `x[::2] @ m` reads a stride-2 vector).
std::optional<Dims> SliceStrides(const Statement& s, const Dims& in_shape, const Dims& in_strides) {
  const Expr* steps = s.args.size() >= 4 ? &s.args[3] : nullptr;
  for (const auto& [name, e] : s.kwargs) {
    if (name == "strides") steps = &e;
  }
  if (steps == nullptr || (steps->kind == Expr::Kind::kConstant && steps->text == "None")) return in_strides;
  const auto list = IntList(*steps);
  if (!list || list->size() != in_shape.size()) return std::nullopt;
  Dims strides = in_strides;
  for (std::size_t d = 0; d < strides.size(); ++d) strides[d] *= (*list)[d];
  return strides;
}

// x[key] with basic indexing (Tensor.__getitem__): each item of the key
// takes input dimensions in order: an int drops one, a slice keeps one with
// its stride times the step, None inserts a size-1 dimension (stride as
// unsqueeze gives it), `...` keeps the dimensions no other item takes. A
// slice the key does not spell (`<slice>`, as a live trace shows it) is
// followed only where it keeps the whole dimension (its size unchanged).
std::optional<Dims> BasicIndexStrides(const Statement& s, const Dims& in_shape,
                                      const Dims& in_strides, const Dims& out_shape) {
  if (s.args.size() < 2) return std::nullopt;
  const Expr& key = s.args[1];
  std::vector<const Expr*> items;
  if (key.kind == Expr::Kind::kTuple) {
    for (const Expr& item : key.items) items.push_back(&item);
  } else {
    items.push_back(&key);
  }
  auto is = [](const Expr* e, std::string_view text) {
    return e->kind == Expr::Kind::kConstant && e->text == text;
  };
  std::size_t consuming = 0;
  for (const Expr* e : items) {
    if (!is(e, "None") && !is(e, "...") && !is(e, "Ellipsis")) ++consuming;
  }
  if (consuming > in_shape.size()) return std::nullopt;
  Dims strides;
  std::size_t d = 0;
  for (const Expr* e : items) {
    if (is(e, "None")) {
      strides.push_back(d < in_shape.size() ? in_shape[d] * in_strides[d] : 1);
    } else if (is(e, "...") || is(e, "Ellipsis")) {
      for (std::size_t k = 0; k < in_shape.size() - consuming; ++k, ++d)
        strides.push_back(in_strides[d]);
      consuming = in_shape.size();  // a second `...` takes nothing
    } else if (IntConstant(*e)) {
      ++d;
    } else if (e->kind == Expr::Kind::kCall && e->text == "slice" && e->items.size() == 3) {
      std::int64_t step = 1;
      if (auto st = IntConstant(e->items[2]))
        step = *st;
      else if (!is(&e->items[2], "None"))
        return std::nullopt;
      strides.push_back(in_strides[d] * step);
      ++d;
    } else if (is(e, "<slice>")) {
      const std::size_t at = strides.size();
      if (at >= out_shape.size() || out_shape[at] != in_shape[d]) return std::nullopt;
      strides.push_back(in_strides[d]);
      ++d;
    } else {
      return std::nullopt;  // a tensor index (advanced indexing) or a form not followed
    }
  }
  for (; d < in_shape.size(); ++d) strides.push_back(in_strides[d]);
  if (strides.size() != out_shape.size()) return std::nullopt;
  return strides;
}

}  // namespace

std::optional<Dims> ViewOutputStrides(LayoutRule rule, const Statement& s, const Dims& in_shape,
                                      const Dims& in_strides, const Dims& out_shape,
                                      std::string* error) {
  switch (rule) {
    case LayoutRule::kSameStrides:
      if (out_shape.size() == in_shape.size()) return in_strides;
      return std::nullopt;
    case LayoutRule::kSlice:
      if (out_shape.size() != in_shape.size()) return std::nullopt;
      return SliceStrides(s, in_shape, in_strides);
    case LayoutRule::kPermute:
      return PermuteStrides(s, in_shape, in_strides, error);
    case LayoutRule::kTranspose:
      return TransposeStrides(s, in_shape, in_strides, error);
    case LayoutRule::kUnsqueeze:
      return UnsqueezeStrides(s, in_shape, in_strides, error);
    case LayoutRule::kDropDims:
      return DropDimsStrides(s, in_shape, in_strides, out_shape, error);
    case LayoutRule::kBroadcastInDim:
    case LayoutRule::kExpand:
      return BroadcastStrides(rule, s, in_shape, in_strides, out_shape, error);
    case LayoutRule::kReshape:
      return ComputeViewStrides(in_shape, in_strides, out_shape);
    case LayoutRule::kBasicIndex:
      return BasicIndexStrides(s, in_shape, in_strides, out_shape);
    default:
      return std::nullopt;
  }
}

}  // namespace peakmem
