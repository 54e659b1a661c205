// What each registry scratch rule (op_registry.h ScratchRule) is when
// CUDA's kernels run the call: the one place both front ends ask (the
// runtime model's RuntimeModel::CudaScratch for traces, aten_ops.cc for
// ATen calls), each answer with the kernel source it follows:
//   - kNone: elementwise kernels wrap and cast nothing on the device: a
//     Python number stays a CPU scalar TensorIterator hands the kernel, and
//     operands of another dtype are cast inside it (TensorIterator.cpp
//     compute_types promotes inputs through temporaries only when the
//     common device is the CPU);
//   - kAsOnTheCpu: where(cond, x, 2.0) makes at::scalar_tensor of the
//     result's dtype on the operand's device (TensorCompare.cpp); Thunder's
//     `*_vjp` gradients recompute their forward on any device; cuBLAS takes
//     row- and column-major operands as CPU BLAS does (cuBlasCommonArgs.h
//     prepare_matrix_for_cublas), and matmul's folding and batching are one
//     composite for both (LinearAlgebra.cpp _matmul_impl);
//   - kCudnnWorkspace: cuDNN's convolution workspace, whose size cuDNN's
//     heuristics choose (Conv_v8.cpp run_conv_plan): not counted, named;
//   - kFusedAttention: the fused attention kernels' workspaces
//     (fused_attention_scratch.h), which need the call's arguments by name
//     (the ATen path; a trace's call is named as not counted);
//   - kLayerNormBackward: layer_norm_backward_cuda's gamma and beta
//     gradients take no buffer up to 65,536 rows; above, partial sums
//     (LaunchGammaBetaBackwardCUDAKernel's dgamma_blocks) that are not
//     modelled, named;
//   - kNotModelled: the CPU kernels' other rules, whose CUDA kernels are
//     not read yet: not counted, named.
#pragma once

#include "peakmem/semantics/op_registry.h"

namespace peakmem {

enum class CudaScratch : unsigned char {
  kNone,
  kAsOnTheCpu,
  kCudnnWorkspace,
  kFusedAttention,
  kLayerNormBackward,
  kNotModelled
};

constexpr CudaScratch CudaScratchOf(ScratchRule rule) {
  switch (rule) {
    case ScratchRule::kNone:
    case ScratchRule::kWrappedScalars:
    case ScratchRule::kWrappedBase:
      return CudaScratch::kNone;
    case ScratchRule::kWhereScalar:
    case ScratchRule::kRecomputedForward:
    case ScratchRule::kBlasOperandClones:
      return CudaScratch::kAsOnTheCpu;
    case ScratchRule::kConvolution:
    case ScratchRule::kConvolutionBackward:
      return CudaScratch::kCudnnWorkspace;
    case ScratchRule::kFusedAttention:
      return CudaScratch::kFusedAttention;
    case ScratchRule::kLayerNormBackward:
      return CudaScratch::kLayerNormBackward;
    default:
      return CudaScratch::kNotModelled;
  }
}

}  // namespace peakmem
