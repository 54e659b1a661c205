// The result of analysing a trace with one model, and its renderings.
//
// A Report holds the peak, the bytes still held when the function returns,
// a breakdown (ordered: key -> bytes, in the order the model first wrote the
// key, as a Python dict keeps it), one step per statement (live bytes after
// it), and diagnostics (ops the model does not know, assumptions it made).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "peakmem/allocators/allocator_choice.h"
#include "peakmem/ir/string_arena.h"
#include "peakmem/ir/string_hash.h"
#include "peakmem/allocators/nccl_buffers.h"
#include "peakmem/semantics/distribution.h"
#include "peakmem/sim/alloc_events.h"

namespace peakmem {

// An insertion-ordered string -> int64 map with Python dict semantics:
// assigning an existing key replaces its value and keeps its position.
// Keys are copied once into an arena (a breakdown of a 10^6-statement trace
// has about as many keys).
//
// Models set one key per step and keys almost never repeat, so Set only
// appends (with the key's hash); repeats are merged when items() is next
// read: entries are grouped by hash in cache-sized buckets, and each key set
// more than once keeps its first place and its last value. A hash table
// probed on every Set cost a cache miss per step on big traces.
class OrderedBreakdown {
 public:
  void Set(std::string_view key, std::int64_t bytes);
  // Makes room for `keys` keys.
  void Reserve(std::size_t keys) {
    items_.reserve(keys);
    hashes_.reserve(keys);
  }
  // The entries, each key once, in first-set order.
  const std::vector<std::pair<std::string_view, std::int64_t>>& items() const {
    if (merged_ != items_.size()) Merge();
    return items_;
  }
  std::size_t size() const { return items().size(); }
  // Appends `part`'s entries after these (as if set here in that order) and
  // empties `part` (it keeps its vectors' room; its keys' arena moves here).
  void Append(OrderedBreakdown* part);

 private:
  void Merge() const;

  std::shared_ptr<StringArena> keys_ = std::make_shared<StringArena>();
  std::vector<std::shared_ptr<StringArena>> appended_keys_;  // arenas of appended parts
  // Merged up to merged_; entries after it may repeat keys. hashes_[i] is
  // the StringHash of items_[i].first.
  mutable std::vector<std::pair<std::string_view, std::int64_t>> items_;
  mutable std::vector<std::uint64_t> hashes_;
  mutable std::size_t merged_ = 0;
};

// Text in a Step views memory its Report keeps alive (the trace's source, or
// the report's own arena), so a step costs no allocation.
struct Step {
  int index = 0;           // 0-based statement index
  int line = 0;            // 1-based source line (0 when unknown)
  std::string_view op;     // symbol name ("mul", "python_del", ...)
  std::string_view source; // the statement's source line, trimmed
  std::int64_t delta_bytes = 0;
  std::int64_t live_bytes = 0;  // after the statement
  // The most bytes live at any moment inside the statement (outputs and
  // op scratch included); equals live_bytes for the `thunder` model.
  std::int64_t peak_bytes = 0;
};

// A tensor storage alive at the peak, and where it came from.
struct LiveTensor {
  std::string name;     // the value that first named it
  std::int64_t bytes = 0;
  std::string made_by;  // the op that allocated it ("argument" for inputs)
  int line = 0;         // where that op is (0 for inputs)
  std::string role;     // "argument", "saved", "intermediate", "scratch"
};

// A tensor the trace returns, with the storage behind it (what a caller that
// runs the trace inside a bigger program needs to carry its identity on).
struct ReturnedTensor {
  std::string name;  // the returned value's name in the trace
  StorageId storage = kNoStorage;  // its storage in the run's storage table
  std::int64_t storage_bytes = 0;
  std::vector<std::int64_t> strides;
  StorageRole role = StorageRole::kIntermediate;  // kArgument: the caller's own tensor (or a view of it)
  std::vector<std::int64_t> shape;  // the tensor's (its strides' dimensions)
};

// A part of a program of several traces (a training step's forward, backward
// and optimizer), as the steps of its Report run it: steps [first, end).
struct ReportPhase {
  std::string name;  // "forward", "backward", "optimizer"
  int iteration = 1;  // which training iteration (1-based)
  std::int32_t first = 0, end = 0;
};

struct Report {
  std::string model;
  std::string trace_name;
  std::int64_t peak_bytes = 0;
  std::int64_t final_bytes = 0;
  int peak_step = -1;  // first step whose live bytes equal the peak; -1: before any step
  // Runtime model only: the peak without op scratch memory (-1 when the
  // model does not separate it), the calling convention assumed, and the
  // storages alive at the peak, largest first.
  std::int64_t tensor_peak_bytes = -1;
  std::string convention;
  std::vector<LiveTensor> live_at_peak;
  // How many storages were alive at the peak: live_at_peak.size(), unless
  // ReportOptions::live_at_peak_limit kept only the largest.
  std::size_t live_at_peak_total = 0;
  OrderedBreakdown breakdown;
  std::vector<Step> steps;
  std::vector<std::string> diagnostics;
  // The allocation event stream of the run (storages and events), when
  // ReportOptions::alloc_log asked for it; what allocator models and
  // writers read.
  std::shared_ptr<const AllocLog> alloc_log;
  // What the allocator model the run was priced with made of the stream
  // (allocators/allocator_choice.h); null for requested bytes, which the
  // fields above already are.
  std::shared_ptr<const AllocatorResult> allocator;
  // The runtime model, when ReportOptions::returned_tensors: every tensor
  // named in the return statement, in the order written (a name once).
  std::vector<ReturnedTensor> returned_tensors;
  // Which rank of how many the numbers are for (semantics/distribution.h).
  Distribution distribution;
  // For a distributed trace of known world size with collectives: NCCL's
  // own buffers, a documented estimate apart from every figure above
  // (allocators/nccl_buffers.h; the CLI's --nccl-* flags set its options).
  std::optional<NcclEstimate> nccl;

  // A program of several traces (a training step): its phases, in order,
  // and each storage's category, an index into kStepCategories
  // (attribution.h), set by whoever joined the traces; empty for a trace,
  // whose storages' categories follow from their roles.
  std::vector<ReportPhase> phases;
  std::vector<std::uint8_t> storage_categories;

  // What the steps' text views: the source they quote and an arena for text
  // rendered for them (statements re-printed from JSON, op names).
  std::shared_ptr<const void> backing;
  std::shared_ptr<StringArena> strings = std::make_shared<StringArena>();
};

// What a model records besides the totals and the breakdown.
// (An optimization pass that only compares peaks turns all three off.)
struct ReportOptions {
  bool steps = true;         // default true: one Step per statement
  bool breakdown = true;     // default true: the ordered breakdown (a key per allocating op)
  bool live_at_peak = true;  // default true (runtime model): the storages alive at the peak
  // Default 0 (all): list only this many of them, the largest (the same
  // ones, in the same order, as the full list starts with). The text report
  // shows kTextReportLiveTensors; a 10^6-statement forward trace has ~300,000
  // storages alive at its peak, and listing them all costs the CLI ~0.09 s.
  std::size_t live_at_peak_limit = 0;
  // Default true (runtime model): on a big trace the steps and breakdown keys
  // are built on a second thread while the model runs (StepRecorder); the
  // report is the same either way.
  bool second_thread = true;
  // Default false: keep the allocation event stream in Report::alloc_log
  // (16 bytes an event, 32 a storage).
  bool alloc_log = false;
  // Default false: fill Report::returned_tensors (runtime model).
  bool returned_tensors = false;
};

// How many of the storages alive at the peak the text report lists.
inline constexpr std::size_t kTextReportLiveTensors = 10;

// Receives a rendered report piece by piece (about 1 MB at a time).
using ReportSink = std::function<void(std::string_view)>;

// The version of the JSON report's schema (docs/report.schema.json), its
// "schema_version" field: raised when a field changes meaning or goes away.
inline constexpr int kReportSchemaVersion = 1;

// JSON: {"schema_version", "model", "trace", "peak_bytes", "final_bytes", "peak_step",
// "breakdown" (ordered object), "steps" [...], "diagnostics" [...]}.
std::string ReportToJson(const Report& report, int indent = 2);
// Human-readable summary and per-step table.
std::string ReportToText(const Report& report);
// The same, streamed: what a big report writes to a file without holding it.
// `at`: what is alive at one moment (attribution.h), added when given.
struct Attribution;
void WriteReportJson(const Report& report, int indent, const ReportSink& sink,
                     const Attribution* at = nullptr);
// How the text report is laid out.
struct TextOptions {
  // Default 0: a row for every statement. Otherwise, when the trace has more
  // statements, only this many: those that allocate the most (delta bytes),
  // the peak's always among them, in program order.
  std::size_t table_rows = 0;
  // Default false: ANSI colour (the peak in bold red, headings in bold), for
  // a terminal.
  bool colour = false;
};
void WriteReportText(const Report& report, const ReportSink& sink, const Attribution* at = nullptr,
                     const TextOptions& text = {});

}  // namespace peakmem
