#include "peakmem/semantics/execution_context.h"

namespace peakmem {

KernelDevice ExecutionContext::KernelsFor(std::string_view tensor_device) const {
  if (target) return *target;
  return tensor_device.rfind("cuda", 0) == 0 ? KernelDevice::kCuda : KernelDevice::kCpu;
}

std::optional<ExecutionContext> ParseTargetDevice(std::string_view text, std::string* error) {
  ExecutionContext c;
  if (text.empty() || text == "auto") return c;
  c.name = std::string(text);
  if (text == "cpu") {
    c.target = KernelDevice::kCpu;
    return c;
  }
  // GPU models by name: their compute capability decides the rules that
  // differ by architecture (the cuBLAS workspace).
  struct Gpu {
    std::string_view name;
    int arch;
    int sm_count;
  };
  constexpr Gpu kGpus[] = {{"cuda", 90, 132}, {"cuda:h100", 90, 132}, {"cuda:h200", 90, 132}, {"cuda:a100", 80, 108}};
  for (const Gpu& g : kGpus) {
    if (text == g.name) {
      c.target = KernelDevice::kCuda;
      c.cuda_arch = g.arch;
      c.sm_count = g.sm_count;
      return c;
    }
  }
  *error = "unknown device '" + std::string(text) +
           "': expected auto (the device each tensor is on), cpu, cuda (a Hopper GPU), cuda:h100, cuda:h200 or "
           "cuda:a100";
  return std::nullopt;
}

CublasWorkspaces CublasWorkspaceBytes(const ExecutionContext& context) {
  if (context.target != KernelDevice::kCuda) return {};
  constexpr std::int64_t kKiB = 1024;
  const std::int64_t cublas = context.cuda_arch >= 90 ? 4096 * kKiB * 8 : 4096 * kKiB * 2 + 16 * 8 * kKiB;
  return {cublas, 1024 * kKiB};
}

}  // namespace peakmem
