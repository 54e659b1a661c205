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

namespace {

// One window of an order as a problem over subsets of its nodes: which
// storages its nodes may free, and the live bytes (relative to the window's
// start) after each node when a given subset has run.
class Window {
 public:
  Window(const DependenceGraph& g, const StorageUse& use, const std::vector<std::vector<NodeId>>& readers_of,
         const std::vector<NodeId>& order, const std::vector<std::size_t>& position, std::size_t begin,
         std::size_t size)
      : g_(g),
        nodes_(order.begin() + static_cast<std::ptrdiff_t>(begin),
               order.begin() + static_cast<std::ptrdiff_t>(begin + size)),
        pred_mask_(size, 0),
        frees_of_(size) {
    const std::size_t end = begin + size;
    for (std::size_t i = 0; i < size; ++i) {
      const NodeId v = nodes_[i];
      for (NodeId p : g.preds[v]) {
        const int pb = BitOf(p);
        if (pb >= 0) pred_mask_[i] |= 1u << pb;
      }
      for (NodeId b : use.reads[v]) frees_of_[i].push_back(StorageIndex(b, use, readers_of, position, end));
      frees_of_[i].push_back(StorageIndex(v, use, readers_of, position, end));
    }
  }

  // Live bytes after window node i runs when the nodes of `s` have run:
  // its output added, and every storage it completes (its last reader, or
  // itself when nothing reads it) freed.
  std::int64_t After(std::uint32_t s, std::int64_t live_before, std::size_t i) const {
    const std::uint32_t t = s | (1u << i);
    std::int64_t live_after = live_before + g_.alloc_bytes[nodes_[i]];
    for (int k : frees_of_[i]) {
      const Storage& st = storages_[static_cast<std::size_t>(k)];
      auto complete = [&](std::uint32_t set) {
        return (st.readers & set) == st.readers && (st.before_window || (set & (1u << st.bit)) != 0);
      };
      if (st.freeable && complete(t) && !complete(s)) live_after -= st.bytes;
    }
    return live_after;
  }

  // The order of the window's nodes with the least peak (a dynamic program
  // over the subsets that respect the dependences) into `reordered`, and
  // that peak; false when no order is valid.
  bool LeastPeakOrder(std::vector<NodeId>* reordered, std::int64_t* peak) const {
    const std::size_t size = nodes_.size();
    const std::uint32_t full = (1u << size) - 1;
    constexpr std::int64_t kUnset = std::numeric_limits<std::int64_t>::max();
    std::vector<std::int64_t> best(std::size_t{1} << size, kUnset);
    std::vector<std::int64_t> live(std::size_t{1} << size, 0);
    std::vector<std::int8_t> last(std::size_t{1} << size, -1);
    best[0] = 0;
    for (std::uint32_t s = 0; s < full; ++s) {
      if (best[s] == kUnset) continue;
      for (std::size_t i = 0; i < size; ++i) {
        const std::uint32_t bit = 1u << i;
        if ((s & bit) != 0 || (pred_mask_[i] & ~s) != 0) continue;
        const std::uint32_t t = s | bit;
        const std::int64_t step_peak = std::max(best[s], live[s] + g_.alloc_bytes[nodes_[i]]);
        if (best[t] == kUnset) live[t] = After(s, live[s], i);  // the same whatever the order
        if (step_peak < best[t]) {
          best[t] = step_peak;
          last[t] = static_cast<std::int8_t>(i);
        }
      }
    }
    if (best[full] == kUnset) return false;
    reordered->assign(size, 0);
    std::uint32_t s = full;
    for (std::size_t k = size; k-- > 0;) {
      const int i = last[s];
      (*reordered)[k] = nodes_[static_cast<std::size_t>(i)];
      s &= ~(1u << i);
    }
    *peak = best[full];
    return true;
  }

  // The peak of the window's nodes in their given order.
  std::int64_t GivenPeak() const {
    std::int64_t given_peak = 0, given_live = 0;
    std::uint32_t done = 0;
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      given_peak = std::max(given_peak, given_live + g_.alloc_bytes[nodes_[i]]);
      given_live = After(done, given_live, i);
      done |= 1u << i;
    }
    return given_peak;
  }

  const std::vector<NodeId>& nodes() const { return nodes_; }

 private:
  // A storage whose freeing the window decides.
  struct Storage {
    NodeId node;
    std::int64_t bytes;
    bool before_window;     // allocated before the window (else by window bit `bit`)
    int bit;
    std::uint32_t readers;  // in-window readers
    bool freeable;          // freeable, and no reader after the window
  };

  int BitOf(NodeId n) const {
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i] == n) return static_cast<int>(i);
    }
    return -1;
  }

  int StorageIndex(NodeId b, const StorageUse& use, const std::vector<std::vector<NodeId>>& readers_of,
                   const std::vector<std::size_t>& position, std::size_t end) {
    for (std::size_t i = 0; i < storages_.size(); ++i) {
      if (storages_[i].node == b) return static_cast<int>(i);
    }
    Storage s{b, g_.alloc_bytes[b], false, BitOf(b), 0, use.freeable[b]};
    s.before_window = s.bit < 0;
    for (NodeId r : readers_of[b]) {
      const int rb = BitOf(r);
      if (rb >= 0) {
        s.readers |= 1u << rb;
      } else if (position[r] >= end) {
        s.freeable = false;
      }
    }
    storages_.push_back(s);
    return static_cast<int>(storages_.size() - 1);
  }

  const DependenceGraph& g_;
  const std::vector<NodeId> nodes_;
  std::vector<std::uint32_t> pred_mask_;      // per window node: its in-window predecessors
  std::vector<Storage> storages_;
  std::vector<std::vector<int>> frees_of_;    // per window node: storages it may free
};

}  // namespace

bool SearchWindow(const DependenceGraph& g, const StorageUse& use, const std::vector<std::vector<NodeId>>& readers_of,
                  std::vector<NodeId>& order, const std::vector<std::size_t>& position, std::size_t begin,
                  std::size_t size) {
  if (size < 2 || size > kMaxWindow || begin + size > order.size()) return false;
  const Window window(g, use, readers_of, order, position, begin, size);
  std::vector<NodeId> reordered;
  std::int64_t peak = 0;
  if (!window.LeastPeakOrder(&reordered, &peak)) return false;
  // Keep the given order when it is as good.
  if (peak >= window.GivenPeak() || reordered == window.nodes()) return false;
  std::copy(reordered.begin(), reordered.end(), order.begin() + static_cast<std::ptrdiff_t>(begin));
  return true;
}

}  // namespace peakmem
