#include "peakmem/report/human_bytes.h"

#include <fmt/format.h>

namespace peakmem {

std::string HumanBytes(std::int64_t bytes) {
  const double b = bytes < 0 ? -static_cast<double>(bytes) : static_cast<double>(bytes);
  const char* sign = bytes < 0 ? "-" : "";
  if (b < 1024) return fmt::format("{}{} B", sign, static_cast<std::int64_t>(b));
  if (b < 1024.0 * 1024) return fmt::format("{}{:.1f} KiB", sign, b / 1024);
  if (b < 1024.0 * 1024 * 1024) return fmt::format("{}{:.1f} MiB", sign, b / (1024.0 * 1024));
  return fmt::format("{}{:.2f} GiB", sign, b / (1024.0 * 1024 * 1024));
}

}  // namespace peakmem
