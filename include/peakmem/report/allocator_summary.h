// The allocator section of a report (Report::allocator), as every output
// shows it: the figures torch.cuda.memory_stats() would give, and whether
// the run fits the device.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "peakmem/report/report.h"

namespace peakmem {

// {"name", "device", "requested_peak_bytes", "requested_final_bytes",
//  "allocated_peak_bytes", "allocated_final_bytes", "allocated_peak_step",
//  "reserved_peak_bytes", "reserved_final_bytes", "reserved_peak_step",
//  "segments_peak", "segments_final", "device_alloc_calls",
//  "device_free_calls", "alloc_retries", "device_capacity_bytes" (null:
//  unbounded), "fits" (null without a capacity), "headroom_bytes" (capacity
//  minus the reserved peak; null without a capacity or when out of memory),
//  "out_of_memory" (null, or {"step", "line", "op", "requested_bytes",
//  "rounded_bytes", "segment_bytes", "allocated_bytes", "reserved_bytes"})}.
// Steps are statement indexes (-1: the arguments; null: never).
// Null when the report has no allocator section.
nlohmann::ordered_json AllocatorSummaryJson(const Report& report);
// The same for people: "allocator: cuda-caching (...)", the allocated and
// reserved peaks and finals, the segments, and whether it fits (or where it
// runs out of memory), one line each, starting with a blank line.
// Requires report.allocator.
std::string AllocatorSummaryText(const Report& report);

}  // namespace peakmem
