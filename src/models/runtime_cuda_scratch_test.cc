// The runtime model with CUDA's kernels (RuntimeOptions::context,
// RuntimeModel::CudaScratch): a trace's op scratch as CUDA allocates it,
// whether the trace names CUDA tensors or a CPU trace is predicted for a
// GPU. Each figure is derived by hand in its comment.
#include <gtest/gtest.h>

#include <string>

#include "peakmem/models/runtime_model.h"
#include "test_util.h"

namespace peakmem {
namespace {

using testing_util::Parse;

Report Simulate(const std::string& text, const std::string& device) {
  std::string error;
  RuntimeOptions options;
  options.convention = CallingConvention::kForward;
  options.context = *ParseTargetDevice(device, &error);
  return RunRuntimeModel(Parse(text), options);
}

// torch.mul(a, 2.0) on f32[4]: a (16) and t0 (16) held; on the CPU the
// 2.0 is wrapped in a 0-d double (8) and cast to f32 (4) inside the op:
// peak 44. CUDA keeps the number on the host: peak 32.
constexpr const char* kMulByNumber = R"(def f(a):
  # a: "DEVICE f32[4]"
  t0 = torch.mul(a, 2.0)  # t0: "DEVICE f32[4]"
  return t0
)";

std::string On(std::string text, const std::string& device) {
  for (std::size_t at = text.find("DEVICE"); at != std::string::npos; at = text.find("DEVICE")) {
    text.replace(at, 6, device);
  }
  return text;
}

TEST(RuntimeCudaScratch, ACpuTraceForACudaTargetWrapsNoNumberOnTheDevice) {
  EXPECT_EQ(Simulate(On(kMulByNumber, "cpu"), "auto").peak_bytes, 44);
  EXPECT_EQ(Simulate(On(kMulByNumber, "cpu"), "cuda").peak_bytes, 32);
  EXPECT_EQ(Simulate(On(kMulByNumber, "meta"), "cuda:h100").peak_bytes, 32);
}

TEST(RuntimeCudaScratch, ACudaTraceRunsCudasKernelsAsTraced) {
  EXPECT_EQ(Simulate(On(kMulByNumber, "cuda:0"), "auto").peak_bytes, 32);
  // ... unless the CPU is named: its kernels' rules then apply.
  EXPECT_EQ(Simulate(On(kMulByNumber, "cuda:0"), "cpu").peak_bytes, 44);
}

TEST(RuntimeCudaScratch, MixedDtypesAreCastInsideCudasKernel) {
  // add(a f16[4], b f32[4]): on the CPU TensorIterator copies a to f32
  // (16 bytes) beside the 16-byte output; CUDA casts inside the kernel.
  // a 8 + b 16 + t0 16 = 40 on CUDA, 56 on the CPU.
  const std::string text = R"(def f(a, b):
  # a: "cpu f16[4]"
  # b: "cpu f32[4]"
  t0 = torch.add(a, b)  # t0: "cpu f32[4]"
  return t0
)";
  EXPECT_EQ(Simulate(text, "auto").peak_bytes, 56);
  EXPECT_EQ(Simulate(text, "cuda").peak_bytes, 40);
}

TEST(RuntimeCudaScratch, ACudaConvolutionIsNamedAsNotCounted) {
  const std::string text = R"(def f(x, w):
  # x: "cpu f32[1, 3, 8, 8]"
  # w: "cpu f32[4, 3, 3, 3]"
  t0 = torch.conv2d(x, w, None, 1, 0, 1, 1)  # t0: "cpu f32[1, 4, 6, 6]"
  return t0
)";
  const Report report = Simulate(text, "cuda");
  // x 768 + w 432 + t0 576: cuDNN's workspace is not known.
  EXPECT_EQ(report.peak_bytes, 768 + 432 + 576);
  // The CPU trace predicted for CUDA says so first; then the convolution.
  ASSERT_EQ(report.diagnostics.size(), 2u);
  EXPECT_NE(report.diagnostics[0].find("the trace's tensors are on the CPU"), std::string::npos)
      << report.diagnostics[0];
  EXPECT_NE(report.diagnostics[1].find("cuDNN's workspace is not counted"), std::string::npos)
      << report.diagnostics[1];
}

}  // namespace
}  // namespace peakmem
