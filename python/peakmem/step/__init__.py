"""One training step, predicted (``estimate_step``) and measured (``measure_step``).

The step, as both functions run it (``steps`` times in a row; by default,
``steps=None``, as many as it takes for the step's memory to repeat: the
steady state of a training run, where the optimizer's state is held through
the forward and backward)::

    def step():
        for _ in range(accumulation_steps):    # the eager front end's micro-batches
            loss = model(*inputs)              # or loss_fn(model(*inputs), *inputs), traced together
            loss.backward()                    # gradient="ones": loss.backward(torch.ones_like(loss))
        if optimizer is not None:
            optimizer.step()
        if zero_grad:
            optimizer.zero_grad(set_to_none=True)   # the module's, without an optimizer
        # `loss` dies when step() returns

with the module's parameters and buffers held throughout and the caller
holding the inputs. Every byte a tensor holds counts: parameters, buffers and
inputs included.

Which front end makes the step: by default the one the user runs
(peakmem.step.frontend): a ``thunder.jit`` module's under Thunder, as
below, any other module's as eager PyTorch runs it (peakmem.step.eager);
``frontend=`` says it outright. ``recompute=`` with ``frontend="eager"``
plans selective activation checkpointing for the eager step
(peakmem.step.eager_recompute; the report's ``recomputation`` is an
``EagerRecomputation``, whose ``apply(model)`` installs it).

How Thunder's estimate is made (on ``meta`` inputs nothing is allocated): the
module is traced with ``thunder.jit`` (one call and one ``backward`` on the
given inputs), and the two execution traces are simulated by the runtime
model and joined with the identity of every tensor carried across (in C++,
peakmem/models/training_step.h, which ``peakmem step STEP.json`` runs on a
file ``export_step`` writes):

* forward: called as Thunder's autograd function calls it, the caller
  holding every argument (parameters, buffers, inputs);
* backward: called as ``ThunderFunction.backward`` calls it
  (thunder/executors/torch_autograd.py: ``compiled_backward([saved_tensors_list,
  saved_other], cotangents)`` after ``ctx.maybe_clear_saved_tensors()``), each
  saved tensor being the forward's own: a saved parameter, input or output is
  that tensor (held elsewhere, it costs the backward nothing and is never
  freed by it), two saved views of one forward storage are one storage with
  the forward's strides, and the cotangent (``torch.ones_like(loss)``, made
  by ``loss.backward()``, or by the caller with ``gradient="ones"``) is
  held until ``backward`` returns;
* gradients, as ``AccumulateGrad`` accumulates them
  (torch/csrc/autograd/functions/accumulate_grad.h): into an empty ``.grad``
  the backward's gradient is stolen (no copy) when it obeys the layout
  contract (the parameter's strides on every dimension of size other than 1)
  and nothing else holds it; into an existing ``.grad`` it is added in place
  and freed;
* the optimizer (``torch.optim.SGD``, ``Adam``, ``AdamW``; others are an
  error): its ``step()`` is written as a program of the tensor calls the
  single-tensor or foreach implementation makes (peakmem.optimizer_program) and
  simulated by the runtime model, its arguments the parameters, their
  ``.grad`` and the state kept from the step before, with the parameters,
  inputs and the loss held around it. The first step creates the state
  (Adam's ``step`` and moments, SGD's momentum buffers); it is held from
  then on.

``measure_step`` runs the same step for real on the CPU under the PyTorch
profiler (peakmem.measure's event walk), after one untimed warm-up step
(Thunder compiles on the first call) whose gradients are dropped.
"""

from __future__ import annotations

from .eager_recompute import EagerRecomputation
from .estimate import estimate_step
from .export import export_step
from .measure import measure_step
from .frontend import Frontend
from .options import EstimateOptions, RunOptions, StepOptions
from .report import CATEGORIES, StepReport
from .training_step import Gradient, Recompute, TrainingStep

__all__ = ["CATEGORIES", "EagerRecomputation", "EstimateOptions", "Frontend", "Gradient", "Recompute", "RunOptions", "StepOptions",
           "StepReport", "TrainingStep", "estimate_step", "export_step", "measure_step"]
