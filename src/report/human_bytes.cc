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

std::string GroupedBytes(std::int64_t bytes) {
  const bool negative = bytes < 0;
  // The magnitude as unsigned: -2^63 has none as a signed count.
  std::uint64_t magnitude = negative ? 0 - static_cast<std::uint64_t>(bytes) : static_cast<std::uint64_t>(bytes);
  std::string digits = std::to_string(magnitude);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return negative ? "-" + out : out;
}

}  // namespace peakmem
