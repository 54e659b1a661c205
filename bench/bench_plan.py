"""The planner against the anchors, on the corpus and the model zoo, and on
synthetic programs whose optimum is known.

    .venv/bin/python bench/bench_plan.py [--torch-threads 2] [--dags 20] [--json OUT]

1. Every stored corpus and zoo trace (tests/data/{corpus,zoo}/*/{fw,bw}.trace),
   planned with `peakmem.plan` (default options): the peak of Thunder's own
   order (the trace as Thunder printed it), Inductor's best-of-4 (the lowest
   of the trace order and Inductor's LPMF, BFS and DFS list schedules) and
   XLA's best-of-3 (its list scheduler, DFS and post order), each simulated
   exactly by peakmem with frees after last use, the plan, the lower bound,
   and the planning time. That a plan's measured peak equals
   its prediction, and that it computes the same outputs, is checked for
   each of these programs by tests/python/test_planner.py.
2. Synthetic programs of fresh allocations (leaves `torch.zeros`, inner nodes
   `torch.cat` of their inputs, sinks returned): random trees and random DAGs
   of 14 to 16 nodes, each written in a random valid order. Their optimal
   peak is found exactly by dynamic programming over the subsets of nodes run
   (the memory after a set of nodes does not depend on their order), with
   the liveness rule the runtime model follows for these ops; the plan's gap
   to it is reported.
3. Thunder traces of stacked Llama blocks (tests/python/step_models.py's
   LlamaLM: RMSNorm, RoPE, grouped-query attention, SwiGLU), traced now
   with thunder.jit, without and with activation checkpointing of every
   block (torch.utils.checkpoint): the same columns, and the planned
   traces run under the profiler (peakmem.measure), measured = predicted.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import peakmem

ROOT = Path(__file__).resolve().parent.parent


def stored_traces():
    for root in ("corpus", "zoo"):
        for trace in sorted((ROOT / "tests" / "data" / root).glob("*/*.trace")):
            if trace.stem in ("fw", "bw"):
                yield f"{root}/{trace.parent.name}/{trace.stem}", trace


def random_dag(rng: random.Random, nodes: int, tree: bool):
    """(preds per node, elements per node): node i's inputs are earlier nodes;
    a tree gives every node but the last exactly one reader."""
    preds = [[] for _ in range(nodes)]
    if tree:
        for i in range(nodes - 1):
            preds[rng.randrange(i + 1, nodes)].append(i)
    else:
        for i in range(1, nodes):
            if rng.random() < 0.25:
                continue  # another leaf
            k = min(i, rng.choice((1, 2, 2, 3)))
            preds[i] = sorted(rng.sample(range(i), k))
    elements = [0] * nodes
    for i in range(nodes):
        elements[i] = rng.randint(1, 64) if not preds[i] else sum(elements[p] for p in preds[i])
    return preds, elements


def dag_trace(preds, elements, rng: random.Random) -> str:
    """The program written in a random topological order, each value deleted
    after its last reader (sinks returned)."""
    n = len(preds)
    readers = [[] for _ in range(n)]
    for v in range(n):
        for p in preds[v]:
            readers[p].append(v)
    indegree = [len(p) for p in preds]
    ready = [v for v in range(n) if indegree[v] == 0]
    order = []
    while ready:
        v = ready.pop(rng.randrange(len(ready)))
        order.append(v)
        for r in readers[v]:
            indegree[r] -= 1
            if indegree[r] == 0:
                ready.append(r)
    position = {v: i for i, v in enumerate(order)}
    lines = ["def fn():"]
    for v in order:
        t = f'  # n{v}: "cpu f32[{elements[v]}]"'
        if preds[v]:
            lines.append(f"  n{v} = torch.cat([{', '.join(f'n{p}' for p in preds[v])}], 0){t}")
        else:
            lines.append(f'  n{v} = torch.zeros(({elements[v]},), device=torch.device("cpu"), dtype=torch.float32){t}')
        dead = [p for p in preds[v] if max(position[r] for r in readers[p]) == position[v]]
        if dead:
            lines.append("  del " + ", ".join(f"n{p}" for p in dead))
    sinks = [v for v in range(n) if not readers[v]]
    lines.append("  return (" + ", ".join(f"n{v}" for v in sinks) + ",)")
    return "\n".join(lines) + "\n"


def optimal_peak(preds, elements) -> int:
    """The lowest peak over every order: a node's output is allocated while
    its inputs are alive; an input is freed when its last reader has run;
    sinks stay. Exact: dynamic programming over the subsets run."""
    n = len(preds)
    size = [4 * e for e in elements]
    readers = [0] * n
    pred_mask = [0] * n
    for v in range(n):
        for p in preds[v]:
            readers[p] |= 1 << v
            pred_mask[v] |= 1 << p
    full = (1 << n) - 1
    inf = float("inf")
    best = [inf] * (1 << n)
    live = [0] * (1 << n)
    best[0] = 0
    for s in range(full):
        if best[s] == inf:
            continue
        for v in range(n):
            bit = 1 << v
            if s & bit or pred_mask[v] & ~s:
                continue
            t = s | bit
            peak = max(best[s], live[s] + size[v])
            if peak < best[t]:
                best[t] = peak
                after = live[s] + size[v]
                for p in preds[v]:
                    if readers[p] & t == readers[p]:  # v was p's last reader
                        after -= size[p]
                live[t] = after
    return int(best[full])


def llama_stack_traces(layers: int, checkpoint: bool):
    """The forward and backward Thunder runs for LlamaLM(layers) on a batch."""
    import torch

    sys.path.insert(0, str(ROOT / "tests" / "python"))
    from peakmem._thunder_compat import import_thunder
    from step_models import CheckpointedLlamaLM, LlamaLM

    thunder = import_thunder()

    torch.manual_seed(0)
    model = (CheckpointedLlamaLM if checkpoint else LlamaLM)(layers=layers)
    jm = thunder.jit(model)
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, 512, (4, 128), generator=g)
    targets = torch.randint(0, 512, (4, 128), generator=g)
    jm(idx, targets).backward()
    return {"fw": thunder.last_traces(jm)[-1], "bw": thunder.last_backward_traces(jm)[-1]}


def stored_trace_rows(args: argparse.Namespace):
    """Part 1: every stored corpus and zoo trace against the baselines."""
    rows = []
    print("| trace | Thunder's order | Inductor best-of-4 | XLA best-of-3 | plan | vs Thunder | vs Inductor | vs XLA | lower bound | plan time |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, path in stored_traces():
        plan = peakmem.plan(str(path), torch_threads=args.torch_threads)
        b = plan.baselines
        inductor = min(b["trace order"], b["inductor lpmf"], b["inductor bfs"], b["inductor dfs"])
        xla = min(b["xla list"], b["xla dfs"], b["xla post order"])
        row = {
            "trace": name,
            "thunder": plan.original_peak_bytes,
            "inductor_best_of_4": inductor,
            "xla_best_of_3": xla,
            "plan": plan.planned_peak_bytes,
            "lower_bound": plan.lower_bound_bytes,
            "seconds": plan.seconds,
            "simulations": plan.simulations,
        }
        rows.append(row)
        print(
            f"| {name} | {row['thunder']:,} | {inductor:,} | {xla:,} | {row['plan']:,} | "
            f"{100 * (1 - row['plan'] / row['thunder']):.1f}% | {100 * (1 - row['plan'] / inductor):.1f}% | "
            f"{100 * (1 - row['plan'] / xla):.1f}% | "
            f"{row['lower_bound']:,} | {1000 * plan.seconds:.1f} ms |"
        )
    vs_thunder = [1 - r["plan"] / r["thunder"] for r in rows]
    vs_inductor = [1 - r["plan"] / r["inductor_best_of_4"] for r in rows]
    vs_xla = [1 - r["plan"] / r["xla_best_of_3"] for r in rows]
    print(
        f"\n{len(rows)} traces: reduction against Thunder's order mean {100 * statistics.mean(vs_thunder):.2f}%, "
        f"best {100 * max(vs_thunder):.1f}%; against Inductor's best-of-4 mean "
        f"{100 * statistics.mean(vs_inductor):.2f}%, best {100 * max(vs_inductor):.1f}%; against XLA's "
        f"best-of-3 mean {100 * statistics.mean(vs_xla):.2f}%, best {100 * max(vs_xla):.1f}%; plans higher "
        f"than a baseline: {sum(r['plan'] > min(r['inductor_best_of_4'], r['xla_best_of_3']) for r in rows)}"
    )

    return rows


def synthetic_optimum(args: argparse.Namespace):
    """Part 2: random trees and DAGs against their exact optimum."""
    rng = random.Random(args.seed)
    synthetic = {}
    for kind in ("tree", "dag"):
        gaps, optimal, times = [], 0, []
        for i in range(args.dags):
            preds, elements = random_dag(rng, 14 + i % 3, kind == "tree")
            text = dag_trace(preds, elements, rng)
            started = time.perf_counter()
            plan = peakmem.plan(text, convention="forward")
            times.append(time.perf_counter() - started)
            best = optimal_peak(preds, elements)
            if plan.planned_peak_bytes < best:
                raise SystemExit(f"error: a plan below the optimum ({plan.planned_peak_bytes} < {best}):\n{text}")
            gaps.append(plan.planned_peak_bytes / best - 1)
            optimal += plan.planned_peak_bytes == best
        synthetic[kind] = {"programs": args.dags, "optimal": optimal, "mean_gap": statistics.mean(gaps),
                           "max_gap": max(gaps), "mean_seconds": statistics.mean(times)}
        print(
            f"{kind}s of 14-16 nodes: {optimal} of {args.dags} plans optimal; gap to the optimum mean "
            f"{100 * statistics.mean(gaps):.2f}%, max {100 * max(gaps):.2f}%; "
            f"{1000 * statistics.mean(times):.1f} ms a plan"
        )
    return synthetic


def llama_stacks(args: argparse.Namespace):
    """Part 3: stacked Llama blocks, with and without checkpointing, each plan measured."""
    stacks = []
    if args.llama_layers > 0:
        import torch

        torch.set_num_threads(args.torch_threads)
        print(f"\n| Llama x{args.llama_layers} | Thunder's order | Inductor best-of-4 | XLA best-of-3 | plan | "
              "plan measured | vs Thunder |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for checkpoint in (False, True):
            for kind, trace in llama_stack_traces(args.llama_layers, checkpoint).items():
                plan = peakmem.plan(trace)
                measured = peakmem.measure(plan.trace).peak_bytes
                b = plan.baselines
                inductor = min(b["trace order"], b["inductor lpmf"], b["inductor bfs"], b["inductor dfs"])
                xla = min(b["xla list"], b["xla dfs"], b["xla post order"])
                name = f"{'checkpointed ' if checkpoint else ''}{kind}"
                stacks.append({"trace": name, "thunder": plan.original_peak_bytes, "inductor_best_of_4": inductor,
                               "xla_best_of_3": xla, "plan": plan.planned_peak_bytes, "measured": measured,
                               "statements": plan.statements, "seconds": plan.seconds})
                print(f"| {name} ({plan.statements} statements) | {plan.original_peak_bytes:,} | {inductor:,} | "
                      f"{xla:,} | {plan.planned_peak_bytes:,} | {measured:,} | "
                      f"{100 * (1 - plan.planned_peak_bytes / plan.original_peak_bytes):.1f}% |")
                if measured != plan.planned_peak_bytes:
                    raise SystemExit(f"error: {name}: the plan measured {measured}, predicted {plan.planned_peak_bytes}")
    return stacks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--torch-threads", type=int, default=2, help="the CPU threads the traces were measured with")
    ap.add_argument("--dags", type=int, default=50, help="random trees and random DAGs each")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--llama-layers", type=int, default=4, help="Llama blocks stacked (0: skip part 3)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()

    rows = stored_trace_rows(args)
    synthetic = synthetic_optimum(args)
    stacks = llama_stacks(args)
    if args.json:
        args.json.write_text(json.dumps({"traces": rows, "synthetic": synthetic, "llama_stacks": stacks}, indent=2)
                             + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
