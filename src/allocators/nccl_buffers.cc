#include "peakmem/allocators/nccl_buffers.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "peakmem/semantics/op_registry.h"

namespace peakmem {
namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;
constexpr std::int64_t kGranule = 2 * kMiB;     // CUDA_IPC_MIN / cuMem granularity
constexpr std::int64_t kConnectionHead = 4096;  // sizeof(ncclRecvMem), sizeof(ncclSendMem)

std::int64_t Granules(std::int64_t bytes) { return (bytes + kGranule - 1) / kGranule * kGranule; }

}  // namespace

std::string NcclCollectiveOf(const std::string& op) {
  const OpInfo* info = FindOp(op);
  return info == nullptr ? std::string() : std::string(info->nccl_collective);
}

NcclEstimate EstimateNcclBuffers(const NcclOptions& o) {
  if (o.world_size < 1 || o.gpus_per_node < 1 || o.channels < 1 || o.communicators < 1 || o.nvls_channels < 0) {
    throw std::invalid_argument("NCCL estimate: world size, GPUs per node, channels and communicators must be >= 1");
  }
  if (o.simple_bytes < 0 || o.ll_bytes < 0 || o.ll128_bytes < 0) {
    throw std::invalid_argument("NCCL estimate: buffer sizes must not be negative");
  }
  static const std::set<std::string> kKnown = {"all_reduce", "all_gather", "reduce_scatter", "broadcast"};
  bool tree = false;
  for (const std::string& c : o.collectives) {
    if (!kKnown.count(c)) throw std::invalid_argument("NCCL estimate: unknown collective '" + c + "'");
    tree = tree || c == "all_reduce";
  }
  NcclEstimate e;
  if (o.world_size == 1 || o.collectives.empty()) {
    e.assumptions.push_back(o.world_size == 1 ? "one rank: NCCL connects nothing"
                                              : "no collective: NCCL connects nothing (2.22+ connects lazily)");
    return e;
  }
  const std::int64_t recv_p2p = Granules(kConnectionHead + o.ll_bytes + o.ll128_bytes + o.simple_bytes);
  const std::int64_t send_p2p = Granules(kConnectionHead);
  const std::int64_t recv_net = Granules(o.ll_bytes + o.ll128_bytes + o.simple_bytes);
  const std::int64_t send_net = Granules(o.ll128_bytes + o.simple_bytes);
  e.crosses_nodes = o.world_size > o.gpus_per_node;
  // A rank at a node's edge: its ring sends to and receives from other nodes
  // (the most any rank of the ring holds).
  const std::int64_t connection_pair = e.crosses_nodes ? recv_net + send_net : recv_p2p + send_p2p;
  e.ring_bytes = o.channels * connection_pair;
  if (tree) e.tree_bytes = o.channels * connection_pair;
  const int local = std::min(o.world_size, o.gpus_per_node);
  if (o.nvls && o.cumem && local > 2) e.nvls_bytes = std::int64_t{o.nvls_channels} * 2 * kMiB * local;
  if (o.cumem) e.channel_structures_bytes = o.channels * 3 * kGranule + 2 * kGranule;
  e.ring_bytes *= o.communicators;
  e.tree_bytes *= o.communicators;
  e.nvls_bytes *= o.communicators;
  e.channel_structures_bytes *= o.communicators;
  e.total_bytes = e.ring_bytes + e.tree_bytes + e.nvls_bytes + e.channel_structures_bytes;
  e.assumptions.push_back(std::to_string(o.channels) + " channels (NCCL's INFO log says the real count)");
  e.assumptions.push_back(e.crosses_nodes ? "a rank at a node's edge: ring connections over the network "
                                            "with GPUDirect RDMA"
                                          : "one node: ring connections over P2P (NVLink or PCIe)");
  if (tree) e.assumptions.push_back("all-reduce: the tree connects as many buffers again as the ring");
  if (!o.cumem) e.assumptions.push_back("cuMem off: channel structures not rounded to granules");
  return e;
}

}  // namespace peakmem
