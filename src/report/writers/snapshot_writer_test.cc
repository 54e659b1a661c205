// The snapshot writer on the hand-built log of writer_test_util.h; every
// expected address and size is derived by hand in the comments from the
// rules in snapshot_writer.cc (512-byte rounding, best fit, device 0 at
// 1 << 40).
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <stdexcept>

#include "peakmem/report/writer.h"
#include "writer_test_util.h"

namespace peakmem::writers {
namespace {

using testing::HandBuiltReport;
using testing::ReadPickle;

constexpr std::int64_t kStart = std::int64_t{1} << 40;

nlohmann::json Snapshot(const Report& report) {
  return ReadPickle(WriteToString(*FindWriter("snapshot"), report));
}

TEST(SnapshotWriter, TraceEntriesFollowTheLog) {
  const nlohmann::json s = Snapshot(HandBuiltReport(true));
  ASSERT_EQ(s.at("device_traces").size(), 1u);  // "cpu": device 0
  const nlohmann::json& t = s.at("device_traces")[0];
  // a 16 -> [0, 512); b 1000 -> [512, 1536); t0 1024 -> [1536, 2560) (the
  // top); scratch 4 -> [2560, 3072) (the top), freed; t0 freed: free
  // [1536, 3072); t1 600 (rounded 1024) best fits there: [1536, 2560).
  struct Expected {
    const char* action;
    std::int64_t offset, size, time_us, line;
    const char* name;
  };
  const Expected expected[] = {
      {"alloc", 0, 16, 0, 0, "argument"},
      {"alloc", 512, 1000, 0, 0, "saved"},
      {"alloc", 1536, 1024, 1, 5, "mul"},
      {"alloc", 2560, 4, 1, 5, "mul"},
      {"free_requested", 2560, 4, 1, 5, "mul"},
      {"free_completed", 2560, 4, 1, 5, "mul"},
      {"free_requested", 1536, 1024, 2, 6, "python_del"},
      {"free_completed", 1536, 1024, 2, 6, "python_del"},
      {"alloc", 1536, 600, 3, 7, "neg"},
  };
  ASSERT_EQ(t.size(), std::size(expected));
  for (std::size_t i = 0; i < t.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(t[i].at("action"), expected[i].action);
    EXPECT_EQ(t[i].at("addr").get<std::int64_t>(), kStart + expected[i].offset);
    EXPECT_EQ(t[i].at("size").get<std::int64_t>(), expected[i].size);
    EXPECT_EQ(t[i].at("stream").get<int>(), 0);
    EXPECT_EQ(t[i].at("time_us").get<std::int64_t>(), expected[i].time_us);
    ASSERT_EQ(t[i].at("frames").size(), 1u);
    EXPECT_EQ(t[i].at("frames")[0].at("filename"), "hand.trace");
    EXPECT_EQ(t[i].at("frames")[0].at("line").get<std::int64_t>(), expected[i].line);
    EXPECT_EQ(t[i].at("frames")[0].at("name"), expected[i].name);
  }
}

TEST(SnapshotWriter, SegmentHoldsWhatIsAliveAtTheEnd) {
  const nlohmann::json s = Snapshot(HandBuiltReport(true));
  ASSERT_EQ(s.at("segments").size(), 1u);
  const nlohmann::json& seg = s.at("segments")[0];
  // High water 3072 (the scratch's end); held at the end: a, b, t1 =
  // 16 + 1000 + 600 = 1616 bytes requested, in blocks of 512 + 1024 + 1024
  // = 2560 (allocated_size sums block sizes, as PyTorch's snapshot does);
  // the gap [2560, 3072) is inactive.
  EXPECT_EQ(seg.at("device").get<int>(), 0);
  EXPECT_EQ(seg.at("address").get<std::int64_t>(), kStart);
  EXPECT_EQ(seg.at("total_size").get<std::int64_t>(), 3072);
  EXPECT_EQ(seg.at("allocated_size").get<std::int64_t>(), 2560);
  EXPECT_EQ(seg.at("requested_size").get<std::int64_t>(), 1616);
  EXPECT_EQ(seg.at("stream").get<int>(), 0);
  const nlohmann::json& blocks = seg.at("blocks");
  ASSERT_EQ(blocks.size(), 4u);
  const std::int64_t offsets[] = {0, 512, 1536, 2560}, sizes[] = {512, 1024, 1024, 512},
                     requested[] = {16, 1000, 600, 0};
  std::int64_t total = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(blocks[i].at("address").get<std::int64_t>(), kStart + offsets[i]);
    EXPECT_EQ(blocks[i].at("size").get<std::int64_t>(), sizes[i]);
    EXPECT_EQ(blocks[i].at("requested_size").get<std::int64_t>(), requested[i]);
    EXPECT_EQ(blocks[i].at("state"), i < 3 ? "active_allocated" : "inactive");
    total += blocks[i].at("size").get<std::int64_t>();
  }
  EXPECT_EQ(total, 3072);  // what torch.cuda._memory_viz.segsum checks
  EXPECT_EQ(blocks[2].at("frames")[0].at("name"), "neg");
}

TEST(SnapshotWriter, LiveStoragesNeverOverlap) {
  // Forty storages, every third freed two steps later: replaying the
  // entries, no two live ranges may intersect.
  Report r = HandBuiltReport(false);
  r.steps.clear();
  auto log = std::make_shared<AllocLog>();
  log->devices = {"cuda:1", "cpu"};
  log->steps = 45;
  for (std::int32_t i = 0; i < 40; ++i) {
    StorageRecord s;
    s.bytes = 100 + 300 * (i % 7);
    s.made_at = i;
    s.device = static_cast<std::uint8_t>(i % 2);
    s.freed_at = i % 3 == 0 ? kNeverFreed : i + 2;
    log->storages.push_back(s);
  }
  for (std::int32_t step = 0; step < 45; ++step) {
    for (StorageId id = 0; id < 40; ++id) {
      if (log->storages[id].freed_at == step) log->events.push_back({step, id, -1, false});
    }
    if (step < 40) log->events.push_back({step, static_cast<StorageId>(step), 1, true});
  }
  r.alloc_log = log;
  const nlohmann::json s = Snapshot(r);
  // "cuda:1" is device 1; "cpu" takes the next index, 2; device 0 has nothing.
  ASSERT_EQ(s.at("device_traces").size(), 3u);
  EXPECT_TRUE(s.at("device_traces")[0].empty());
  for (int d : {1, 2}) {
    std::map<std::int64_t, std::int64_t> live;  // addr -> size
    for (const nlohmann::json& e : s.at("device_traces")[d]) {
      const auto addr = e.at("addr").get<std::int64_t>(), size = e.at("size").get<std::int64_t>();
      EXPECT_EQ(addr, (std::int64_t{d} + 1) << 40 | (addr & ((std::int64_t{1} << 40) - 1)));
      if (e.at("action") == "alloc") {
        for (const auto& [a, n] : live) {
          EXPECT_TRUE(addr + size <= a || a + n <= addr) << addr << " overlaps " << a;
        }
        live[addr] = size;
      } else if (e.at("action") == "free_completed") {
        EXPECT_EQ(live.erase(addr), 1u);
      }
    }
  }
  EXPECT_EQ(s.at("segments").size(), 2u);
}

TEST(SnapshotWriter, ZeroByteStoragesAreLeftOut) {
  Report r = HandBuiltReport(true);
  auto log = std::make_shared<AllocLog>(*r.alloc_log);
  log->storages.push_back(StorageRecord{});  // 0 bytes, allocated at step 2, never freed
  log->events.push_back({2, static_cast<StorageId>(log->storages.size() - 1), 0, true});
  r.alloc_log = log;
  EXPECT_EQ(Snapshot(r).at("device_traces")[0].size(), 9u);  // as without it
}

TEST(SnapshotWriter, NeedsTheLog) {
  const ReportWriter& writer = *FindWriter("snapshot");
  EXPECT_TRUE(writer.needs_alloc_log());
  EXPECT_TRUE(ReportOptionsFor(writer).alloc_log);
  try {
    WriteToString(writer, HandBuiltReport(false));
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "the 'snapshot' format needs the allocation event log "
                 "(ReportOptions::alloc_log), which the 'runtime' model did not record");
  }
}

TEST(SnapshotWriter, BadLogsAreErrorsNotCrashes) {
  const std::pair<void (*)(AllocLog&), const char*> cases[] = {
      {[](AllocLog& l) { l.events[2].storage = 99; }, "event 2 names storage 99 of 5"},
      {[](AllocLog& l) { l.events[5].alloc = true; }, "event 5 allocates storage 2, already allocated"},
      {[](AllocLog& l) { l.events[2].alloc = false; }, "event 2 frees storage 2, never allocated"},
      {[](AllocLog& l) { l.events[6].step = 0; }, "event 6 is at step 0, after step 1 of 3"},
      {[](AllocLog& l) { l.storages[1].device = 3; }, "storage 1 is on device 3 of 1"},
  };
  for (const auto& [spoil, message] : cases) {
    Report r = HandBuiltReport(true);
    auto log = std::make_shared<AllocLog>(*r.alloc_log);
    spoil(*log);
    r.alloc_log = log;
    try {
      WriteToString(*FindWriter("snapshot"), r);
      ADD_FAILURE() << "no error for: " << message;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()),
                std::string("the 'snapshot' format cannot read the allocation event log: ") +
                    message);
    }
  }
}

}  // namespace
}  // namespace peakmem::writers

namespace peakmem::writers {
namespace {

// The hand-built run priced by the CUDA caching allocator (its "cpu"
// storages priced as on one GPU). Every request is below 1 MiB: the small
// pool, blocks rounded to 512 (a 512, b 1024, t0 1024, scratch 512, t1
// 1024). a finds no free block: one 2 MiB segment at 0 is cudaMalloc'd and
// split (a at 0, the rest free); b takes [512, 1536), t0 [1536, 2560), the
// scratch [2560, 3072), freed back into the rest; freeing t0 merges it with
// the rest ([1536, 2 MiB) free), where t1 then goes (best fit: the only
// free block). At the end: a, b, t1 active, [2560, 2 MiB) inactive.
TEST(SnapshotWriter, WithTheCudaCachingAllocatorItsSegmentsAndAddresses) {
  Report r = HandBuiltReport(true);
  AllocatorOptions options;
  options.model = AllocatorModel::kCudaCaching;
  r.allocator = std::make_shared<const AllocatorResult>(RunAllocatorModel(*r.alloc_log, options));
  const nlohmann::json s = Snapshot(r);
  struct Want {
    const char* action;
    std::int64_t addr, size, time_us;
  };
  const Want want[] = {
      {"segment_alloc", 0, 2097152, 0}, {"alloc", 0, 16, 0},         {"alloc", 512, 1000, 0},
      {"alloc", 1536, 1024, 1},         {"alloc", 2560, 4, 1},        {"free_requested", 2560, 4, 1},
      {"free_completed", 2560, 4, 1},   {"free_requested", 1536, 1024, 2},
      {"free_completed", 1536, 1024, 2}, {"alloc", 1536, 600, 3},
  };
  const nlohmann::json& t = s.at("device_traces").at(0);
  ASSERT_EQ(t.size(), std::size(want));
  for (std::size_t i = 0; i < std::size(want); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(t[i].at("action"), want[i].action);
    EXPECT_EQ(t[i].at("addr").get<std::int64_t>(), kStart + want[i].addr);
    EXPECT_EQ(t[i].at("size").get<std::int64_t>(), want[i].size);
    EXPECT_EQ(t[i].at("time_us").get<std::int64_t>(), want[i].time_us);
  }
  ASSERT_EQ(s.at("segments").size(), 1u);
  const nlohmann::json& seg = s.at("segments")[0];
  EXPECT_EQ(seg.at("segment_type"), "small");
  EXPECT_EQ(seg.at("total_size").get<std::int64_t>(), 2097152);
  EXPECT_EQ(seg.at("allocated_size").get<std::int64_t>(), 512 + 1024 + 1024);
  EXPECT_EQ(seg.at("requested_size").get<std::int64_t>(), 16 + 1000 + 600);
  const nlohmann::json& blocks = seg.at("blocks");
  ASSERT_EQ(blocks.size(), 4u);
  const std::int64_t offsets[] = {0, 512, 1536, 2560}, sizes[] = {512, 1024, 1024, 2097152 - 2560};
  for (std::size_t i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(blocks[i].at("address").get<std::int64_t>(), kStart + offsets[i]);
    EXPECT_EQ(blocks[i].at("size").get<std::int64_t>(), sizes[i]);
    EXPECT_EQ(blocks[i].at("state"), i < 3 ? "active_allocated" : "inactive");
  }
}

}  // namespace
}  // namespace peakmem::writers
