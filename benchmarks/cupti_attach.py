"""Should the kernel clock keep CUPTI attached between its sessions? Two questions, one fresh process:

1. Cost to the other clocks: the events clock (GPU ms per call) and the host clock (ms per call until the last
   launch returned) of K back-to-back calls of a small convolution, torch's op and one engine plan through our
   own launch path, with CUPTI never attached yet, after a session that finalized it (the default), and while it
   is held attached between sessions (measure.cupti_held). The throughput and host clocks of every search are
   measured between kernel-clock sessions, so holding CUPTI is only safe if the held column matches the others.
2. Host memory: --sessions kernel-clock sessions each finalizing CUPTI, then as many while it is held; RSS kept
   (after collection and malloc_trim) before and after each. On the H200 (CUDA 13.0) each attach/finalize cycle
   kept ~70 KB.

The finalized and held states alternate over --rounds rounds (after the never-attached one, which can only come
first), so drift of the machine shows as spread, not as a difference.

    python benchmarks/cupti_attach.py [--sessions 200] [--rounds 5] [--json out.json]
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

import cudnn_algos  # noqa: E402
from cudnn_algos import backend, measure  # noqa: E402
from cudnn_algos.problem import make_problem  # noqa: E402
from fresh import rss_kept_mb  # noqa: E402
from reliability_gpu import LAYER, SHAPE, clock_session, operands  # noqa: E402

CALLS = 50
SAMPLES = 7


def sample(fn, k: int) -> tuple[float, float]:
    """(events ms per call, host ms per call) of k back-to-back calls."""
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.perf_counter()
    s.record()
    for _ in range(k):
        fn()
    e.record()
    host = (time.perf_counter() - t0) * 1e3
    e.synchronize()
    return s.elapsed_time(e) / k, host / k


def clocks(fns: dict) -> dict:
    """Per callable: median events and host ms per call over SAMPLES samples of CALLS calls."""
    out = {}
    for name, fn in fns.items():
        fn()
        got = [sample(fn, CALLS) for _ in range(SAMPLES)]
        out[name] = (statistics.median(g for g, _ in got), statistics.median(h for _, h in got))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sessions", type=int, default=200)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--json")
    a = p.parse_args(argv)
    x, w = operands()
    problem = make_problem(LAYER, SHAPE, dtype=torch.float16)
    res = cudnn_algos.find_engines(LAYER, SHAPE, dtype=torch.float16, runtime_compiled=False)  # no CUPTI
    row = next(r for r in res.rows if r.ok)
    sets = measure.operand_sets(problem, "warm", 0)
    plan = measure.plan_runnable(problem, res.cudnn_direction, row.plan, sets)
    fns = {"torch conv2d": lambda: torch.nn.functional.conv2d(x, w, padding=1),
           f"engine plan {row.name.split('{')[0]}": lambda: plan.call(0)}
    with torch.no_grad():
        states = {"never attached": [clocks(fns)], "after a finalized session": [], "held between sessions": []}
        for _ in range(a.rounds):
            clock_session(x, w)  # ends with cuptiFinalize
            states["after a finalized session"].append(clocks(fns))
            with measure.cupti_held():
                clock_session(x, w)  # ends attached
                states["held between sessions"].append(clocks(fns))
        memory = {}
        for label, held in (("finalized after each", False), ("held", True)):
            before = rss_kept_mb()
            with measure.cupti_held() if held else contextlib.nullcontext():
                for _ in range(a.sessions):
                    clock_session(x, w)
            memory[label] = round(rss_kept_mb() - before, 2)
    table = {state: {name: {"events_ms": statistics.median(r[name][0] for r in rounds),
                            "host_ms": statistics.median(r[name][1] for r in rounds),
                            "events_range": [min(r[name][0] for r in rounds), max(r[name][0] for r in rounds)]}
                     for name in fns}
             for state, rounds in states.items()}
    out = {"clocks": table, "rss_growth_mb": memory, "sessions": a.sessions, "rounds": a.rounds,
           "kernel_clock": dataclasses.asdict(backend.kernel_clock_stats())}
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    print(f"CUPTI attached or not ({CALLS} back-to-back calls, median of {SAMPLES} samples; "
          f"{a.rounds} alternating rounds):")
    for name in fns:
        base = table["never attached"][name]
        for state, t in table.items():
            r = t[name]
            print(f"  {name:<22} {state:<27} events {r['events_ms'] * 1e3:7.2f} us/call "
                  f"({r['events_ms'] / base['events_ms']:.3f}x)  host {r['host_ms'] * 1e3:7.2f} us/call "
                  f"({r['host_ms'] / base['host_ms']:.3f}x)")
    for label, mb in memory.items():
        print(f"  {a.sessions} sessions, CUPTI {label}: RSS kept +{mb} MB ({mb * 1024 / a.sessions:.1f} KB/session)")
    print(f"  kernel clock: {out['kernel_clock']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
