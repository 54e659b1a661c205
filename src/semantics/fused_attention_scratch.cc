#include "peakmem/semantics/fused_attention_scratch.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace peakmem {
namespace {

std::int64_t CeilDiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
std::int64_t RoundUp(std::int64_t a, std::int64_t m) { return CeilDiv(a, m) * m; }

// flash_api.cpp num_splits_heuristic: the fewest splits whose wave
// efficiency is within 85 % of the best, among splits that change the
// number of key blocks each split takes.
std::int64_t NumSplitsHeuristic(std::int64_t batch_heads_mblocks, std::int64_t sms, std::int64_t n_blocks,
                                std::int64_t max_splits) {
  if (static_cast<double>(batch_heads_mblocks) >= 0.8 * static_cast<double>(sms)) return 1;
  max_splits = std::min({max_splits, sms, n_blocks});
  auto eligible = [&](std::int64_t s) { return s == 1 || CeilDiv(n_blocks, s) != CeilDiv(n_blocks, s - 1); };
  std::vector<double> efficiency;
  double best = 0;
  for (std::int64_t s = 1; s <= max_splits; ++s) {
    double e = 0;
    if (eligible(s)) {
      const double waves = static_cast<double>(batch_heads_mblocks * s) / static_cast<double>(sms);
      e = waves / std::ceil(waves);
      best = std::max(best, e);
    }
    efficiency.push_back(e);
  }
  for (std::int64_t s = 1; s <= max_splits; ++s) {
    if (eligible(s) && efficiency[s - 1] >= 0.85 * best) return s;
  }
  return 1;
}

std::int64_t HeadDimRounded(std::int64_t d) { return RoundUp(d, d <= 128 ? 32 : 64); }

// A [b, s, h, d] copy's bytes.
std::int64_t CopyBytes(const AttentionCall& c, std::int64_t len, std::int64_t dim) {
  return c.batch * len * c.heads * dim * c.itemsize;
}

}  // namespace

bool IsTransposedBshd(const Dims& shape, const Dims& strides) {
  if (shape.size() != 4 || strides.size() != 4) return false;
  const std::int64_t h = shape[1], s = shape[2], d = shape[3];
  auto same = [](std::int64_t extent, std::int64_t got, std::int64_t want) { return extent <= 1 || got == want; };
  return same(shape[0], strides[0], s * h * d) && same(h, strides[1], d) && same(s, strides[2], h * d) &&
         same(d, strides[3], 1);
}

ScratchEstimate FlashAttentionForwardScratch(const AttentionCall& c) {
  if (c.dropout != 0) return {};  // split-KV is not implemented with dropout
  const std::int64_t d = c.qk_dim;
  const std::int64_t block_n = d <= 64 ? 256 : (d <= 128 ? 128 : 64);
  const std::int64_t splits =
      NumSplitsHeuristic(c.batch * c.heads * CeilDiv(c.q_len, 64), 2 * c.sm_count, CeilDiv(c.kv_len, block_n), 128);
  if (splits <= 1) return {};
  ScratchEstimate out;
  out.with_outputs = splits * c.batch * c.heads * c.q_len * 4 +                     // softmax_lse_accum
                     splits * c.batch * c.heads * c.q_len * HeadDimRounded(d) * 4;  // out_accum
  return out;
}

ScratchEstimate FlashAttentionBackwardScratch(const AttentionCall& c) {
  ScratchEstimate out;
  const std::int64_t q_rounded = RoundUp(c.q_len, 128);
  out.with_outputs = c.batch * c.heads * q_rounded * 4 +                             // softmax_d
                     c.batch * q_rounded * c.heads * HeadDimRounded(c.qk_dim) * 4;  // dq_accum
  if (c.kv_heads != c.heads) out.with_outputs += 2 * CopyBytes(c, c.kv_len, c.qk_dim);  // dk, dv expanded
  if (!c.grad_out_bshd) out.with_outputs += CopyBytes(c, c.q_len, c.v_dim);
  if (!c.out_bshd) out.with_outputs += CopyBytes(c, c.q_len, c.v_dim);
  return out;
}

ScratchEstimate EfficientAttentionForwardScratch(const AttentionCall& c) {
  ScratchEstimate out;
  if (c.half && std::max(c.qk_dim, c.v_dim) > 128) out.with_outputs = c.batch * c.q_len * c.heads * c.v_dim * 4;
  return out;
}

ScratchEstimate EfficientAttentionBackwardScratch(const AttentionCall& c) {
  const std::int64_t b = c.batch, h = c.heads, m = c.q_len, n = c.kv_len, k = c.qk_dim, kv = c.v_dim;
  // The kernel: the first of cutlassB's list whose kMaxK fits the head dims
  // (block sizes BI x BJ); the 128 x 128 half kernel is taken where it fits
  // the GPU's shared memory, as on sm80 and sm90.
  const std::int64_t max_k = std::max(k, kv);
  std::int64_t bi = 128, bj = 64, kernel_max_k = 65536;
  if (max_k <= 32) {
    bi = 64, bj = 64, kernel_max_k = 32;
  } else if (max_k <= 64) {
    bi = 64, bj = 64, kernel_max_k = 64;
  } else if (max_k <= 128) {
    bi = 128, bj = c.half ? 128 : 64, kernel_max_k = 128;
  }
  const bool output_in_registers = c.half && kernel_max_k <= bi;
  const bool accumulate_kv = c.half && !output_in_registers;
  std::int64_t splits_key = CeilDiv(n, bj);
  if (b * h >= 256 && n <= 2 * bj) splits_key = 1;
  if (accumulate_kv) splits_key = std::min(splits_key, 200 / (b * h));
  splits_key = std::max<std::int64_t>(splits_key, 1);
  const std::int64_t gk = accumulate_kv ? splits_key * bj * RoundUp(k, bi) : 0;
  const std::int64_t gv = accumulate_kv ? splits_key * bj * RoundUp(kv, bi) : 0;
  const std::int64_t gq = CeilDiv(m, bi) * CeilDiv(k, bj) * (16 + 4 * bi * bj) / 4;  // GradQTempStorage, floats
  const std::int64_t workspace = b * h * RoundUp(gk + gv + gq, 4) * 4;
  ScratchEstimate out;
  const std::int64_t grad_copy = c.grad_out_bshd ? 0 : CopyBytes(c, m, kv);
  if (c.half) {
    out.with_outputs = grad_copy + b * h * m * 4 + workspace;  // delta, then the workspace beside it
  } else {
    // delta = (grad_out * out).sum(-1).transpose(-2, -1).contiguous(): the
    // product with its sum, then the sum with its contiguous copy, which
    // lives on beside the workspace.
    const std::int64_t product = b * m * h * kv * 4, sum = b * m * h * 4;
    out.with_outputs = grad_copy + std::max({product + sum, 2 * sum, sum + workspace});
  }
  return out;
}

}  // namespace peakmem
