#include "peakmem/report/allocator_summary.h"

#include <fmt/format.h>

#include "peakmem/report/human_bytes.h"

namespace peakmem {

namespace {

nlohmann::ordered_json StepOrNull(std::int32_t step) {
  if (step == kCudaNoStep) return nullptr;
  return step;
}

nlohmann::ordered_json OutOfMemory(const Report& report, const AllocatorResult& a) {
  const CudaAllocatorStats& s = a.stats;
  if (s.oom_step == kCudaNoStep) return nullptr;
  nlohmann::ordered_json oom;
  oom["step"] = s.oom_step;
  const bool have_step = s.oom_step >= 0 && s.oom_step < static_cast<std::int32_t>(report.steps.size());
  oom["line"] = have_step ? nlohmann::ordered_json(report.steps[s.oom_step].line) : nullptr;
  oom["op"] = have_step ? nlohmann::ordered_json(std::string(report.steps[s.oom_step].op)) : nullptr;
  oom["requested_bytes"] = a.oom_requested_bytes;
  oom["rounded_bytes"] = s.oom_size;
  oom["segment_bytes"] = s.oom_alloc_size;  // what PyTorch's message says it tried to allocate
  oom["allocated_bytes"] = s.allocated_bytes;
  oom["reserved_bytes"] = s.reserved_bytes;
  return oom;
}

// " at step N" (or the arguments); nothing for a peak never reached.
std::string AtStep(std::int32_t step) {
  if (step == kCudaNoStep) return "";
  if (step < 0) return " at the arguments";
  return fmt::format(" at step {}", step);
}

}  // namespace

std::string AllocatorSummaryText(const Report& report) {
  std::string text;
  std::string* out = &text;
  const AllocatorResult& a = *report.allocator;
  const CudaAllocatorStats& s = a.stats;
  *out += fmt::format("\nallocator: {} ({})\n", AllocatorModelName(a.model),
                      a.device == "all" ? "no CUDA tensors in the trace: every storage priced as on one GPU"
                                        : "the storages on " + a.device);
  *out += fmt::format("  allocated: peak {} bytes ({}){}; final {} bytes\n",
                      s.allocated_bytes_peak, HumanBytes(s.allocated_bytes_peak),
                      AtStep(s.allocated_peak_step), s.allocated_bytes);
  *out += fmt::format("  reserved:  peak {} bytes ({}){}; final {} bytes\n",
                      s.reserved_bytes_peak, HumanBytes(s.reserved_bytes_peak),
                      AtStep(s.reserved_peak_step), s.reserved_bytes);
  *out += fmt::format("  segments:  peak {}, final {}; {} cudaMalloc, {} cudaFree, {} retries\n",
                      s.segments_peak, s.segments, s.num_device_alloc, s.num_device_free,
                      s.num_alloc_retries);
  if (s.oom_step != kCudaNoStep) {
    const bool have_step =
        s.oom_step >= 0 && s.oom_step < static_cast<std::int32_t>(report.steps.size());
    *out += fmt::format(
        "  OUT OF MEMORY{}{}: a request of {} bytes (a {}-byte segment) failed with {} bytes "
        "allocated and {} reserved{}\n",
        AtStep(s.oom_step),
        have_step ? fmt::format(" (line {}, op '{}')", report.steps[s.oom_step].line,
                                report.steps[s.oom_step].op)
                  : "",
        a.oom_requested_bytes, s.oom_alloc_size, s.allocated_bytes, s.reserved_bytes,
        a.device_capacity > 0 ? fmt::format(" of a {}-byte device", a.device_capacity) : "");
  } else if (a.device_capacity > 0) {
    *out += fmt::format("  fits a {}-byte device ({}): headroom {} bytes ({})\n", a.device_capacity,
                        HumanBytes(a.device_capacity), a.device_capacity - s.reserved_bytes_peak,
                        HumanBytes(a.device_capacity - s.reserved_bytes_peak));
  }
  return text;
}

namespace {
}  // namespace

nlohmann::ordered_json AllocatorSummaryJson(const Report& report) {
  if (report.allocator == nullptr) return nullptr;
  const AllocatorResult& a = *report.allocator;
  const CudaAllocatorStats& s = a.stats;
  nlohmann::ordered_json j;
  j["name"] = AllocatorModelName(a.model);
  j["device"] = a.device;
  j["requested_peak_bytes"] = s.requested_bytes_peak;
  j["requested_final_bytes"] = s.requested_bytes;
  j["allocated_peak_bytes"] = s.allocated_bytes_peak;
  j["allocated_final_bytes"] = s.allocated_bytes;
  j["allocated_peak_step"] = StepOrNull(s.allocated_peak_step);
  j["reserved_peak_bytes"] = s.reserved_bytes_peak;
  j["reserved_final_bytes"] = s.reserved_bytes;
  j["reserved_peak_step"] = StepOrNull(s.reserved_peak_step);
  j["segments_peak"] = s.segments_peak;
  j["segments_final"] = s.segments;
  j["device_alloc_calls"] = s.num_device_alloc;
  j["device_free_calls"] = s.num_device_free;
  j["alloc_retries"] = s.num_alloc_retries;
  const bool bounded = a.device_capacity > 0;
  const bool oom = s.oom_step != kCudaNoStep;
  j["device_capacity_bytes"] = bounded ? nlohmann::ordered_json(a.device_capacity) : nullptr;
  j["fits"] = bounded ? nlohmann::ordered_json(!oom) : nullptr;
  j["headroom_bytes"] = bounded && !oom
                            ? nlohmann::ordered_json(a.device_capacity - s.reserved_bytes_peak)
                            : nullptr;
  j["out_of_memory"] = OutOfMemory(report, a);
  return j;
}

}  // namespace peakmem
