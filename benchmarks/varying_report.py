"""varying_shapes.py's summary lines from its modes' results (each mode's worker JSON, by mode name, in the order
the modes ran; a mode's further processes under mode + AGAIN): steady steps and what the allocator did there, first
passes over fresh processes, and what each mode added to benchmark off's wall."""
from __future__ import annotations

import statistics
from typing import Sequence

AGAIN = "_again"  # results[mode + AGAIN]: the mode's further processes (varying_shapes.py --repeats)


def processes(results: dict, mode: str) -> list[dict]:
    """A mode's processes' results: its first run and its AGAIN runs (a failed one included: it has no times)."""
    return [results.get(mode, {})] + results.get(f"{mode}{AGAIN}", [])


def first_pass_line(results: dict, modes: Sequence[str]) -> str:
    """Each mode's first pass as the median over its processes (the first run and its AGAIN runs; a failed one left
    out), the runs in brackets, and that median against benchmark off's."""
    med = {}
    parts = []
    for m in modes:
        procs = processes(results, m)
        runs = [r["first_pass_s"] for r in procs if "first_pass_s" in r]
        if runs:
            med[m] = statistics.median(runs)
            parts.append(f"{m} {med[m]:.2f} s [{', '.join(f'{x:.2f}' for x in runs)}]"
                         + (f" ({med[m] / med['off']:.2f}x off's)" if m != "off" and med.get("off") else ""))
    return "first pass, median over fresh processes: " + "; ".join(parts)


def first_pass_steps_line(results: dict, modes: Sequence[str], n: int) -> str:
    """Each first-pass step's wall (ms) as the median over the mode's processes, and per mode its step-by-step
    difference from benchmark off's medians: where in the first pass a mode's extra time lands."""
    med: dict[str, list[float]] = {}
    for m in modes:
        procs = [r for r in processes(results, m) if len(r.get("step_s", [])) >= n]
        if procs:
            med[m] = [1e3 * statistics.median(r["step_s"][i] for r in procs) for i in range(n)]
    lines = [f"first pass step by step, median ms over processes (steps 1..{n}):"]
    for m, steps in med.items():
        diff = (" (- off's: " + " ".join(f"{x - y:+.0f}" for x, y in zip(steps, med["off"])) + ")"
                if m != "off" and "off" in med else "")
        lines.append(f"  {m:>13}: " + " ".join(f"{x:.0f}" for x in steps) + diff)
    return "\n".join(lines)


def first_pass_host_line(results: dict, modes: Sequence[str], n: int) -> str:
    """With --why, per mode over its first pass (median over its processes): seconds in Python's garbage collector
    and its oldest-generation collections, and the operator's host stages (apply()'s modes) in ms, largest first."""
    parts = []
    for m in modes:
        procs = [r for r in processes(results, m) if len(r.get("memory") or []) >= n]
        if not procs:
            continue
        ends = [r["memory"][n - 1] for r in procs]
        stages = {k: statistics.median(e.get("stages_us", {}).get(k, 0.0) for e in ends) / 1e3
                  for k in ends[0].get("stages_us", {})}
        top = sorted(((v, k) for k, v in stages.items() if v >= 1), reverse=True)
        parts.append(f"  {m:>13}: gc {1e3 * statistics.median(e['gc_s'] for e in ends):.0f} ms "
                     f"({statistics.median(e['gc_oldest'] for e in ends):.0f} oldest-generation)"
                     + ("; operator stages, ms: " + ", ".join(f"{k} {v:.0f}" for v, k in top) if top else ""))
    return "\n".join(["first pass host time, median over processes:", *parts])


def added_line(results: dict) -> str:
    """What each mode added to benchmark off's wall over the same steps (its process against off's: the search it
    paid, in the first pass or later, where it chose), and against what benchmark on added."""
    off = results["off"]["step_s"]
    added = {m: sum(r["step_s"][:len(off)]) - sum(off[:len(r["step_s"])]) for m, r in results.items()
             if m != "off" and isinstance(r, dict) and "step_s" in r}
    on = added.get("on")
    return "added to benchmark off's wall over the run: " + ", ".join(
        f"{m} {v:.2f} s" + (f" ({v / on:.3f}x on's)" if on and m != "on" else "") for m, v in added.items())


def why_lines(results: dict, n: int) -> str:
    """Per mode, over the steady cycles (after the first pass): the median step's wall and host share, and with --why
    what the caching allocator did there (cudaMalloc/cudaFree calls and retries after the first pass, reserved
    GiB at the end): the evidence for where a steady-cycle difference comes from."""
    out = []
    for mode, r in results.items():
        if not isinstance(r, dict) or "step_s" not in r or len(r["step_s"]) <= n:
            continue
        wall = statistics.median(r["step_s"][n:])
        host = statistics.median(r["host_s"][n:]) if r.get("host_s") else float("nan")
        line = (f"{mode:>13} steady steps: median wall {1e3 * wall:.2f} ms, host until step() returned "
                f"{1e3 * host:.2f} ms")
        mem = r.get("memory") or []
        if len(mem) > n:
            a, b = mem[n - 1], mem[-1]
            line += (f"; after the first pass: {b['cuda_mallocs'] - a['cuda_mallocs']} cudaMalloc, "
                     f"{b['cuda_frees'] - a['cuda_frees']} cudaFree, {b['retries'] - a['retries']} allocator retries; "
                     f"reserved {b['reserved'] / 2**30:.2f} GiB")
        out.append(line)
    return "\n".join(out)
