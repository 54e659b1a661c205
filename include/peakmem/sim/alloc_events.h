// The allocation event stream: the one record of memory that every model
// emits and every allocator model, counter, report builder and writer reads.
//
// A model simulates a program and says, in order, which storage it
// allocates and which it frees, inside which statement (a "step"). That is
// all a consumer needs: the requested-bytes counter sums the deltas, the
// CUDA caching allocator rounds and carves them into segments, a memory
// snapshot writer lists them as alloc/free trace entries. Consumers never
// see a model's objects; models never know which consumers listen.
//
//   model --Alloc/Free/StepEnd--> AllocStream --+--> RequestedBytes (always: the exact counter)
//                                               +--> AllocLog (when asked: storages + events)
//                                               +--> AllocSink* (online consumers, when attached)
//   AllocLog --Replay--> any AllocSink (allocator models, writers), after the run
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "peakmem/ir/string_arena.h"
#include "peakmem/ir/trace.h"

namespace peakmem {

// A storage's index in the storage table, in allocation order.
using StorageId = std::uint32_t;
inline constexpr StorageId kNoStorage = 0xFFFFFFFFu;

// Steps are statement indexes; arguments are allocated before the first.
inline constexpr std::int32_t kBeforeFirstStep = -1;
inline constexpr std::int32_t kNeverFreed = std::numeric_limits<std::int32_t>::max();

// Why a storage exists, for attribution.
enum class StorageRole : std::uint8_t {
  kArgument,      // the caller passed it
  kSaved,         // a tensor saved for backward that the backward's caller passed
  kIntermediate,  // an op's output
  kScratch,       // memory an op allocates and frees before it returns
};
const char* StorageRoleName(StorageRole role);

struct StorageRecord {
  std::int64_t bytes = 0;
  ValueId value = kNoValue;          // the value it was first bound to (kNoValue: scratch)
  std::int32_t made_at = kBeforeFirstStep;  // the step that allocated it
  std::int32_t freed_at = kNeverFreed;      // the step that freed it (kNeverFreed: still held)
  // Which free this was, counting from 1 (0 while alive): with the number of
  // storages, says what was alive at any moment without keeping the events.
  std::uint32_t free_seq = 0;
  StorageRole role = StorageRole::kIntermediate;
  std::uint8_t device = 0;  // index in AllocLog::devices
};

// One event: `delta` > 0 allocates storage `storage`, < 0 frees it (the
// storage's bytes either way; a zero-byte storage gives delta 0 and is
// told apart by `alloc`).
struct AllocEvent {
  std::int32_t step = kBeforeFirstStep;
  StorageId storage = kNoStorage;
  std::int64_t delta = 0;
  bool alloc = true;
};

// A consumer of the stream. Callbacks come in program order; StepEnd(step)
// follows the last event of each step (steps without events included), from
// kBeforeFirstStep (the arguments) to the last statement.
class AllocSink {
 public:
  virtual ~AllocSink() = default;
  virtual void Alloc(StorageId id, const StorageRecord& storage, std::int32_t step) = 0;
  virtual void Free(StorageId id, const StorageRecord& storage, std::int32_t step) = 0;
  virtual void StepEnd(std::int32_t step) { (void)step; }
};

// The whole stream, kept when a caller asks for it (ReportOptions::alloc_log):
// the storage table and the events in order.
struct AllocLog {
  std::vector<StorageRecord> storages;
  std::vector<AllocEvent> events;
  std::vector<std::string> devices;  // StorageRecord::device indexes it ("cpu", "cuda:0")
  std::int32_t steps = 0;            // statements in the program
  // The name of the value each storage was first bound to ("" for scratch),
  // indexed like `storages`; copied into `name_text`, so the log outlives
  // the trace it came from (reports and writers name storages with it).
  std::vector<std::string_view> storage_names;
  std::shared_ptr<StringArena> name_text;
};

// Hands `log`'s events to `sink` in order, with StepEnd after each step.
void Replay(const AllocLog& log, AllocSink& sink);

}  // namespace peakmem
