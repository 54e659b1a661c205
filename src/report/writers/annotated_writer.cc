// The "annotated" writer: the trace's statements, each followed by the bytes
// live after it as a comment, as Thunder prints a trace with annotate=True:
//
//   # trace: fw.trace
//   # model: runtime; peak: 13120 bytes at step 3; final: 7168 bytes
//   # live before the first statement (the arguments): 5696 bytes
//   t101 = torch.nn.functional.linear(x, t_fc1_weight, t_fc1_bias)  # live: 6720 bytes
//   ...
//
// A statement is quoted as Report::steps[i].source (its first line, trimmed);
// the peak's statement says "(peak)" after its number.
#include <fmt/format.h>

#include <string>

#include "registry.h"

namespace peakmem::writers {
namespace {

class Annotated final : public ReportWriter {
 public:
  std::string_view name() const override { return "annotated"; }
  std::string_view description() const override {
    return "the trace's statements, each followed by '  # live: N bytes', the bytes live after it";
  }
  void Write(const Report& report, const WriterOptions&, const ReportSink& sink) const override {
    std::string out;
    out.reserve(kFlushBytes + 4096);
    out += fmt::format("# trace: {}\n", report.trace_name);
    if (report.peak_step >= 0) {
      out += fmt::format("# model: {}; peak: {} bytes at step {}; final: {} bytes\n", report.model,
                         report.peak_bytes, report.peak_step, report.final_bytes);
    } else {
      out += fmt::format("# model: {}; peak: {} bytes before the first statement; final: {} bytes\n",
                         report.model, report.peak_bytes, report.final_bytes);
    }
    if (!report.steps.empty()) {
      const Step& first = report.steps.front();
      out += "# live before the first statement (the arguments): ";
      AppendInt(first.live_bytes - first.delta_bytes, &out);
      out += " bytes\n";
    }
    for (const Step& s : report.steps) {
      out += s.source;
      out += "  # live: ";
      AppendInt(s.live_bytes, &out);
      out += s.index == report.peak_step ? " bytes (peak)\n" : " bytes\n";
      FlushIfFull(&out, sink);
    }
    sink(out);
  }
};

}  // namespace

const ReportWriter& AnnotatedWriter() {
  static const Annotated writer;
  return writer;
}

}  // namespace peakmem::writers
