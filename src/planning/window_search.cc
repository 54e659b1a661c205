#include "peakmem/planning/window_search.h"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace peakmem {

std::vector<std::vector<NodeId>> ReadersOf(const DependenceGraph& g, const StorageUse& use) {
  std::vector<std::vector<NodeId>> readers(g.size());
  for (NodeId n = 0; n < g.size(); ++n) {
    for (NodeId b : use.reads[n]) readers[b].push_back(n);
  }
  return readers;
}

bool SearchWindow(const DependenceGraph& g, const StorageUse& use, const std::vector<std::vector<NodeId>>& readers_of,
                  std::vector<NodeId>& order, const std::vector<std::size_t>& position, std::size_t begin,
                  std::size_t size) {
  if (size < 2 || size > kMaxWindow || begin + size > order.size()) return false;
  const std::size_t end = begin + size;
  const std::vector<NodeId> window(order.begin() + static_cast<std::ptrdiff_t>(begin),
                                   order.begin() + static_cast<std::ptrdiff_t>(end));
  auto bit_of = [&](NodeId n) -> int {
    for (std::size_t i = 0; i < size; ++i) {
      if (window[i] == n) return static_cast<int>(i);
    }
    return -1;
  };
  std::vector<std::uint32_t> pred_mask(size, 0);
  // The storages whose freeing the window decides: per window node, those it
  // may free (what it reads and its own), with the in-window readers' mask.
  struct Storage {
    NodeId node;
    std::int64_t bytes;
    bool before_window;   // allocated before the window (else by window bit `bit`)
    int bit;
    std::uint32_t readers;  // in-window readers
    bool freeable;          // freeable, and no reader after the window
  };
  std::vector<Storage> storages;
  std::vector<std::vector<int>> frees_of(size);  // per window node: storages it may free
  auto storage_index = [&](NodeId b) -> int {
    for (std::size_t i = 0; i < storages.size(); ++i) {
      if (storages[i].node == b) return static_cast<int>(i);
    }
    Storage s{b, g.alloc_bytes[b], false, bit_of(b), 0, use.freeable[b]};
    s.before_window = s.bit < 0;
    for (NodeId r : readers_of[b]) {
      const int rb = bit_of(r);
      if (rb >= 0) {
        s.readers |= 1u << rb;
      } else if (position[r] >= end) {
        s.freeable = false;
      }
    }
    storages.push_back(s);
    return static_cast<int>(storages.size() - 1);
  };
  for (std::size_t i = 0; i < size; ++i) {
    const NodeId v = window[i];
    for (NodeId p : g.preds[v]) {
      const int pb = bit_of(p);
      if (pb >= 0) pred_mask[i] |= 1u << pb;
    }
    for (NodeId b : use.reads[v]) frees_of[i].push_back(storage_index(b));
    frees_of[i].push_back(storage_index(v));
  }
  const std::uint32_t full = (1u << size) - 1;
  // Live bytes (relative to the window's start) after window node i runs
  // when the nodes of `s` have run: its output added, and every storage it
  // completes (its last reader, or itself when nothing reads it) freed.
  auto after = [&](std::uint32_t s, std::int64_t live_before, std::size_t i) {
    const std::uint32_t t = s | (1u << i);
    std::int64_t live_after = live_before + g.alloc_bytes[window[i]];
    for (int k : frees_of[i]) {
      const Storage& st = storages[static_cast<std::size_t>(k)];
      auto complete = [&](std::uint32_t set) {
        return (st.readers & set) == st.readers && (st.before_window || (set & (1u << st.bit)) != 0);
      };
      if (st.freeable && complete(t) && !complete(s)) live_after -= st.bytes;
    }
    return live_after;
  };
  constexpr std::int64_t kUnset = std::numeric_limits<std::int64_t>::max();
  std::vector<std::int64_t> best(std::size_t{1} << size, kUnset);
  std::vector<std::int64_t> live(std::size_t{1} << size, 0);
  std::vector<std::int8_t> last(std::size_t{1} << size, -1);
  best[0] = 0;
  for (std::uint32_t s = 0; s < full; ++s) {
    if (best[s] == kUnset) continue;
    for (std::size_t i = 0; i < size; ++i) {
      const std::uint32_t bit = 1u << i;
      if ((s & bit) != 0 || (pred_mask[i] & ~s) != 0) continue;
      const std::uint32_t t = s | bit;
      const std::int64_t step_peak = std::max(best[s], live[s] + g.alloc_bytes[window[i]]);
      if (best[t] == kUnset) live[t] = after(s, live[s], i);  // the same whatever the order
      if (step_peak < best[t]) {
        best[t] = step_peak;
        last[t] = static_cast<std::int8_t>(i);
      }
    }
  }
  if (best[full] == kUnset) return false;
  std::vector<NodeId> reordered(size);
  std::uint32_t s = full;
  for (std::size_t k = size; k-- > 0;) {
    const int i = last[s];
    reordered[k] = window[static_cast<std::size_t>(i)];
    s &= ~(1u << i);
  }
  // Keep the given order when it is as good.
  std::int64_t given_peak = 0, given_live = 0;
  std::uint32_t done = 0;
  for (std::size_t i = 0; i < size; ++i) {
    given_peak = std::max(given_peak, given_live + g.alloc_bytes[window[i]]);
    given_live = after(done, given_live, i);
    done |= 1u << i;
  }
  if (best[full] >= given_peak || reordered == window) return false;
  std::copy(reordered.begin(), reordered.end(), order.begin() + static_cast<std::ptrdiff_t>(begin));
  return true;
}

}  // namespace peakmem
