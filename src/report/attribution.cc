#include "peakmem/report/attribution.h"

#include <algorithm>
#include <charconv>
#include <stdexcept>
#include <string>

#include "peakmem/report/writer.h"
#include "peakmem/semantics/op_registry.h"

namespace peakmem {
namespace {

constexpr std::uint8_t kArgumentCategory = 0, kCotangentCategory = 1, kSavedCategory = 2,
                       kOutputCategory = 3, kIntermediateCategory = 4, kCollectiveCategory = 5,
                       kScratchCategory = 6;
static_assert(kCategories[kCollectiveCategory] == "collective" &&
              kCategories[kScratchCategory] == "scratch");

bool MadeByCollective(const Report& report, const StorageRecord& s) {
  if (s.made_at < 0 || static_cast<std::size_t>(s.made_at) >= report.steps.size()) return false;
  const OpInfo* op = FindOp(report.steps[s.made_at].op);
  return op != nullptr && op->collective;
}

// Sorts groups largest first (equal bytes: by key, so the order is fixed).
void SortGroups(std::vector<AttributionGroup>* groups) {
  std::sort(groups->begin(), groups->end(), [](const AttributionGroup& a, const AttributionGroup& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.key < b.key;
  });
}

// The attribution of the storages live once the first `events` events of
// the log have happened.
Attribution AttributeMoment(const Report& report, const AllocLog& log, std::size_t events,
                            std::size_t largest) {
  std::vector<bool> live(log.storages.size(), false);
  for (std::size_t i = 0; i < events; ++i) live[log.events[i].storage] = log.events[i].alloc;
  const std::vector<std::uint8_t> categories = StorageCategories(report);
  const std::span<const std::string_view> names = CategoryNames(report);

  Attribution out;
  std::int64_t by_category[kCategoryCount] = {};
  std::size_t count_by_category[kCategoryCount] = {};
  std::vector<AttributedStorage> all;
  for (StorageId id = 0; id < log.storages.size(); ++id) {
    if (!live[id]) continue;
    const StorageRecord& s = log.storages[id];
    AttributedStorage a;
    a.storage = id;
    a.bytes = s.bytes;
    a.category = names[categories[id]];
    a.name = s.role == StorageRole::kScratch ? std::string_view("(scratch)")
             : id < log.storage_names.size()  ? log.storage_names[id]
                                              : std::string_view("?");
    a.made_at = s.made_at;
    if (s.made_at < 0) {
      a.made_by = "caller";
    } else if (static_cast<std::size_t>(s.made_at) < report.steps.size()) {
      a.made_by = report.steps[s.made_at].op;
      a.line = report.steps[s.made_at].line;
    } else {
      a.made_by = "?";
    }
    out.live_bytes += s.bytes;
    by_category[categories[id]] += s.bytes;
    ++count_by_category[categories[id]];
    all.push_back(a);
  }
  out.storages = all.size();
  for (std::size_t c = 0; c < names.size(); ++c) {
    if (count_by_category[c] > 0) out.by_category.push_back({names[c], by_category[c], count_by_category[c]});
  }
  SortGroups(&out.by_category);
  // By op: storages with the same maker are summed (keys view the report's steps).
  std::vector<AttributedStorage> by_maker = all;
  std::sort(by_maker.begin(), by_maker.end(),
            [](const AttributedStorage& a, const AttributedStorage& b) { return a.made_by < b.made_by; });
  for (const AttributedStorage& a : by_maker) {
    if (out.by_op.empty() || out.by_op.back().key != a.made_by) out.by_op.push_back({a.made_by, 0, 0});
    out.by_op.back().bytes += a.bytes;
    ++out.by_op.back().storages;
  }
  SortGroups(&out.by_op);
  // Largest first; the storage id (allocation order) breaks ties.
  const auto larger = [](const AttributedStorage& a, const AttributedStorage& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.storage < b.storage;
  };
  if (largest > 0 && largest < all.size()) {
    std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(largest), all.end(), larger);
    all.resize(largest);
  } else {
    std::sort(all.begin(), all.end(), larger);
  }
  out.largest = std::move(all);
  return out;
}

// How many events have happened once step `step` is over.
std::size_t EventsThrough(const AllocLog& log, std::int32_t step) {
  const auto after = std::upper_bound(
      log.events.begin(), log.events.end(), step,
      [](std::int32_t s, const AllocEvent& e) { return s < e.step; });
  return static_cast<std::size_t>(after - log.events.begin());
}

}  // namespace

std::span<const std::string_view> CategoryNames(const Report& report) {
  if (report.storage_categories.empty()) return kCategories;
  return kStepCategories;
}

std::vector<std::uint8_t> StorageCategories(const Report& report) {
  const AllocLog& log = RequireAllocLog(report, "attribution");
  if (!report.storage_categories.empty()) {
    if (report.storage_categories.size() != log.storages.size()) {
      throw std::logic_error("a category for each of the " + std::to_string(log.storages.size()) +
                             " storages is needed");
    }
    return report.storage_categories;
  }
  std::vector<bool> returned(log.storages.size(), false);
  for (const ReturnedTensor& t : report.returned_tensors) {
    if (t.storage < returned.size()) returned[t.storage] = true;
  }
  const bool backward = report.convention == "backward";
  std::vector<std::uint8_t> out(log.storages.size(), kIntermediateCategory);
  for (StorageId id = 0; id < log.storages.size(); ++id) {
    switch (log.storages[id].role) {
      case StorageRole::kArgument: out[id] = backward ? kCotangentCategory : kArgumentCategory; break;
      case StorageRole::kSaved: out[id] = kSavedCategory; break;
      case StorageRole::kScratch: out[id] = kScratchCategory; break;
      case StorageRole::kIntermediate:
        out[id] = returned[id]                                 ? kOutputCategory
                  : MadeByCollective(report, log.storages[id]) ? kCollectiveCategory
                                                               : kIntermediateCategory;
        break;
    }
  }
  return out;
}

std::vector<std::vector<std::int64_t>> LiveByGroup(const Report& report,
                                                   const std::vector<std::uint32_t>& groups,
                                                   std::size_t count) {
  const AllocLog& log = RequireAllocLog(report, "the live bytes by group");
  if (groups.size() != log.storages.size()) {
    throw std::invalid_argument("a group for each of the " + std::to_string(log.storages.size()) +
                                " storages is needed, got " + std::to_string(groups.size()));
  }
  for (const std::uint32_t g : groups) {
    if (g >= count) {
      throw std::invalid_argument("group " + std::to_string(g) + " is not below the count " +
                                  std::to_string(count));
    }
  }
  std::vector<std::vector<std::int64_t>> out(count, std::vector<std::int64_t>(static_cast<std::size_t>(log.steps) + 1));
  std::vector<std::int64_t> live(count, 0);
  std::size_t next = 0;
  for (std::int32_t step = kBeforeFirstStep; step < log.steps; ++step) {
    for (; next < log.events.size() && log.events[next].step == step; ++next) {
      live[groups[log.events[next].storage]] += log.events[next].delta;
    }
    for (std::size_t g = 0; g < count; ++g) out[g][static_cast<std::size_t>(step + 1)] = live[g];
  }
  return out;
}

std::vector<std::array<std::int64_t, kCategoryCount>> LiveByCategory(const Report& report) {
  const std::vector<std::uint8_t> categories = StorageCategories(report);
  const auto by_group =
      LiveByGroup(report, std::vector<std::uint32_t>(categories.begin(), categories.end()), kCategoryCount);
  std::vector<std::array<std::int64_t, kCategoryCount>> out(by_group[0].size());
  for (std::size_t c = 0; c < kCategoryCount; ++c) {
    for (std::size_t p = 0; p < out.size(); ++p) out[p][c] = by_group[c][p];
  }
  return out;
}

Attribution AttributeAfterStep(const Report& report, std::int32_t step, std::size_t largest) {
  const AllocLog& log = RequireAllocLog(report, "attribution");
  if (step < kBeforeFirstStep || step >= log.steps) {
    throw std::invalid_argument("step " + std::to_string(step) + " is not in the trace (it has " +
                                std::to_string(log.steps) + " statements, steps 0 to " +
                                std::to_string(log.steps - 1) + "; -1 is the arguments alone)");
  }
  Attribution out = AttributeMoment(report, log, EventsThrough(log, step), largest);
  out.step = step;
  return out;
}

Attribution AttributeAtPeak(const Report& report, std::size_t largest) {
  const AllocLog& log = RequireAllocLog(report, "attribution");
  // The first moment inside the peak step where the running total equals
  // the peak; after the step when there is none (a model whose peak is
  // measured between statements, as Thunder's is).
  std::size_t events = EventsThrough(log, report.peak_step);
  std::int64_t live = 0;
  for (std::size_t i = 0; i < log.events.size() && log.events[i].step <= report.peak_step; ++i) {
    live += log.events[i].delta;
    if (log.events[i].step == report.peak_step && live == report.peak_bytes) {
      events = i + 1;
      break;
    }
  }
  Attribution out = AttributeMoment(report, log, events, largest);
  out.step = report.peak_step;
  out.at_peak = true;
  return out;
}

bool ParseAttributionMoment(std::string_view text, AttributionMoment* out, std::string* error) {
  if (text == "peak") {
    *out = AttributionMoment{};
    return true;
  }
  std::int32_t step = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), step);
  if (ec != std::errc() || end != text.data() + text.size() || step < kBeforeFirstStep) {
    *error = "'" + std::string(text) +
             "' is not a moment: give 'peak' or a statement's step number (-1: the arguments alone)";
    return false;
  }
  *out = AttributionMoment{false, step};
  return true;
}

Attribution Attribute(const Report& report, const AttributionMoment& at, std::size_t largest) {
  return at.peak ? AttributeAtPeak(report, largest) : AttributeAfterStep(report, at.step, largest);
}

}  // namespace peakmem
