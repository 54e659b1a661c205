"""Selective activation checkpointing under Thunder
(peakmem.step.thunder_checkpoint): a SAC policy's choice runs as chosen,
every figure measured by running the step."""

from __future__ import annotations

import functools
from typing import Callable

import pytest

from step_models import GPT, checkpoint_first

BATCH, SEQ, LAYERS = 2, 64, 2


def _inputs():
    import torch

    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 512, (BATCH, SEQ), generator=g), torch.randint(0, 512, (BATCH, SEQ), generator=g)


def _model():
    import torch

    torch.manual_seed(0)
    return GPT(layers=LAYERS)


def _policy_saving(saved: Callable) -> Callable:
    from torch.utils.checkpoint import CheckpointPolicy

    def policy(ctx, func, *args, **kwargs):
        return CheckpointPolicy.MUST_SAVE if saved(func) else CheckpointPolicy.PREFER_RECOMPUTE

    return policy


def _selective(model, policy):
    """Each block's forward under checkpoint with `policy` (SAC)."""
    from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

    for block in model.blocks:
        block.forward = functools.partial(checkpoint, block.forward, use_reentrant=False,
                                          context_fn=functools.partial(create_selective_checkpoint_contexts, policy))
    return model


def _matmuls(func) -> bool:
    import torch

    aten = torch.ops.aten
    return func in (aten.addmm.default, aten.mm.default, aten._scaled_dot_product_flash_attention_for_cpu.default)


def _measured(model, **kw):
    import peakmem

    return peakmem.measure_step(model, *_inputs(), frontend="thunder", **kw)


@functools.lru_cache(maxsize=None)
def _plain_and_whole() -> tuple[int, int]:
    """The measured peaks of Thunder's step as is and with every block
    checkpointed whole."""
    return _measured(_model()).peak_bytes, _measured(checkpoint_first(_model(), LAYERS)).peak_bytes


def _loss_and_grads(thunder, model):
    loss = thunder.jit(model)(*_inputs())
    loss.backward()
    return loss.detach(), [p.grad for p in model.parameters()]


def test_a_policy_runs_as_it_chooses_and_is_estimated(thunder):
    import torch

    import peakmem
    from peakmem.step.thunder_checkpoint import selective_checkpointing

    plain, whole = _plain_and_whole()
    with selective_checkpointing():
        estimated = peakmem.estimate_step(_selective(_model(), _policy_saving(_matmuls)), *_inputs(),
                                          frontend="thunder")
        measured = _measured(_selective(_model(), _policy_saving(_matmuls)))
        # Saving everything is Thunder's step as is; saving nothing, checkpointing whole blocks.
        everything = _measured(_selective(_model(), _policy_saving(lambda f: True))).peak_bytes
        nothing = _measured(_selective(_model(), _policy_saving(lambda f: False))).peak_bytes
        loss, grads = _loss_and_grads(thunder, _selective(_model(), _policy_saving(_matmuls)))
    assert (estimated.peak_bytes, estimated.final_bytes) == (measured.peak_bytes, measured.final_bytes)
    # Below Thunder's step, and not checkpointing whole blocks (measured:
    # here whole blocks peak higher than the policy's choice).
    assert measured.peak_bytes < plain and measured.peak_bytes != whole, (whole, measured.peak_bytes, plain)
    assert (everything, nothing) == (plain, whole)
    loss0, grads0 = _loss_and_grads(thunder, _model())
    assert torch.equal(loss, loss0) and all(torch.equal(a, b) for a, b in zip(grads, grads0))


def test_without_it_thunder_ignores_the_policy(thunder):
    # Thunder's own lookaside warns and checkpoints the blocks whole.
    with pytest.warns(UserWarning, match="context_fn is not supported in Thunder"):
        ignored = _measured(_selective(_model(), _policy_saving(_matmuls))).peak_bytes
    assert ignored == _plain_and_whole()[1]


def test_the_policy_is_asked_as_pytorch_asks_it(thunder):
    """Once per operator of the forward, in PyTorch's order, with
    is_recompute False: the calls a policy counting its calls sees under
    PyTorch's own forward (the SAC ILP plans' policies count so)."""
    from peakmem.step.thunder_checkpoint import selective_checkpointing

    def asked(log):
        def policy(ctx, func, *args, **kwargs):
            log.append((str(func), ctx.is_recompute))
            return _policy_saving(_matmuls)(ctx, func, *args, **kwargs)
        return policy

    eager: list = []
    model = _selective(_model(), asked(eager))
    model(*_inputs())  # PyTorch's forward only: its recomputation would ask again
    traced: list = []
    with selective_checkpointing():
        thunder.jit(_selective(_model(), asked(traced)))(*_inputs())
    assert traced == eager and len(eager) > 20 and not any(r for _, r in eager)
    assert ("aten.addmm.default", False) in eager  # the matmuls the policy saves are asked about


def test_a_function_calling_otherwise_under_thunder_is_refused(thunder):
    from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

    from peakmem.step.thunder_checkpoint import selective_checkpointing

    calls = [0]

    def block(x):
        calls[0] += 1
        return x.sin() if calls[0] % 2 else x.cos().exp()  # one call eagerly, two under Thunder

    def f(x):
        return checkpoint(block, x, use_reentrant=False,
                          context_fn=functools.partial(create_selective_checkpoint_contexts,
                                                       _policy_saving(lambda func: False)))

    import torch

    with selective_checkpointing(), pytest.raises(Exception, match=r"makes different calls under Thunder and "
                                                                    r"eagerly.*call 0 is cos under Thunder and sin"):
        thunder.jit(f)(torch.ones(4, requires_grad=True))


def test_a_context_fn_not_from_sac_is_refused(thunder):
    import contextlib

    import torch
    from torch.utils.checkpoint import checkpoint

    from peakmem.step.thunder_checkpoint import selective_checkpointing

    def f(x):
        return checkpoint(torch.sin, x, use_reentrant=False,
                          context_fn=lambda: (contextlib.nullcontext(), contextlib.nullcontext()))

    with selective_checkpointing(), pytest.raises(Exception, match="create_selective_checkpoint_contexts"):
        thunder.jit(f)(torch.ones(4, requires_grad=True))


def test_selective_checkpointing_gives_thunders_own_back(thunder):
    import torch.utils.checkpoint
    from thunder.core.jit_ext import _general_jit_lookaside_map as registry

    from peakmem.step import thunder_checkpoint

    thunders = registry[torch.utils.checkpoint.checkpoint]
    with thunder_checkpoint.selective_checkpointing():
        assert registry[torch.utils.checkpoint.checkpoint] is not thunders
    assert registry[torch.utils.checkpoint.checkpoint] is thunders
