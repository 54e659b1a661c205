// The requested-bytes counter over hand-built logs: every number below is
// the running sum of the live storages' bytes, derived in the comments.
#include "peakmem/sim/requested_bytes.h"

#include <gtest/gtest.h>

#include "peakmem/sim/alloc_events.h"

namespace peakmem {
namespace {

// A log with storages of the given bytes and roles; events added by the test.
AllocLog MakeLog(std::vector<std::pair<std::int64_t, StorageRole>> storages, std::int32_t steps) {
  AllocLog log;
  for (const auto& [bytes, role] : storages) {
    StorageRecord r;
    r.bytes = bytes;
    r.role = role;
    log.storages.push_back(r);
  }
  log.steps = steps;
  return log;
}

TEST(RequestedBytes, PeakFinalAndTheMomentOfThePeak) {
  // step -1: +100 (argument) -> 100
  // step 0:  +50 -> 150, +30 -> 180 (the peak: 3 storages made, 0 freed)
  // step 1:  -50 -> 130, +40 -> 170
  // step 2:  -100 -> 70 (final)
  AllocLog log = MakeLog({{100, StorageRole::kArgument},
                          {50, StorageRole::kIntermediate},
                          {30, StorageRole::kIntermediate},
                          {40, StorageRole::kIntermediate}},
                         3);
  log.events = {{-1, 0, 100, true}, {0, 1, 50, true}, {0, 2, 30, true},
                {1, 1, -50, false}, {1, 3, 40, true}, {2, 0, -100, false}};
  RequestedBytesSink sink;
  Replay(log, sink);
  EXPECT_EQ(sink.counter().peak(), 180);
  EXPECT_EQ(sink.counter().live(), 70);
  EXPECT_EQ(sink.counter().tensor_peak(), 180);
  EXPECT_EQ(sink.counter().peak_moment().step, 0);
  EXPECT_EQ(sink.counter().peak_moment().storages, 3u);
  EXPECT_EQ(sink.counter().peak_moment().frees, 0u);
}

TEST(RequestedBytes, ScratchRaisesThePeakButNotTheTensorPeak) {
  // step -1: +16 -> 16; step 0: +16 -> 32, scratch +12 -> 44 (peak), scratch -12 -> 32.
  // Without scratch the most ever live is 32.
  AllocLog log = MakeLog({{16, StorageRole::kArgument},
                          {16, StorageRole::kIntermediate},
                          {12, StorageRole::kScratch}},
                         1);
  log.events = {{-1, 0, 16, true}, {0, 1, 16, true}, {0, 2, 12, true}, {0, 2, -12, false}};
  RequestedBytesSink sink;
  Replay(log, sink);
  EXPECT_EQ(sink.counter().peak(), 44);
  EXPECT_EQ(sink.counter().tensor_peak(), 32);
  EXPECT_EQ(sink.counter().live(), 32);
}

TEST(RequestedBytes, AnOverflowingAllocationIsRefusedAndCountsNothing) {
  RequestedBytes counter;
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  EXPECT_TRUE(counter.Alloc(max - 1, false, 0, 1, 0));
  EXPECT_FALSE(counter.Alloc(2, false, 0, 2, 0));
  EXPECT_EQ(counter.live(), max - 1);
}

// Replay calls StepEnd once per step, empty steps included, after the
// step's events: a recorder of the calls shows the order.
class CallRecorder : public AllocSink {
 public:
  void Alloc(StorageId id, const StorageRecord&, std::int32_t step) override {
    calls.push_back("alloc " + std::to_string(id) + " @" + std::to_string(step));
  }
  void Free(StorageId id, const StorageRecord&, std::int32_t step) override {
    calls.push_back("free " + std::to_string(id) + " @" + std::to_string(step));
  }
  void StepEnd(std::int32_t step) override { calls.push_back("end " + std::to_string(step)); }
  std::vector<std::string> calls;
};

TEST(Replay, StepEndsFollowEachStepIncludingEmptyOnes) {
  AllocLog log = MakeLog({{8, StorageRole::kIntermediate}}, 3);
  log.events = {{1, 0, 8, true}, {1, 0, -8, false}};
  CallRecorder recorder;
  Replay(log, recorder);
  const std::vector<std::string> expected = {"end -1", "end 0", "alloc 0 @1", "free 0 @1",
                                             "end 1",  "end 2"};
  EXPECT_EQ(recorder.calls, expected);
}

}  // namespace
}  // namespace peakmem
