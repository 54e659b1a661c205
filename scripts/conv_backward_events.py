"""What one CPU aten::convolution_backward allocates, as the profiler sees
it: the allocation sequence (bytes, frees negative, the returned gradients
named) that include/peakmem/semantics/convolution_scratch.h's backward rule
reproduces (src/semantics/convolution_scratch_test.cc quotes such lists).

    .venv/bin/python scripts/conv_backward_events.py 2 3 32 64 8 --stride 8 --bias --threads 2
    # N C_in H(=W) C_out k [--stride S] [--padding P] [--input-grad] [--no-weight-grad] [--bias] [--threads T]

float32, contiguous operands, oneDNN limited to AVX2 as the test suite runs
it (ONEDNN_MAX_CPU_ISA=AVX2 unless the environment sets it).
"""

from __future__ import annotations

import argparse
import os


def allocation_sequence(prof, returned: dict[int, str]) -> list:
    """The CPU allocations and frees under the aten::convolution_backward node,
    in time order; allocations still live at the end named by `returned`
    (data_ptr -> name) as "name:bytes"."""
    from torch._C._profiler import _EventType

    def find(nodes):
        for n in nodes:
            if n.tag != _EventType.Allocation and n.name == "aten::convolution_backward":
                return n
            hit = find(n.children)
            if hit is not None:
                return hit
        return None

    events = []

    def walk(n):
        if n.tag == _EventType.Allocation:
            f = n.extra_fields
            if f.device.type == "cpu":
                events.append((n.start_time_ns, f.ptr, f.alloc_size))
            return
        for c in n.children:
            walk(c)

    walk(find(prof.profiler.kineto_results.experimental_event_tree()))
    events.sort(key=lambda e: e[0])
    seq: list = []
    live: dict[int, int] = {}
    for _, ptr, size in events:
        if size > 0:
            live[ptr] = len(seq)
        else:
            live.pop(ptr, None)
        seq.append(size)
    for ptr, i in live.items():
        seq[i] = f"{returned.get(ptr, '?')}:{seq[i]}"
    return seq


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("batch", "in_channels", "size", "out_channels", "kernel"):
        p.add_argument(name, type=int)
    p.add_argument("--stride", type=int, default=1)
    p.add_argument("--padding", type=int, default=0)
    p.add_argument("--input-grad", action="store_true")
    p.add_argument("--no-weight-grad", action="store_true")
    p.add_argument("--bias", action="store_true")
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX2")
    import torch

    torch.set_num_threads(a.threads)
    out = (a.size + 2 * a.padding - a.kernel) // a.stride + 1
    x = torch.randn(a.batch, a.in_channels, a.size, a.size)
    w = torch.randn(a.out_channels, a.in_channels, a.kernel, a.kernel)
    grad = torch.randn(a.batch, a.out_channels, out, out)
    mask = [a.input_grad, not a.no_weight_grad, a.bias]
    args = (grad, x, w, [a.out_channels] if a.bias else None, [a.stride] * 2, [a.padding] * 2, [1, 1], False,
            [0, 0], 1, mask)
    torch.ops.aten.convolution_backward(*args)  # first call: oneDNN's primitive caches
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        result = torch.ops.aten.convolution_backward(*args)
    returned = {t.data_ptr(): name for t, name in zip(result, ("grad_input", "grad_weight", "grad_bias"))
                if t is not None and t.numel() > 0}
    print(allocation_sequence(prof, returned))


if __name__ == "__main__":
    main()
