// Where a program's kernels run: the device whose kernels' allocations the
// op rules describe.
//
// The same ATen call allocates different scratch on different devices (the
// rules in scratch.h, aten_ops.h and the runtime model say which): a CPU
// kernel wraps a Python number in a 0-d tensor of the device and copies
// operands of another dtype before an elementwise kernel, where CUDA's
// TensorIterator keeps the number on the host and casts inside the kernel;
// a CPU BLAS call clones operands BLAS cannot take, where cuBLAS takes any
// strided batch (see CudaProductCopies); CUDA libraries keep workspaces
// from their first call. A tensor on `meta` runs no kernel: it stands for
// the device the estimate targets.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace peakmem {

enum class KernelDevice : unsigned char { kCpu, kCuda };

struct ExecutionContext {
  // Unset: each tensor's kernels are its own device's as the trace or the
  // recording names it ("cuda:0" CUDA's, "cpu" and "meta" the CPU's). Set:
  // every tensor's kernels are this device's (an estimate for the GPU the
  // user will rent, made from a CPU or meta recording).
  std::optional<KernelDevice> target;
  // The CUDA GPU's compute capability, major * 10 + minor (90: H100 and
  // H200, 80: A100); 0 when the target is not a GPU model.
  int cuda_arch = 0;
  // Its streaming multiprocessors (flash attention's split heuristic):
  // 132 on an H100 SXM and an H200, 108 on an A100; 0 off a GPU model.
  int sm_count = 0;
  // The name the user gave ("cuda:h100"), for reports; empty: as traced.
  std::string name;
  // A GPU model's (GpuCatalog): what torch.cuda.get_device_properties()
  // .total_memory reports, and the CUDA context a PyTorch process holds
  // outside the caching allocator; 0 off a GPU model.
  std::int64_t total_memory_bytes = 0;
  std::int64_t context_bytes = 0;
  std::string description;  // "NVIDIA H100 80GB HBM3 (SXM)"

  // The kernels a tensor on `tensor_device` runs.
  KernelDevice KernelsFor(std::string_view tensor_device) const;
};

// A GPU people rent for training, as a target device names it.
//
// total_memory_bytes: cudaDeviceProp::totalGlobalMem, what
// torch.cuda.get_device_properties().total_memory reports and what the
// caching allocator, the CUDA context and everything else on the card
// share. It is the card's memory less what the driver reserves, and moves
// by tens of MiB between driver releases (an H100 SXM: 81,106 MiB under
// driver 565, 81,079 under 580): each entry is one public printout, named
// in `source`; a user's own card says its figure with
// torch.cuda.get_device_properties(0).total_memory (pass it as budget=).
//
// context_bytes: what a PyTorch process holds on the card that the caching
// allocator never sees (the CUDA context, its lazily loaded kernel modules,
// cuBLAS's and cuDNN's handles). PyTorch sets CUDA_MODULE_LOADING=LAZY
// (PR #86509: 254 MiB lazily against 616 MiB eagerly, on an unnamed GPU);
// public reports of torch 2.x range from 256 MiB (RTX 3090) to 426 MiB
// (RTX 6000 Ada, torch 2.10), and a bare context grows with the SM count
// (555 MiB on a 188-SM Blackwell). No torch 2.13 figure of any of these
// cards has been measured here: every entry takes kAssumedContextBytes
// until scripts/gpu_check.py measures it (its "context" row), and reports
// say so (context_measured false). context_bytes= overrides it.
struct GpuModel {
  std::string_view name;         // "cuda:h100"
  std::string_view description;  // the name torch.cuda.get_device_properties() gives, "(SXM)" added where it does not say
  int arch;                      // compute capability, major * 10 + minor
  int sm_count;
  std::int64_t total_memory_bytes;
  std::int64_t context_bytes;
  bool context_measured;
  std::string_view source;  // where total_memory_bytes was printed
};
inline constexpr std::int64_t kAssumedContextBytes = std::int64_t{512} << 20;

// Every GPU model a target device may name, "cuda" (a Hopper GPU: the
// H100 SXM's figures) first.
const GpuModel* GpuCatalogBegin();
const GpuModel* GpuCatalogEnd();
// The model named `name`, or nullptr.
const GpuModel* FindGpuModel(std::string_view name);

// Parses a target device: "cpu", "cuda" (a Hopper GPU, the default GPU
// model), a GpuCatalog name ("cuda:h100", "cuda:a100-40gb", ...) or
// "auto"/"" (as traced). nullopt with `error` set for anything else (the
// error lists the names).
std::optional<ExecutionContext> ParseTargetDevice(std::string_view text, std::string* error);

// The bytes cuBLAS's and cuBLASLt's workspaces take through the caching
// allocator once the first matrix product ran, and keep: ATen's
// CublasHandlePool.cpp parseChosenWorkspaceSize, CUBLAS_WORKSPACE_CONFIG
// unset (":4096:8", 32 MiB, on sm90 and later; ":4096:2:16:8", 8 MiB +
// 128 KiB, before) and getCUDABlasLtWorkspaceSize's default 1 MiB (its
// own 1 MiB request, not unified with cuBLAS's in torch 2.11). Measured on an H200 (torch 2.11):
// 34,603,008 bytes allocated in 35,651,584 reserved after a warm-up.
struct CublasWorkspaces {
  std::int64_t cublas = 0;
  std::int64_t cublas_lt = 0;
};
CublasWorkspaces CublasWorkspaceBytes(const ExecutionContext& context);

}  // namespace peakmem
