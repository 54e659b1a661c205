// The "text" writer: a human-readable summary, the breakdown and the
// per-step table.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <exception>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "peakmem/report/allocator_summary.h"
#include "registry.h"

namespace peakmem {

using writers::kFlushBytes;

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

// ANSI escapes for the text report on a terminal.
struct Style {
  const char* bold = "";
  const char* peak = "";
  const char* reset = "";
};
Style StyleFor(bool colour) {
  if (!colour) return {};
  return {"\x1b[1m", "\x1b[1;31m", "\x1b[0m"};
}

// One row of the step table, as "{:>5} {:>5} {:>14} {:>14} {:>14}  {source}".
// The numbers are written with to_chars (fmt's general path costs more than
// the rest of the row on a 10^6-step table).
void AppendStepRow(const Report& report, const Step& s, const Style& style, std::string* out) {
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
  if (s.index == report.peak_step) {
    *out += "   ";
    *out += style.peak;
    *out += "<- peak";
    *out += style.reset;
  }
  *out += '\n';
}

// The step table's rows [begin, end), appended to `out`.
void AppendStepRows(const Report& report, std::size_t begin, std::size_t end, std::string* out) {
  // Each row quotes its statement's line from the trace text, which was
  // last read long before: the lines are fetched a few rows ahead (each is
  // on a page of its own every ~16 rows, where the hardware stops).
  constexpr std::size_t kAhead = 12;
  const Style plain;
  for (std::size_t i = begin; i < end; ++i) {
    if (i + kAhead < end) {
      const std::string_view ahead = report.steps[i + kAhead].source;
      if (!ahead.empty()) __builtin_prefetch(ahead.data());
      if (ahead.size() > 64) __builtin_prefetch(ahead.data() + 64);
    }
    AppendStepRow(report, report.steps[i], plain, out);
  }
}

// The compact table: the `rows` statements that allocate the most, the
// peak's among them, in program order.
void AppendCompactRows(const Report& report, std::size_t rows, const Style& style, std::string* out) {
  std::vector<std::size_t> order(report.steps.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  const auto more = [&](std::size_t a, std::size_t b) {
    const std::int64_t da = report.steps[a].delta_bytes, db = report.steps[b].delta_bytes;
    return da != db ? da > db : a < b;
  };
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(rows), order.end(), more);
  order.resize(rows);
  const auto peak = static_cast<std::size_t>(report.peak_step);
  if (report.peak_step >= 0 && std::find(order.begin(), order.end(), peak) == order.end()) {
    order.back() = peak;
  }
  std::sort(order.begin(), order.end());
  for (const std::size_t i : order) AppendStepRow(report, report.steps[i], style, out);
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

void AppendGroups(const char* title, const std::vector<AttributionGroup>& groups, std::string* out) {
  *out += fmt::format("  {}:\n", title);
  const std::size_t shown = std::min<std::size_t>(groups.size(), kTextReportLiveTensors);
  for (std::size_t i = 0; i < shown; ++i) {
    const AttributionGroup& g = groups[i];
    *out += fmt::format("    {:>14} {:>11}  {:<14} {} storage{}\n", g.bytes, HumanBytes(g.bytes), g.key,
                        g.storages, g.storages == 1 ? "" : "s");
  }
  if (groups.size() > shown) *out += fmt::format("    ... and {} more\n", groups.size() - shown);
}

// What is alive at the moment `--at` names.
void AppendAttributionText(const Attribution& a, std::string* out) {
  const std::string when = a.at_peak ? "at the peak (inside step " + std::to_string(a.step) + ")"
                           : a.step < 0 ? std::string("before the first statement")
                                        : "after step " + std::to_string(a.step);
  *out += fmt::format("\nalive {}: {} bytes ({}) in {} storages\n", when, a.live_bytes,
                      HumanBytes(a.live_bytes), a.storages);
  AppendGroups("by category", a.by_category, out);
  AppendGroups("by the op that made them", a.by_op, out);
  *out += "  largest:\n";
  for (const AttributedStorage& t : a.largest) {
    *out += fmt::format("    {:>14} {:>11}  {:<12} {:<12} made by {}{}\n", t.bytes, HumanBytes(t.bytes),
                        t.name, t.category, t.made_by, t.line > 0 ? fmt::format(" (line {})", t.line) : "");
  }
  if (a.storages > a.largest.size()) *out += fmt::format("    ... and {} more\n", a.storages - a.largest.size());
}

// The breakdown: every key, or with a compact table (TextOptions::table_rows)
// only that many, the most bytes (allocations, not frees), in their order.
void AppendBreakdown(const Report& report, const TextOptions& text, const Style& style,
                     std::string* out, const ReportSink& sink) {
  const auto& items = report.breakdown.items();
  std::vector<bool> shown;
  if (text.table_rows > 0 && report.steps.size() > text.table_rows && items.size() > text.table_rows) {
    std::vector<std::size_t> order(items.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    const auto size = [&](std::size_t i) { return items[i].second; };
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(text.table_rows), order.end(),
                      [&](std::size_t a, std::size_t b) { return size(a) != size(b) ? size(a) > size(b) : a < b; });
    shown.assign(items.size(), false);
    for (std::size_t k = 0; k < text.table_rows; ++k) shown[order[k]] = true;
    *out += fmt::format("\n{}breakdown{} (the {} largest of {} keys):\n", style.bold, style.reset,
                        text.table_rows, items.size());
  } else {
    *out += fmt::format("\n{}breakdown:{}\n", style.bold, style.reset);
  }
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (!shown.empty() && !shown[i]) continue;
    char row[48];
    char* at = row;
    *at++ = ' ';
    *at++ = ' ';
    at = PutRight(items[i].second, 14, at);
    *at++ = ' ';
    *at++ = ' ';
    out->append(row, at);
    *out += items[i].first;
    *out += '\n';
    // A big trace has hundreds of thousands of keys: written a megabyte at
    // a time, not held whole.
    if (out->size() >= kFlushBytes) {
      sink(*out);
      out->clear();
    }
  }
}

// The per-step table after `head`: every statement, or the compact one.
void WriteStepTable(const Report& report, const TextOptions& text, const Style& style, std::string head,
                    const ReportSink& sink) {
  std::string out = std::move(head);
  const bool compact = text.table_rows > 0 && report.steps.size() > text.table_rows;
  if (compact) {
    out += fmt::format("\n{}the {} statements that allocate the most, of {} (--table full lists every one):{}\n",
                       style.bold, text.table_rows, report.steps.size(), style.reset);
  }
  out += fmt::format("\n{}{:>5} {:>5} {:>14} {:>14} {:>14}  {}{}\n", style.bold, "step", "line", "delta",
                     "live", "peak in step", "statement", style.reset);
  if (compact) {
    AppendCompactRows(report, text.table_rows, style, &out);
    sink(out);
    return;
  }
  if (text.colour) {  // (a terminal: a table read by people, not a 10^6-row file)
    for (const Step& s : report.steps) AppendStepRow(report, s, style, &out);
    sink(out);
    return;
  }
  WriteStepRows(report, std::move(out), sink);
}

}  // namespace

void WriteReportText(const Report& report, const ReportSink& sink, const Attribution* at,
                     const TextOptions& text) {
  const Style style = StyleFor(text.colour);
  std::string out;
  out.reserve(kFlushBytes + 4096);
  out += fmt::format("trace: {}\nmodel: {}\n", report.trace_name, report.model);
  out += fmt::format("{}peak:  {} bytes ({}){}\n", style.peak, report.peak_bytes,
                     HumanBytes(report.peak_bytes), style.reset);
  out += fmt::format("final: {} bytes ({})\n", report.final_bytes, HumanBytes(report.final_bytes));
  if (report.tensor_peak_bytes >= 0) {
    out += fmt::format("tensor peak (without op scratch): {} bytes ({})\n",
                       report.tensor_peak_bytes, HumanBytes(report.tensor_peak_bytes));
  }
  if (!report.convention.empty()) out += fmt::format("calling convention: {}\n", report.convention);
  if (const Distribution& d = report.distribution; d.distributed) {
    out += d.world_size > 0 ? fmt::format("distributed: rank {} of {} (world size from {})\n",
                                          d.rank, d.world_size, d.world_size_from)
                            : fmt::format(
                                  "distributed: rank {} (the trace does not say the world size; "
                                  "--world-size gives it)\n",
                                  d.rank);
  }
  if (report.nccl) {
    out += fmt::format(
        "NCCL's own buffers (an estimate, outside PyTorch's allocator and every figure here; "
        "docs/nccl-buffers.md): {} ({}; --nccl-channels, --gpus-per-node, --nccl-nvls)\n",
        HumanBytes(report.nccl->total_bytes), fmt::join(report.nccl->assumptions, "; "));
  }
  if (report.peak_step >= 0 && report.peak_step < static_cast<int>(report.steps.size())) {
    const Step& s = report.steps[report.peak_step];
    out += fmt::format("peak reached at step {} (line {}), op '{}': {}\n", s.index, s.line, s.op,
                       s.source);
  } else {
    out += "peak reached before the first statement (the inputs alone)\n";
  }
  if (report.allocator != nullptr) out += AllocatorSummaryText(report);
  if (!report.live_at_peak.empty() && at == nullptr) {  // (the attribution lists them)
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
  if (at != nullptr) AppendAttributionText(*at, &out);
  if (!report.diagnostics.empty()) {
    out += "\ndiagnostics:\n";
    for (const std::string& d : report.diagnostics) out += "  - " + d + "\n";
  }
  AppendBreakdown(report, text, style, &out, sink);
  WriteStepTable(report, text, style, std::move(out), sink);
}

std::string ReportToText(const Report& report) {
  std::string out;
  WriteReportText(report, [&](std::string_view chunk) { out += chunk; });
  return out;
}

namespace writers {
namespace {

class Text final : public ReportWriter {
 public:
  std::string_view name() const override { return "text"; }
  std::string_view description() const override {
    return "summary, breakdown, per-step table";
  }
  std::size_t live_at_peak_shown() const override { return kTextReportLiveTensors; }
  void Write(const Report& report, const WriterOptions& options,
             const ReportSink& sink) const override {
    if (!options.at) return WriteReportText(report, sink, nullptr, options.text);
    const Attribution at = Attribute(report, *options.at, kTextReportLiveTensors);
    WriteReportText(report, sink, &at, options.text);
  }
};

}  // namespace

const ReportWriter& TextWriter() {
  static const Text writer;
  return writer;
}

}  // namespace writers
}  // namespace peakmem
