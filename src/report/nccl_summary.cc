#include "peakmem/report/nccl_summary.h"

namespace peakmem {

nlohmann::ordered_json NcclSummaryJson(const NcclEstimate& e) {
  return {{"total_bytes", e.total_bytes},
          {"ring_bytes", e.ring_bytes},
          {"tree_bytes", e.tree_bytes},
          {"nvls_bytes", e.nvls_bytes},
          {"channel_structures_bytes", e.channel_structures_bytes},
          {"crosses_nodes", e.crosses_nodes},
          {"assumptions", e.assumptions}};
}

}  // namespace peakmem
