#include "peakmem/sim/alloc_events.h"

namespace peakmem {

const char* StorageRoleName(StorageRole role) {
  switch (role) {
    case StorageRole::kArgument: return "argument";
    case StorageRole::kSaved: return "saved";
    case StorageRole::kIntermediate: return "intermediate";
    case StorageRole::kScratch: return "scratch";
  }
  return "?";
}

void Replay(const AllocLog& log, AllocSink& sink) {
  std::int32_t step = kBeforeFirstStep;
  for (const AllocEvent& e : log.events) {
    for (; step < e.step; ++step) sink.StepEnd(step);
    const StorageRecord& storage = log.storages[e.storage];
    if (e.alloc) {
      sink.Alloc(e.storage, storage, e.step);
    } else {
      sink.Free(e.storage, storage, e.step);
    }
  }
  for (; step < log.steps; ++step) sink.StepEnd(step);
}

}  // namespace peakmem
