// Target devices: their names, the workspaces CUDA libraries keep, and the
// ATen rules as CUDA's kernels run them.
#include "peakmem/semantics/execution_context.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "peakmem/semantics/aten_ops.h"

namespace peakmem {
namespace {

TEST(ExecutionContext, NamesParseToTheirKernelsAndArchitecture) {
  std::string error;
  const auto as_traced = ParseTargetDevice("auto", &error);
  ASSERT_TRUE(as_traced);
  EXPECT_FALSE(as_traced->target);
  EXPECT_EQ(as_traced->KernelsFor("cuda:0"), KernelDevice::kCuda);
  EXPECT_EQ(as_traced->KernelsFor("cpu"), KernelDevice::kCpu);
  EXPECT_EQ(as_traced->KernelsFor("meta"), KernelDevice::kCpu);  // meta stands for the CPU unless told
  const auto h100 = ParseTargetDevice("cuda:h100", &error);
  ASSERT_TRUE(h100);
  EXPECT_EQ(h100->KernelsFor("meta"), KernelDevice::kCuda);
  EXPECT_EQ(h100->KernelsFor("cpu"), KernelDevice::kCuda);
  EXPECT_EQ(h100->cuda_arch, 90);
  EXPECT_EQ(ParseTargetDevice("cuda:a100", &error)->cuda_arch, 80);
  EXPECT_EQ(ParseTargetDevice("cpu", &error)->KernelsFor("cuda:0"), KernelDevice::kCpu);
  EXPECT_FALSE(ParseTargetDevice("cuda:k80", &error));
  EXPECT_NE(error.find("unknown device 'cuda:k80'"), std::string::npos) << error;
  EXPECT_NE(error.find("cuda:h100"), std::string::npos) << error;
  EXPECT_NE(error.find("cuda:rtx4090"), std::string::npos) << error;
}

TEST(ExecutionContext, TheCatalogsCardsCarryTheirMemoryAndArchitecture) {
  std::string error;
  // deviceQuery's "Total amount of global memory: 81106 MBytes (85045477376 bytes)" on an H100 SXM.
  const auto h100 = ParseTargetDevice("cuda:h100", &error);
  EXPECT_EQ(h100->total_memory_bytes, 85'045'477'376);
  EXPECT_EQ((h100->total_memory_bytes + (1 << 19)) >> 20, 81'106);  // deviceQuery rounds to MiB
  EXPECT_EQ(h100->context_bytes, kAssumedContextBytes);
  // The PCIe card has 114 SMs (torch's multi_processor_count), the SXM 132.
  EXPECT_EQ(ParseTargetDevice("cuda:h100-pcie", &error)->sm_count, 114);
  EXPECT_EQ(ParseTargetDevice("cuda:h100-pcie", &error)->cuda_arch, 90);
  // torch prints total_memory=143156MB for an H200: 143156 * 2^20 bytes.
  EXPECT_EQ(ParseTargetDevice("cuda:h200", &error)->total_memory_bytes, 143'156LL * 1024 * 1024);
  EXPECT_EQ(ParseTargetDevice("cuda:l4", &error)->cuda_arch, 89);
  EXPECT_EQ(ParseTargetDevice("cuda:v100", &error)->cuda_arch, 70);
  EXPECT_EQ(ParseTargetDevice("cuda:b200", &error)->cuda_arch, 100);
  // "cuda" is a Hopper GPU: the H100 SXM's figures.
  EXPECT_EQ(ParseTargetDevice("cuda", &error)->total_memory_bytes, h100->total_memory_bytes);
  // Every card has its memory and a source for it, and is found by its name.
  for (const GpuModel* g = GpuCatalogBegin(); g != GpuCatalogEnd(); ++g) {
    EXPECT_GT(g->total_memory_bytes, 15LL << 30) << g->name;
    EXPECT_FALSE(g->source.empty()) << g->name;
    EXPECT_EQ(FindGpuModel(g->name), g);
  }
  EXPECT_EQ(FindGpuModel("cuda:k80"), nullptr);
  EXPECT_EQ(ParseTargetDevice("cpu", &error)->total_memory_bytes, 0);
}

TEST(ExecutionContext, CublasWorkspacesAreWhatAnH200Kept) {
  // Measured on an H200 (torch 2.11+cu130, docs/gpu-check-2026-12-04.md's
  // note): a warm-up's matrix products left 34,603,008 bytes allocated:
  // cuBLAS's 4096 KiB * 8 = 33,554,432 (sm90) and cuBLASLt's 1,048,576.
  std::string error;
  const CublasWorkspaces h200 = CublasWorkspaceBytes(*ParseTargetDevice("cuda:h200", &error));
  EXPECT_EQ(h200.cublas + h200.cublas_lt, 34'603'008);
  EXPECT_EQ(h200.cublas, 33'554'432);
  // Before sm90, CUBLAS_WORKSPACE_CONFIG's default ":4096:2:16:8":
  // 2 * 4 MiB + 8 * 16 KiB = 8,519,680 bytes.
  EXPECT_EQ(CublasWorkspaceBytes(*ParseTargetDevice("cuda:a100", &error)).cublas, 8'519'680);
  // No GPU, no workspace.
  EXPECT_EQ(CublasWorkspaceBytes(*ParseTargetDevice("cpu", &error)).cublas, 0);
}

ExecutionContext Cuda() {
  std::string error;
  return *ParseTargetDevice("cuda:h100", &error);
}

AtenArgument F32(std::string name, std::vector<std::int64_t> shape) {
  AtenArgument a;
  a.name = std::move(name);
  a.kind = AtenArgument::Kind::kTensor;
  a.type = *MakeTensorType("meta", "f32", Dims(shape.begin(), shape.end()), false, nullptr);
  a.strides = a.type.contiguous_strides;
  return a;
}

AtenArgument Float(std::string name) {
  AtenArgument a;
  a.name = std::move(name);
  a.kind = AtenArgument::Kind::kNumber;
  a.number = NumberKind::kFloat;
  return a;
}

TEST(ExecutionContext, CudasElementwiseKernelsWrapNothingOnTheDevice) {
  // div.Tensor(f32, 0.5): the CPU wraps the double (8 bytes) and casts it
  // (4); CUDA's TensorIterator keeps it a host scalar: nothing on the GPU.
  std::string why_not;
  const std::vector<AtenArgument> div = {F32("self", {128, 128}), Float("other")};
  EXPECT_EQ(EstimateAtenScratch("aten.div.Tensor", div, 1, &why_not).with_outputs, 12);
  EXPECT_EQ(EstimateAtenScratch("aten.div.Tensor", div, 1, &why_not, Cuda()).with_outputs, 0);
  EXPECT_EQ(why_not, "");
}

TEST(ExecutionContext, WhereMakesItsScalarTensorOnCudaToo) {
  // where.ScalarOther: at::scalar_tensor of the result's dtype on the
  // operand's device (4 bytes in f32), on either device.
  AtenArgument condition = F32("condition", {4});
  condition.type = *MakeTensorType("meta", "b8", Dims{4}, false, nullptr);
  const std::vector<AtenArgument> where = {condition, F32("self", {4}), Float("other")};
  std::string why_not;
  EXPECT_EQ(EstimateAtenScratch("aten.where.ScalarOther", where, 1, &why_not, Cuda()).with_outputs, 4);
}

TEST(ExecutionContext, ACudaConvolutionNamesCudnnsWorkspaceAsNotCounted) {
  std::vector<AtenArgument> conv = {F32("input", {1, 3, 8, 8}), F32("weight", {4, 3, 3, 3})};
  std::string why_not;
  const ScratchEstimate s = EstimateAtenScratch("aten.convolution.default", conv, 1, &why_not, Cuda());
  EXPECT_EQ(s.before_outputs + s.with_outputs, 0);
  EXPECT_EQ(why_not, "cuDNN's workspace is not modelled");
}

}  // namespace
}  // namespace peakmem
