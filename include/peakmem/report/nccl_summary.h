// NCCL's buffer estimate (allocators/nccl_buffers.h) as the JSON report's
// "nccl_estimate" object, which the Python binding returns as a dict too.
#pragma once

#include <nlohmann/json.hpp>

#include "peakmem/allocators/nccl_buffers.h"

namespace peakmem {

// {"total_bytes", "ring_bytes", "tree_bytes", "nvls_bytes",
//  "channel_structures_bytes", "crosses_nodes", "assumptions": [...]}.
nlohmann::ordered_json NcclSummaryJson(const NcclEstimate& estimate);

}  // namespace peakmem
