#!/usr/bin/env python3
"""peakmem vs Thunder's own estimator, from a live TraceCtx.

    .venv/bin/python bench/bench_python.py [--layers 400] [--repeat 5] [--json OUT]

Builds, with lightning-thunder on CPU, a deep and narrow residual MLP stack
(per layer: layer_norm, linear, gelu, residual add; width 8; the layers'
weights are stacked in three tensors and indexed per layer, so the trace
keeps per-layer `getitem`s without thousands of parameters, which make
Thunder's own compilation slow) and takes its execution traces: the
training forward and the backward (`thunder.last_traces`,
`thunder.last_backward_traces`). For each trace, best of --repeat:

  thunder        thunder.examine.memory_calculation.get_alloc_memory(trc)
  peakmem_gam    peakmem.thunder.get_alloc_memory(trc)   (the drop-in: the live
                 reader's lean form and the thunder model, peak and breakdown only)
  analyze_rt     peakmem.analyze(trc)                    (runtime model)
  analyze_th     peakmem.analyze(trc, memory_model="thunder")
  export         peakmem.to_json_export(trc)             (live reader, exact form, + JSON writer)
  core           peakmem._core.analyze_text(json, ...)   (JSON reader + thunder model)
  breakdown      report.breakdown                        (C++ -> Python dict)

and checks that the two get_alloc_memory results are equal (peak and the
breakdown, keys in order). Then profiles peakmem.thunder.get_alloc_memory
with cProfile and prints the top entries. Times are wall (perf_counter) and
CPU (process_time); the ratios use CPU time when the machine is shared.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import sys
import time
from typing import Any, Callable


def best_of(fn: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    """(best wall s, best CPU s, last result)."""
    walls, cpus, result = [], [], None
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        cpus.append(time.process_time() - c0)
        walls.append(time.perf_counter() - w0)
    return min(walls), min(cpus), result


def build_traces(layers: int, width: int) -> tuple[dict[str, Any], dict[str, float]]:
    from peakmem._thunder_compat import import_thunder

    thunder = import_thunder()
    import torch
    import torch.nn.functional as F

    def stack(x, Ws, Bs, Gs):
        for i in range(layers):
            h = F.layer_norm(x, (width,), Gs[i], None)
            x = x + F.gelu(F.linear(h, Ws[i], Bs[i]))
        return x

    torch.manual_seed(0)
    x = torch.randn(4, width, requires_grad=True)
    Ws = torch.randn(layers, width, width, requires_grad=True)
    Bs = torch.randn(layers, width, requires_grad=True)
    Gs = torch.randn(layers, width, requires_grad=True)
    w0, c0 = time.perf_counter(), time.process_time()
    jf = thunder.jit(stack)
    jf(x, Ws, Bs, Gs)
    compile_times = {"wall_s": time.perf_counter() - w0, "cpu_s": time.process_time() - c0}
    traces = {"forward": thunder.last_traces(jf)[-1]}
    bw = thunder.last_backward_traces(jf)
    if bw and bw[-1] is not None:
        traces["backward"] = bw[-1]
    return traces, compile_times


def profile_top(fn: Callable[[], Any], top: int) -> dict[str, str]:
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    out = {}
    for key in ("tottime", "cumulative"):
        buf = io.StringIO()
        st = pstats.Stats(prof, stream=buf)
        st.sort_stats(key).print_stats(top)
        text = buf.getvalue()
        # keep the table only
        i = text.find("   ncalls")
        out[key] = text[i:] if i >= 0 else text
    return out


def main(argv: list[str] | None = None) -> int:  # the benchmark's steps in order, as it reports them
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=400)
    ap.add_argument("--width", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--min-bsyms", type=int, default=20000,
                    help="fail if the forward trace has fewer bound symbols")
    ap.add_argument("--top", type=int, default=25, help="profile entries to show")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)

    import peakmem
    import peakmem.thunder
    from peakmem import _core

    traces, compile_times = build_traces(args.layers, args.width)
    from thunder.examine.memory_calculation import get_alloc_memory as thunder_gam

    results: dict[str, Any] = {
        "layers": args.layers,
        "width": args.width,
        "repeat": args.repeat,
        "thunder_compile": compile_times,
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_avg_start": os.getloadavg(),
        "peakmem_module": os.path.dirname(peakmem.__file__),
        "traces": {},
    }
    ok = True
    for kind, trc in traces.items():
        n = len(trc.bound_symbols)
        r: dict[str, Any] = {"bound_symbols": n}
        print(f"\n== {kind} trace: {n} bound symbols", flush=True)
        if kind == "forward" and n < args.min_bsyms:
            print(f"   FAIL: fewer than {args.min_bsyms} bound symbols; raise --layers", flush=True)
            ok = False
        th_w, th_c, th_res = best_of(lambda: thunder_gam(trc), args.repeat)
        pm_w, pm_c, pm_res = best_of(lambda: peakmem.thunder.get_alloc_memory(trc), args.repeat)
        rt_w, rt_c, _ = best_of(lambda: peakmem.analyze(trc), args.repeat)
        at_w, at_c, _ = best_of(lambda: peakmem.analyze(trc, memory_model="thunder"), args.repeat)
        ex_w, ex_c, exported = best_of(lambda: peakmem.to_json_export(trc), args.repeat)
        co_w, co_c, report = best_of(
            lambda: _core.analyze_text(exported, "<TraceCtx>", "thunder", "auto", True), args.repeat)
        bd_w, bd_c, _ = best_of(lambda: report.breakdown, args.repeat)
        equal_peak = th_res[0] == pm_res[0]
        equal_breakdown = list(th_res[1].items()) == list(pm_res[1].items())
        r.update({
            "thunder_get_alloc_memory": {"wall_s": th_w, "cpu_s": th_c},
            "peakmem_get_alloc_memory": {"wall_s": pm_w, "cpu_s": pm_c},
            "peakmem_analyze_runtime": {"wall_s": rt_w, "cpu_s": rt_c},
            "peakmem_analyze_thunder": {"wall_s": at_w, "cpu_s": at_c},
            "export_json": {"wall_s": ex_w, "cpu_s": ex_c, "bytes": len(exported)},
            "core_read_and_thunder_model": {"wall_s": co_w, "cpu_s": co_c},
            "breakdown_to_dict": {"wall_s": bd_w, "cpu_s": bd_c},
            "speedup_get_alloc_memory_cpu": th_c / pm_c if pm_c else None,
            "speedup_get_alloc_memory_wall": th_w / pm_w if pm_w else None,
            "speedup_analyze_runtime_cpu": th_c / rt_c if rt_c else None,
            "export_share_of_peakmem_gam": ex_c / pm_c if pm_c else None,
            "equal_peak": equal_peak,
            "equal_breakdown": equal_breakdown,
            "peak_bytes": th_res[0],
            "breakdown_entries": len(th_res[1]),
        })
        ok = ok and equal_peak and equal_breakdown
        us = lambda s: 1e6 * s / n  # noqa: E731
        print(f"   thunder.get_alloc_memory          {th_c*1e3:9.1f} ms cpu {th_w*1e3:9.1f} ms wall  ({us(th_c):6.2f} us/bsym)")
        print(f"   peakmem.thunder.get_alloc_memory  {pm_c*1e3:9.1f} ms cpu {pm_w*1e3:9.1f} ms wall  ({us(pm_c):6.2f} us/bsym)")
        print(f"   peakmem.analyze (runtime)         {rt_c*1e3:9.1f} ms cpu {rt_w*1e3:9.1f} ms wall")
        print(f"   peakmem.analyze (thunder)         {at_c*1e3:9.1f} ms cpu {at_w*1e3:9.1f} ms wall")
        print(f"     export to JSON                  {ex_c*1e3:9.1f} ms cpu  ({len(exported)/1e6:.1f} MB)")
        print(f"     C++ read JSON + thunder model   {co_c*1e3:9.1f} ms cpu")
        print(f"     report.breakdown -> dict        {bd_c*1e3:9.1f} ms cpu")
        print(f"   speedup (thunder / peakmem get_alloc_memory): {r['speedup_get_alloc_memory_cpu']:.2f}x cpu, "
              f"{r['speedup_get_alloc_memory_wall']:.2f}x wall   (target >= 20x)")
        print(f"   results equal: peak {equal_peak}, breakdown {equal_breakdown} "
              f"({len(th_res[1])} entries, peak {th_res[0]} bytes)", flush=True)
        prof = profile_top(lambda: peakmem.thunder.get_alloc_memory(trc), args.top)
        r["profile_peakmem_get_alloc_memory"] = prof
        print(f"\n   cProfile of peakmem.thunder.get_alloc_memory, top {args.top} by own time:")
        print("   " + prof["tottime"].replace("\n", "\n   "))
        if kind == "forward":
            tprof = profile_top(lambda: thunder_gam(trc), 12)
            r["profile_thunder_get_alloc_memory"] = tprof
            print("   cProfile of Thunder's get_alloc_memory, top 12 by own time:")
            print("   " + tprof["tottime"].replace("\n", "\n   "))
        results["traces"][kind] = r
    results["load_avg_end"] = os.getloadavg()
    results["ok"] = ok
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
