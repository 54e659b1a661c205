#include "peakmem/report/live_at_peak.h"

#include <algorithm>

namespace peakmem {

std::vector<LiveTensor> LiveAtPeak(const Trace& trace, const std::vector<StorageRecord>& storages,
                                   const PeakMoment& peak, std::size_t limit, std::size_t* total) {
  // Sort small records, then build the LiveTensors of those kept.
  struct Entry {
    std::int64_t bytes;
    std::size_t storage;
  };
  std::vector<Entry> entries;
  for (std::size_t i = 0; i < std::min(peak.storages, storages.size()); ++i) {
    const StorageRecord& s = storages[i];
    const bool freed_by_then = s.free_seq != 0 && s.free_seq <= peak.frees;
    if (freed_by_then || s.bytes == 0) continue;
    entries.push_back({s.bytes, i});
  }
  // The storage index breaks ties (a plain sort with that key orders as a
  // stable sort by bytes, without its buffer). The key is a total order, so
  // the largest N of a partial sort are exactly the full list's first N.
  const auto larger = [](const Entry& a, const Entry& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.storage < b.storage;
  };
  *total = entries.size();
  if (limit > 0 && limit < entries.size()) {
    std::partial_sort(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(limit),
                      entries.end(), larger);
    entries.resize(limit);
  } else {
    std::sort(entries.begin(), entries.end(), larger);
  }
  std::vector<LiveTensor> out;
  out.reserve(entries.size());
  for (const Entry& e : entries) {
    const StorageRecord& s = storages[e.storage];
    LiveTensor t;
    t.bytes = e.bytes;
    if (s.role == StorageRole::kScratch) {
      t.name = "(scratch)";
    } else {
      t.name = s.value == kNoValue ? "?" : std::string(trace.value(s.value).name);
    }
    if (s.made_at >= 0) {
      const Statement& st = trace.statements[s.made_at];
      t.made_by = std::string(trace.SymbolName(st));
      t.line = st.source_line;
    } else {
      t.made_by = "caller";
    }
    t.role = StorageRoleName(s.role);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace peakmem
