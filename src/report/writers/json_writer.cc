// The "json" writer: the report as one JSON object, streamed (the breakdown
// and the steps, a key or a row per statement, are written as text spliced
// into nlohmann::json's dump of the rest, in its exact layout).
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "peakmem/report/allocator_summary.h"
#include "peakmem/report/nccl_summary.h"
#include "registry.h"

namespace peakmem {
namespace writers {

// Printable ASCII (every name and op in a trace) is escaped here; anything
// else goes through nlohmann::json, which replaces invalid UTF-8 with U+FFFD.
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

}  // namespace writers

using writers::AppendInt;
using writers::AppendJsonString;
using writers::kFlushBytes;

namespace {

// "\n" and `spaces` blanks ("" when indent < 0). Appended, not `"\n" +
// std::string(...)`: GCC 12 warns falsely (-Wrestrict, its bug 105651) on
// that operator+ once inlined.
std::string NewlinePad(int indent, int spaces) {
  std::string pad;
  if (indent < 0) return pad;
  pad += '\n';
  pad.append(static_cast<std::size_t>(spaces), ' ');
  return pad;
}

// Writes `items` as a JSON array or object in nlohmann::json's layout
// (dump(indent)): one element per line at `level`+1, or compact when
// indent < 0. `write(i, out)` appends element i. Output goes to the sink
// whenever the buffer passes kFlushBytes, so a report of 10^6 steps never
// sits in memory whole.
template <typename Write>
void AppendJsonList(std::size_t count, int indent, int level, char open, char close,
                    Write write, std::string* out, const ReportSink& sink) {
  *out += open;
  if (count == 0) {
    *out += close;
    return;
  }
  const std::string pad = NewlinePad(indent, (level + 1) * indent);
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

// Every field of the report but the breakdown and the steps, which are
// null placeholders here: WriteReportJson writes them as text where the
// placeholders are (ordered_json finds keys by linear search and costs an
// allocation per value; a 10^6-step report would be slow).
nlohmann::ordered_json GroupsJson(const std::vector<AttributionGroup>& groups) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const AttributionGroup& g : groups) {
    out.push_back({{"key", g.key}, {"bytes", g.bytes}, {"storages", g.storages}});
  }
  return out;
}

nlohmann::ordered_json AttributionJson(const Attribution& a) {
  nlohmann::ordered_json j;
  j["step"] = a.step;
  j["at_peak"] = a.at_peak;
  j["live_bytes"] = a.live_bytes;
  j["storages"] = a.storages;
  j["by_category"] = GroupsJson(a.by_category);
  j["by_op"] = GroupsJson(a.by_op);
  nlohmann::ordered_json largest = nlohmann::ordered_json::array();
  for (const AttributedStorage& s : a.largest) {
    largest.push_back({{"name", s.name},
                       {"bytes", s.bytes},
                       {"category", s.category},
                       {"made_by", s.made_by},
                       {"made_at", s.made_at},
                       {"line", s.line}});
  }
  j["largest"] = std::move(largest);
  return j;
}

nlohmann::ordered_json ReportHead(const Report& report, const Attribution* at) {
  nlohmann::ordered_json j;
  j["schema_version"] = kReportSchemaVersion;
  j["model"] = report.model;
  j["trace"] = report.trace_name;
  j["peak_bytes"] = report.peak_bytes;
  j["final_bytes"] = report.final_bytes;
  j["peak_step"] = report.peak_step;
  if (report.tensor_peak_bytes >= 0) j["tensor_peak_bytes"] = report.tensor_peak_bytes;
  if (!report.convention.empty()) j["convention"] = report.convention;
  if (const Distribution& d = report.distribution; d.distributed) {
    nlohmann::ordered_json dist;
    dist["rank"] = d.rank;
    dist["world_size"] =
        d.world_size > 0 ? nlohmann::ordered_json(d.world_size) : nlohmann::ordered_json();
    dist["world_size_from"] = d.world_size_from;
    j["distributed"] = std::move(dist);
  }
  // Apart from every figure above: not PyTorch's allocator.
  if (report.nccl) j["nccl_estimate"] = NcclSummaryJson(*report.nccl);
  if (report.allocator != nullptr) j["allocator"] = AllocatorSummaryJson(report);
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
  if (at != nullptr) j["attribution"] = AttributionJson(*at);
  j["diagnostics"] = report.diagnostics;
  return j;
}

// One row of "steps", as nlohmann would print it at this indent.
void AppendStepJson(const Step& s, int indent, const char* colon, const std::string& field_pad,
                    std::string* out) {
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
}

}  // namespace

void WriteReportJson(const Report& report, int indent, const ReportSink& sink,
                     const Attribution* at) {
  const std::string head =
      ReportHead(report, at).dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
  const char* colon = indent >= 0 ? ": " : ":";
  const std::string breakdown_placeholder = std::string("\"breakdown\"") + colon + "null";
  const std::string steps_placeholder = std::string("\"steps\"") + colon + "null";
  const std::size_t b = head.find(breakdown_placeholder);
  const std::size_t st = head.find(steps_placeholder, b);
  const std::size_t b_end = b + breakdown_placeholder.size();
  const std::size_t st_end = st + steps_placeholder.size();

  std::string out;
  out.reserve(kFlushBytes + 4096);
  out.append(head, 0, b_end - 4);  // up to the placeholder's "null"
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
  const std::string field_pad = NewlinePad(indent, 3 * indent);
  AppendJsonList(
      report.steps.size(), indent, 1, '[', ']',
      [&](std::size_t i, std::string* out) {
        AppendStepJson(report.steps[i], indent, colon, field_pad, out);
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

namespace writers {
namespace {

class Json final : public ReportWriter {
 public:
  std::string_view name() const override { return "json"; }
  std::string_view description() const override {
    return "object with model, trace, peak_bytes, final_bytes, peak_step, breakdown, steps, "
           "live_at_peak, diagnostics (and attribution with --at), as docs/report.schema.json "
           "describes";
  }
  void Write(const Report& report, const WriterOptions& options,
             const ReportSink& sink) const override {
    if (!options.at) return WriteReportJson(report, options.indent, sink);
    const Attribution at = Attribute(report, *options.at, 0);
    WriteReportJson(report, options.indent, sink, &at);
  }
};

}  // namespace

const ReportWriter& JsonWriter() {
  static const Json writer;
  return writer;
}

}  // namespace writers
}  // namespace peakmem
