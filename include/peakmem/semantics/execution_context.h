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

  // The kernels a tensor on `tensor_device` runs.
  KernelDevice KernelsFor(std::string_view tensor_device) const;
};

// Parses a target device: "cpu", "cuda" (a Hopper GPU, the default GPU
// model), "cuda:h100", "cuda:h200", "cuda:a100" or "auto"/"" (as traced).
// nullopt with `error` set for anything else (the error lists the names).
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
