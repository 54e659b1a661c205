"""The eager front end on the `transformers` zoo (transformers_zoo.py: 27
families, eager_models.py's five included): one AdamW step each, the
estimate equal to the step run for real on the CPU (measure_step, the
profiler), to the byte, from the CPU model and from its meta copy. The
convolutions of ResNet and ConvNeXt that convolution_scratch.h's rules do
not cover are asked of oneDNN (step/cpu_kernel_probe.py), which the
diagnostics say.

Each family's step is taken every way it can be (``variants``: sdpa and
eager attention, no mask, an all-ones mask or a padded one, use_cache on
and off): the whole matrix is a long check (``pytest tests/python -m
long``); every run takes each family's default way and one other, which
rotates through the variants by the family's place in the zoo (a fixed
choice, so a failure reproduces)."""

from __future__ import annotations

import pytest
import torch

import peakmem
from transformers_zoo import ALL, ZOO, variant, variants


def _check(family: str, model, kwargs, meta_model, meta_kwargs) -> None:
    step = {"kwinputs": kwargs, "optimizer": torch.optim.AdamW, "frontend": "eager"}
    estimate = peakmem.estimate_step(model, **step)
    measured = peakmem.measure_step(model, **step)
    assert (estimate.peak_bytes, estimate.final_bytes) == (measured.peak_bytes, measured.final_bytes)
    on_meta = peakmem.estimate_step(meta_model, **{**step, "kwinputs": meta_kwargs})
    assert (on_meta.peak_bytes, on_meta.final_bytes) == (estimate.peak_bytes, estimate.final_bytes)


@pytest.mark.parametrize("family", sorted(ZOO))
def test_an_adamw_step_is_exact_on_cpu_and_meta(family):
    """The family's default step; on meta every input is a meta tensor."""
    _check(family, *ZOO[family]("cpu"), *ZOO[family]("meta"))


def _sampled() -> list[tuple[str, tuple]]:
    """Each family's variant number (its place in the zoo) mod its count,
    past the default (the first)."""
    out = []
    for i, family in enumerate(sorted(ALL)):
        ways = variants(family)
        if len(ways) > 1:
            out.append((family, ways[1 + i % (len(ways) - 1)]))
    return out


def _every() -> list[tuple[str, tuple]]:
    return [(family, way) for family in sorted(ALL) for way in variants(family)]


def _ids(params: list[tuple[str, tuple]]) -> list[str]:
    return [f"{f}-{a}-mask_{m}-cache_{c}" for f, (a, m, c) in params]


def _check_variant(family: str, way: tuple) -> None:
    """The CPU model and its meta copy, given the batch's real integer inputs."""
    _check(family, *variant(family, "cpu", *way), *variant(family, "meta", *way))


@pytest.mark.parametrize("family, way", _sampled(), ids=_ids(_sampled()))
def test_a_step_taken_another_way_is_exact(family, way):
    _check_variant(family, way)


@pytest.mark.long
@pytest.mark.parametrize("family, way", _every(), ids=_ids(_every()))
def test_every_way_of_every_family_is_exact(family, way):
    _check_variant(family, way)


def test_the_zoo_is_what_it_says():
    assert len(ALL) >= 25 and len(_every()) > 200
