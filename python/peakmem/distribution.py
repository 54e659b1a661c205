"""One rank of a distributed training step, from a strategy's name.

``estimate_step(model, x, strategy="fsdp", world_size=64, rank=0)`` is
``estimate_step(model, x, transform=...)`` with Thunder's own transform for
the strategy, run as rank `rank` of a fake process group of `world_size`
(torch.testing._internal.distributed.fake_pg: collectives return at once and
move no data, so the one process allocates what that rank allocates). The
group is made for the call and destroyed after it, so one process can ask
for every rank in turn; a process group the caller initialised is kept and
must be a fake one of that size and rank.

Strategies (thunder/distributed/__init__.py):
    "fsdp", "fsdp-zero2": thunder.distributed.fsdp, ZeRO-2 (Thunder's default);
    "fsdp-zero3": with sharding_strategy=FSDPType.ZERO3;
    "ddp": thunder.distributed.ddp.
Tensor parallelism names the layers it shards, so it stays a ``transform=``
(tests/data/distributed/program.py shows one).

On the eager front end (``frontend="eager"``) ``"ddp"`` is torch's own
DistributedDataParallel around the step's model (peakmem.step.data_parallel)
and ``"fsdp"`` FSDP2's fully_shard on it (peakmem.step.fully_sharded, with
the caller's ``parallelize=``), run under rank `rank` of an instant process
group of `world_size`
(``instant_process_group``: torch's fake group completes a collective
without its tensors, which DDP's reducer needs back); a process group the
caller initialised (gloo on real ranks, say) is used as it is when it has
that size and rank.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Literal, TypeVar, cast, get_args

__all__ = ["STRATEGIES", "Strategy", "fake_process_group", "instant_process_group", "nccl_estimate",
           "strategy_transform", "traces_collectives", "with_strategy"]

Strategy = Literal["fsdp", "fsdp-zero2", "fsdp-zero3", "ddp"]
STRATEGIES: tuple[str, ...] = get_args(Strategy)


def strategy_transform(strategy: Strategy, device: Any) -> Callable[[Any], Any]:
    """The transform ``thunder.jit``'s module gets for `strategy`, its
    shards made on `device` (the model's: ``meta`` allocates nothing)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r} (peakmem knows {', '.join(STRATEGIES)}; "
                         "tensor parallelism and other transforms: pass transform=)")

    def apply(jitted: Any) -> Any:
        import thunder.distributed as td

        if strategy == "ddp":
            return td.ddp(jitted)
        sharding = td.FSDPType.ZERO3 if strategy == "fsdp-zero3" else td.FSDPType.ZERO2
        return td.fsdp(jitted, device=device, sharding_strategy=sharding)

    return apply


F = TypeVar("F", bound=Callable[..., Any])


def with_strategy(fn: F) -> F:
    """`fn(model, *inputs, ...)` (estimate_step, measure_step, export_step)
    taking `strategy`, `world_size` and `rank`: it runs as that rank of a
    fake process group made for the call, with the strategy's transform on
    the model's device."""
    import functools

    @functools.wraps(fn)
    def run(model: Any, *inputs: Any, strategy: Strategy | None = None, world_size: int | None = None,
            rank: int = 0, **kwargs: Any) -> Any:
        if strategy is None:
            if kwargs.get("parallelize") is not None:
                raise ValueError("parallelize= shards the model for strategy='fsdp' (with world_size= and rank=)")
            if world_size is not None or rank != 0:
                raise ValueError("world_size= and rank= go with strategy= (with transform=, the caller's "
                                 "process group says them)")
            return fn(model, *inputs, **kwargs)
        if kwargs.get("transform") is not None:
            raise ValueError("pass strategy= or transform=, not both")
        if world_size is None:
            raise ValueError(f"strategy={strategy!r} needs world_size=")
        if kwargs.get("frontend") in ("eager", "compile"):
            if strategy not in ("ddp", "fsdp") or kwargs["frontend"] == "compile":
                raise ValueError(f"strategy={strategy!r} on the {kwargs['frontend']!r} front end is not modelled "
                                 "(the eager front end models strategy='ddp', torch's DistributedDataParallel, "
                                 "and 'fsdp', FSDP2's fully_shard): pass frontend='thunder' for Thunder's "
                                 "transform")
            if kwargs.get("parallelize") is not None and strategy != "fsdp":
                raise ValueError("parallelize= is FSDP2's wrapping: it goes with strategy='fsdp'")
            with instant_process_group(world_size, rank):
                return fn(model, *inputs, distributed=strategy, **kwargs)
        if kwargs.get("parallelize") is not None:
            raise ValueError("parallelize= shards the eager front end's model: it goes with strategy='fsdp' and "
                             "frontend='eager'")
        held = [*model.parameters(), *model.buffers()]
        transform = strategy_transform(strategy, held[0].device if held else None)
        with fake_process_group(world_size, rank):
            return fn(model, *inputs, transform=transform, **kwargs)

    return cast(F, run)  # its type is fn's, so that an editor shows fn's signature


def _check_rank(world_size: int, rank: int) -> None:
    for name, value in (("world_size", world_size), ("rank", rank)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} must be an integer, got {value!r}")
    if world_size < 1:
        raise ValueError(f"world_size must be at least 1, got {world_size}")
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, {world_size}), got {rank}")


@contextlib.contextmanager
def fake_process_group(world_size: int, rank: int) -> Iterator[None]:
    """Rank `rank` of a fake process group of `world_size` for the block."""
    import torch.distributed as dist

    _check_rank(world_size, rank)
    if dist.is_initialized():
        have = (dist.get_backend(), dist.get_world_size(), dist.get_rank())
        if have != ("fake", world_size, rank):
            raise ValueError(f"a process group is initialised already (backend {have[0]!r}, world size "
                             f"{have[1]}, rank {have[2]}), not rank {rank} of a fake group of {world_size}: "
                             "destroy it, or pass transform= and run under it")
        yield
        return
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", rank=rank, world_size=world_size, store=FakeStore())
    try:
        yield
    finally:
        dist.destroy_process_group()


_INSTANT = "peakmem-instant"


def _instant_group(rank: int, world_size: int, name: str) -> Any:
    """A process group whose collectives complete at once, each returning
    its own tensors as they are (an all-reduce's sum is not taken, a
    broadcast keeps each rank's values): what one rank allocates around its
    collectives, without the other ranks. Collectives on meta tensors
    complete too."""
    import torch
    import torch.distributed as dist
    from torch._C._distributed_c10d import _create_work_from_future

    class InstantGroup(dist.ProcessGroup):
        def _done(self, result: Any) -> Any:
            future = torch.futures.Future()
            future.set_result(result)
            return _create_work_from_future(future)

        def allreduce(self, tensors, opts=None):
            return self._done(tensors)

        def broadcast(self, tensors, opts=None):
            return self._done(tensors)

        def allgather(self, outputs, inputs, opts=None):
            return self._done(outputs)

        def all_gather_single(self, output, input, opts=None):
            return self._done([output])

        def all_gather_single_coalesced(self, outputs, inputs, opts=None):
            return self._done(outputs)

        def reduce_scatter(self, outputs, inputs, opts=None):
            return self._done(outputs)

        def reduce_scatter_single(self, output, input, opts=None):
            return self._done([output])

        def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
            return self._done(outputs)

        def allreduce_coalesced(self, tensors, opts=None):
            return self._done(tensors)

        def reduce(self, tensors, opts=None):
            return self._done(tensors)

        def scatter(self, outputs, inputs, opts=None):
            return self._done(outputs)

        def gather(self, outputs, inputs, opts=None):
            return self._done(outputs)

        def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
            return self._done([output])

        def barrier(self, opts=None):
            return self._done(None)

        @property
        def group_name(self) -> str:  # what a DeviceMesh resolves the group by
            return name

        def getBackendName(self) -> str:
            return _INSTANT

    return InstantGroup(rank, world_size)


@contextlib.contextmanager
def instant_process_group(world_size: int, rank: int) -> Iterator[None]:
    """Rank `rank` of an instant process group (_instant_group) of
    `world_size` for the block; a group the caller initialised is kept when
    it has that size and rank (a real one: the step's collectives run)."""
    import torch.distributed as dist

    _check_rank(world_size, rank)
    if dist.is_initialized():
        have = (dist.get_world_size(), dist.get_rank())
        if have != (world_size, rank):
            raise ValueError(f"a process group is initialised already (world size {have[0]}, rank {have[1]}), "
                             f"not rank {rank} of {world_size}: destroy it, or pass its own size and rank")
        yield
        return
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if _INSTANT not in dist.Backend.backend_list:
        dist.Backend.register_backend(
            _INSTANT, lambda opts, _options: _instant_group(opts.group_rank, opts.group_size, opts.group_id),
            extended_api=True, devices=["cpu", "meta", "cuda"])
    dist.init_process_group(_INSTANT, rank=rank, world_size=world_size, store=FakeStore())
    try:
        yield
    finally:
        dist.destroy_process_group()


def nccl_estimate(world_size: int, collectives: list[str], **options: Any) -> dict:
    """NCCL's own device buffers on one rank: an estimate, outside
    PyTorch's allocator and apart from every exact figure
    (docs/nccl-buffers.md; peakmem/allocators/nccl_buffers.h). `collectives`:
    "all_reduce", "all_gather", "reduce_scatter", "broadcast"; `options`:
    channels (16), gpus_per_node (8), nvls (False), communicators (1),
    simple_bytes / ll_bytes / ll128_bytes (NCCL_BUFFSIZE, NCCL_LL_BUFFSIZE,
    NCCL_LL128_BUFFSIZE), cumem (True). Returns {"total_bytes", "ring_bytes",
    "tree_bytes", "nvls_bytes", "channel_structures_bytes", "crosses_nodes",
    "assumptions"}."""
    from ._core import nccl_estimate as native_estimate

    return native_estimate(world_size, list(collectives), **options)


def traces_collectives(*traces: Any) -> list[str]:
    """The NCCL collectives the Thunder traces call, each once, in order."""
    from ._core import nccl_collective_of

    out: list[str] = []
    for trace in traces:
        for b in trace.bound_symbols:
            c = nccl_collective_of(b.sym.name)
            if c and c not in out:
                out.append(c)
    return out
