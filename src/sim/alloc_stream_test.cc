// AllocStream: what a model's Alloc/Free calls become (the storage table,
// the log, the step's named events, online sinks).
#include "peakmem/sim/alloc_stream.h"

#include <gtest/gtest.h>

namespace peakmem {
namespace {

TEST(AllocStream, RecordsStoragesEventsAndNamedChangesOfAStep) {
  std::vector<StorageRecord> storages;
  AllocLog log;
  AllocStream stream(&storages, &log, /*name_steps=*/true);
  const StorageId a = stream.Alloc(16, /*value=*/0, StorageRole::kArgument, stream.Device("cpu"));
  stream.EndStep();
  EXPECT_EQ(stream.step_named(), (std::vector<NamedBytes>{{0, 16}}));
  stream.ClearStepNamed();
  stream.BeginStep(0);
  const StorageId t = stream.Alloc(32, 1, StorageRole::kIntermediate);
  const StorageId s = stream.Alloc(8, kNoValue, StorageRole::kScratch);
  stream.Free(s);
  stream.Free(a);
  stream.EndStep();
  // Named: t made (+32), a freed (-16); the scratch has no value.
  EXPECT_EQ(stream.step_named(), (std::vector<NamedBytes>{{1, 32}, {0, -16}}));
  Trace trace;
  trace.values.resize(2);
  trace.values[0].name = "a";
  trace.values[1].name = "t";
  stream.Finish(1, trace);
  // 16 -> 48 -> 56 (peak, 3 storages, no frees yet) -> 48 -> 32.
  EXPECT_EQ(stream.counter().peak(), 56);
  EXPECT_EQ(stream.counter().live(), 32);
  EXPECT_EQ(stream.counter().tensor_peak(), 48);
  EXPECT_EQ(stream.counter().peak_moment().storages, 3u);
  ASSERT_EQ(log.events.size(), 5u);
  EXPECT_EQ(log.events[0].storage, a);
  EXPECT_EQ(log.events[0].step, kBeforeFirstStep);
  EXPECT_EQ(log.events[2].storage, s);
  EXPECT_EQ(log.events[3].delta, -8);
  EXPECT_FALSE(log.events[4].alloc);
  ASSERT_EQ(log.storages.size(), 3u);
  EXPECT_EQ(log.storages[a].freed_at, 0);
  EXPECT_EQ(log.storages[a].free_seq, 2u);
  EXPECT_EQ(log.storages[t].freed_at, kNeverFreed);
  EXPECT_EQ(log.devices, (std::vector<std::string>{"cpu"}));
  EXPECT_EQ(log.steps, 1);
  EXPECT_EQ(log.storage_names, (std::vector<std::string_view>{"a", "t", ""}));
}

TEST(AllocStream, WithoutALogKeepsOnlyTheTableAndTheCounter) {
  std::vector<StorageRecord> storages;
  AllocStream stream(&storages, nullptr, /*name_steps=*/false);
  stream.Alloc(10, 0, StorageRole::kIntermediate, stream.Device("cuda:0"));
  EXPECT_TRUE(stream.step_named().empty());
  EXPECT_EQ(storages.size(), 1u);
  EXPECT_EQ(storages[0].device, 0);
  EXPECT_EQ(stream.counter().live(), 10);
}

}  // namespace
}  // namespace peakmem
