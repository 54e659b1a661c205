#include "peakmem/planning/schedule_heuristics.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <queue>
#include <tuple>

namespace peakmem {
namespace {

// Node ranges [begin, end) of the segments, in order (segments are runs of
// consecutive node ids).
std::vector<std::pair<NodeId, NodeId>> Segments(const DependenceGraph& g) {
  std::vector<std::pair<NodeId, NodeId>> out;
  for (NodeId v = 0; v < g.size(); ++v) {
    if (v == 0 || g.segment[v] != g.segment[v - 1]) out.emplace_back(v, v);
    out.back().second = v + 1;
  }
  return out;
}

// Predecessors inside [begin, end) not yet scheduled, per node of the segment.
std::vector<std::uint32_t> InnerIndegree(const DependenceGraph& g, NodeId begin, NodeId end) {
  std::vector<std::uint32_t> indegree(end - begin, 0);
  for (NodeId v = begin; v < end; ++v) {
    for (NodeId p : g.preds[v]) {
      if (p >= begin && p < end) ++indegree[v - begin];
    }
  }
  return indegree;
}

}  // namespace

StorageUse ComputeStorageUse(const DependenceGraph& g) {
  StorageUse use;
  use.reads.resize(g.size());
  use.readers.assign(g.size(), 0);
  use.freeable.assign(g.size(), true);
  for (ValueId v = 0; v < g.storage_of.size(); ++v) {
    const NodeId b = g.storage_of[v];
    if (b != kNoNode && !g.deleted_by_trace[v]) use.freeable[b] = false;
  }
  for (NodeId n = 0; n < g.size(); ++n) {
    for (ValueId v : g.touches[n]) {
      const NodeId b = v < g.storage_of.size() ? g.storage_of[v] : kNoNode;
      if (b == kNoNode || b == n) continue;
      std::vector<NodeId>& r = use.reads[n];
      if (std::find(r.begin(), r.end(), b) == r.end()) {
        r.push_back(b);
        ++use.readers[b];
      }
    }
  }
  return use;
}

std::vector<NodeId> TraceOrder(const DependenceGraph& g) {
  std::vector<NodeId> order(g.size());
  for (NodeId v = 0; v < g.size(); ++v) order[v] = v;
  return order;
}

std::vector<NodeId> LeastPeakMemoryFirstOrder(const DependenceGraph& g) {
  const StorageUse use = ComputeStorageUse(g);
  std::vector<std::uint32_t> readers_left = use.readers;
  std::vector<NodeId> order;
  order.reserve(g.size());
  std::int64_t live = 0;
  std::int64_t max_memory = 0;
  // What scheduling `n` frees: storages it is the last reader of.
  auto frees = [&](NodeId n) {
    std::int64_t bytes = 0;
    for (NodeId b : use.reads[n]) {
      if (readers_left[b] == 1 && use.freeable[b]) bytes += g.alloc_bytes[b];
    }
    return bytes;
  };
  for (const auto& [begin, end] : Segments(g)) {
    std::vector<std::uint32_t> indegree = InnerIndegree(g, begin, end);
    std::vector<NodeId> ready;
    for (NodeId v = begin; v < end; ++v) {
      if (indegree[v - begin] == 0) ready.push_back(v);
    }
    while (!ready.empty()) {
      const std::int64_t gap = max_memory - live;
      std::size_t best = 0;
      std::tuple<std::int64_t, std::int64_t, NodeId> best_key{std::numeric_limits<std::int64_t>::max(), 0, 0};
      for (std::size_t i = 0; i < ready.size(); ++i) {
        const NodeId n = ready[i];
        const std::int64_t size = g.alloc_bytes[n];
        const std::tuple<std::int64_t, std::int64_t, NodeId> key{size > gap ? size : 0, size - frees(n), n};
        if (key < best_key) {
          best_key = key;
          best = i;
        }
      }
      const NodeId n = ready[best];
      ready[best] = ready.back();
      ready.pop_back();
      order.push_back(n);
      live += g.alloc_bytes[n];
      max_memory = std::max(max_memory, live);
      for (NodeId b : use.reads[n]) {
        if (--readers_left[b] == 0 && use.freeable[b]) live -= g.alloc_bytes[b];
      }
      if (use.readers[n] == 0 && use.freeable[n]) live -= g.alloc_bytes[n];
      for (NodeId s : g.succs[n]) {
        if (s >= begin && s < end && --indegree[s - begin] == 0) ready.push_back(s);
      }
    }
  }
  return order;
}

std::vector<NodeId> BreadthFirstOrder(const DependenceGraph& g) {
  std::vector<NodeId> order;
  order.reserve(g.size());
  std::vector<std::uint32_t> position(g.size(), 0);
  using Key = std::pair<std::uint32_t, NodeId>;  // (last predecessor's position + 1, node)
  for (const auto& [begin, end] : Segments(g)) {
    std::vector<std::uint32_t> indegree = InnerIndegree(g, begin, end);
    std::priority_queue<Key, std::vector<Key>, std::greater<Key>> ready;
    auto key_of = [&](NodeId v) {
      std::uint32_t last = 0;
      for (NodeId p : g.preds[v]) last = std::max(last, position[p] + 1);
      return Key{last, v};
    };
    for (NodeId v = begin; v < end; ++v) {
      if (indegree[v - begin] == 0) ready.push(key_of(v));
    }
    while (!ready.empty()) {
      const NodeId n = ready.top().second;
      ready.pop();
      position[n] = static_cast<std::uint32_t>(order.size());
      order.push_back(n);
      for (NodeId s : g.succs[n]) {
        if (s >= begin && s < end && --indegree[s - begin] == 0) ready.push(key_of(s));
      }
    }
  }
  return order;
}

std::vector<NodeId> DepthFirstOrder(const DependenceGraph& g) {
  const StorageUse use = ComputeStorageUse(g);
  std::vector<std::int64_t> size(g.size());
  for (NodeId n = 0; n < g.size(); ++n) {
    size[n] = g.alloc_bytes[n];
    for (NodeId b : use.reads[n]) size[n] += g.alloc_bytes[b];
  }
  auto smaller = [&](NodeId a, NodeId b) { return std::tie(size[a], a) < std::tie(size[b], b); };
  std::vector<NodeId> order;
  order.reserve(g.size());
  std::vector<bool> done(g.size(), false);
  for (const auto& [begin, end] : Segments(g)) {
    std::vector<NodeId> roots;
    for (NodeId v = begin; v < end; ++v) roots.push_back(v);
    std::sort(roots.begin(), roots.end(), smaller);
    // An explicit stack (a trace's chains run to 10^5 nodes): (node, its
    // predecessors sorted, the next one to visit).
    struct Frame {
      NodeId node;
      std::vector<NodeId> preds;
      std::size_t next = 0;
    };
    for (NodeId root : roots) {
      if (done[root]) continue;
      std::vector<Frame> stack;
      auto push = [&](NodeId v) {
        Frame f{v, {}, 0};
        for (NodeId p : g.preds[v]) {
          if (p >= begin && p < end && !done[p]) f.preds.push_back(p);
        }
        std::sort(f.preds.begin(), f.preds.end(), smaller);
        done[v] = true;  // entered; emitted when its predecessors are
        stack.push_back(std::move(f));
      };
      push(root);
      while (!stack.empty()) {
        Frame& top = stack.back();
        if (top.next < top.preds.size()) {
          const NodeId p = top.preds[top.next++];
          if (!done[p]) push(p);
          continue;
        }
        order.push_back(top.node);
        stack.pop_back();
      }
    }
  }
  return order;
}

}  // namespace peakmem
