// A byte count as people read it, printed beside the exact bytes by the text
// reports, the HTML report, `peakmem step` and the Python StepReport.
#pragma once

#include <cstdint>
#include <string>

namespace peakmem {

// Binary units: "512 B", "59.6 KiB", "1.2 MiB", "3.45 GiB" (below 1 KiB
// exact; KiB and MiB to one decimal, GiB, the largest, to two), signed.
std::string HumanBytes(std::int64_t bytes);

// The exact count with its thousands grouped: "25,769,803,776", "-8".
std::string GroupedBytes(std::int64_t bytes);

}  // namespace peakmem
