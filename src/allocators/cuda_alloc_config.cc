#include "peakmem/allocators/cuda_alloc_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstdlib>
#include <vector>

namespace peakmem {
namespace {

constexpr std::int64_t kMB = 1 << 20;

bool IsPowerOf2(std::int64_t v) { return v > 0 && std::has_single_bit(static_cast<std::uint64_t>(v)); }
int Log2Floor(std::uint64_t v) { return 63 - std::countl_zero(v); }

// AllocatorConfig::lexArgs: ',', ':', '[' and ']' are tokens of their own,
// spaces are dropped, everything else makes up words.
std::vector<std::string> Lex(std::string_view text) {
  std::vector<std::string> tokens;
  std::string word;
  for (char c : text) {
    if (c == ',' || c == ':' || c == '[' || c == ']') {
      if (!word.empty()) tokens.push_back(std::move(word)), word.clear();
      tokens.emplace_back(1, c);
    } else if (c != ' ') {
      word.push_back(c);
    }
  }
  if (!word.empty()) tokens.push_back(std::move(word));
  return tokens;
}

// Walks the tokens; every failure names the key it was reading.
class ConfReader {
 public:
  explicit ConfReader(std::string_view text) : tokens_(Lex(text)) {}

  bool Done() const { return i_ >= tokens_.size(); }
  const std::string& error() const { return error_; }

  bool Fail(std::string message) {
    if (error_.empty()) error_ = "PYTORCH_CUDA_ALLOC_CONF: " + std::move(message);
    return false;
  }
  // The next token, which must exist; `what` names it in the error.
  bool Next(std::string_view what, std::string* token) {
    if (Done()) return Fail(fmt::format("expected {} at the end", what));
    *token = tokens_[i_++];
    return true;
  }
  bool Expect(char c, std::string_view key) {
    std::string token;
    if (!Next(fmt::format("'{}' after {}", c, key), &token)) return false;
    if (token.size() != 1 || token[0] != c) {
      return Fail(fmt::format("expected '{}' after {}, found '{}'", c, key, token));
    }
    return true;
  }
  bool PeekIs(char c) const { return !Done() && tokens_[i_].size() == 1 && tokens_[i_][0] == c; }

  bool Integer(std::string_view key, std::int64_t* value) {
    std::string token;
    if (!Next(fmt::format("a value for {}", key), &token)) return false;
    const char* end = token.data() + token.size();
    auto [ptr, ec] = std::from_chars(token.data(), end, *value);
    if (ec != std::errc() || ptr != end || *value < 0) {
      return Fail(fmt::format("{}: '{}' is not a non-negative integer", key, token));
    }
    return true;
  }
  bool Real(std::string_view key, double* value) {
    std::string token;
    if (!Next(fmt::format("a value for {}", key), &token)) return false;
    char* end = nullptr;
    *value = std::strtod(token.c_str(), &end);
    if (token.empty() || end != token.c_str() + token.size()) {
      return Fail(fmt::format("{}: '{}' is not a number", key, token));
    }
    return true;
  }
  bool Bool(std::string_view key, bool* value) {
    std::string token;
    if (!Next(fmt::format("True or False for {}", key), &token)) return false;
    if (token != "True" && token != "False") {
      return Fail(fmt::format("{}: expected True or False, found '{}'", key, token));
    }
    *value = token == "True";
    return true;
  }

 private:
  std::vector<std::string> tokens_;
  std::size_t i_ = 0;
  std::string error_;
};

// parseMaxSplitSize / parseMaxNonSplitRoundingSize: megabytes, at least
// kLargeBuffer / 1 MiB (20).
bool ReadMegabytes(ConfReader& r, std::string_view key, std::int64_t* bytes) {
  std::int64_t mb = 0;
  if (!r.Expect(':', key) || !r.Integer(key, &mb)) return false;
  if (mb < kCudaLargeBuffer / kMB) {
    return r.Fail(fmt::format("{} too small, must be >= {} (found {})", key, kCudaLargeBuffer / kMB, mb));
  }
  *bytes = mb > kCudaNoMaxSplitSize / kMB ? kCudaNoMaxSplitSize : mb * kMB;
  return true;
}

// parseRoundUpPower2Divisions: one power of two for every interval, or
// [MB:divisions, ..., >:divisions]. The first MB entry also sets every
// interval below it; ">" sets the intervals from the last MB entry on.
bool ReadRoundupDivisions(ConfReader& r, std::array<std::int64_t, kCudaRoundupIntervals>* divisions) {
  constexpr std::string_view kKey = "roundup_power2_divisions";
  if (!r.Expect(':', kKey)) return false;
  if (!r.PeekIs('[')) {
    std::int64_t value = 0;
    if (!r.Integer(kKey, &value)) return false;
    if (!IsPowerOf2(value)) return r.Fail(fmt::format("{}: the divisions ({}) must be a power of 2", kKey, value));
    divisions->fill(value);
    return true;
  }
  std::string token;
  r.Next("'['", &token);
  bool first_value = true;
  std::size_t last_index = 0;
  while (true) {
    if (!r.Next(fmt::format("']' closing {}", kKey), &token)) return false;
    if (token == "]") break;
    std::int64_t value = 0;
    if (!r.Expect(':', kKey) || !r.Integer(kKey, &value)) return false;
    if (value != 0 && !IsPowerOf2(value)) {
      return r.Fail(fmt::format("{}: the divisions ({}) must be a power of 2 or 0", kKey, value));
    }
    if (token == ">") {
      std::fill(divisions->begin() + static_cast<std::ptrdiff_t>(last_index), divisions->end(), value);
    } else {
      std::int64_t mb = 0;
      auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), mb);
      if (ec != std::errc() || ptr != token.data() + token.size() || !IsPowerOf2(mb)) {
        return r.Fail(fmt::format("{}: the interval '{}' must be a power of 2 (in MB) or '>'", kKey, token));
      }
      std::size_t index = std::min<std::size_t>(Log2Floor(static_cast<std::uint64_t>(mb)), kCudaRoundupIntervals - 1);
      if (first_value) {
        std::fill(divisions->begin(), divisions->begin() + static_cast<std::ptrdiff_t>(index), value);
        first_value = false;
      }
      (*divisions)[index] = value;
      last_index = index;
    }
    if (r.Done()) return r.Fail(fmt::format("{}: expected ']' at the end", kKey));
    if (!r.PeekIs(']') && !r.Expect(',', kKey)) return false;
  }
  return true;
}

// One key and its value (AllocatorConfig::parseArgs's loop body).
bool ReadKey(ConfReader& r, const std::string& key, CudaCachingOptions* o) {
  if (key == "max_split_size_mb") return ReadMegabytes(r, key, &o->max_split_size);
  if (key == "max_non_split_rounding_mb") return ReadMegabytes(r, key, &o->max_non_split_rounding_size);
  if (key == "roundup_power2_divisions") return ReadRoundupDivisions(r, &o->roundup_power2_divisions);
  if (key == "garbage_collection_threshold") {
    if (!r.Expect(':', key) || !r.Real(key, &o->garbage_collection_threshold)) return false;
    if (!(o->garbage_collection_threshold > 0.0 && o->garbage_collection_threshold < 1.0)) {
      return r.Fail(fmt::format("{} must be in (0.0, 1.0), found {}", key, o->garbage_collection_threshold));
    }
    return true;
  }
  if (key == "per_process_memory_fraction") {
    if (!r.Expect(':', key) || !r.Real(key, &o->per_process_memory_fraction)) return false;
    if (!(o->per_process_memory_fraction >= 0.0 && o->per_process_memory_fraction <= 1.0)) {
      return r.Fail(fmt::format("{} must be in [0.0, 1.0], found {}", key, o->per_process_memory_fraction));
    }
    return true;
  }
  if (key == "expandable_segments") {
    if (!r.Expect(':', key) || !r.Bool(key, &o->expandable_segments)) return false;
    if (o->expandable_segments) return r.Fail("expandable_segments:True is not modeled (only False)");
    return true;
  }
  if (key == "backend") {
    std::string value;
    if (!r.Expect(':', key) || !r.Next("a value for backend", &value)) return false;
    if (value != "native") return r.Fail(fmt::format("backend '{}' is not modeled (only native)", value));
    return true;
  }
  if (key == "release_lock_on_cudamalloc" || key == "pinned_use_cuda_host_register" ||
      key == "pinned_use_background_threads") {
    bool ignored = false;
    return r.Expect(':', key) && r.Bool(key, &ignored);
  }
  if (key == "pinned_num_register_threads") {
    std::int64_t ignored = 0;
    return r.Expect(':', key) && r.Integer(key, &ignored);
  }
  return r.Fail(fmt::format("unrecognized option '{}'", key));
}

}  // namespace

bool ParseCudaAllocConf(std::string_view conf, CudaCachingOptions* options, std::string* error) {
  CudaCachingOptions parsed;
  parsed.device_capacity = options->device_capacity;
  parsed.per_process_memory_fraction = options->per_process_memory_fraction;
  parsed.device = options->device;
  parsed.stop_at_oom = options->stop_at_oom;
  parsed.layout_at = options->layout_at;
  ConfReader r(conf);
  std::string key;
  while (!r.Done()) {
    r.Next("an option", &key);
    if (!ReadKey(r, key, &parsed)) break;
    if (!r.Done() && !r.Expect(',', key)) break;
  }
  if (r.error().empty()) {
    std::string invalid = ValidateCudaCachingOptions(parsed);
    if (!invalid.empty()) r.Fail(invalid);
  }
  if (!r.error().empty()) {
    if (error) *error = r.error();
    return false;
  }
  *options = parsed;
  return true;
}

std::string ValidateCudaCachingOptions(const CudaCachingOptions& o) {
  if (o.expandable_segments) return "expandable_segments is not modeled";
  if (o.max_split_size < kCudaLargeBuffer) {
    return fmt::format("max_split_size ({} bytes) must be at least {} (20 MiB)", o.max_split_size, kCudaLargeBuffer);
  }
  if (o.max_non_split_rounding_size < kCudaLargeBuffer) {
    return fmt::format("max_non_split_rounding_size ({} bytes) must be at least {} (20 MiB)",
                       o.max_non_split_rounding_size, kCudaLargeBuffer);
  }
  for (std::int64_t d : o.roundup_power2_divisions) {
    if (d != 0 && !IsPowerOf2(d)) return fmt::format("roundup_power2_divisions: {} is not a power of 2 or 0", d);
  }
  if (!(o.garbage_collection_threshold >= 0.0 && o.garbage_collection_threshold < 1.0)) {
    return fmt::format("garbage_collection_threshold ({}) must be in [0, 1)", o.garbage_collection_threshold);
  }
  if (!(o.per_process_memory_fraction >= 0.0 && o.per_process_memory_fraction <= 1.0)) {
    return fmt::format("per_process_memory_fraction ({}) must be in [0, 1]", o.per_process_memory_fraction);
  }
  if (o.per_process_memory_fraction > 0.0 && o.device_capacity <= 0) {
    return "per_process_memory_fraction needs device_capacity (the fraction is of the device's memory)";
  }
  if (o.device_capacity < 0) return fmt::format("device_capacity ({}) is negative", o.device_capacity);
  return {};
}

std::int64_t CudaRoundupDivisions(std::int64_t size, const CudaCachingOptions& options) {
  // AllocatorConfig::roundup_power2_divisions: interval = log2(size) - log2(1 MiB), clamped.
  int index = Log2Floor(static_cast<std::uint64_t>(size)) - Log2Floor(static_cast<std::uint64_t>(kMB));
  index = std::clamp(index, 0, kCudaRoundupIntervals - 1);
  return options.roundup_power2_divisions[static_cast<std::size_t>(index)];
}

namespace {
// DeviceCachingAllocator::roundup_power2_next_division: the next of
// `divisions` equal steps between the powers of two around `size`.
std::uint64_t RoundupPower2NextDivision(std::uint64_t size, std::uint64_t divisions) {
  if (std::has_single_bit(size)) return size;
  const std::uint64_t power2_floor = std::bit_floor(size);
  const std::uint64_t division = power2_floor >> Log2Floor(divisions);
  if (division == 0) return power2_floor << 1;
  const std::uint64_t floor = size & ~(division - 1);
  return floor == size ? size : floor + division;
}
}  // namespace

std::int64_t CudaRoundSize(std::int64_t bytes, const CudaCachingOptions& options) {
  // DeviceCachingAllocator::round_size.
  if (bytes < kCudaMinBlockSize) return kCudaMinBlockSize;
  const std::int64_t divisions = CudaRoundupDivisions(bytes, options);
  if (divisions > 1 && bytes > kCudaMinBlockSize * divisions) {
    return static_cast<std::int64_t>(
        RoundupPower2NextDivision(static_cast<std::uint64_t>(bytes), static_cast<std::uint64_t>(divisions)));
  }
  return kCudaMinBlockSize * ((bytes + kCudaMinBlockSize - 1) / kCudaMinBlockSize);
}

std::int64_t CudaAllocationSize(std::int64_t size) {
  // DeviceCachingAllocator::get_allocation_size.
  if (size <= kCudaSmallSize) return kCudaSmallBuffer;
  if (size < kCudaMinLargeAlloc) return kCudaLargeBuffer;
  return kCudaRoundLarge * ((size + kCudaRoundLarge - 1) / kCudaRoundLarge);
}

}  // namespace peakmem
