// A DTensor's placement over its device mesh, as Thunder prints it, and the
// local shard a rank holds.
//
// Thunder prints a DTensor value's type (thunder/torch/experimental/
// dtensor_proxy.py, DTensorProxy.type_string) with its *global* shape:
//   DTensor cpu f32[16, 16] mesh=DeviceMesh((2,), 'cpu', stride=(1,)), placements=(Shard(dim=0),)
//   DTensor cpu f32[16, 16] mesh=DeviceMesh((dp=2, tp=2), 'cpu', stride=(2, 1)),
//   placements=(Shard(dim=0), Shard(dim=1))
// and older printers without the mesh (`DTensor cuda:0 f32[16, 16]`). What a
// rank allocates is its local shard: each mesh dimension i placed Shard(d)
// splits tensor dimension d into mesh.shape[i] pieces as torch.chunk does
// (pieces of ceil(n / k), the last ones short or empty: torch's
// Shard._local_shard_size_and_offset), taken in mesh-dimension order;
// Replicate and Partial keep the dimension whole. The printed mesh keeps its
// shape, not its rank list: a rank's coordinates are taken row-major over
// the mesh shape (the mesh `init_device_mesh` builds, ranks 0..N-1).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "peakmem/ir/value_type.h"

namespace peakmem {

struct DTensorPlacement {
  enum class Kind : std::uint8_t { kShard, kReplicate, kPartial };
  Kind kind = Kind::kReplicate;
  int dim = 0;  // kShard: the tensor dimension split
};

struct DTensorLayout {
  Dims mesh_shape;
  std::vector<DTensorPlacement> placements;  // one per mesh dimension
};

// Parses the text after the global shape (" mesh=DeviceMesh(...), placements=(...)").
// On failure returns false with `*error` set, its offset within `suffix`.
bool ParseDTensorLayout(std::string_view suffix, DTensorLayout* layout, TypeStringError* error);

// The shape rank `rank` holds of a tensor of `global` shape laid out so; an
// empty string, or why it cannot be known (the rank outside the mesh, a
// sharded dimension the tensor does not have).
std::string LocalShardShape(const Dims& global, const DTensorLayout& layout, int rank, Dims* local);

}  // namespace peakmem
