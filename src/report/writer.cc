#include "peakmem/report/writer.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "writers/registry.h"

namespace peakmem {

const std::vector<const ReportWriter*>& AllWriters() {
  // The registry: one line per writer (each defined in src/report/writers/).
  static const std::vector<const ReportWriter*> writers = {
      &writers::TextWriter(),        &writers::JsonWriter(),     &writers::AnnotatedWriter(),
      &writers::ChromeTraceWriter(), &writers::SnapshotWriter(),
      &writers::HtmlWriter(),
  };
  return writers;
}

const ReportWriter* FindWriter(std::string_view name) {
  for (const ReportWriter* writer : AllWriters()) {
    if (writer->name() == name) return writer;
  }
  return nullptr;
}

std::vector<std::string> WriterNames() {
  std::vector<std::string> names;
  for (const ReportWriter* writer : AllWriters()) names.emplace_back(writer->name());
  return names;
}

ReportOptions ReportOptionsFor(const ReportWriter& writer, ReportOptions base,
                               const WriterOptions& writing) {
  if (writer.uses_alloc_log() || writing.at.has_value()) {
    base.alloc_log = true;
    base.returned_tensors = true;  // outputs are a category of their own (attribution.h)
  }
  const std::size_t shown = writer.live_at_peak_shown();
  if (shown > 0) {
    base.live_at_peak_limit =
        base.live_at_peak_limit == 0 ? shown : std::min(base.live_at_peak_limit, shown);
  }
  return base;
}

std::string WriteToString(const ReportWriter& writer, const Report& report,
                          const WriterOptions& options) {
  std::string out;
  writer.Write(report, options, [&](std::string_view chunk) { out += chunk; });
  return out;
}

namespace {

// Why `log` is not a stream a writer can read (empty: it is): every event
// names a storage of the table on one of the log's devices, in step order,
// and each storage is allocated once and freed at most once, after that.
std::string CheckAllocLog(const AllocLog& log) {
  const std::size_t devices = std::max<std::size_t>(log.devices.size(), 1);
  for (std::size_t i = 0; i < log.storages.size(); ++i) {
    if (log.storages[i].device >= devices) {
      return "storage " + std::to_string(i) + " is on device " +
             std::to_string(log.storages[i].device) + " of " + std::to_string(devices);
    }
  }
  std::vector<std::uint8_t> state(log.storages.size(), 0);  // 0 new, 1 allocated, 2 freed
  std::int32_t step = kBeforeFirstStep;
  for (std::size_t i = 0; i < log.events.size(); ++i) {
    const AllocEvent& e = log.events[i];
    const std::string event = "event " + std::to_string(i);
    if (e.storage >= log.storages.size()) {
      return event + " names storage " + std::to_string(e.storage) + " of " +
             std::to_string(log.storages.size());
    }
    if (e.step < step || e.step >= log.steps) {
      return event + " is at step " + std::to_string(e.step) + ", after step " +
             std::to_string(step) + " of " + std::to_string(log.steps);
    }
    step = e.step;
    std::uint8_t& s = state[e.storage];
    if (s != (e.alloc ? 0 : 1)) {
      const char* why = s == 0 ? ", never allocated" : s == 1 ? ", already allocated" : ", already freed";
      return event + (e.alloc ? " allocates" : " frees") + " storage " +
             std::to_string(e.storage) + why;
    }
    s = e.alloc ? 1 : 2;
  }
  return {};
}

}  // namespace

const AllocLog& RequireAllocLog(const Report& report, std::string_view writer) {
  if (report.alloc_log == nullptr) {
    throw std::invalid_argument(
        "the '" + std::string(writer) +
        "' format needs the allocation event log (ReportOptions::alloc_log), which the '" +
        report.model + "' model did not record");
  }
  const std::string problem = CheckAllocLog(*report.alloc_log);
  if (!problem.empty()) {
    throw std::invalid_argument("the '" + std::string(writer) +
                                "' format cannot read the allocation event log: " + problem);
  }
  return *report.alloc_log;
}

}  // namespace peakmem
