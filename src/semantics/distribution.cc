#include "peakmem/semantics/distribution.h"

#include <algorithm>

#include <stdexcept>

#include "peakmem/ir/dtensor_layout.h"
#include "peakmem/semantics/op_registry.h"

namespace peakmem {
namespace {

// The world size a gathering or scattering collective's shapes say, or 0.
std::int64_t CollectiveWorldSize(const Trace& trace, const Statement& s) {
  const std::string_view op = trace.SymbolOf(s);
  const bool gather = op == "torch_all_gather_prim_impl";
  if (!gather && op != "torch_reduce_scatter_prim_impl") return 0;
  if (s.args.empty() || s.args[0].kind != Expr::Kind::kValue) return 0;
  const std::vector<ValueId> outs = FlatOutputs(s);
  if (outs.size() != 1) return 0;
  const ValueType& in = *trace.value(s.args[0].value).type;
  const ValueType& out = *trace.value(outs[0]).type;
  if (!IsTensorKind(in.kind) || !IsTensorKind(out.kind) || in.shape.size() != out.shape.size() ||
      in.shape.empty()) {
    return 0;
  }
  // all_gather(a, group, do_async, dim) and reduce_scatter(a, op, group, do_async, dim).
  const std::size_t dim_at = gather ? 3 : 4;
  std::size_t dim = 0;
  if (s.args.size() > dim_at && s.args[dim_at].kind == Expr::Kind::kConstant &&
      s.args[dim_at].has_int) {
    dim = static_cast<std::size_t>(s.args[dim_at].int_value);
  }
  if (dim >= in.shape.size()) return 0;
  const std::int64_t small = gather ? in.shape[dim] : out.shape[dim];
  const std::int64_t big = gather ? out.shape[dim] : in.shape[dim];
  if (small <= 0 || big % small != 0) return 0;
  return big / small;
}

std::int64_t MeshSize(const ValueType& type) {
  if (type.dtensor_layout.empty()) return 0;
  DTensorLayout layout;
  TypeStringError ignored;
  if (!ParseDTensorLayout(type.dtensor_layout, &layout, &ignored)) return 0;
  std::int64_t n = 1;
  for (std::int64_t d : layout.mesh_shape) n *= d;
  return n;
}

}  // namespace

Distribution DistributionOf(const Trace& trace, const SourceFile& source, int rank,
                            int world_size) {
  Distribution d;
  d.rank = rank;
  std::int64_t said = 0;
  SourceLocation said_at;
  auto say = [&](std::int64_t n, SourceLocation at, std::string from) {
    d.distributed = true;
    if (n <= 0) return;
    if (said == 0) {
      said = n;
      said_at = at;
      d.world_size_from = std::move(from);
    } else if (n != said) {
      d.disagreements.push_back(
          from + " says a world size of " + std::to_string(n) + " where " + d.world_size_from +
          " says " + std::to_string(said) +
          " (process groups of different sizes?); the report gives the first");
    }
  };
  for (const Value& v : trace.values) {
    if (v.type != nullptr && !v.type->dtensor_layout.empty()) {
      say(MeshSize(*v.type), v.defined_at,
          "the DTensor mesh of '" + std::string(v.name) + "' (line " +
              std::to_string(v.defined_at.line) + ")");
    }
  }
  bool collectives = false;
  for (const CallSymbol& c : trace.call_symbols) {
    const OpInfo* op = FindCallOp(c.callee, c.symbol);
    collectives = collectives || (op != nullptr && op->collective);
  }
  for (const Statement& s : trace.statements) {
    if (!collectives) break;
    if (s.kind != StatementKind::kCall) continue;
    const OpInfo* op = FindCallOp(trace.CalleeOf(s), trace.SymbolOf(s));
    if (op == nullptr || !op->collective) continue;
    const std::string symbol(trace.SymbolOf(s));
    if (std::find(d.collective_ops.begin(), d.collective_ops.end(), symbol) == d.collective_ops.end()) {
      d.collective_ops.push_back(symbol);
    }
    say(CollectiveWorldSize(trace, s), s.at,
        "the " + std::string(trace.SymbolOf(s)) + " at line " + std::to_string(s.source_line));
  }
  if (world_size > 0) {
    if (said != 0 && said != world_size) {
      ThrowAt(source, said_at,
              "--world-size " + std::to_string(world_size) + " was given, but " +
                  d.world_size_from + " says " + std::to_string(said));
    }
    if (said == 0) d.world_size_from = "given";
    said = world_size;
  }
  d.world_size = static_cast<int>(said);
  if (d.world_size > 0 && rank >= d.world_size) {
    throw std::invalid_argument("rank " + std::to_string(rank) + " is not below the world size " +
                                std::to_string(d.world_size) + " (" + d.world_size_from + ")");
  }
  return d;
}

}  // namespace peakmem
