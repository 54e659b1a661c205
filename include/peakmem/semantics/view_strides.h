// The strides of a view op's output, by the op's layout rule (op_registry.h):
// pure functions of the input's shape and strides, the output's shape and
// the call's constant arguments, as ATen computes them for each view.
#pragma once

#include <optional>
#include <string>

#include "peakmem/ir/trace.h"
#include "peakmem/ir/value_type.h"
#include "peakmem/semantics/op_registry.h"

namespace peakmem {

// The output's strides, or nullopt when the rule cannot follow this call
// (arguments that are not constants, a rank that does not fit: the caller
// falls back); an argument out of range also gives nullopt, with `error`
// saying which.
std::optional<Dims> ViewOutputStrides(LayoutRule rule, const Statement& s, const Dims& in_shape,
                                      const Dims& in_strides, const Dims& out_shape,
                                      std::string* error);

// An integer constant argument (parsed by the reader: Expr::int_value).
std::optional<std::int64_t> IntConstant(const Expr& e);
// A constant int or tuple/list of ints.
std::optional<Dims> IntList(const Expr& e);
// Positional argument `index` of a call, else its keyword argument
// `keyword`; nullptr when it has neither.
const Expr* ArgOrKeyword(const Statement& s, std::size_t index, std::string_view keyword);
// A dimension argument as an index in [0, rank), or -1 when out of range.
std::int64_t NormalizeDim(std::int64_t dim, std::size_t rank);

}  // namespace peakmem
