// What is alive at one moment of a run, and who made it: the storages live
// then, grouped by category and by the op that allocated them, largest
// first. Read from the allocation event stream (Report::alloc_log), so a
// view is never counted apart from its storage.
//
// Categories say why a storage exists:
//   argument      the caller's tensor (a forward's inputs, parameters)
//   cotangent     a backward's incoming gradient (an argument that is not saved)
//   saved         a tensor saved for backward, passed to the backward
//   output        an op's output that the program returns
//   intermediate  an op's output that the program does not return
//   scratch       memory an op allocates and frees before it returns
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "peakmem/report/report.h"

namespace peakmem {

// Every category, in the order reports stack and list them.
inline constexpr std::string_view kCategories[] = {"argument",     "cotangent",  "saved",  "output",
                                                   "intermediate", "collective", "scratch"};
inline constexpr std::size_t kCategoryCount = std::size(kCategories);

// A training step's categories (Report::storage_categories indexes them):
//   parameters       the module's parameters and buffers
//   inputs           the caller's input tensors
//   gradients        .grad and the gradients the backward returns
//   optimizer_state  what the optimizer keeps between steps
//   activations      tensors the forward saves for the backward
//   temporaries      everything else: intermediates, the loss, the
//                    cotangent, op scratch
//   workspaces       what a device's libraries allocate at their first call
//                    and keep (cuBLAS's and cuBLASLt's workspaces on CUDA)
inline constexpr std::string_view kStepCategories[] = {"parameters",  "inputs",      "gradients", "optimizer_state",
                                                       "activations", "temporaries", "workspaces"};
static_assert(std::size(kStepCategories) <= kCategoryCount);

// The names a report's categories have: kStepCategories for a training
// step (Report::storage_categories set), else kCategories.
std::span<const std::string_view> CategoryNames(const Report& report);

// Which category each storage of `report.alloc_log` is in (an index into
// CategoryNames(report): a training step's are Report::storage_categories;
// a trace's follow). Outputs are known from Report::returned_tensors, cotangents
// from the backward calling convention; "collective" is what a collective
// (OpInfo::collective: an all-gather's gathered tensor, a reduce-scatter's
// shard) allocated and the trace does not return, known from the steps' ops
// (without Report::steps such storages are "intermediate").
std::vector<std::uint8_t> StorageCategories(const Report& report);

// The live bytes of each category (CategoryNames' order; slots past them
// stay 0) at every point:
// [0] the arguments alone, [i + 1] after statement i. Throws
// std::invalid_argument without an event log.
std::vector<std::array<std::int64_t, kCategoryCount>> LiveByCategory(const Report& report);
// The same for any grouping of the storages: `groups[s]` is storage s's
// group (< `count`); out[g][p] the bytes of group g live at point p. Throws
// std::invalid_argument without an event log, for a `groups` of another
// length than the storage table or a group out of range.
std::vector<std::vector<std::int64_t>> LiveByGroup(const Report& report,
                                                   const std::vector<std::uint32_t>& groups,
                                                   std::size_t count);

struct AttributedStorage {
  StorageId storage = kNoStorage;
  std::string_view name;      // the value it was first bound to ("(scratch)" for scratch)
  std::int64_t bytes = 0;
  std::string_view category;  // one of kCategories
  std::string_view made_by;   // the op that allocated it ("caller" for arguments)
  std::int32_t made_at = kBeforeFirstStep;  // that op's step
  int line = 0;               // that op's source line (0 for arguments)
};

struct AttributionGroup {
  std::string_view key;  // a category, or an op name
  std::int64_t bytes = 0;
  std::size_t storages = 0;
};

struct Attribution {
  // The moment: inside step `step` when `at_peak` (where the live bytes
  // first reach the peak, its outputs and scratch included), else after it
  // (kBeforeFirstStep: the arguments alone).
  std::int32_t step = kBeforeFirstStep;
  bool at_peak = false;
  std::int64_t live_bytes = 0;
  std::vector<AttributionGroup> by_category;  // largest first; empty categories left out
  std::vector<AttributionGroup> by_op;        // largest first
  std::vector<AttributedStorage> largest;     // largest first, at most the limit asked
  std::size_t storages = 0;                   // how many storages are live then
};

// The storages live after step `step` (kBeforeFirstStep..steps-1).
// `largest`: how many storages to list (0: all). Throws
// std::invalid_argument without an event log or for a step out of range.
Attribution AttributeAfterStep(const Report& report, std::int32_t step, std::size_t largest);
// The storages live at the peak (the first moment the live bytes equal
// Report::peak_bytes).
Attribution AttributeAtPeak(const Report& report, std::size_t largest);

// A moment to attribute, as `peakmem analyze --at` takes it: the peak, or
// after a step.
struct AttributionMoment {
  bool peak = true;
  std::int32_t step = kBeforeFirstStep;  // when !peak (kBeforeFirstStep: the arguments alone)
};
// Reads "peak" or a step number (-1: the arguments alone); false, with
// `error` saying why, for anything else.
bool ParseAttributionMoment(std::string_view text, AttributionMoment* out, std::string* error);
Attribution Attribute(const Report& report, const AttributionMoment& at, std::size_t largest);

}  // namespace peakmem
