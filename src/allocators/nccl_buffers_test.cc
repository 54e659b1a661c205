// NCCL's buffer estimate against figures derived by hand from NCCL's
// constants (src/init.cc: Simple 4 MiB, LL 512 KiB, LL128 4,915,200 B;
// each allocation rounded up to 2 MiB).
#include "peakmem/allocators/nccl_buffers.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace peakmem {
namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;

NcclOptions On(int world_size, std::vector<std::string> collectives) {
  NcclOptions o;
  o.world_size = world_size;
  o.collectives = std::move(collectives);
  return o;
}

TEST(NcclBuffers, OneNodeRingForFsdpsCollectives) {
  // A P2P receive: 4096 + 524,288 + 4,915,200 + 4,194,304 = 9,637,888 B,
  // five 2 MiB granules (10 MiB); a send: one granule. 16 channels of ring:
  // 16 x 12 MiB = 192 MiB. Channel structures: 3 granules a channel and 2
  // a communicator: 16 x 6 + 4 = 100 MiB. No all-reduce: no tree.
  const NcclEstimate e = EstimateNcclBuffers(On(8, {"all_gather", "reduce_scatter"}));
  EXPECT_EQ(e.ring_bytes, 192 * kMiB);
  EXPECT_EQ(e.tree_bytes, 0);
  EXPECT_EQ(e.channel_structures_bytes, 100 * kMiB);
  EXPECT_EQ(e.total_bytes, 292 * kMiB);
  EXPECT_FALSE(e.crosses_nodes);
}

TEST(NcclBuffers, AllReduceConnectsTheTreeAndNodesConnectOverTheNetwork) {
  EXPECT_EQ(EstimateNcclBuffers(On(8, {"all_reduce"})).total_bytes, (192 + 192 + 100) * kMiB);
  // 64 ranks on 8-GPU nodes: a rank at a node's edge sends align(LL128 +
  // Simple) = 9,109,504 B -> 10 MiB and receives align(LL + LL128 +
  // Simple) = 9,633,792 B -> 10 MiB: 20 MiB a channel, ring and tree.
  const NcclEstimate e = EstimateNcclBuffers(On(64, {"all_reduce"}));
  EXPECT_TRUE(e.crosses_nodes);
  EXPECT_EQ(e.ring_bytes, 16 * 20 * kMiB);
  EXPECT_EQ(e.total_bytes, (320 + 320 + 100) * kMiB);
}

TEST(NcclBuffers, OptionsChangeWhatTheyShould) {
  NcclOptions o = On(8, {"all_gather"});
  o.simple_bytes = 8 * kMiB;  // NCCL_BUFFSIZE=8MiB: a receive of 13.2 MiB takes 7 granules
  o.channels = 4;
  o.cumem = false;
  EXPECT_EQ(EstimateNcclBuffers(o).total_bytes, 4 * (14 + 2) * kMiB);
  o = On(8, {"all_gather"});
  o.nvls = true;  // 16 channels x 2 x 1 MiB x 8 GPUs
  EXPECT_EQ(EstimateNcclBuffers(o).nvls_bytes, 256 * kMiB);
  o.communicators = 2;
  EXPECT_EQ(EstimateNcclBuffers(o).total_bytes, 2 * (192 + 256 + 100) * kMiB);
}

TEST(NcclBuffers, NothingToConnectAndBadOptions) {
  EXPECT_EQ(EstimateNcclBuffers(On(1, {"all_reduce"})).total_bytes, 0);
  EXPECT_EQ(EstimateNcclBuffers(On(8, {})).total_bytes, 0);
  EXPECT_THROW(EstimateNcclBuffers(On(8, {"all_to_all"})), std::invalid_argument);
  EXPECT_THROW(EstimateNcclBuffers(On(0, {"all_reduce"})), std::invalid_argument);
  EXPECT_EQ(NcclCollectiveOf("torch_reduce_scatter_prim_impl"), "reduce_scatter");
  EXPECT_EQ(NcclCollectiveOf("torch_wait_prim_impl"), "");
}

}  // namespace
}  // namespace peakmem
