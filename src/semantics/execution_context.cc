#include "peakmem/semantics/execution_context.h"

#include <iterator>

namespace peakmem {

KernelDevice ExecutionContext::KernelsFor(std::string_view tensor_device) const {
  if (target) return *target;
  return tensor_device.rfind("cuda", 0) == 0 ? KernelDevice::kCuda : KernelDevice::kCpu;
}

namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;

// total_memory_bytes as printed: deviceQuery's "(N bytes)" where one was
// found, else torch's `total_memory=NMB` (bytes >> 20, so within a MiB).
constexpr GpuModel kGpuCatalog[] = {
    {"cuda", "a Hopper GPU (the H100 SXM's figures)", 90, 132, 85'045'477'376, kAssumedContextBytes, false,
     "as cuda:h100"},
    {"cuda:h100", "NVIDIA H100 80GB HBM3 (SXM)", 90, 132, 85'045'477'376, kAssumedContextBytes, false,
     "deviceQuery, driver 565.57.01: github.com/thamada/nvidia-smi gls/H100SXMx8_deviceQuery.py"},
    {"cuda:h100-pcie", "NVIDIA H100 PCIe", 90, 114, 81'008 * kMiB, kAssumedContextBytes, false,
     "torch 2.0.1 total_memory=81008MB, multi_processor_count=114 (driver 535; pytorch/pytorch#110153's machine)"},
    {"cuda:h200", "NVIDIA H200", 90, 132, 143'156 * kMiB, kAssumedContextBytes, false,
     "torch total_memory=143156MB, multi_processor_count=132: github.com/ai-bot-pro/achatbot "
     "deploy/modal/src/llm/vllm/vlm/skywork_r1v.py"},
    {"cuda:a100", "NVIDIA A100-SXM4-80GB", 80, 108, 85'100'068'864, kAssumedContextBytes, false,
     "deviceQuery, driver 555.42.02: github.com/thamada/nvidia-smi gls/A100SXMx4_deviceQuery.py"},
    {"cuda:a100-pcie", "NVIDIA A100 80GB PCIe", 80, 108, 81'049 * kMiB, kAssumedContextBytes, false,
     "mixbench 'Total global mem: 81049 MB' (totalGlobalMem >> 20), driver 12.3: github.com/ekondis/mixbench/issues/47"},
    {"cuda:a100-40gb", "NVIDIA A100-SXM4-40GB", 80, 108, 42'298'834'944, kAssumedContextBytes, false,
     "deviceQuery, driver 12.2: github.com/bottlerocket-os/bottlerocket/pull/3873"},
    {"cuda:l4", "NVIDIA L4", 89, 58, 23'570'219'008, kAssumedContextBytes, false,
     "deviceQuery, driver 550.90.07: github.com/thamada/nvidia-smi gls/L4_deviceQuery.py"},
    {"cuda:l40s", "NVIDIA L40S", 89, 142, 47'803'596'800, kAssumedContextBytes, false,
     "deviceQuery, driver 550.127.05: github.com/thamada/nvidia-smi gls/L40S_deviceQuery.py"},
    {"cuda:a10g", "NVIDIA A10G", 86, 80, 22'587 * kMiB, kAssumedContextBytes, false,
     "torch total_memory=22587MB, multi_processor_count=80 (torch 2.15 nightly, cu130): TorchCodec's "
     "'Accelerated video decoding on GPUs with CUDA and NVDEC' example"},
    {"cuda:rtx4090", "NVIDIA GeForce RTX 4090", 89, 128, 25'386'352'640, kAssumedContextBytes, false,
     "deviceQuery, driver 550.127.05: github.com/thamada/nvidia-smi gls/RTX4090_deviceQuery.py"},
    {"cuda:rtx3090", "NVIDIA GeForce RTX 3090", 86, 82, 25'327'697'920, kAssumedContextBytes, false,
     "deviceQuery, driver 560.35.03: github.com/thamada/nvidia-smi gls/RTX3090_deviceQuery.py"},
    {"cuda:v100", "Tesla V100-SXM2-16GB", 70, 80, 16'928'342'016, kAssumedContextBytes, false,
     "deviceQuery, driver 12.4 (a public 8 x V100 printout)"},
    {"cuda:v100-32gb", "Tesla V100-SXM2-32GB", 70, 80, 34'089'926'656, kAssumedContextBytes, false,
     "deviceQuery, driver 11.6 and 13.0 (SDSC Expanse's GPU tutorial)"},
    {"cuda:b200", "NVIDIA B200", 100, 148, 182'642 * kMiB, kAssumedContextBytes, false,
     "torch total_memory=182642MB, multi_processor_count=148: github.com/ai-bot-pro/achatbot "
     "deploy/modal/src/llm/vllm/vlm/skywork_r1v.py"},
};

}  // namespace

const GpuModel* GpuCatalogBegin() { return std::begin(kGpuCatalog); }
const GpuModel* GpuCatalogEnd() { return std::end(kGpuCatalog); }

const GpuModel* FindGpuModel(std::string_view name) {
  for (const GpuModel& g : kGpuCatalog) {
    if (g.name == name) return &g;
  }
  return nullptr;
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
  // differ by architecture (the cuBLAS workspace, attention's backends).
  if (const GpuModel* g = FindGpuModel(text)) {
    c.target = KernelDevice::kCuda;
    c.cuda_arch = g->arch;
    c.sm_count = g->sm_count;
    c.total_memory_bytes = g->total_memory_bytes;
    c.context_bytes = g->context_bytes;
    c.description = std::string(g->description);
    return c;
  }
  std::string names;
  for (const GpuModel* g = GpuCatalogBegin(); g != GpuCatalogEnd(); ++g) names += ", " + std::string(g->name);
  *error = "unknown device '" + std::string(text) + "': expected auto (the device each tensor is on), cpu" + names;
  return std::nullopt;
}

CublasWorkspaces CublasWorkspaceBytes(const ExecutionContext& context) {
  if (context.target != KernelDevice::kCuda) return {};
  constexpr std::int64_t kKiB = 1024;
  const std::int64_t cublas = context.cuda_arch >= 90 ? 4096 * kKiB * 8 : 4096 * kKiB * 2 + 16 * 8 * kKiB;
  return {cublas, 1024 * kKiB};
}

}  // namespace peakmem
