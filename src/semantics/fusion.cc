#include "peakmem/semantics/fusion.h"

#include <charconv>
#include <map>
#include <string_view>
#include <vector>

#include "peakmem/semantics/op_registry.h"

namespace peakmem {
namespace {

using Mask = std::vector<bool>;  // true: the dimension is broadcast (stride 0)

struct SubCall {
  std::string_view out;
  std::string_view callee;
  std::vector<std::string_view> args;  // top-level argument texts
  std::vector<std::int64_t> shape;     // from the type comment
  bool typed = false;
};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

std::vector<std::int64_t> Ints(std::string_view list) {
  std::vector<std::int64_t> out;
  std::size_t i = 0;
  while (i < list.size()) {
    while (i < list.size() && !(list[i] == '-' || (list[i] >= '0' && list[i] <= '9'))) ++i;
    if (i >= list.size()) break;
    std::int64_t v = 0;
    auto [ptr, ec] = std::from_chars(list.data() + i, list.data() + list.size(), v);
    if (ec != std::errc()) break;
    out.push_back(v);
    i = static_cast<std::size_t>(ptr - list.data());
  }
  return out;
}

// `t15 = prims.add(t13, t5)  # t15: "cuda:0 f32[2, 3, 4]"`
bool ParseSubCall(std::string_view text, SubCall* call) {
  const std::size_t eq = text.find(" = ");
  const std::size_t open = text.find('(');
  if (eq == std::string_view::npos || open == std::string_view::npos || open < eq) return false;
  call->out = Trim(text.substr(0, eq));
  call->callee = Trim(text.substr(eq + 3, open - eq - 3));
  int depth = 0;
  std::size_t start = open + 1;
  std::size_t i = open + 1;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') {
      if (depth == 0) break;
      --depth;
    }
    if (c == ',' && depth == 0) {
      call->args.push_back(Trim(text.substr(start, i - start)));
      start = i + 1;
    }
  }
  if (i >= text.size()) return false;
  if (i > start) call->args.push_back(Trim(text.substr(start, i - start)));
  const std::size_t type = text.find(": \"", i);
  const std::size_t bracket = type == std::string_view::npos ? type : text.find('[', type);
  if (bracket != std::string_view::npos) {
    call->shape = Ints(text.substr(bracket, text.find(']', bracket) - bracket));
    call->typed = true;
  }
  return true;
}

std::string_view LastComponent(std::string_view s) {
  const std::size_t dot = s.rfind('.');
  return dot == std::string_view::npos ? s : s.substr(dot + 1);
}

void Collect(std::span<const SubSymbol> nodes, std::vector<SubCall>* calls) {
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    // Only the leaves (prims) say what the region computes; a node is a
    // leaf when the next one is not deeper.
    const bool leaf = i + 1 == nodes.size() || nodes[i + 1].depth <= nodes[i].depth;
    SubCall call;
    if (leaf && ParseSubCall(nodes[i].text, &call)) calls->push_back(call);
  }
}

}  // namespace

bool UsesSubSymbols(std::string_view symbol) { return symbol.rfind("nvFusion", 0) == 0; }

std::int64_t FusionOutputBytes(const Trace& trace, const Statement& s, ValueId out) {
  const Value& v = trace.value(out);
  const auto dense = static_cast<std::int64_t>(v.type->bytes);
  if (!UsesSubSymbols(trace.SymbolOf(s)) || s.subsymbols.empty()) return dense;
  std::vector<SubCall> calls;
  Collect(trace.SubSymbolsOf(s), &calls);
  std::map<std::string_view, Mask> masks;
  std::map<std::string_view, std::vector<std::int64_t>> shapes;
  for (const SubCall& c : calls) {
    if (!c.typed) continue;
    shapes[c.out] = c.shape;
    Mask mask(c.shape.size(), false);
    const std::string_view op = LastComponent(c.callee);
    const OpInfo* info = FindOp(op);
    if (info != nullptr && info->layout == LayoutRule::kBroadcastInDim && c.args.size() >= 3) {
      const std::vector<std::int64_t> bdims = Ints(c.args[2]);
      const auto in_mask = masks.find(c.args[0]);
      const auto in_shape = shapes.find(c.args[0]);
      std::fill(mask.begin(), mask.end(), true);
      for (std::size_t i = 0; i < bdims.size(); ++i) {
        const auto o = static_cast<std::size_t>(bdims[i]);
        if (o >= mask.size()) continue;
        bool broadcast = false;
        if (in_mask != masks.end() && i < in_mask->second.size()) broadcast = in_mask->second[i];
        if (in_shape != shapes.end() && i < in_shape->second.size() &&
            in_shape->second[i] == 1 && c.shape[o] != 1) {
          broadcast = true;
        }
        mask[o] = broadcast;
      }
    } else if (info != nullptr && info->layout == LayoutRule::kElementwise) {
      // Broadcast in the output where every same-rank tensor input is.
      bool any = false;
      std::fill(mask.begin(), mask.end(), true);
      for (std::string_view a : c.args) {
        auto m = masks.find(a);
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
