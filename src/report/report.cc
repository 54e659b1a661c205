#include "peakmem/report/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>
#include <exception>
#include <iterator>
#include <system_error>
#include <thread>

#include <nlohmann/json.hpp>

namespace peakmem {

void OrderedBreakdown::Set(std::string_view key, std::int64_t bytes) {
  hashes_.push_back(StringHash{}(key));
  items_.emplace_back(keys_->Save(key), bytes);
}

void OrderedBreakdown::Append(OrderedBreakdown* part) {
  items_.insert(items_.end(), part->items_.begin(), part->items_.end());
  hashes_.insert(hashes_.end(), part->hashes_.begin(), part->hashes_.end());
  appended_keys_.push_back(std::move(part->keys_));
  for (auto& arena : part->appended_keys_) appended_keys_.push_back(std::move(arena));
  part->appended_keys_.clear();
  part->keys_ = std::make_shared<StringArena>();
  part->items_.clear();
  part->hashes_.clear();
  part->merged_ = 0;
}

void OrderedBreakdown::Merge() const {
  const std::size_t n = items_.size();
  merged_ = n;
  if (n < 2) return;
  // Bucket the entries by the top bits of their hash (a counting sort), so
  // that each bucket's entries are grouped in cache; then sort each bucket
  // by (hash, position): equal keys end up adjacent, first position first.
  // About 4-8 entries a bucket: sorting is then nearly free (at 526,321
  // entries, 17 bits: 12 ms against 20 ms with 1,024 buckets of ~500).
  const int bits = std::clamp(static_cast<int>(std::bit_width(n)) - 3, 4, 20);
  const std::size_t buckets = std::size_t{1} << bits;
  std::vector<std::uint32_t> start(buckets + 1, 0);
  for (std::uint64_t h : hashes_) ++start[(h >> (64 - bits)) + 1];
  for (std::size_t b = 0; b < buckets; ++b) start[b + 1] += start[b];
  std::vector<std::pair<std::uint64_t, std::uint32_t>> grouped(n);
  {
    std::vector<std::uint32_t> next(start.begin(), start.end() - 1);
    for (std::size_t i = 0; i < n; ++i) {
      grouped[next[hashes_[i] >> (64 - bits)]++] = {hashes_[i], static_cast<std::uint32_t>(i)};
    }
  }
  std::vector<bool> dropped;  // made only if some key repeats
  for (std::size_t b = 0; b < buckets; ++b) {
    auto first = grouped.begin() + start[b];
    auto last = grouped.begin() + start[b + 1];
    if (last - first < 2) continue;
    std::sort(first, last);
    for (auto i = first; i != last; ++i) {
      if (!dropped.empty() && dropped[i->second]) continue;
      // Later entries with the same key (same hash, equal text): the first
      // keeps its place and takes the last one's value.
      for (auto j = i + 1; j != last && j->first == i->first; ++j) {
        if ((!dropped.empty() && dropped[j->second]) ||
            items_[j->second].first != items_[i->second].first) {
          continue;
        }
        if (dropped.empty()) dropped.assign(n, false);
        items_[i->second].second = items_[j->second].second;
        dropped[j->second] = true;
      }
    }
  }
  if (dropped.empty()) return;
  std::size_t out = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (dropped[i]) continue;
    items_[out] = items_[i];
    hashes_[out] = hashes_[i];
    ++out;
  }
  items_.resize(out);
  hashes_.resize(out);
  merged_ = out;
}

namespace {

void AppendInt(std::int64_t value, std::string* out) {
  char digits[24];
  const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, value);
  (void)ec;
  out->append(digits, end);
}

// Appends `text` as a JSON string. Printable ASCII (every name and op in a
// trace) is escaped here; anything else goes through nlohmann::json, which
// replaces invalid UTF-8 with U+FFFD, so output is valid JSON either way.
void AppendJsonString(std::string_view text, std::string* out) {
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) {
      *out += nlohmann::json(std::string(text))
                  .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      return;
    }
  }
  out->reserve(out->size() + text.size() + 2);
  *out += '"';
  for (const char c : text) {
    if (c == '"' || c == '\\') *out += '\\';
    *out += c;
  }
  *out += '"';
}

// Writes `items` as a JSON array or object in nlohmann::json's layout
// (dump(indent)): one element per line at `level`+1, or compact when
// indent < 0. `write(i, out)` appends element i.
// Output is built in a buffer handed to the sink whenever it passes this
// size, so a report of 10^6 steps never sits in memory whole.
constexpr std::size_t kFlushBytes = 1 << 20;

template <typename Write>
void AppendJsonList(std::size_t count, int indent, int level, char open, char close,
                    Write write, std::string* out, const ReportSink& sink) {
  *out += open;
  if (count == 0) {
    *out += close;
    return;
  }
  const std::string pad = indent >= 0 ? "\n" + std::string((level + 1) * indent, ' ') : "";
  for (std::size_t i = 0; i < count; ++i) {
    if (i) *out += ',';
    *out += pad;
    write(i, out);
    if (out->size() >= kFlushBytes) {
      sink(*out);
      out->clear();
    }
  }
  if (indent >= 0) {
    *out += '\n';
    out->append(level * indent, ' ');
  }
  *out += close;
}

}  // namespace

void WriteReportJson(const Report& report, int indent, const ReportSink& sink) {
  nlohmann::ordered_json j;
  j["model"] = report.model;
  j["trace"] = report.trace_name;
  j["peak_bytes"] = report.peak_bytes;
  j["final_bytes"] = report.final_bytes;
  j["peak_step"] = report.peak_step;
  if (report.tensor_peak_bytes >= 0) j["tensor_peak_bytes"] = report.tensor_peak_bytes;
  if (!report.convention.empty()) j["convention"] = report.convention;
  // The breakdown and the steps (a key or a row per statement) are written
  // as text below, spliced where these placeholders are: ordered_json finds
  // keys by linear search and costs an allocation per value.
  j["breakdown"] = nullptr;
  j["steps"] = nullptr;
  nlohmann::ordered_json live = nlohmann::ordered_json::array();
  for (const LiveTensor& t : report.live_at_peak) {
    live.push_back({{"name", t.name},
                    {"bytes", t.bytes},
                    {"made_by", t.made_by},
                    {"line", t.line},
                    {"role", t.role}});
  }
  j["live_at_peak"] = std::move(live);
  // Only when the list was cut (ReportOptions::live_at_peak_limit).
  if (report.live_at_peak_total > report.live_at_peak.size()) {
    j["live_at_peak_total"] = report.live_at_peak_total;
  }
  j["diagnostics"] = report.diagnostics;
  const std::string head = j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
  const char* colon = indent >= 0 ? ": " : ":";
  const std::string breakdown_placeholder = std::string("\"breakdown\"") + colon + "null";
  const std::string steps_placeholder = std::string("\"steps\"") + colon + "null";
  const std::size_t b = head.find(breakdown_placeholder);
  const std::size_t st = head.find(steps_placeholder, b);
  const std::size_t b_end = b + breakdown_placeholder.size();
  const std::size_t st_end = st + steps_placeholder.size();

  std::string out;
  out.reserve(kFlushBytes + 4096);
  out.append(head, 0, b_end - 4);
  const auto& items = report.breakdown.items();
  AppendJsonList(
      items.size(), indent, 1, '{', '}',
      [&](std::size_t i, std::string* out) {
        AppendJsonString(items[i].first, out);
        *out += colon;
        AppendInt(items[i].second, out);
      },
      &out, sink);
  out.append(head, b_end, st_end - 4 - b_end);
  const std::string field_pad = indent >= 0 ? "\n" + std::string(3 * indent, ' ') : "";
  AppendJsonList(
      report.steps.size(), indent, 1, '[', ']',
      [&](std::size_t i, std::string* out) {
        const Step& s = report.steps[i];
        auto field = [&](const char* name, bool first) {
          if (!first) *out += ',';
          *out += field_pad;
          *out += '"';
          *out += name;
          *out += '"';
          *out += colon;
        };
        *out += '{';
        field("index", true);
        AppendInt(s.index, out);
        field("line", false);
        AppendInt(s.line, out);
        field("op", false);
        AppendJsonString(s.op, out);
        field("source", false);
        AppendJsonString(s.source, out);
        field("delta_bytes", false);
        AppendInt(s.delta_bytes, out);
        field("live_bytes", false);
        AppendInt(s.live_bytes, out);
        field("peak_bytes", false);
        AppendInt(s.peak_bytes, out);
        if (indent >= 0) {
          *out += '\n';
          out->append(2 * indent, ' ');
        }
        *out += '}';
      },
      &out, sink);
  out.append(head, st_end);
  out += '\n';
  sink(out);
}

std::string ReportToJson(const Report& report, int indent) {
  std::string out;
  WriteReportJson(report, indent, [&](std::string_view chunk) { out += chunk; });
  return out;
}

namespace {

// Writes `value` right-aligned in `width` columns (wider values are not
// cut) at `at`, which has room for max(width, 20) chars; returns the end.
char* PutRight(std::int64_t value, int width, char* at) {
  char digits[24];
  const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, value);
  (void)ec;
  const auto n = static_cast<int>(end - digits);
  if (n < width) {
    std::memset(at, ' ', static_cast<std::size_t>(width - n));
    at += width - n;
  }
  std::memcpy(at, digits, static_cast<std::size_t>(n));
  return at + n;
}

std::string HumanBytes(std::int64_t bytes) {
  const double b = static_cast<double>(bytes < 0 ? -bytes : bytes);
  const char* sign = bytes < 0 ? "-" : "";
  if (b < 1024) return fmt::format("{}{} B", sign, static_cast<std::int64_t>(b));
  if (b < 1024.0 * 1024) return fmt::format("{}{:.1f} KiB", sign, b / 1024);
  if (b < 1024.0 * 1024 * 1024) return fmt::format("{}{:.1f} MiB", sign, b / (1024.0 * 1024));
  return fmt::format("{}{:.2f} GiB", sign, b / (1024.0 * 1024 * 1024));
}

// The step table's rows [begin, end), appended to `out`: one row per step,
// as "{:>5} {:>5} {:>14} {:>14} {:>14}  {source}". The numbers are written
// with to_chars (fmt's general path costs more than the rest of the row on a
// 10^6-step table).
void AppendStepRows(const Report& report, std::size_t begin, std::size_t end, std::string* out) {
  // Each row quotes its statement's line from the trace text, which was
  // last read long before: the lines are fetched a few rows ahead (each is
  // on a page of its own every ~16 rows, where the hardware stops).
  constexpr std::size_t kAhead = 12;
  for (std::size_t i = begin; i < end; ++i) {
    if (i + kAhead < end) {
      const std::string_view ahead = report.steps[i + kAhead].source;
      if (!ahead.empty()) __builtin_prefetch(ahead.data());
      if (ahead.size() > 64) __builtin_prefetch(ahead.data() + 64);
    }
    const Step& s = report.steps[i];
    const bool cut = s.source.size() > 80;
    char row[128];  // the numbers: 5 columns of at most 20 digits and a space each
    char* at = row;
    at = PutRight(s.index, 5, at);
    *at++ = ' ';
    at = PutRight(s.line, 5, at);
    *at++ = ' ';
    at = PutRight(s.delta_bytes, 14, at);
    *at++ = ' ';
    at = PutRight(s.live_bytes, 14, at);
    *at++ = ' ';
    at = PutRight(s.peak_bytes, 14, at);
    *at++ = ' ';
    *at++ = ' ';
    out->append(row, at);
    *out += cut ? s.source.substr(0, 77) : s.source;
    if (cut) *out += "...";
    if (s.index == report.peak_step) *out += "   <- peak";
    *out += '\n';
  }
}

// Writes `head` and then every step row to `sink`, about a megabyte at a
// time. A big table (10^6 rows render in ~0.13 s, a tenth of the CLI's run)
// is rendered on two threads: a second thread renders every other block of
// rows while this one renders the block before it; the blocks go to `sink`
// in order, so the output is the same byte for byte, and at most two blocks
// (a few MB) are held at once.
void WriteStepRows(const Report& report, std::string head, const ReportSink& sink) {
  constexpr std::size_t kBlockRows = std::size_t{1} << 13;  // ~1 MB of text
  const std::size_t n = report.steps.size();
  std::string out = std::move(head);
  std::size_t done = 0;
  if (n >= 8 * kBlockRows && std::thread::hardware_concurrency() > 1) {
    std::string other;
    other.reserve(kFlushBytes + 4096);
    for (; done < n; done = std::min(done + 2 * kBlockRows, n)) {
      const std::size_t mid = std::min(done + kBlockRows, n);
      const std::size_t end = std::min(done + 2 * kBlockRows, n);
      std::exception_ptr failure;
      std::thread second;
      try {
        second = std::thread([&] {
          try {
            AppendStepRows(report, mid, end, &other);
          } catch (...) {
            failure = std::current_exception();
          }
        });
      } catch (const std::system_error&) {
        break;  // no thread: the rest on this one
      }
      std::exception_ptr own;  // (the second thread is joined before anything is thrown)
      try {
        AppendStepRows(report, done, mid, &out);
      } catch (...) {
        own = std::current_exception();
      }
      second.join();
      if (own) std::rethrow_exception(own);
      if (failure) std::rethrow_exception(failure);
      sink(out);
      out.clear();
      sink(other);
      other.clear();
    }
  }
  out.reserve(out.size() + kFlushBytes + 4096);
  for (; done < n; done = std::min(done + kBlockRows, n)) {
    AppendStepRows(report, done, std::min(done + kBlockRows, n), &out);
    if (out.size() >= kFlushBytes) {
      sink(out);
      out.clear();
    }
  }
  sink(out);
}

}  // namespace

void WriteReportText(const Report& report, const ReportSink& sink) {
  std::string out;
  out.reserve(kFlushBytes + 4096);
  out += fmt::format("trace: {}\nmodel: {}\n", report.trace_name, report.model);
  out += fmt::format("peak:  {} bytes ({})\n", report.peak_bytes, HumanBytes(report.peak_bytes));
  out += fmt::format("final: {} bytes ({})\n", report.final_bytes, HumanBytes(report.final_bytes));
  if (report.tensor_peak_bytes >= 0) {
    out += fmt::format("tensor peak (without op scratch): {} bytes ({})\n",
                       report.tensor_peak_bytes, HumanBytes(report.tensor_peak_bytes));
  }
  if (!report.convention.empty()) out += fmt::format("calling convention: {}\n", report.convention);
  if (report.peak_step >= 0 && report.peak_step < static_cast<int>(report.steps.size())) {
    const Step& s = report.steps[report.peak_step];
    out += fmt::format("peak reached at step {} (line {}), op '{}': {}\n", s.index, s.line, s.op,
                       s.source);
  } else {
    out += "peak reached before the first statement (the inputs alone)\n";
  }
  if (!report.live_at_peak.empty()) {
    out += "\nlargest live tensors at the peak:\n";
    const std::size_t shown =
        std::min<std::size_t>(report.live_at_peak.size(), kTextReportLiveTensors);
    const std::size_t total = std::max(report.live_at_peak_total, report.live_at_peak.size());
    for (std::size_t i = 0; i < shown; ++i) {
      const LiveTensor& t = report.live_at_peak[i];
      out += fmt::format("  {:>14}  {:<12} {:<12} made by {}{}\n", t.bytes, t.name, t.role,
                         t.made_by, t.line > 0 ? fmt::format(" (line {})", t.line) : "");
    }
    if (total > shown) {
      out += fmt::format("  ... and {} more\n", total - shown);
    }
  }
  if (!report.diagnostics.empty()) {
    out += "\ndiagnostics:\n";
    for (const std::string& d : report.diagnostics) out += "  - " + d + "\n";
  }
  out += "\nbreakdown:\n";
  for (const auto& [key, bytes] : report.breakdown.items()) {
    char row[48];
    char* at = row;
    *at++ = ' ';
    *at++ = ' ';
    at = PutRight(bytes, 14, at);
    *at++ = ' ';
    *at++ = ' ';
    out.append(row, at);
    out += key;
    out += '\n';
    // A big trace has hundreds of thousands of keys: written a megabyte at
    // a time, not held whole.
    if (out.size() >= kFlushBytes) {
      sink(out);
      out.clear();
    }
  }
  out += fmt::format("\n{:>5} {:>5} {:>14} {:>14} {:>14}  {}\n", "step", "line", "delta", "live",
                     "peak in step", "statement");
  WriteStepRows(report, std::move(out), sink);
}

std::string ReportToText(const Report& report) {
  std::string out;
  WriteReportText(report, [&](std::string_view chunk) { out += chunk; });
  return out;
}

}  // namespace peakmem
