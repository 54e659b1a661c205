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

namespace {

// A post-order depth-first walk of each segment: from each root in turn,
// every node after its predecessors (inside the segment), predecessors
// visited in the order `before` gives. An explicit stack: a trace's chains
// run to 10^5 nodes.
template <typename Roots, typename Before>
std::vector<NodeId> PostOrderWalk(const DependenceGraph& g, Roots roots_of, Before before) {
  std::vector<NodeId> order;
  order.reserve(g.size());
  std::vector<bool> entered(g.size(), false);
  struct Frame {
    NodeId node;
    std::vector<NodeId> preds;
    std::size_t next = 0;
  };
  for (const auto& [begin, end] : Segments(g)) {
    const NodeId b = begin, e = end;
    std::vector<Frame> stack;
    auto enter = [&](NodeId v) {
      Frame f{v, {}, 0};
      for (NodeId p : g.preds[v]) {
        if (p >= b && p < e && !entered[p]) f.preds.push_back(p);
      }
      std::stable_sort(f.preds.begin(), f.preds.end(), before);
      entered[v] = true;  // emitted once its predecessors are
      stack.push_back(std::move(f));
    };
    for (NodeId root : roots_of(begin, end)) {
      if (entered[root]) continue;
      enter(root);
      while (!stack.empty()) {
        Frame& top = stack.back();
        if (top.next < top.preds.size()) {
          const NodeId p = top.preds[top.next++];
          if (!entered[p]) enter(p);
          continue;
        }
        order.push_back(top.node);
        stack.pop_back();
      }
    }
  }
  return order;
}

// The segment's nodes no other node of the segment depends on, in trace
// order, then every other node (a walk from the sinks reaches them all; the
// rest only guards against an edge leaving the segment).
std::vector<NodeId> SinksThenRest(const DependenceGraph& g, NodeId begin, NodeId end) {
  std::vector<NodeId> sinks, rest;
  for (NodeId v = begin; v < end; ++v) {
    const bool sink = std::none_of(g.succs[v].begin(), g.succs[v].end(),
                                   [&](NodeId s) { return s >= begin && s < end; });
    (sink ? sinks : rest).push_back(v);
  }
  sinks.insert(sinks.end(), rest.begin(), rest.end());
  return sinks;
}

}  // namespace

std::vector<NodeId> DepthFirstOrder(const DependenceGraph& g) {
  const StorageUse use = ComputeStorageUse(g);
  std::vector<std::int64_t> size(g.size());
  for (NodeId n = 0; n < g.size(); ++n) {
    size[n] = g.alloc_bytes[n];
    for (NodeId b : use.reads[n]) size[n] += g.alloc_bytes[b];
  }
  auto smaller = [&](NodeId a, NodeId b) { return std::tie(size[a], a) < std::tie(size[b], b); };
  return PostOrderWalk(
      g,
      [&](NodeId begin, NodeId end) {
        std::vector<NodeId> roots;
        for (NodeId v = begin; v < end; ++v) roots.push_back(v);
        std::sort(roots.begin(), roots.end(), smaller);
        return roots;
      },
      smaller);
}

std::vector<NodeId> XlaListOrder(const DependenceGraph& g) {
  const StorageUse use = ComputeStorageUse(g);
  std::vector<std::uint32_t> readers_left = use.readers;
  std::vector<NodeId> order;
  order.reserve(g.size());
  using Priority = std::pair<std::int64_t, std::int64_t>;
  auto priority = [&](NodeId n) -> Priority {
    constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
    if (g.scalar_output[n]) return {kMax, kMax};
    std::int64_t freed = 0;
    for (NodeId b : use.reads[n]) {
      if (readers_left[b] == 1 && use.freeable[b]) freed += g.alloc_bytes[b];
    }
    return {freed - g.alloc_bytes[n], static_cast<std::int64_t>(g.succs[n].size())};
  };
  for (const auto& [begin, end] : Segments(g)) {
    std::vector<std::uint32_t> indegree = InnerIndegree(g, begin, end);
    std::vector<NodeId> ready;  // in the order they became ready
    for (NodeId v = begin; v < end; ++v) {
      if (indegree[v - begin] == 0) ready.push_back(v);
    }
    while (!ready.empty()) {
      // The highest priority; among equals the one made ready last (the
      // scheduler's multimap hands out the last of equal keys).
      std::size_t best = 0;
      Priority best_priority = priority(ready[0]);
      for (std::size_t i = 1; i < ready.size(); ++i) {
        const Priority p = priority(ready[i]);
        if (p >= best_priority) {
          best_priority = p;
          best = i;
        }
      }
      const NodeId n = ready[best];
      ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(best));
      order.push_back(n);
      for (NodeId b : use.reads[n]) --readers_left[b];
      for (NodeId s : g.succs[n]) {
        if (s >= begin && s < end && --indegree[s - begin] == 0) ready.push_back(s);
      }
    }
  }
  return order;
}

std::vector<NodeId> XlaDepthFirstOrder(const DependenceGraph& g) {
  // Per node, over its predecessors transitively (node order is
  // topological): users beyond the first, and bytes allocated, each capped
  // as XLA caps them (a DAG counts shared ancestors more than once).
  std::vector<std::int64_t> extra_users(g.size()), total_sizes(g.size());
  std::int64_t cumulative = 0;
  const auto n_nodes = static_cast<std::int64_t>(g.size());
  for (NodeId v = 0; v < g.size(); ++v) {
    extra_users[v] = g.succs[v].empty() ? 0 : static_cast<std::int64_t>(g.succs[v].size()) - 1;
    total_sizes[v] = g.alloc_bytes[v];
    cumulative += g.alloc_bytes[v];
    for (NodeId p : g.preds[v]) {
      extra_users[v] += extra_users[p];
      total_sizes[v] += total_sizes[p];
    }
    total_sizes[v] = std::min(total_sizes[v], cumulative);
    extra_users[v] = std::min(extra_users[v], n_nodes);
  }
  auto before = [&](NodeId a, NodeId b) {
    if (extra_users[a] != extra_users[b]) return extra_users[a] > extra_users[b];
    if (total_sizes[a] != total_sizes[b]) return total_sizes[a] > total_sizes[b];
    return a < b;
  };
  return PostOrderWalk(g, [&](NodeId begin, NodeId end) { return SinksThenRest(g, begin, end); }, before);
}

std::vector<NodeId> XlaPostOrder(const DependenceGraph& g) {
  // Operands in the order the statement names them (preds are recorded so).
  return PostOrderWalk(
      g, [&](NodeId begin, NodeId end) { return SinksThenRest(g, begin, end); }, [](NodeId, NodeId) { return false; });
}

}  // namespace peakmem
