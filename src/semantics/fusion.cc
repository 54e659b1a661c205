#include "peakmem/semantics/fusion.h"

#include <algorithm>
#include <map>
#include <span>
#include <string_view>
#include <vector>

#include "peakmem/semantics/op_registry.h"

namespace peakmem {
namespace {

using Mask = std::vector<bool>;  // true: the dimension is broadcast (stride 0)

// The region's name an argument spells (its names stay text: SubSymbolCall).
std::string_view NameOf(const Expr& e) {
  return e.kind == Expr::Kind::kConstant && e.number == NumberKind::kNone ? e.text
                                                                          : std::string_view();
}

// The ints of a literal list or tuple (`(0, 1, 2)`); the non-int items are
// left out.
std::vector<std::int64_t> Ints(const Expr& e) {
  std::vector<std::int64_t> out;
  for (const Expr& item : e.items) {
    if (item.has_int) out.push_back(item.int_value);
  }
  return out;
}

std::string_view LastComponent(std::string_view s) {
  const std::size_t dot = s.rfind('.');
  return dot == std::string_view::npos ? s : s.substr(dot + 1);
}

}  // namespace

bool UsesSubSymbols(std::string_view symbol) { return symbol.rfind("nvFusion", 0) == 0; }

std::int64_t FusionOutputBytes(const Trace& trace, const Statement& s, ValueId out) {
  const Value& v = trace.value(out);
  const auto dense = static_cast<std::int64_t>(v.type->bytes);
  if (!UsesSubSymbols(trace.SymbolOf(s)) || s.subsymbols.empty()) return dense;
  const std::span<const SubSymbol> lines = trace.SubSymbolsOf(s);
  std::map<std::string_view, Mask> masks;
  std::map<std::string_view, Dims> shapes;
  for (const SubSymbolCall& c : trace.SubSymbolCallsOf(s)) {
    // Only the leaves (prims) say what the region computes; a line is a
    // leaf when the next one is not deeper.
    const std::size_t line = c.subsymbol - s.subsymbols.begin;
    const bool leaf = line + 1 == lines.size() || lines[line + 1].depth <= lines[line].depth;
    if (!leaf || c.out_type == nullptr || !IsTensorKind(c.out_type->kind)) continue;
    const Dims& shape = c.out_type->shape;
    shapes[c.out] = shape;
    Mask mask(shape.size(), false);
    const OpInfo* info = FindOp(LastComponent(c.callee));
    if (info != nullptr && info->layout == LayoutRule::kBroadcastInDim && c.args.size() >= 3) {
      const std::vector<std::int64_t> bdims = Ints(c.args[2]);
      const auto in_mask = masks.find(NameOf(c.args[0]));
      const auto in_shape = shapes.find(NameOf(c.args[0]));
      std::fill(mask.begin(), mask.end(), true);
      for (std::size_t i = 0; i < bdims.size(); ++i) {
        const auto o = static_cast<std::size_t>(bdims[i]);
        if (o >= mask.size()) continue;
        bool broadcast = false;
        if (in_mask != masks.end() && i < in_mask->second.size()) broadcast = in_mask->second[i];
        if (in_shape != shapes.end() && i < in_shape->second.size() &&
            in_shape->second[i] == 1 && shape[o] != 1) {
          broadcast = true;
        }
        mask[o] = broadcast;
      }
    } else if (info != nullptr && info->layout == LayoutRule::kElementwise) {
      // Broadcast in the output where every same-rank tensor input is.
      bool any = false;
      std::fill(mask.begin(), mask.end(), true);
      for (const Expr& a : c.args) {
        auto m = masks.find(NameOf(a));
        if (m == masks.end() || m->second.size() != mask.size()) continue;
        any = true;
        for (std::size_t d = 0; d < mask.size(); ++d) mask[d] = mask[d] && m->second[d];
      }
      if (!any) std::fill(mask.begin(), mask.end(), false);
    }
    masks[c.out] = std::move(mask);
  }
  auto m = masks.find(v.name);
  if (m == masks.end() || m->second.size() != v.type->shape.size()) return dense;
  std::int64_t elements = 1;
  for (std::size_t d = 0; d < v.type->shape.size(); ++d) {
    if (!m->second[d]) elements *= v.type->shape[d];
  }
  return elements * v.type->dtype->bits / 8;
}

}  // namespace peakmem
