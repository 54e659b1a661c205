#include "peakmem/ir/dtensor_layout.h"

#include <charconv>

#include "peakmem/ir/source.h"

namespace peakmem {
namespace {

bool Fail(TypeStringError* error, std::size_t offset, std::string message) {
  if (error != nullptr) *error = {offset, std::move(message)};
  return false;
}

// The text between the '(' at `open` and its matching ')'; npos if unclosed.
std::size_t Closing(std::string_view text, std::size_t open) {
  int depth = 0;
  for (std::size_t i = open; i < text.size(); ++i) {
    if (text[i] == '(') ++depth;
    if (text[i] == ')' && --depth == 0) return i;
  }
  return std::string_view::npos;
}

// Splits "a, b(c, d), e" at top-level commas.
std::vector<std::string_view> Items(std::string_view list) {
  std::vector<std::string_view> out;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= list.size(); ++i) {
    if (i == list.size() || (list[i] == ',' && depth == 0)) {
      std::string_view item = list.substr(start, i - start);
      while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
      while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
      if (!item.empty()) out.push_back(item);
      start = i + 1;
    } else if (list[i] == '(') {
      ++depth;
    } else if (list[i] == ')') {
      --depth;
    }
  }
  return out;
}

bool ParseInt(std::string_view text, std::int64_t* out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

bool ParseDTensorLayout(std::string_view suffix, DTensorLayout* layout, TypeStringError* error) {
  constexpr std::string_view kMesh = " mesh=DeviceMesh(";
  if (suffix.substr(0, kMesh.size()) != kMesh) {
    return Fail(
        error, 0,
        "the DTensor type names no mesh and placements, so the shard a rank holds is unknown "
        "(print the trace with a Thunder whose DTensor types show them)");
  }
  const std::size_t mesh_open = kMesh.size() - 1;
  const std::size_t mesh_close = Closing(suffix, mesh_open);
  if (mesh_close == std::string_view::npos) return Fail(error, mesh_open, "unclosed DeviceMesh(");
  // DeviceMesh((2,), 'cpu', stride=(1,)) or ((dp=2, tp=2), ...): the shape first.
  const std::size_t shape_open = mesh_open + 1;
  if (suffix[shape_open] != '(') return Fail(error, shape_open, "expected the mesh shape '(...)'");
  const std::size_t shape_close = Closing(suffix, shape_open);
  layout->mesh_shape.clear();
  for (std::string_view item : Items(suffix.substr(shape_open + 1, shape_close - shape_open - 1))) {
    if (const std::size_t eq = item.find('='); eq != std::string_view::npos)
      item = item.substr(eq + 1);
    std::int64_t n = 0;
    if (!ParseInt(item, &n) || n <= 0) {
      return Fail(error, shape_open, "bad mesh dimension '" + EscapeForMessage(item) + "'");
    }
    layout->mesh_shape.push_back(n);
  }
  constexpr std::string_view kPlacements = ", placements=(";
  const std::size_t at = mesh_close + 1;
  if (suffix.substr(at, kPlacements.size()) != kPlacements) {
    return Fail(error, at, "expected ', placements=(...)' after the mesh");
  }
  const std::size_t open = at + kPlacements.size() - 1;
  const std::size_t close = Closing(suffix, open);
  if (close == std::string_view::npos || close + 1 != suffix.size()) {
    return Fail(error, open, "expected the placements '(...)' to end the type");
  }
  layout->placements.clear();
  for (std::string_view p : Items(suffix.substr(open + 1, close - open - 1))) {
    DTensorPlacement placement;
    constexpr std::string_view kShard = "Shard(dim=";
    if (p == "Replicate()") {
      placement.kind = DTensorPlacement::Kind::kReplicate;
    } else if (p.substr(0, 8) == "Partial(") {
      placement.kind = DTensorPlacement::Kind::kPartial;
    } else if (p.substr(0, kShard.size()) == kShard && p.back() == ')') {
      std::int64_t dim = 0;
      if (!ParseInt(p.substr(kShard.size(), p.size() - kShard.size() - 1), &dim) || dim < 0) {
        return Fail(error, open, "bad placement '" + EscapeForMessage(p) + "'");
      }
      placement.kind = DTensorPlacement::Kind::kShard;
      placement.dim = static_cast<int>(dim);
    } else {
      return Fail(error, open,
                  "placement '" + EscapeForMessage(p) +
                      "' is not modelled (Shard, Replicate and Partial are)");
    }
    layout->placements.push_back(placement);
  }
  if (layout->placements.size() != layout->mesh_shape.size()) {
    return Fail(error, open,
                std::to_string(layout->placements.size()) + " placements for a " +
                    std::to_string(layout->mesh_shape.size()) + "-d mesh");
  }
  return true;
}

std::string LocalShardShape(const Dims& global, const DTensorLayout& layout, int rank,
                            Dims* local) {
  std::int64_t ranks = 1;
  for (std::int64_t n : layout.mesh_shape) ranks *= n;
  if (rank < 0 || rank >= ranks) {
    return "rank " + std::to_string(rank) + " is not in its mesh of " + std::to_string(ranks) +
           " ranks";
  }
  // Row-major coordinates of the rank over the mesh shape.
  Dims coords(layout.mesh_shape.size(), 0);
  std::int64_t rest = rank;
  for (std::size_t i = layout.mesh_shape.size(); i-- > 0;) {
    coords[i] = rest % layout.mesh_shape[i];
    rest /= layout.mesh_shape[i];
  }
  *local = global;
  for (std::size_t i = 0; i < layout.placements.size(); ++i) {
    const DTensorPlacement& p = layout.placements[i];
    if (p.kind != DTensorPlacement::Kind::kShard) continue;
    if (static_cast<std::size_t>(p.dim) >= local->size()) {
      return "Shard(dim=" + std::to_string(p.dim) + ") of a " + std::to_string(local->size()) +
             "-d tensor";
    }
    std::int64_t& n = (*local)[p.dim];
    const std::int64_t pieces = layout.mesh_shape[i];
    const std::int64_t chunk = (n + pieces - 1) / pieces;
    const std::int64_t begin = std::min(n, coords[i] * chunk);
    n = std::min(n, begin + chunk) - begin;
  }
  return {};
}

}  // namespace peakmem
