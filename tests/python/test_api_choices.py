"""The values the API's string options take are Literal types
(peakmem.api's Model, Convention, Allocator; peakmem.distribution.Strategy;
peakmem.step's Frontend and Gradient), and each is the set the code that
reads the option accepts: the engine's own lists where it has one."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, Optional, Unpack, get_args, get_type_hints

import pytest
import torch

import peakmem
from peakmem.api import Allocator, Convention, Model
from peakmem.distribution import STRATEGIES, Strategy
from peakmem.step import Frontend, Gradient
from peakmem.step.estimate import estimate_step
from peakmem.step.options import EstimateOptions


def test_the_literals_are_what_the_engine_accepts():
    assert list(get_args(Model)) == peakmem.available_models()
    with pytest.raises(ValueError) as e:
        peakmem.analyze("x = 1\n", allocator="bogus")
    listed = re.search(r"available allocators: (.*)$", str(e.value)).group(1).split(", ")
    assert list(get_args(Allocator)) == listed
    assert get_args(Strategy) == STRATEGIES
    assert set(get_args(Convention)) == {"auto", "forward", "backward", "plain"}


def test_estimate_steps_options_are_typed_by_them():
    assert get_type_hints(estimate_step)["options"] == Unpack[EstimateOptions]
    hints = get_type_hints(EstimateOptions)
    assert hints["allocator"] == Optional[Allocator]  # None: by the device (peakmem.step.budget)
    assert hints["strategy"] == Optional[Strategy]
    assert hints["frontend"] == Optional[Frontend] and get_args(Frontend) == ("thunder", "eager", "compile")
    assert hints["gradient"] == Optional[Gradient] and Gradient == Literal["ones"]


def test_measure_takes_convention_auto_as_analyze_does(thunder):
    def add(x, y):
        return x + y

    jitted = thunder.jit(add)
    jitted(torch.randn(64), torch.randn(64))
    trace = thunder.last_traces(jitted)[-1]
    auto, none = peakmem.measure(trace, convention="auto"), peakmem.measure(trace, convention=None)
    assert auto.convention == none.convention == "forward" and auto.peak_bytes == none.peak_bytes
    with pytest.raises(ValueError, match="convention must be 'auto', 'forward' or 'backward', got 'sideways'"):
        peakmem.measure(trace, convention="sideways")


def test_analyze_memory_model_is_spelt_so_and_model_is_its_old_spelling():
    trace = Path(__file__).resolve().parents[1] / "data" / "nvfusion_broadcast_fw.trace"
    thunders = peakmem.analyze(trace, memory_model="thunder")
    runtime = peakmem.analyze(trace)
    # The two models differ on this trace, so "same result" below says which one ran.
    assert (thunders.peak_bytes, thunders.final_bytes) != (runtime.peak_bytes, runtime.final_bytes)
    with pytest.warns(DeprecationWarning, match=r"analyze\(model=...\) is deprecated .*: pass memory_model="):
        old = peakmem.analyze(trace, model="thunder")
    assert (old.peak_bytes, old.final_bytes, old.breakdown) == (thunders.peak_bytes, thunders.final_bytes,
                                                                thunders.breakdown)
    with pytest.raises(TypeError, match=r"analyze\(\) got memory_model= and model=, its old spelling"):
        peakmem.analyze(trace, memory_model="thunder", model="thunder")
