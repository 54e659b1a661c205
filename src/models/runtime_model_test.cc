// The runtime model, tested by the allocation events it emits on small
// traces (as XLA's heap simulator tests record HeapSimulator calls): which
// storage is allocated and freed in which statement. f32[4] is 16 bytes;
// each sequence is derived by hand in its comment from the model's rules
// (runtime_model.h). The end-to-end numbers are checked against real PyTorch
// measurement elsewhere (tests/python/test_corpus_runtime.py).
#include "peakmem/models/runtime_model.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "peakmem/sim/requested_bytes.h"
#include "test_util.h"

namespace peakmem {
namespace {

using testing_util::Parse;

struct Event {
  std::int32_t step;
  std::string value;  // the storage's value ("(scratch)" for scratch)
  std::int64_t delta;
  bool operator==(const Event&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Event& e) {
  return os << "{" << e.step << ", " << e.value << ", " << e.delta << "}";
}

std::vector<Event> EventsOf(const std::string& text, CallingConvention convention) {
  const ParsedTrace parsed = Parse(text);
  ReportOptions options;
  options.alloc_log = true;
  const Report report = RunRuntimeModel(parsed, RuntimeOptions{.convention = convention}, options);
  EXPECT_NE(report.alloc_log, nullptr);
  std::vector<Event> events;
  for (const AllocEvent& e : report.alloc_log->events) {
    const StorageRecord& s = report.alloc_log->storages[e.storage];
    const std::string name = s.role == StorageRole::kScratch
                                 ? "(scratch)"
                                 : std::string(parsed.trace.value(s.value).name);
    events.push_back({e.step, name, e.delta});
  }
  return events;
}

TEST(RuntimeModelEvents, ForwardCallerHoldsArgumentsDelFreesReturnKeepsTheResult) {
  // Arguments a, b (16 each) before the first statement; t0 at step 0, t1 at
  // step 1; `del t0` (step 2) frees t0; the return hands t1 to the caller,
  // and the caller holds a and b: nothing more is freed.
  const std::string text = R"(def f(a, b):
  # a: "cpu f32[4]"
  # b: "cpu f32[4]"
  t0 = torch.add(a, b)  # t0: "cpu f32[4]"
  t1 = torch.mul(t0, t0)  # t1: "cpu f32[4]"
  del t0
  return t1
)";
  const std::vector<Event> expected = {
      {-1, "a", 16}, {-1, "b", 16}, {0, "t0", 16}, {1, "t1", 16}, {2, "t0", -16}};
  EXPECT_EQ(EventsOf(text, CallingConvention::kForward), expected);
}

TEST(RuntimeModelEvents, WrappedScalarIsAScratchAllocFreedInsideTheOp) {
  // torch.mul(a, 2.0) on f32: the 2.0 is wrapped in a 0-d double (8 bytes)
  // and cast to f32 (4 bytes), both alive with the output until the op
  // returns (scratch.h): t0 (16), then scratch 12 allocated and freed, all
  // at step 0.
  const std::string text = R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.mul(a, 2.0)  # t0: "cpu f32[4]"
  return t0
)";
  const std::vector<Event> expected = {
      {-1, "a", 16}, {0, "t0", 16}, {0, "(scratch)", 12}, {0, "(scratch)", -12}};
  EXPECT_EQ(EventsOf(text, CallingConvention::kForward), expected);
}

TEST(RuntimeModelEvents, ViewsShareTheirBaseStorage) {
  // t1 = reshape of contiguous t0 is a view: no event of its own; t0's
  // storage is freed only when both names are gone (del t0 at step 2 frees
  // nothing, del t1 at step 3 frees t0's 16 bytes).
  const std::string text = R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.neg(a)  # t0: "cpu f32[4]"
  t1 = torch.reshape(t0, (2, 2))  # t1: "cpu f32[2, 2]"
  del t0
  del t1
  return a
)";
  const std::vector<Event> expected = {{-1, "a", 16}, {0, "t0", 16}, {3, "t0", -16}};
  EXPECT_EQ(EventsOf(text, CallingConvention::kForward), expected);
}

TEST(RuntimeModelEvents, ReportNumbersEqualTheCounterOverTheLog) {
  // The report's peak and final bytes are what a replay of its own log
  // counts: 16 + 16 + 12 = 44 at the peak, 32 at the end.
  const ParsedTrace parsed = Parse(R"(def f(a):
  # a: "cpu f32[4]"
  t0 = torch.mul(a, 2.0)  # t0: "cpu f32[4]"
  return t0
)");
  ReportOptions options;
  options.alloc_log = true;
  const Report report = RunRuntimeModel(parsed, {}, options);
  RequestedBytesSink sink;
  Replay(*report.alloc_log, sink);
  EXPECT_EQ(report.peak_bytes, 44);
  EXPECT_EQ(sink.counter().peak(), 44);
  EXPECT_EQ(report.final_bytes, 32);
  EXPECT_EQ(sink.counter().live(), 32);
  EXPECT_EQ(report.tensor_peak_bytes, 32);
}

}  // namespace
}  // namespace peakmem
