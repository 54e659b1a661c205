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
// With the requested-bytes allocator (the default), no allocator is
// modelled; storages get addresses so that storages alive at the same
// moment never overlap. Each storage takes a
// range of its bytes rounded up to 512 (the caching allocator's block
// alignment), best fit: the smallest free range that holds it (lowest
// address among equals), else the top of the device's space grows; freed
// ranges merge with free neighbours. Device d's space starts at (d + 1) << 40.
// Each device with allocations has one segment [start, high water): its
// blocks are the storages still held at the end ('active_allocated', their
// rounded size, 'requested_size' their bytes) and the gaps between them
// ('inactive'), so the viewer can run the trace backwards from it.
//
// With the CUDA caching allocator (a report priced with --allocator
// cuda-caching), the run is replayed through the allocator model
// (allocators/cuda_caching_allocator.h) with the same settings, and the
// snapshot is what PyTorch's would be: only the storages the allocator
// holds (its device's), at the model's addresses (device d's segments
// start at (d + 1) << 40); device_traces also has 'segment_alloc' and
// 'segment_free' entries (size: the segment's) and an 'oom' entry (size:
// the rounded request) where it runs out of memory; 'segments' are the
// allocator's segments at the end, each block 'active_allocated' or
// 'inactive' with its rounded size, so the viewer's segment view shows the
// predicted fragmentation.
#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "peakmem/allocators/cuda_caching_allocator.h"
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

std::uint64_t DeviceStart(int device) { return static_cast<std::uint64_t>(device + 1) << 40; }

// What the snapshot lists, before it is written: one trace entry per
// allocator action and the segments at the end.
struct TraceRecord {
  const char* action;
  std::uint64_t addr;
  std::int64_t size;
  std::int32_t step;
  StorageRole role;
};
struct BlockRecord {
  std::uint64_t addr;
  std::uint64_t size;
  std::int64_t requested;  // 0 when free
  const StorageRecord* storage;  // nullptr when free
};
struct SegmentRecord {
  int device;
  std::uint64_t addr;
  std::uint64_t size;
  bool small;
  std::vector<BlockRecord> blocks;  // in address order, covering the segment
};
struct Content {
  std::vector<SegmentRecord> segments;
  std::vector<std::vector<TraceRecord>> traces;  // per snapshot device
};

// Requested bytes: storages placed best fit, one segment per device.
Content RequestedContent(const AllocLog& log) {
  const std::vector<int> device_of = SnapshotDevices(log);
  const int devices = *std::max_element(device_of.begin(), device_of.end()) + 1;
  std::vector<AddressSpace> spaces(static_cast<std::size_t>(devices));
  std::vector<std::uint64_t> address(log.storages.size(), 0);
  Content c;
  c.traces.resize(static_cast<std::size_t>(devices));
  for (const AllocEvent& e : log.events) {
    const StorageRecord& s = log.storages[e.storage];
    if (s.bytes <= 0) continue;
    const int device = device_of[s.device];
    AddressSpace& space = spaces[static_cast<std::size_t>(device)];
    std::vector<TraceRecord>& trace = c.traces[static_cast<std::size_t>(device)];
    if (e.alloc) {
      address[e.storage] = DeviceStart(device) + space.Take(Rounded(s.bytes));
      trace.push_back({"alloc", address[e.storage], s.bytes, e.step, s.role});
    } else {
      space.Give(address[e.storage] - DeviceStart(device), Rounded(s.bytes));
      trace.push_back({"free_requested", address[e.storage], s.bytes, e.step, s.role});
      trace.push_back({"free_completed", address[e.storage], s.bytes, e.step, s.role});
    }
  }
  for (int device = 0; device < devices; ++device) {
    const std::uint64_t size = spaces[static_cast<std::size_t>(device)].high_water();
    if (size == 0) continue;
    const std::uint64_t start = DeviceStart(device);
    std::vector<std::pair<std::uint64_t, StorageId>> held;  // (address, storage) at the end
    for (StorageId id = 0; id < log.storages.size(); ++id) {
      const StorageRecord& s = log.storages[id];
      if (s.bytes > 0 && s.freed_at == kNeverFreed && device_of[s.device] == device) {
        held.emplace_back(address[id], id);
      }
    }
    std::sort(held.begin(), held.end());
    SegmentRecord& seg = c.segments.emplace_back(SegmentRecord{device, start, size, false, {}});
    std::uint64_t at = start;
    for (const auto& [addr, id] : held) {
      if (addr > at) seg.blocks.push_back({at, addr - at, 0, nullptr});
      const StorageRecord& s = log.storages[id];
      seg.blocks.push_back({addr, Rounded(s.bytes), s.bytes, &s});
      at = addr + Rounded(s.bytes);
    }
    if (start + size > at) seg.blocks.push_back({at, start + size - at, 0, nullptr});
  }
  return c;
}

// The CUDA caching allocator's actions, as trace records.
class AllocatorRecorder final : public CudaAllocatorObserver, public AllocSink {
 public:
  AllocatorRecorder(const AllocLog& log, CudaCachingAllocator* allocator, std::uint64_t start,
                    std::vector<TraceRecord>* out)
      : log_(log), allocator_(allocator), start_(start), out_(out) {}
  void SegmentAlloc(std::int64_t address, std::int64_t size, bool) override {
    Add("segment_alloc", address, size, StorageRole::kIntermediate);
  }
  void SegmentFree(std::int64_t address, std::int64_t size) override {
    Add("segment_free", address, size, StorageRole::kIntermediate);
  }
  void BlockAlloc(StorageId id, std::int64_t address, std::int64_t requested) override {
    Add("alloc", address, requested, log_.storages[id].role);
  }
  void BlockFree(StorageId id, std::int64_t address, std::int64_t requested) override {
    Add("free_requested", address, requested, log_.storages[id].role);
    Add("free_completed", address, requested, log_.storages[id].role);
  }
  void OutOfMemory(StorageId id, std::int64_t size) override {
    out_->push_back({"oom", 0, size, step_, log_.storages[id].role});
  }
  void Alloc(StorageId id, const StorageRecord& s, std::int32_t step) override {
    step_ = step;
    allocator_->Alloc(id, s, step);
  }
  void Free(StorageId id, const StorageRecord& s, std::int32_t step) override {
    step_ = step;
    allocator_->Free(id, s, step);
  }

 private:
  void Add(const char* action, std::int64_t address, std::int64_t size, StorageRole role) {
    out_->push_back({action, start_ + static_cast<std::uint64_t>(address), size, step_, role});
  }
  const AllocLog& log_;
  CudaCachingAllocator* allocator_;
  std::uint64_t start_;
  std::vector<TraceRecord>* out_;
  std::int32_t step_ = kBeforeFirstStep;
};

// The run replayed through the CUDA caching allocator it was priced with.
Content AllocatorContent(const AllocLog& log, const AllocatorResult& priced) {
  const std::vector<int> device_of = SnapshotDevices(log);
  const int device = priced.cuda.device >= 0 ? device_of[static_cast<std::size_t>(priced.cuda.device)] : 0;
  const std::uint64_t start = DeviceStart(device);
  Content c;
  c.traces.resize(static_cast<std::size_t>(device) + 1);
  CudaCachingAllocator allocator(priced.cuda);
  AllocatorRecorder recorder(log, &allocator, start, &c.traces.back());
  allocator.SetObserver(&recorder);
  Replay(log, recorder);
  for (const CudaSegmentInfo& s : allocator.Snapshot().segments) {
    SegmentRecord& seg = c.segments.emplace_back(SegmentRecord{
        device, start + static_cast<std::uint64_t>(s.address), static_cast<std::uint64_t>(s.size), s.small_pool, {}});
    for (const CudaBlockInfo& b : s.blocks) {
      seg.blocks.push_back({start + static_cast<std::uint64_t>(b.address), static_cast<std::uint64_t>(b.size),
                            b.allocated ? b.requested_size : 0,
                            b.allocated ? &log.storages[b.storage] : nullptr});
    }
  }
  return c;
}

class Writer {
 public:
  Writer(const Report& report, Content content, const ReportSink& sink)
      : report_(report), content_(std::move(content)), p_(sink) {}

  void Write() {
    p_.BeginDict();
    p_.Memo("segments");
    p_.BeginList();
    for (const SegmentRecord& s : content_.segments) Segment(s);
    p_.EndList();
    p_.Memo("device_traces");
    p_.BeginList();
    for (const std::vector<TraceRecord>& trace : content_.traces) {
      p_.BeginList();
      for (const TraceRecord& e : trace) Entry(e);
      p_.EndList();
    }
    p_.EndList();
    p_.EndDict();
    p_.Finish();
  }

 private:
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

  void Block(const BlockRecord& b) {
    p_.BeginDict();
    p_.Memo("address");
    p_.Int(static_cast<std::int64_t>(b.addr));
    p_.Memo("size");
    p_.Int(static_cast<std::int64_t>(b.size));
    p_.Memo("requested_size");
    p_.Int(b.requested);
    p_.Memo("state");
    p_.Memo(b.storage != nullptr ? "active_allocated" : "inactive");
    p_.Memo("frames");
    if (b.storage != nullptr) {
      Frames(b.storage->made_at, b.storage->role);
    } else {
      p_.BeginList();
      p_.EndList();
    }
    p_.EndDict();
  }

  void Segment(const SegmentRecord& s) {
    std::int64_t allocated = 0, requested = 0;
    for (const BlockRecord& b : s.blocks) {
      if (b.storage == nullptr) continue;
      allocated += static_cast<std::int64_t>(b.size);
      requested += b.requested;
    }
    p_.BeginDict();
    p_.Memo("device");
    p_.Int(s.device);
    p_.Memo("address");
    p_.Int(static_cast<std::int64_t>(s.addr));
    p_.Memo("total_size");
    p_.Int(static_cast<std::int64_t>(s.size));
    p_.Memo("allocated_size");
    p_.Int(allocated);
    p_.Memo("active_size");
    p_.Int(allocated);
    p_.Memo("requested_size");
    p_.Int(requested);
    p_.Memo("stream");
    p_.Int(0);
    p_.Memo("segment_type");
    p_.Memo(s.small ? "small" : "large");
    p_.Memo("is_expandable");
    p_.Bool(false);
    p_.Memo("frames");
    p_.BeginList();
    p_.EndList();
    p_.Memo("blocks");
    p_.BeginList();
    for (const BlockRecord& b : s.blocks) Block(b);
    p_.EndList();
    p_.EndDict();
  }

  void Entry(const TraceRecord& e) {
    p_.BeginDict();
    p_.Memo("action");
    p_.Memo(e.action);
    p_.Memo("addr");
    p_.Int(static_cast<std::int64_t>(e.addr));
    p_.Memo("size");
    p_.Int(e.size);
    p_.Memo("stream");
    p_.Int(0);
    p_.Memo("time_us");
    p_.Int(e.step + 1);
    p_.Memo("frames");
    Frames(e.step, e.role);
    p_.EndDict();
  }

  const Report& report_;
  const Content content_;
  PickleEmitter p_;
};

class Snapshot final : public ReportWriter {
 public:
  std::string_view name() const override { return "snapshot"; }
  std::string_view description() const override {
    return "PyTorch memory snapshot pickle, as torch.cuda.memory._dump_snapshot writes it, "
           "for pytorch.org/memory_viz (with --allocator cuda-caching: the allocator's segments, "
           "blocks and addresses)";
  }
  bool needs_alloc_log() const override { return true; }
  void Write(const Report& report, const WriterOptions&, const ReportSink& sink) const override {
    const AllocLog& log = RequireAllocLog(report, name());
    const bool cuda = report.allocator != nullptr && report.allocator->model == AllocatorModel::kCudaCaching;
    Writer(report, cuda ? AllocatorContent(log, *report.allocator) : RequestedContent(log), sink).Write();
  }
};

}  // namespace

const ReportWriter& SnapshotWriter() {
  static const Snapshot writer;
  return writer;
}

}  // namespace peakmem::writers
