#include "peakmem/allocators/allocator_choice.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace peakmem {

const char* AllocatorModelName(AllocatorModel model) {
  switch (model) {
    case AllocatorModel::kRequested: return "requested";
    case AllocatorModel::kCudaCaching: return "cuda-caching";
  }
  return "?";
}

bool ParseAllocatorModel(std::string_view text, AllocatorModel* out) {
  for (AllocatorModel m : {AllocatorModel::kRequested, AllocatorModel::kCudaCaching}) {
    if (text == AllocatorModelName(m)) {
      *out = m;
      return true;
    }
  }
  return false;
}

std::vector<std::string> AllocatorModelNames() {
  return {AllocatorModelName(AllocatorModel::kRequested),
          AllocatorModelName(AllocatorModel::kCudaCaching)};
}

AllocatorOptions MakeAllocatorOptions(std::string_view model,
                                      std::optional<std::string_view> alloc_conf,
                                      std::string_view device_memory, std::string_view conf_name,
                                      std::string_view memory_name) {
  AllocatorOptions options;
  // No writer reads the segments at the peak yet, and keeping them costs a
  // copy of the layout at every new peak (quadratic on a growing forward).
  options.cuda.layout_at = CudaLayoutAt::kNone;
  if (!ParseAllocatorModel(model, &options.model)) {
    throw std::invalid_argument("unknown allocator '" + std::string(model) +
                                "'; available allocators: requested, cuda-caching");
  }
  const bool conf_given = alloc_conf.has_value() && !alloc_conf->empty();
  if (options.model != AllocatorModel::kCudaCaching) {
    if (conf_given || !device_memory.empty()) {
      throw std::invalid_argument(std::string(conf_name) + " and " + std::string(memory_name) +
                                  " need the cuda-caching allocator");
    }
    return options;
  }
  std::string conf;
  std::string where;  // (the parser's messages name PYTORCH_CUDA_ALLOC_CONF)
  if (alloc_conf.has_value()) {
    conf = std::string(*alloc_conf);
    where = std::string(conf_name) + ": ";
  } else if (const char* env = std::getenv("PYTORCH_CUDA_ALLOC_CONF")) {
    conf = env;
  }
  std::string error;
  if (!conf.empty() && !ParseCudaAllocConf(conf, &options.cuda, &error)) {
    throw std::invalid_argument(where + error);
  }
  if (!device_memory.empty() &&
      !ParseByteSize(device_memory, &options.cuda.device_capacity, &error)) {
    throw std::invalid_argument(std::string(memory_name) + ": " + error);
  }
  return options;
}

AllocatorResult RunAllocatorModel(const AllocLog& log, const AllocatorOptions& options) {
  if (options.model != AllocatorModel::kCudaCaching) {
    throw std::invalid_argument(std::string("allocator '") + AllocatorModelName(options.model) +
                                "' has no model to run");
  }
  AllocatorResult result;
  result.model = options.model;
  CudaCachingOptions cuda = options.cuda;
  cuda.device = -1;
  result.device = "all";
  for (std::size_t i = 0; i < log.devices.size(); ++i) {
    if (log.devices[i].rfind("cuda", 0) == 0) {
      cuda.device = static_cast<int>(i);
      result.device = log.devices[i] == "cuda" ? "cuda:0" : log.devices[i];
      break;
    }
  }
  result.device_capacity = cuda.device_capacity;
  result.cuda = cuda;
  result.stats = SimulateCudaCaching(
      log, cuda, cuda.layout_at == CudaLayoutAt::kNone ? nullptr : &result.peak_layout);
  if (result.stats.oom_storage < log.storages.size()) {
    result.oom_requested_bytes = log.storages[result.stats.oom_storage].bytes;
  }
  return result;
}

namespace {

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// The bytes in one unit, or 0 for a unit that is not known.
std::int64_t UnitBytes(std::string_view unit) {
  struct Unit {
    const char* name;
    std::int64_t bytes;
  };
  static constexpr Unit kUnits[] = {
      {"", 1},
      {"B", 1},
      {"KB", 1000},
      {"MB", 1000 * 1000},
      {"GB", 1000 * 1000 * 1000},
      {"TB", std::int64_t{1000} * 1000 * 1000 * 1000},
      {"KiB", 1 << 10},
      {"MiB", 1 << 20},
      {"GiB", 1 << 30},
      {"TiB", std::int64_t{1} << 40},
  };
  for (const Unit& u : kUnits) {
    if (EqualsIgnoringCase(unit, u.name)) return u.bytes;
  }
  return 0;
}

}  // namespace

bool ParseByteSize(std::string_view text, std::int64_t* bytes, std::string* error) {
  const std::string quoted = "'" + std::string(text) + "'";
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
    ++i;
  }
  const std::string_view number = text.substr(0, i);
  std::size_t unit_begin = i;
  while (unit_begin < text.size() && text[unit_begin] == ' ') ++unit_begin;
  const std::int64_t scale = UnitBytes(text.substr(unit_begin));
  const std::size_t dot = number.find('.');
  if (number.empty() || number == "." || (dot != std::string_view::npos && number.find('.', dot + 1) != std::string_view::npos) ||
      scale == 0) {
    *error = "cannot read the size " + quoted +
             ": expected a number and a unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), e.g. 80GiB";
    return false;
  }
  // Whole part and fraction apart, so that sizes in bytes stay exact.
  std::int64_t whole = 0;
  for (char c : number.substr(0, dot)) {
    if (__builtin_mul_overflow(whole, 10, &whole) || __builtin_add_overflow(whole, c - '0', &whole)) {
      *error = "the size " + quoted + " does not fit 64 bits";
      return false;
    }
  }
  std::int64_t total = 0;
  if (__builtin_mul_overflow(whole, scale, &total)) {
    *error = "the size " + quoted + " does not fit 64 bits";
    return false;
  }
  if (dot != std::string_view::npos) {
    const double fraction = std::stod("0" + std::string(number.substr(dot))) * static_cast<double>(scale);
    if (fraction != std::floor(fraction)) {
      *error = "the size " + quoted + " is not a whole number of bytes";
      return false;
    }
    if (__builtin_add_overflow(total, static_cast<std::int64_t>(fraction), &total)) {
      *error = "the size " + quoted + " does not fit 64 bits";
      return false;
    }
  }
  *bytes = total;
  return true;
}

bool ParseSizeWithUnit(std::string_view text, std::int64_t* bytes, std::string* error) {
  std::size_t begin = 0, end = text.size();
  while (begin < end && text[begin] == ' ') ++begin;
  while (end > begin && text[end - 1] == ' ') --end;
  const std::string_view number = text.substr(begin, end - begin);
  const bool bare = !number.empty() && number.find_first_not_of("0123456789.") == std::string_view::npos;
  if (bare) {
    const std::string n(number);
    *error = "'" + std::string(text) + "' has no unit: give a size such as " + n + "GiB (or " + n + "B for bytes)";
    return false;
  }
  return ParseByteSize(text, bytes, error);
}

}  // namespace peakmem
