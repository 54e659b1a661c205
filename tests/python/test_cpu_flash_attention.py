"""The CPU flash attention kernel's own buffers (semantics/aten_ops.cc,
CpuFlashAttentionScratch): a step through scaled_dot_product_attention on
the CPU, estimated on the eager front end, equals the step run for real
(measure_step, the profiler), at sequence lengths where the buffers decide
the peak, causal or not, on one thread and on two. Without the rule the
estimate was 786,688 bytes under at 256 queries and 4,195,328 at 1,024 (2
threads, causal, float32); in bfloat16 the kernel keeps reduced copies
besides."""

from __future__ import annotations

import pytest
import torch

import peakmem


class Attention(torch.nn.Module):
    """One attention layer whose output is summed directly: its gradient
    reaches the backward kernel expanded (zero strides), which copies it."""

    def __init__(self, width: int = 256, heads: int = 4, causal: bool = True):
        super().__init__()
        self.qkv, self.heads, self.causal = torch.nn.Linear(width, 3 * width), heads, causal

    def forward(self, x):
        batch, length, width = x.shape
        q, k, v = (t.view(batch, length, self.heads, width // self.heads).transpose(1, 2)
                   for t in self.qkv(x).split(width, -1))
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=self.causal).sum()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("length, causal, threads", [(256, True, 2), (1024, True, 2), (256, False, 2),
                                                     (256, True, 1)])
def test_the_flash_kernels_buffers_are_counted(length, causal, threads, dtype):
    # bf16 before its rule: 655,616 bytes under at 256 causal queries on 2
    # threads, 4,195,328 at 1,024 (its float32 scores and its bf16 copies).
    was = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        torch.manual_seed(0)
        model, x = Attention(causal=causal).to(dtype), torch.randn(2, length, 256, dtype=dtype)
        measured = peakmem.measure_step(model, x, frontend="eager")
        estimate = peakmem.estimate_step(model, x, frontend="eager")
    finally:
        torch.set_num_threads(was)
    assert (estimate.peak_bytes, estimate.final_bytes) == (measured.peak_bytes, measured.final_bytes)


def test_a_float16_forward_that_may_pack_is_named_as_not_counted():
    # 4 heads of 64: cpublas::need_pack(kHalf) decides, on the CPU's ISA.
    torch.manual_seed(0)
    model, x = Attention().to(torch.float16), torch.randn(2, 256, 256, dtype=torch.float16)
    estimate = peakmem.estimate_step(model, x, frontend="eager")
    assert any("f16 forward may pack its keys and values" in d for d in estimate.report.diagnostics)
