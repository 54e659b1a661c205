#include "peakmem/models/step_stream.h"

#include <algorithm>
#include <stdexcept>

#include "peakmem/allocators/cuda_caching_allocator.h"
#include "peakmem/models/training_step.h"

namespace peakmem {

std::string_view ModuleOf(const std::map<std::string, std::string, std::less<>>& modules, std::string_view name) {
  auto it = modules.find(name);
  return it == modules.end() ? std::string_view() : std::string_view(it->second);
}

StepStream::StepStream(bool rows) : stream_(&storages_, &log_, false), rows_(rows) { log_.name_text = names_arena_; }

StorageId StepStream::Alloc(std::int64_t bytes, std::string_view name, StorageRole role, StepCategory category,
                            std::string_view module, std::uint8_t device) {
  const StorageId id = stream_.Alloc(bytes, role == StorageRole::kScratch ? kNoValue : 0, role, device);
  if (id == kNoStorage) {
    throw std::overflow_error("the step's live bytes pass 2^63 bytes when " + std::string(name) + " is allocated");
  }
  log_.storage_names.push_back(name.empty() ? std::string_view() : names_arena_->Save(name));
  categories_.push_back(category);
  modules_.push_back(module.empty() ? std::string_view() : names_arena_->Save(module));
  live_[category] += bytes;
  if (stream_.counter().peak() > peak_seen_) {
    peak_seen_ = stream_.counter().peak();
    at_peak_ = live_;
  }
  return id;
}

void StepStream::Free(StorageId id) {
  live_[categories_[id]] -= storages_[id].bytes;
  stream_.Free(id);
}

void StepStream::Begin() {
  live_before_ = live();
  statement_starts_.push_back(live_before_);
  stream_.BeginStep(next_step_);
}

void StepStream::End(std::string_view label, std::string_view op, std::string_view source, int line) {
  if (rows_) {
    Step row;
    row.index = next_step_;
    row.line = line;
    row.op = strings_->Save(op);
    row.source = strings_->Save(std::string(label) + ": " + std::string(source));
    row.live_bytes = live();
    row.delta_bytes = row.live_bytes - live_before_;
    row.peak_bytes = stream_.counter().step_peak();
    rows_out_.push_back(row);
  }
  statement_peaks_.push_back(stream_.counter().step_peak());
  stream_.EndStep();
  ++next_step_;
}

std::int64_t StepStream::LiveBefore(std::int32_t first) const {
  if (first < 0 || static_cast<std::size_t>(first) >= statement_starts_.size()) return live();
  return statement_starts_[first];
}

std::int64_t StepStream::PeakWithin(std::int32_t first, std::int32_t end) const {
  const auto size = static_cast<std::int32_t>(statement_peaks_.size());
  first = std::clamp(first, 0, size);
  end = std::clamp(end, first, size);
  std::int64_t peak = 0;
  for (std::int32_t i = first; i < end; ++i) peak = std::max(peak, statement_peaks_[i]);
  return peak;
}

Report StepStream::Finish(const std::vector<ReportPhase>& phases) {
  Report out;
  out.model = "runtime";
  out.trace_name = "training step";
  out.convention = "step";
  const RequestedBytes& counter = stream_.counter();
  out.peak_bytes = counter.peak();
  out.final_bytes = counter.live();
  out.peak_step = counter.peak_moment().step;
  out.tensor_peak_bytes = counter.tensor_peak();
  out.phases = phases;
  for (std::size_t c = 0; c < kStepCategoryCount; ++c) out.breakdown.Set(kStepCategories[c], at_peak_[c]);
  log_.storages = storages_;
  log_.steps = next_step_;
  out.storage_categories = categories_;
  if (rows_) {
    out.steps = std::move(rows_out_);
    out.live_at_peak = LiveAtPeak(out, &out.live_at_peak_total);
    out.alloc_log = std::make_shared<const AllocLog>(log_);
  }
  out.strings = strings_;
  return out;
}

std::vector<std::pair<std::string, std::int64_t>> StepStream::ModulesAtPeak() const {
  std::map<std::string_view, std::int64_t> modules;
  for (const StorageId i : LiveAtPeakIds()) modules[modules_[i]] += storages_[i].bytes;
  std::vector<std::pair<std::string, std::int64_t>> out;
  for (const auto& [module, bytes] : modules) out.emplace_back(module, bytes);
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

std::vector<StorageId> StepStream::LiveAtPeakIds() const {
  const PeakMoment& m = stream_.counter().peak_moment();
  std::vector<StorageId> live;
  for (StorageId i = 0; i < std::min(m.storages, storages_.size()); ++i) {
    const StorageRecord& s = storages_[i];
    if ((s.free_seq != 0 && s.free_seq <= m.frees) || s.bytes == 0) continue;
    live.push_back(i);
  }
  return live;
}

std::vector<LiveTensor> StepStream::LiveAtPeak(const Report& out, std::size_t* total) const {
  std::vector<StorageId> live = LiveAtPeakIds();
  std::stable_sort(live.begin(), live.end(),
                   [&](StorageId a, StorageId b) { return storages_[a].bytes > storages_[b].bytes; });
  *total = live.size();
  std::vector<LiveTensor> tensors;
  for (const StorageId i : live) {
    const StorageRecord& s = storages_[i];
    LiveTensor t;
    t.name = s.role == StorageRole::kScratch ? "(scratch)" : std::string(log_.storage_names[i]);
    t.bytes = s.bytes;
    if (s.made_at >= 0 && static_cast<std::size_t>(s.made_at) < out.steps.size()) {
      t.made_by = std::string(out.steps[s.made_at].op);
      t.line = out.steps[s.made_at].line;
    } else {
      t.made_by = "caller";
    }
    t.role = std::string(kStepCategories[categories_[i]]);
    tensors.push_back(std::move(t));
  }
  return tensors;
}

void FinishTrainingStep(StepStream& stream, const std::vector<ReportPhase>& phases, bool modules,
                        const AllocatorOptions& allocator, TrainingStepResult* out) {
  out->step = stream.Finish(phases);
  out->peak_bytes = out->step.peak_bytes;
  out->final_bytes = out->step.final_bytes;
  for (TrainingStepPhase& p : out->phases) p.peak = stream.PeakWithin(p.first, p.end);
  for (const ReportPhase& p : phases) {
    if (out->step.peak_step >= p.first && out->step.peak_step < p.end) {
      out->phase_at_peak = p.name;
      out->step_at_peak = p.iteration;
    }
  }
  for (std::size_t c = 0; c < kStepCategoryCount; ++c) {
    out->by_category.emplace_back(kStepCategories[c], stream.at_peak()[c]);
  }
  if (modules) {
    for (auto& [module, bytes] : stream.ModulesAtPeak()) out->by_module.emplace_back(module, bytes);
  }
  if (allocator.model != AllocatorModel::kRequested) {
    out->step.allocator = std::make_shared<const AllocatorResult>(RunAllocatorModel(stream.log(), allocator));
  }
}

}  // namespace peakmem
