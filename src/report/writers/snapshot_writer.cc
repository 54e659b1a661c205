// The "snapshot" writer: the pickle torch.cuda.memory._dump_snapshot() writes
// (read by pytorch.org/memory_viz and torch.cuda._memory_viz), built from
// the report's allocation event log:
//
//   {'segments': [Segment, ...], 'device_traces': [[TraceEntry, ...], ...]}
//
// device_traces[d] lists device d's events in program order: an 'alloc'
// entry for each storage allocated, a 'free_requested' and a
// 'free_completed' entry for each one freed (PyTorch writes that pair for
// every free on its own stream). Each entry has 'addr', 'size' (the
// storage's bytes), 'stream' 0, 'time_us' (not a time: the step, statement
// index + 1, 0 for the arguments) and 'frames': one frame
// {'filename': the trace, 'line': the statement's line, 'name': its op},
// or for the arguments {'line': 0, 'name': 'argument'|'saved'}.
//
// Zero-byte storages are left out: PyTorch's allocator records nothing for
// them.
//
// Devices: "cuda:N" is device N; other devices (the corpus runs on "cpu")
// take the indexes after the largest CUDA one, in the log's order.
//
// Addresses: no allocator is modelled here; storages get addresses so that
// storages alive at the same moment never overlap. Each storage takes a
// range of its bytes rounded up to 512 (the caching allocator's block
// alignment), best fit: the smallest free range that holds it (lowest
// address among equals), else the top of the device's space grows; freed
// ranges merge with free neighbours. Device d's space starts at (d + 1) << 40.
// Each device with allocations has one segment [start, high water): its
// blocks are the storages still held at the end ('active_allocated', their
// rounded size, 'requested_size' their bytes) and the gaps between them
// ('inactive'), so the viewer can run the trace backwards from it.
#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "pickle_emitter.h"
#include "registry.h"

namespace peakmem::writers {
namespace {

constexpr std::uint64_t kAlignment = 512;

std::uint64_t Rounded(std::int64_t bytes) {
  return (static_cast<std::uint64_t>(bytes) + kAlignment - 1) / kAlignment * kAlignment;
}

// Offsets of ranges in one device's space, best fit (see the file comment).
class AddressSpace {
 public:
  std::uint64_t Take(std::uint64_t size) {
    auto fit = by_size_.lower_bound({size, 0});
    if (fit != by_size_.end()) {
      const auto [free_size, at] = *fit;
      by_size_.erase(fit);
      by_address_.erase(at);
      if (free_size > size) Insert(at + size, free_size - size);
      return at;
    }
    // None fits: the free range at the top, if any, is extended.
    std::uint64_t at = top_;
    if (!by_address_.empty()) {
      const auto last = std::prev(by_address_.end());
      if (last->first + last->second == top_) {
        at = last->first;
        by_size_.erase({last->second, last->first});
        by_address_.erase(last);
      }
    }
    top_ = at + size;
    return at;
  }

  void Give(std::uint64_t at, std::uint64_t size) {
    auto next = by_address_.lower_bound(at);
    if (next != by_address_.end() && at + size == next->first) {
      size += next->second;
      by_size_.erase({next->second, next->first});
      next = by_address_.erase(next);
    }
    if (next != by_address_.begin()) {
      const auto prev = std::prev(next);
      if (prev->first + prev->second == at) {
        at = prev->first;
        size += prev->second;
        by_size_.erase({prev->second, prev->first});
        by_address_.erase(prev);
      }
    }
    Insert(at, size);
  }

  std::uint64_t high_water() const { return top_; }

 private:
  void Insert(std::uint64_t at, std::uint64_t size) {
    by_address_.emplace(at, size);
    by_size_.emplace(size, at);
  }

  std::map<std::uint64_t, std::uint64_t> by_address_;       // start -> size
  std::set<std::pair<std::uint64_t, std::uint64_t>> by_size_;  // (size, start)
  std::uint64_t top_ = 0;
};

// The snapshot's device index of each of the log's devices.
std::vector<int> SnapshotDevices(const AllocLog& log) {
  const std::size_t n = std::max<std::size_t>(log.devices.size(), 1);
  std::vector<int> index(n, -1);
  int next = 0;
  for (std::size_t d = 0; d < log.devices.size(); ++d) {
    const std::string& name = log.devices[d];
    if (name.rfind("cuda:", 0) == 0 && name.size() > 5 && name.size() < 9 &&
        std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      index[d] = std::stoi(name.substr(5));
      next = std::max(next, index[d] + 1);
    }
  }
  for (int& i : index) {
    if (i < 0) i = next++;
  }
  return index;
}

struct Layout {
  std::vector<int> device_of;            // per log device: the snapshot's index
  std::vector<std::uint64_t> address;    // per storage (absolute)
  std::vector<std::uint64_t> high_water; // per snapshot device, relative to its start
};

std::uint64_t DeviceStart(int device) { return static_cast<std::uint64_t>(device + 1) << 40; }

Layout Assign(const AllocLog& log) {
  Layout layout;
  layout.device_of = SnapshotDevices(log);
  const int devices = *std::max_element(layout.device_of.begin(), layout.device_of.end()) + 1;
  std::vector<AddressSpace> spaces(static_cast<std::size_t>(devices));
  layout.address.assign(log.storages.size(), 0);
  for (const AllocEvent& e : log.events) {
    const StorageRecord& s = log.storages[e.storage];
    if (s.bytes <= 0) continue;
    const int device = layout.device_of[s.device];
    AddressSpace& space = spaces[static_cast<std::size_t>(device)];
    if (e.alloc) {
      layout.address[e.storage] = DeviceStart(device) + space.Take(Rounded(s.bytes));
    } else {
      space.Give(layout.address[e.storage] - DeviceStart(device), Rounded(s.bytes));
    }
  }
  for (const AddressSpace& space : spaces) layout.high_water.push_back(space.high_water());
  return layout;
}

class Writer {
 public:
  Writer(const Report& report, const AllocLog& log, const ReportSink& sink)
      : report_(report), log_(log), layout_(Assign(log)), p_(sink) {}

  void Write() {
    p_.BeginDict();
    p_.Memo("segments");
    p_.BeginList();
    for (std::size_t d = 0; d < layout_.high_water.size(); ++d) Segment(static_cast<int>(d));
    p_.EndList();
    p_.Memo("device_traces");
    p_.BeginList();
    for (std::size_t d = 0; d < layout_.high_water.size(); ++d) Trace(static_cast<int>(d));
    p_.EndList();
    p_.EndDict();
    p_.Finish();
  }

 private:
  int DeviceOf(const StorageRecord& s) const { return layout_.device_of[s.device]; }

  // The one frame of what happened at `step` (`role` names the arguments).
  void Frames(std::int32_t step, StorageRole role) {
    p_.BeginList();
    p_.BeginDict();
    p_.Memo("filename");
    p_.Memo(report_.trace_name);
    p_.Memo("line");
    if (step == kBeforeFirstStep) {
      p_.Int(0);
      p_.Memo("name");
      p_.Memo(StorageRoleName(role));
    } else if (step >= 0 && static_cast<std::size_t>(step) < report_.steps.size()) {
      const Step& s = report_.steps[static_cast<std::size_t>(step)];
      p_.Int(s.line);
      p_.Memo("name");
      p_.Memo(s.op);
    } else {  // a report without steps
      p_.Int(0);
      p_.Memo("name");
      p_.Str("statement " + std::to_string(step));
    }
    p_.EndDict();
    p_.EndList();
  }

  void Block(std::uint64_t address, std::uint64_t size, std::int64_t requested, bool active,
             const StorageRecord* storage) {
    p_.BeginDict();
    p_.Memo("address");
    p_.Int(static_cast<std::int64_t>(address));
    p_.Memo("size");
    p_.Int(static_cast<std::int64_t>(size));
    p_.Memo("requested_size");
    p_.Int(requested);
    p_.Memo("state");
    p_.Memo(active ? "active_allocated" : "inactive");
    p_.Memo("frames");
    if (storage != nullptr) {
      Frames(storage->made_at, storage->role);
    } else {
      p_.BeginList();
      p_.EndList();
    }
    p_.EndDict();
  }

  void Segment(int device) {
    const std::uint64_t size = layout_.high_water[static_cast<std::size_t>(device)];
    if (size == 0) return;
    const std::uint64_t start = DeviceStart(device);
    std::vector<std::pair<std::uint64_t, StorageId>> held;  // (address, storage) at the end
    for (StorageId id = 0; id < log_.storages.size(); ++id) {
      const StorageRecord& s = log_.storages[id];
      if (s.bytes > 0 && s.freed_at == kNeverFreed && DeviceOf(s) == device) {
        held.emplace_back(layout_.address[id], id);
      }
    }
    std::sort(held.begin(), held.end());
    std::int64_t allocated = 0;
    for (const auto& [address, id] : held) allocated += log_.storages[id].bytes;
    p_.BeginDict();
    p_.Memo("device");
    p_.Int(device);
    p_.Memo("address");
    p_.Int(static_cast<std::int64_t>(start));
    p_.Memo("total_size");
    p_.Int(static_cast<std::int64_t>(size));
    p_.Memo("allocated_size");
    p_.Int(allocated);
    p_.Memo("active_size");
    p_.Int(allocated);
    p_.Memo("requested_size");
    p_.Int(allocated);
    p_.Memo("stream");
    p_.Int(0);
    p_.Memo("segment_type");
    p_.Memo("large");
    p_.Memo("is_expandable");
    p_.Bool(false);
    p_.Memo("frames");
    p_.BeginList();
    p_.EndList();
    p_.Memo("blocks");
    p_.BeginList();
    std::uint64_t at = start;
    for (const auto& [address, id] : held) {
      if (address > at) Block(at, address - at, 0, false, nullptr);
      const StorageRecord& s = log_.storages[id];
      Block(address, Rounded(s.bytes), s.bytes, true, &s);
      at = address + Rounded(s.bytes);
    }
    if (start + size > at) Block(at, start + size - at, 0, false, nullptr);
    p_.EndList();
    p_.EndDict();
  }

  void Entry(const char* action, StorageId id, std::int32_t step) {
    const StorageRecord& s = log_.storages[id];
    p_.BeginDict();
    p_.Memo("action");
    p_.Memo(action);
    p_.Memo("addr");
    p_.Int(static_cast<std::int64_t>(layout_.address[id]));
    p_.Memo("size");
    p_.Int(s.bytes);
    p_.Memo("stream");
    p_.Int(0);
    p_.Memo("time_us");
    p_.Int(step + 1);
    p_.Memo("frames");
    Frames(step, s.role);
    p_.EndDict();
  }

  void Trace(int device) {
    p_.BeginList();
    for (const AllocEvent& e : log_.events) {
      const StorageRecord& s = log_.storages[e.storage];
      if (s.bytes <= 0 || DeviceOf(s) != device) continue;
      if (e.alloc) {
        Entry("alloc", e.storage, e.step);
      } else {
        Entry("free_requested", e.storage, e.step);
        Entry("free_completed", e.storage, e.step);
      }
    }
    p_.EndList();
  }

  const Report& report_;
  const AllocLog& log_;
  const Layout layout_;
  PickleEmitter p_;
};

class Snapshot final : public ReportWriter {
 public:
  std::string_view name() const override { return "snapshot"; }
  std::string_view description() const override {
    return "PyTorch memory snapshot pickle, as torch.cuda.memory._dump_snapshot writes it, "
           "for pytorch.org/memory_viz";
  }
  bool needs_alloc_log() const override { return true; }
  void Write(const Report& report, const WriterOptions&, const ReportSink& sink) const override {
    const AllocLog& log = RequireAllocLog(report, name());
    Writer(report, log, sink).Write();
  }
};

}  // namespace

const ReportWriter& SnapshotWriter() {
  static const Snapshot writer;
  return writer;
}

}  // namespace peakmem::writers
