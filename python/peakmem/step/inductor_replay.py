"""A torch.compile'd step recorded from the program Inductor generates.

A compiled step allocates what Inductor's generated wrapper allocates, not
what the eager step would: its fused kernels write into buffers the wrapper
makes (``empty_strided_cpu``), reuses (``# reuse``) and frees (``del``), its
extern kernels write into them (``extern_kernels.addmm(..., out=buf)``),
and AOTAutograd's partitioner chooses what the forward hands the backward.
So the step is recorded with those programs:

1. The module the user compiled is compiled again, on its meta replica,
   with the user's backend options (mode and ``options=``, ``dynamic``,
   ``fullgraph``) by :class:`InductorOnTheCpu`, a backend that hands
   Inductor each graph as the CPU runs it: the graph's inputs are fake CPU
   tensors of the same sizes, strides and dtypes, and a ``meta`` device the
   graph names is the CPU. Inductor on ``meta`` inputs would generate a
   different program (every op an ATen fallback, nothing saved), so it is
   never asked to.
2. Each generated program (forward and backward, one per graph between
   graph breaks) is run by the recording through a copy of its ``call``
   whose allocations are made on ``meta``: ``empty_strided_cpu`` and the
   ``device`` it names give meta tensors, ``reinterpret_tensor`` is the
   view it is (``as_strided`` at the added offset), and Inductor's own C++
   kernels, which write into buffers already made and allocate nothing
   through PyTorch's allocator, do nothing. Extern kernels and ATen
   fallbacks run as ATen calls on meta, so the recording prices them by
   the registry's rules as in an eager step. The module Inductor loaded is
   not touched: another compile of the same code (the user's own) runs it.
3. One unrecorded step compiles the programs (the forward at the first
   call, the backward at the first backward); the recorded steps then run
   them under the stance ``fail_on_recompile``, so a guard that fails in
   the recording is an error, never a silent recompile under the recording.

What is not modelled is refused (CompiledStepError, naming it): a backend
other than Inductor, autotuning modes and options (their choice is
benchmarked on real data), a compiled module inside the model, a module
compiled in place, and a CUDA target (its wrapper needs the GPU's Triton
kernels compiled for it).
"""

from __future__ import annotations

import contextlib
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Iterator

from .compiled import CompiledStepError

__all__ = ["CompileSpec", "InductorOnTheCpu", "compile_failures_named", "compiled_specs", "compiling_for_the_cpu",
           "is_compiled_module", "no_recompiles", "recompiled", "replayed_callback"]

# Options whose programs depend on timing kernels on real data (torch/_inductor/config.py).
_BENCHMARKED = ("max_autotune", "max_autotune_gemm", "max_autotune_pointwise", "coordinate_descent_tuning")


def is_compiled_module(model: Any) -> bool:
    """Whether `model` is what ``torch.compile(module)`` returns."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    return eval_frame is not None and isinstance(model, eval_frame.OptimizedModule)


def _backend(callback: Any) -> Any:
    """The backend at the end of Dynamo's callback wrappers
    (CatchErrorsWrapper, ConvertFrame, WrapBackendDebug each keep the one
    they wrap as ``_torchdynamo_orig_backend``)."""
    seen = 0
    while hasattr(callback, "_torchdynamo_orig_backend") and seen < 16:
        callback = callback._torchdynamo_orig_backend
        seen += 1
    # torch.compile(backend=<a callable>) wraps it in a _TorchCompileWrapper
    # (torch/__init__.py) that keeps it as `compiler_fn`.
    if type(callback).__name__ == "_TorchCompileWrapper":
        callback = getattr(callback, "compiler_fn", callback)
    return callback


@dataclass(frozen=True)
class CompileSpec:
    """How the user compiled a module: Inductor's config patches (the
    mode's and ``options=``), ``dynamic`` and ``fullgraph``."""

    config: dict = field(default_factory=dict)
    dynamic: bool | None = None
    fullgraph: bool = False

    def compile(self, module: Any, in_place: bool) -> tuple[Any, "InductorOnTheCpu"]:
        """`module` compiled as the user compiled theirs, with an
        InductorOnTheCpu as the backend: ``torch.compile(module)``'s module,
        or `module` itself compiled `in_place` (``module.compile()``); and
        the backend. ``dynamic=None``
        (torch.compile's default) compiles static shapes first, and only a
        later call with other shapes compiles them dynamic: the program a
        step of fixed shapes runs is the static one, so that is the one
        compiled, whatever sizes Dynamo saw before in this process.
        ``isolate_recompiles``: each replica's programs are its own, kept
        apart from other compiles of the same code (another estimate's
        replica of the same shapes, the user's own compile, whose first
        compile stays static)."""
        import torch

        backend = InductorOnTheCpu(self.config)
        options = {"backend": backend, "dynamic": bool(self.dynamic), "fullgraph": self.fullgraph,
                   "isolate_recompiles": True}
        if not in_place:
            return torch.compile(module, **options), backend
        module.compile(**options)
        return module, backend


def _context(module: Any, where: str) -> Any:
    """The Dynamo context that compiled `module` (an OptimizedModule's, or
    the one in the closure of the ``_call_impl`` that ``.compile()``
    compiled in place); None when it is not compiled."""
    if is_compiled_module(module):
        return module.dynamo_ctx
    impl = getattr(module, "_compiled_call_impl", None)
    if impl is None:
        return None
    eval_frame = sys.modules["torch._dynamo.eval_frame"]
    for cell in getattr(impl, "__closure__", None) or ():
        if isinstance(cell.cell_contents, eval_frame._TorchDynamoContext):
            return cell.cell_contents
    raise CompiledStepError(f"{where}: compiled in place by a torch.compile whose options peakmem cannot read")


def _spec(context: Any, where: str) -> CompileSpec:
    """The CompileSpec of a Dynamo context; CompiledStepError for what this
    front end does not model."""
    backend = _backend(context.callback)
    if getattr(backend, "compiler_name", None) != "inductor" or not isinstance(getattr(backend, "config", None),
                                                                                 dict):
        name = getattr(backend, "compiler_name", None) or getattr(backend, "__name__", type(backend).__name__)
        raise CompiledStepError(f"{where} is compiled with the backend {name!r}; peakmem models Inductor's "
                                "programs (torch.compile's default backend) only")
    config = dict(backend.config)
    tuned = [k for k in _BENCHMARKED if config.get(k)]
    if tuned:
        raise CompiledStepError(f"{where} is compiled with {', '.join(tuned)}: Inductor picks its kernels by "
                                "timing them on real data, which peakmem cannot predict; compile it in the "
                                "default mode (or without those options) to estimate it")
    return CompileSpec(config=config, dynamic=getattr(backend, "dynamic", None), fullgraph=bool(context.fullgraph))


def compiled_specs(model: Any, target: Any = None) -> dict[str, CompileSpec]:
    """Each module of `model` that ``torch.compile`` compiled (the model
    itself, an OptimizedModule inside it, a module compiled in place by
    ``.compile()``), by its path (``""``: the model; paths are those of
    the module an OptimizedModule at the top wraps), with how it was
    compiled, for `target` (a peakmem.step.device_target.DeviceTarget;
    None: the CPU). CompiledStepError for what this front end does not
    model: a compiled ``forward`` function, a compiled part inside another,
    a GPU target, and _spec's."""
    from .compiled import compiled_parts

    specs: dict[str, CompileSpec] = {}
    if is_compiled_module(model):
        specs[""] = _spec(model.dynamo_ctx, "the module")
        model = model._orig_mod
    functions = [p for p in compiled_parts(model) if "forward is a torch.compile'd function" in p]
    if functions:
        raise CompiledStepError(f"{'; '.join(functions)}: a compiled forward function is not modelled (its "
                                "compile is the class's, not the module's): compile the module instead "
                                "(torch.compile(module) or module.compile())")
    for path, module in model.named_modules():
        context = _context(module, path or "(top)") if path or "" not in specs else None
        if context is None:
            continue
        inside = [p for p in compiled_parts(module._orig_mod if is_compiled_module(module) else module)
                  if not p.startswith("(top)")]
        if specs and (inside or any(path.startswith(f"{p}.") or not p for p in specs)):
            raise CompiledStepError(f"{path or '(top)'} is compiled inside a compiled module "
                                    f"({'; '.join(inside) or 'its parent'}); peakmem records each compiled "
                                    "module once: compile the outer one or the inner ones")
        specs[path] = _spec(context, path or "the module")
    if specs and target is not None and target.cuda:
        raise CompiledStepError(f"a torch.compile'd step is modelled on the CPU only: Inductor's program for "
                                f"{target.name} is made of Triton kernels compiled for that GPU, which this "
                                "machine cannot generate; estimate it with device='cpu', or the module before "
                                "compiling it with frontend='eager'")
    return specs


def recompiled(replica: Any, specs: dict[str, CompileSpec]) -> tuple[Any, list["InductorOnTheCpu"]]:
    """The meta replica of a model with each compiled part compiled again
    by an InductorOnTheCpu as `specs` say (an OptimizedModule the replica
    copied is replaced; a module compiled in place, whose compile a copy
    does not keep, is compiled in place), and the backends."""
    backends = []
    for path, spec in specs.items():
        if not path:
            continue
        parent, _, name = path.rpartition(".")
        owner = replica.get_submodule(parent) if parent else replica
        module = getattr(owner, name)
        wrapped = is_compiled_module(module)
        module, backend = spec.compile(module._orig_mod if wrapped else module, in_place=not wrapped)
        setattr(owner, name, module)
        backends.append(backend)
    if "" in specs:  # an OptimizedModule at the top, unwrapped before the replica was made
        replica, backend = specs[""].compile(replica, in_place=False)
        backends.append(backend)
    return replica, backends


def replayed_callback(callback: Any) -> bool:
    """Whether a Dynamo callback compiles with InductorOnTheCpu."""
    return isinstance(_backend(callback), InductorOnTheCpu)


def _on_the_cpu(x: Any) -> Any:
    import torch

    return torch.device("cpu") if isinstance(x, torch.device) and x.type == "meta" else x


def _graph_on_the_cpu(gm: Any) -> None:
    """A meta device the Dynamo graph names (a factory the forward calls
    under the recording's ``torch.device("meta")``) is the CPU's."""
    from torch.utils._pytree import tree_map

    for node in gm.graph.nodes:
        node.args = tree_map(_on_the_cpu, node.args)
        node.kwargs = tree_map(_on_the_cpu, node.kwargs)
    gm.recompile()


def _cpu_inputs(example_inputs: list) -> list:
    """Fake CPU tensors of the example inputs' sizes, strides, dtypes and
    requires_grad, in Dynamo's fake mode (nothing allocated)."""
    import torch
    from torch._guards import detect_fake_mode

    fake_mode = detect_fake_mode(example_inputs)
    made = []
    with fake_mode:
        for x in example_inputs:
            if isinstance(x, torch.Tensor) and x.device.type == "meta":
                y = torch.empty_strided(x.size(), x.stride(), dtype=x.dtype, device="cpu")
                made.append(y.requires_grad_(x.requires_grad) if x.requires_grad else y)
            else:
                made.append(x)
    return made


def _dense(size: Any, stride: Any) -> bool:
    """Whether a layout covers a block of exactly its elements (a
    permutation of a contiguous one)."""
    extent = 1
    for n, s in sorted(zip(size, stride), key=lambda d: d[1]):
        if n == 1:
            continue
        if s != extent:
            return False
        extent *= n
    return True


def _meta_call(call: Any) -> Any:
    """A copy of a generated program's ``call`` (a module function or a
    bound method of its ``Runner``) whose globals make its buffers on meta
    and whose C++ kernels do nothing (see the module docstring)."""
    import torch

    function = getattr(call, "__func__", call)
    names = dict(function.__globals__)
    meta = torch.device("meta")

    def empty_strided_cpu(size, stride, dtype):
        return torch.empty_strided(size, stride, dtype=dtype, device=meta)

    def reinterpret_tensor(base, size, stride, offset):
        # torch/csrc/dynamo/guards.cpp _reinterpret_tensor: a view of base's
        # storage at base's offset plus `offset`.
        return base.as_strided(size, stride, base.storage_offset() + offset)

    def nothing(*_args, **_kwargs):
        return None

    checked = names.get("assert_size_stride")

    def assert_size_stride(t, size, stride, *rest):
        # Inductor states the layout the CPU kernel of each fallback gives
        # (a convolution's channels-last output). Meta kernels pick layouts
        # for CUDA (torch/_meta_registrations.py device_hint): the stand-in
        # takes the stated layout when it is the same dense block of memory.
        if tuple(t.shape) == tuple(size) and tuple(t.stride()) != tuple(stride) and _dense(size, stride) \
                and _dense(t.shape, t.stride()):
            t.as_strided_(size, stride)
        elif checked is not None:
            checked(t, size, stride, *rest)

    for name, value in list(names.items()):
        if name.startswith("cpp_fused") or type(value).__name__ == "CppPythonBindingsFunction":
            names[name] = nothing
    names.update(empty_strided_cpu=empty_strided_cpu, reinterpret_tensor=reinterpret_tensor,
                 assert_size_stride=assert_size_stride,
                 device=lambda *_a, **_k: meta)
    unknown = [n for n in ("empty_strided_cuda", "empty_strided_xpu") if n in function.__code__.co_names]
    if unknown:
        raise CompiledStepError(f"Inductor's program allocates with {', '.join(unknown)}: not a CPU program")
    copy = types.FunctionType(function.__code__, names, function.__name__, function.__defaults__,
                              function.__closure__)
    owner = getattr(call, "__self__", None)
    return copy if owner is None else types.MethodType(copy, owner)


class InductorOnTheCpu:
    """A torch.compile backend: Inductor's program for the CPU, run on meta
    (the module docstring's 1 and 2). ``programs``: the programs compiled,
    each ``(AOT id, source)``."""

    def __init__(self, config: dict) -> None:
        self.config = dict(config)
        self.programs: list[tuple[str, str]] = []

    def _inner_compile(self, gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
        from torch._inductor.compile_fx import compile_fx_inner

        compiled = compile_fx_inner(gm, example_inputs, **kwargs)
        call = getattr(compiled, "current_callable", None)
        if call is None or not hasattr(getattr(call, "__func__", call), "__globals__"):
            raise CompiledStepError(f"Inductor's compiled graph ({type(compiled).__name__}) has no Python "
                                    "wrapper peakmem can run (a C++ wrapper, cpp_wrapper=True, is not modelled)")
        compiled.current_callable = _meta_call(call)
        self.programs.append(("backward" if kwargs.get("is_backward") else "forward",
                              getattr(compiled, "source_code", "")))
        return compiled

    def __call__(self, gm: Any, example_inputs: list) -> Any:
        from torch._inductor.compile_fx import compile_fx

        _graph_on_the_cpu(gm)
        return compile_fx(gm, _cpu_inputs(example_inputs), inner_compile=self._inner_compile,
                          config_patches=self.config)


@contextlib.contextmanager
def compiling_for_the_cpu() -> Iterator[None]:
    """While the replica compiles: every fake tensor Dynamo, AOTAutograd and
    Inductor make for a meta one is a CPU tensor (FakeTensor's device is
    the one ``FakeTensor._normalize_fake_device`` gives, so a meta device is
    the CPU there), so the graphs are traced as the CPU runs them: a
    ``torch.tensor([], device=x.device)`` in the forward (transformers'
    DynamicLayer) is a CPU tensor as in the user's run, where on meta Dynamo
    would make it a real meta tensor and fail. Inductor's and AOTAutograd's
    caches are off: a cache hit would hand back a program without calling
    the backend's inner compile."""
    import torch
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config
    from torch._subclasses.fake_tensor import FakeTensor

    import torch._dynamo.config as dynamo_config

    # Each estimate compiles a replica of its own: Dynamo keeps an entry per
    # replica on the forward's code, and past its recompile limit (8) it
    # would run the next one eagerly.
    normalize = FakeTensor.__dict__["_normalize_fake_device"]
    cpu = torch.device("cpu")

    def on_the_cpu(device: Any) -> Any:
        return cpu if device.type == "meta" else normalize.__func__(device)

    FakeTensor._normalize_fake_device = staticmethod(on_the_cpu)
    try:
        with inductor_config.patch(fx_graph_cache=False, fx_graph_remote_cache=False), \
                functorch_config.patch(enable_autograd_cache=False), \
                dynamo_config.patch(recompile_limit=1 << 20, accumulated_recompile_limit=1 << 20):
            yield
    finally:
        FakeTensor._normalize_fake_device = normalize


@contextlib.contextmanager
def compile_failures_named() -> Iterator[None]:
    """A failure of Dynamo or Inductor while the replica compiles, as a
    CompiledStepError naming it (the one this module raised inside the
    backend as it is)."""
    from torch._dynamo.exc import TorchDynamoException

    try:
        yield
    except TorchDynamoException as e:
        inner = getattr(e, "inner_exception", None) or e.__cause__
        if isinstance(inner, CompiledStepError):
            raise inner from None
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise CompiledStepError(
            f"torch.compile could not compile the step for the estimate ({type(e).__name__}: {first}); the "
            "estimate compiles a meta replica of the module as the CPU would: estimate the module run eagerly "
            "(frontend='eager'), or measure the compiled step on the CPU (measure_step)") from e


@contextlib.contextmanager
def no_recompiles() -> Iterator[None]:
    """Dynamo's stance ``fail_on_recompile`` (torch.compiler.set_stance)."""
    import torch

    with torch.compiler.set_stance("fail_on_recompile"):
        yield
