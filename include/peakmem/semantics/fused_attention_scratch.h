// The workspaces CUDA's fused attention kernels allocate and free inside
// themselves (ATen's _scaled_dot_product_{flash,efficient}_attention and
// their backwards, which the eager front end runs on a CUDA target:
// python/peakmem/step/cuda_attention.py). Read from PyTorch 2.13's sources
// (the structure checked against the 2.13 cu130 wheel's libtorch_cuda.so);
// not yet measured on a GPU: scripts/gpu-check's eager steps check them.
// cuDNN's attention workspace is sized by cuDNN's heuristics and is not
// modelled.
#pragma once

#include <cstdint>

#include "peakmem/ir/trace.h"
#include "peakmem/semantics/scratch.h"

namespace peakmem {

// One call's operands, as [batch, heads, sequence, head dim] tensors.
struct AttentionCall {
  std::int64_t batch = 0, heads = 0, kv_heads = 0, q_len = 0, kv_len = 0, qk_dim = 0, v_dim = 0;
  int itemsize = 4;    // of q, k and v
  bool half = false;   // float16 or bfloat16
  double dropout = 0;  // dropout_p
  // Backward: whether grad_out and out are laid out as contiguous
  // [batch, sequence, heads, dim] (the kernels' own layout; otherwise each
  // is copied so first).
  bool grad_out_bshd = true, out_bshd = true;
  int sm_count = 132;  // the GPU's multiprocessors (execution_context.h)
};

// Whether [b, h, s, d] strides are those of a contiguous [b, s, h, d] tensor
// seen transposed (the fused kernels' layout).
bool IsTransposedBshd(const Dims& shape, const Dims& strides);

// flash_api.cpp mha_fwd's split-KV accumulators (set_params_splitkv): with
// no dropout and num_splits_heuristic above 1, softmax_lse_accum and
// out_accum in float32, freed when the kernel returns.
ScratchEstimate FlashAttentionForwardScratch(const AttentionCall& call);
// mha_bwd: softmax_d [b, h, round128(sq)] and dq_accum [b, round128(sq),
// h, round(d, 32 or 64)] in float32, grouped heads' expanded dk and dv, and
// the contiguous copies of grad_out and out (_flash_attention_backward).
ScratchEstimate FlashAttentionBackwardScratch(const AttentionCall& call);
// _efficient_attention_forward: a float32 output accumulator for half
// types whose head dim is above 128 (kNeedsOutputAccumulatorBuffer).
ScratchEstimate EfficientAttentionForwardScratch(const AttentionCall& call);
// _efficient_attention_backward: grad_out's contiguous copy, delta
// (float32 [b, h, sq] for half types; for float32 the product
// grad_out * out, its sum and that sum made contiguous) and the kernel's
// workspace (gk, gv, gq of the kernel the head dim selects).
ScratchEstimate EfficientAttentionBackwardScratch(const AttentionCall& call);

}  // namespace peakmem
