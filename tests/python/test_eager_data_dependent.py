"""Steps that read a value from their data (peakmem.step.shadow_values):
``transformers``' mask code reads its position ids (``.all()`` of the
packed-sequence check, with ``use_cache=False``) and, for ``sdpa``, its
attention mask (``padding_mask.all()``). The eager front end takes those
values from the real integer inputs and the tensors made from them, so the
estimate equals the step run for real (measure_step, the profiler on the
CPU); a value that comes from floating-point data is a clear error naming
the call and the model's line."""

from __future__ import annotations

import pytest
import torch

import peakmem

transformers = pytest.importorskip("transformers")
from transformers_steps import tiny_config  # noqa: E402 (after the import it needs)


def _model(family: str, attention: str):
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(tiny_config(family, attention))


@pytest.mark.parametrize("family", ["llama", "gpt2"])
@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("mask", [None, "padded"])
def test_a_step_that_reads_its_ids_and_mask_is_estimated_as_it_runs(family, attention, mask):
    model = _model(family, attention)
    ids = torch.randint(0, 512, (2, 32), generator=torch.Generator().manual_seed(1))
    kwinputs = {"input_ids": ids, "labels": ids}
    if mask == "padded":  # a tokenizer's mask of a shorter second sequence
        kwinputs["attention_mask"] = torch.ones(2, 32, dtype=torch.long)
        kwinputs["attention_mask"][1, 24:] = 0
    step = {"kwinputs": kwinputs, "optimizer": torch.optim.AdamW, "frontend": "eager"}
    measured = peakmem.measure_step(model, **step)
    estimated = peakmem.estimate_step(model, **step)
    assert (estimated.peak_bytes, estimated.final_bytes) == (measured.peak_bytes, measured.final_bytes)


def test_a_value_of_floating_point_data_is_named_with_its_line():
    class Branching(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            y = self.lin(x)
            if y.sum().item() > 0:
                return y.sum()
            return (2 * y).sum()

    with pytest.raises(ValueError, match=r"aten._local_scalar_dense.default needs a tensor's value.*"
                                         r"test_eager_data_dependent.py:\d+ \(if y.sum\(\).item\(\) > 0:\)"):
        peakmem.estimate_step(Branching(), torch.randn(2, 4), frontend="eager")


class _Ctc(torch.nn.Module):
    """Frames to label scores, scored by torch's CTC loss."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(16, 8)

    def forward(self, frames, targets, frame_lengths, target_lengths):
        log_probs = self.proj(frames).log_softmax(-1).transpose(0, 1)
        return torch.nn.functional.ctc_loss(log_probs, targets, frame_lengths, target_lengths)


def test_an_op_without_a_meta_kernel_is_named_with_its_line():
    # _ctc_loss has no meta kernel; its lengths are real, its scores are not.
    frames, targets = torch.randn(2, 12, 16), torch.randint(1, 8, (2, 5))
    lengths = (torch.tensor([12, 10]), torch.tensor([5, 4]))
    with pytest.raises(ValueError, match=r"aten._ctc_loss.Tensor has no meta kernel.*at .*"
                                         r"test_eager_data_dependent.py:\d+ .*does not model this op yet"):
        peakmem.estimate_step(_Ctc(), frames, targets, *lengths, frontend="eager")
