// DTensor layouts and shards, derived by hand from torch.chunk's rule
// (pieces of ceil(n / k), the last short or empty).
#include "peakmem/ir/dtensor_layout.h"

#include <gtest/gtest.h>

namespace peakmem {
namespace {

DTensorLayout MustParse(std::string_view suffix) {
  DTensorLayout layout;
  TypeStringError error;
  EXPECT_TRUE(ParseDTensorLayout(suffix, &layout, &error)) << error.message;
  return layout;
}

Dims Shard(const Dims& global, std::string_view suffix, int rank) {
  Dims local;
  EXPECT_EQ(LocalShardShape(global, MustParse(suffix), rank, &local), "");
  return local;
}

TEST(DTensorLayout, OneDimensionalMeshShardReplicatePartial) {
  const DTensorLayout s0 =
      MustParse(" mesh=DeviceMesh((2,), 'cpu', stride=(1,)), placements=(Shard(dim=0),)");
  EXPECT_EQ(s0.mesh_shape, (Dims{2}));
  ASSERT_EQ(s0.placements.size(), 1u);
  EXPECT_EQ(s0.placements[0].kind, DTensorPlacement::Kind::kShard);
  EXPECT_EQ(s0.placements[0].dim, 0);
  // [16, 16] in rows over 2: 8 rows each.
  EXPECT_EQ(
      Shard({16, 16}, " mesh=DeviceMesh((2,), 'cpu', stride=(1,)), placements=(Shard(dim=0),)", 1),
      (Dims{8, 16}));
  EXPECT_EQ(
      Shard({16, 16}, " mesh=DeviceMesh((4,), 'cpu', stride=(1,)), placements=(Replicate(),)", 3),
      (Dims{16, 16}));
  EXPECT_EQ(
      Shard({16, 16}, " mesh=DeviceMesh((4,), 'cpu', stride=(1,)), placements=(Partial(sum),)", 0),
      (Dims{16, 16}));
}

TEST(DTensorLayout, UnevenShardsFollowTorchChunk) {
  // 10 rows over 4: ceil(10 / 4) = 3: rows 3, 3, 3, 1.
  const char* four = " mesh=DeviceMesh((4,), 'cpu', stride=(1,)), placements=(Shard(dim=0),)";
  EXPECT_EQ(Shard({10, 16}, four, 0), (Dims{3, 16}));
  EXPECT_EQ(Shard({10, 16}, four, 2), (Dims{3, 16}));
  EXPECT_EQ(Shard({10, 16}, four, 3), (Dims{1, 16}));
  // 5 over 4: ceil = 2: 2, 2, 1, 0 (the last rank holds an empty shard).
  EXPECT_EQ(Shard({5}, four, 2), (Dims{1}));
  EXPECT_EQ(Shard({5}, four, 3), (Dims{0}));
}

TEST(DTensorLayout, TwoDimensionalMeshTakesRowMajorCoordinates) {
  // Mesh (dp=2, tp=2): rank 3 is (1, 1); Shard(0) over dp, Shard(1) over tp.
  const char* mesh2d =
      " mesh=DeviceMesh((dp=2, tp=2), 'cpu', stride=(2, 1)), placements=(Shard(dim=0), "
      "Shard(dim=1))";
  EXPECT_EQ(MustParse(mesh2d).mesh_shape, (Dims{2, 2}));
  EXPECT_EQ(Shard({16, 10}, mesh2d, 3), (Dims{8, 5}));
  // Both mesh dims splitting dim 0: 16 -> 8 (dp) -> 4 (tp).
  EXPECT_EQ(
      Shard(
          {16},
          " mesh=DeviceMesh((2, 2), 'cpu', stride=(2, 1)), placements=(Shard(dim=0), Shard(dim=0))",
          2),
      (Dims{4}));
}

TEST(DTensorLayout, WhatCannotBeKnownIsAnError) {
  DTensorLayout layout;
  TypeStringError error;
  EXPECT_FALSE(ParseDTensorLayout("", &layout, &error));
  EXPECT_NE(error.message.find("names no mesh and placements"), std::string::npos);
  EXPECT_FALSE(ParseDTensorLayout(
      " mesh=DeviceMesh((2,), 'cpu', stride=(1,)), placements=(_StridedShard(dim=0, sf=16),)",
      &layout, &error));
  EXPECT_EQ(
      error.message,
      "placement '_StridedShard(dim=0, sf=16)' is not modelled (Shard, Replicate and Partial are)");
  EXPECT_FALSE(ParseDTensorLayout(
      " mesh=DeviceMesh((2, 2), 'cpu', stride=(2, 1)), placements=(Shard(dim=0),)", &layout,
      &error));
  EXPECT_EQ(error.message, "1 placements for a 2-d mesh");
  const DTensorLayout s2 =
      MustParse(" mesh=DeviceMesh((2,), 'cpu', stride=(1,)), placements=(Shard(dim=2),)");
  Dims local;
  EXPECT_EQ(LocalShardShape({4, 4}, s2, 0, &local), "Shard(dim=2) of a 2-d tensor");
  EXPECT_EQ(LocalShardShape({4, 4}, s2, 2, &local), "rank 2 is not in its mesh of 2 ranks");
}

}  // namespace
}  // namespace peakmem
