// The "chrome-trace" writer: Chrome trace-event JSON (the "JSON Object
// Format" Perfetto and chrome://tracing load):
//
//   {"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {model, trace, ...}}
//
// Time is the program's order, not a measurement: statement i is a
// complete slice ("ph": "X") from ts = i to i + 1 microseconds on thread 1,
// named by its op, with its line, source and bytes in "args". The counter
// "live bytes" ("ph": "C", args {"bytes"}) holds the bytes live before the
// first statement from ts = 0 and those live after statement i from
// ts = i + 1. When the report carries the allocation event log, the counter
// "live bytes by role" splits the same bytes by StorageRole (args
// "argument", "saved", "intermediate", "scratch": what chrome://tracing
// stacks), at the same times.
#include <array>
#include <string>

#include "registry.h"

namespace peakmem::writers {
namespace {

constexpr std::array<StorageRole, 4> kRoles = {StorageRole::kArgument, StorageRole::kSaved,
                                               StorageRole::kIntermediate, StorageRole::kScratch};

// Opens an event: {"name": name, "ph": ph, "ts": ts, "pid": 1, "tid": tid.
void Begin(std::string_view name, char ph, std::int64_t ts, int tid, std::string* out) {
  *out += ",\n{\"name\":";
  AppendJsonString(name, out);
  *out += ",\"ph\":\"";
  *out += ph;
  *out += "\",\"ts\":";
  AppendInt(ts, out);
  *out += ",\"pid\":1,\"tid\":";
  AppendInt(tid, out);
}

void Field(const char* name, std::int64_t value, std::string* out) {
  *out += ",\"";
  *out += name;
  *out += "\":";
  AppendInt(value, out);
}

// Counter values per role at each StepEnd, written as events.
class RoleCounter final : public AllocSink {
 public:
  RoleCounter(std::string* out, const ReportSink& sink) : out_(out), sink_(sink) {}
  void Alloc(StorageId, const StorageRecord& s, std::int32_t) override {
    live_[static_cast<std::size_t>(s.role)] += s.bytes;
  }
  void Free(StorageId, const StorageRecord& s, std::int32_t) override {
    live_[static_cast<std::size_t>(s.role)] -= s.bytes;
  }
  void StepEnd(std::int32_t step) override {
    Begin("live bytes by role", 'C', step + 1, 0, out_);
    *out_ += ",\"args\":{";
    for (std::size_t r = 0; r < kRoles.size(); ++r) {
      if (r) *out_ += ',';
      *out_ += '"';
      *out_ += StorageRoleName(kRoles[r]);
      *out_ += "\":";
      AppendInt(live_[static_cast<std::size_t>(kRoles[r])], out_);
    }
    *out_ += "}}";
    FlushIfFull(out_, sink_);
  }

 private:
  std::array<std::int64_t, 4> live_{};
  std::string* out_;
  const ReportSink& sink_;
};

class ChromeTrace final : public ReportWriter {
 public:
  std::string_view name() const override { return "chrome-trace"; }
  std::string_view description() const override {
    return "Chrome trace-event JSON for Perfetto or chrome://tracing: a slice per statement, "
           "counters of live bytes, by role when the event log is kept";
  }
  bool uses_alloc_log() const override { return true; }  // the counter by role
  void Write(const Report& report, const WriterOptions&, const ReportSink& sink) const override {
    std::string out;
    out.reserve(kFlushBytes + 4096);
    out += "{\"traceEvents\":[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,"
           "\"args\":{\"name\":";
    AppendJsonString("peakmem " + report.model + ": " + report.trace_name, &out);
    out += "}}";
    Begin("thread_name", 'M', 0, 1, &out);
    out += ",\"args\":{\"name\":\"statements\"}}";
    if (!report.steps.empty()) {
      const Step& first = report.steps.front();
      Begin("live bytes", 'C', 0, 0, &out);
      Field("args\":{\"bytes", first.live_bytes - first.delta_bytes, &out);
      out += "}}";
    }
    for (const Step& s : report.steps) {
      Begin(s.op, 'X', s.index, 1, &out);
      out += ",\"dur\":1,\"cat\":\"statement\",\"args\":{\"index\":";
      AppendInt(s.index, &out);
      Field("line", s.line, &out);
      out += ",\"source\":";
      AppendJsonString(s.source, &out);
      Field("delta_bytes", s.delta_bytes, &out);
      Field("live_bytes", s.live_bytes, &out);
      Field("peak_bytes", s.peak_bytes, &out);
      out += "}}";
      Begin("live bytes", 'C', s.index + 1, 0, &out);
      Field("args\":{\"bytes", s.live_bytes, &out);
      out += "}}";
      FlushIfFull(&out, sink);
    }
    if (report.alloc_log != nullptr) {
      RoleCounter counter(&out, sink);
      Replay(RequireAllocLog(report, name()), counter);
    }
    out += "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"model\":";
    AppendJsonString(report.model, &out);
    out += ",\"trace\":";
    AppendJsonString(report.trace_name, &out);
    Field("peak_bytes", report.peak_bytes, &out);
    Field("final_bytes", report.final_bytes, &out);
    Field("peak_step", report.peak_step, &out);
    out += "}}\n";
    sink(out);
  }
};

}  // namespace

const ReportWriter& ChromeTraceWriter() {
  static const ChromeTrace writer;
  return writer;
}

}  // namespace peakmem::writers
