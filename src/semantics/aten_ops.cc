#include "peakmem/semantics/aten_ops.h"

namespace peakmem {
namespace {

// "aten.div_.Scalar" -> ("div_", "Scalar"); "aten::lt" -> ("lt", "").
std::pair<std::string_view, std::string_view> SplitAtenName(std::string_view name) {
  for (std::string_view prefix : {std::string_view("aten::"), std::string_view("aten.")}) {
    if (name.substr(0, prefix.size()) == prefix) {
      name.remove_prefix(prefix.size());
      break;
    }
  }
  const std::size_t dot = name.find('.');
  if (dot == std::string_view::npos) return {name, {}};
  return {name.substr(0, dot), name.substr(dot + 1)};
}

}  // namespace

const OpInfo* FindAtenOp(std::string_view aten_name) { return FindOp(SplitAtenName(aten_name).first); }

ScratchEstimate EstimateAtenScratch(std::string_view aten_name, const AtenOperands& operands) {
  const auto [base, overload] = SplitAtenName(aten_name);
  const OpInfo* op = FindOp(base);
  if (op == nullptr || operands.tensors.empty()) return {};
  // pow's exponent is not named self or other: only a number base
  // (pow.Scalar) is among `wrapped`, as kWrappedBase asks.
  if (op->scratch == ScratchRule::kWrappedScalars || op->scratch == ScratchRule::kWrappedBase) {
    const bool true_division =
        op->name == "true_divide" || (op->name == "div" && overload.find("mode") == std::string_view::npos);
    return ElementwiseOperandScratch(operands.tensors, operands.wrapped, true_division);
  }
  return {};
}

}  // namespace peakmem
