// An estimate of the device memory NCCL allocates for a rank's
// communicators: outside PyTorch's allocator (not in torch.cuda.memory_stats,
// never in peakmem's exact figures), but in what nvidia-smi shows and in what
// runs out. A documented estimate, not a measurement: docs/nccl-buffers.md
// gives each rule's source in NCCL (2.18-2.27, github.com/NVIDIA/nccl) and
// what is uncertain.
//
// Per communicator, per channel, each connection of the rank has buffers for
// NCCL's three protocols (src/init.cc: DEFAULT_BUFFSIZE 4 MiB (Simple),
// DEFAULT_LL_BUFFSIZE 512 KiB, DEFAULT_LL128_BUFFSIZE 4,915,200 B), each
// allocation rounded up to 2 MiB (CUDA_IPC_MIN, the cuMem granularity):
//   within a node (P2P transport, src/transport/p2p.cc): the receiver holds
//     align(4 KiB + LL + LL128 + Simple), the sender align(4 KiB)
//     (10 MiB + 2 MiB with the defaults);
//   across nodes (NET transport with GPUDirect RDMA, net.cc): the sender
//     align(LL128 + Simple), the receiver align(LL + LL128 + Simple)
//     (10 MiB + 10 MiB).
// Ring: one receive and one send connection per channel. Tree (all-reduce
// only; NCCL 2.22+ connects an algorithm at its first collective): as many
// again. All-gather, reduce-scatter and broadcast run on the ring. NVLS
// (NVSwitch multicast, more than 2 GPUs in a node): nvls_channels x 2 x
// 1 MiB x GPUs in the node. With cuMem (the default from 2.19) each
// channel's small device structures take a granule each: about 6 MiB a
// channel and 4 MiB a communicator.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace peakmem {

struct NcclOptions {
  int world_size = 1;
  int gpus_per_node = 8;
  // NCCL's collective channels (its INFO log says "N coll channels"); 16
  // is common on 8-GPU NVLink machines.
  int channels = 16;
  int communicators = 1;  // one per process group (and device)
  // The collectives the program runs ("all_reduce", "all_gather",
  // "reduce_scatter", "broadcast"): which algorithms connect.
  std::vector<std::string> collectives;
  // NCCL_BUFFSIZE, NCCL_LL_BUFFSIZE, NCCL_LL128_BUFFSIZE.
  std::int64_t simple_bytes = std::int64_t{4} << 20;
  std::int64_t ll_bytes = std::int64_t{512} << 10;
  std::int64_t ll128_bytes = 4915200;
  bool cumem = true;  // NCCL_CUMEM_ENABLE (default on from 2.19)
  bool nvls = false;  // NVSwitch multicast (H100/H200 SXM systems; NCCL_NVLS_ENABLE)
  int nvls_channels = 16;
};

struct NcclEstimate {
  std::int64_t ring_bytes = 0;
  std::int64_t tree_bytes = 0;
  std::int64_t nvls_bytes = 0;
  std::int64_t channel_structures_bytes = 0;
  std::int64_t total_bytes = 0;
  bool crosses_nodes = false;  // the rank's ring neighbours may be on other nodes
  std::vector<std::string> assumptions;  // what the figure takes for granted, in words
};

// Throws std::invalid_argument for a world size, channel count or
// communicator count below 1, or a collective it does not know.
NcclEstimate EstimateNcclBuffers(const NcclOptions& options);

// The collective an op runs, as the registry says (OpInfo::nccl_collective:
// "all_reduce", ...; empty for `wait`, non-collectives and unknown ops).
std::string NcclCollectiveOf(const std::string& op);

}  // namespace peakmem
