"""Does a torch.profiler (CUPTI) session change the kernel times measured after it in the same process?

For a few small ResNet-50 problems, times torch's own convolution and the graph API's first heuristic configuration
with the kernel clock (CUDA-graph replay) before any profiler session, after one, and after a second; each in a
fresh process, once as torch leaves CUPTI (default) and once with TEARDOWN_CUPTI=1 (CUPTI finalized at the end of
each session). Prints one table; writes DIR/profiler_effect.json.

    python benchmarks/profiler_effect.py [--out DIR] [--repeats 15]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PROBLEMS = [  # (label, conv, input shape, dtype, layout, direction)
    ("1x1 1024->256 @14 fp16 NHWC bwd_filter", (1024, 256, 1, 1, 0), (32, 1024, 14, 14), "float16", "channels_last",
     "backward_filter"),
    ("1x1 64->64 @56 fp16 NHWC fwd", (64, 64, 1, 1, 0), (32, 64, 56, 56), "float16", "channels_last", "forward"),
    ("3x3 128->128 @28 fp16 NHWC fwd", (128, 128, 3, 1, 1), (32, 128, 28, 28), "float16", "channels_last", "forward"),
    ("1x1 1024->256 @14 fp32 NCHW bwd_data", (1024, 256, 1, 1, 0), (32, 1024, 14, 14), "float32", "contiguous",
     "backward_data"),
]


def child(repeats: int) -> dict:
    import cudnn_algos
    from cudnn_algos.api import _CUDNN_DIRECTION, _problem
    from cudnn_algos.measure import (_cupti_per_row, operand_sets, plan_timer, python_loop, time_three_ways,
                                     torch_call)

    dev = torch.cuda.current_device()
    subjects = []
    for label, (ci, co, k, st, pad), shape, dt, fmt, d in PROBLEMS:
        conv = torch.nn.Conv2d(ci, co, k, stride=st, padding=pad, bias=False, device="meta")
        problem = _problem(conv, shape, getattr(torch, dt), fmt, None)
        cdir = _CUDNN_DIRECTION[(False, d)]
        sets = operand_sets(problem, "warm", dev)
        eng = cudnn_algos.find_engines(conv, shape, direction=d, dtype=getattr(torch, dt), memory_format=fmt,
                                       heuristics=("instant",), runtime_compiled=False)
        plan = next(r.plan for r in eng.rows if r.ok)
        tcall = torch_call(problem, cdir, sets)
        tcall(0)
        subjects.append((label + " | torch op", tcall, python_loop(tcall, dev)))
        subjects.append((label + " | engine plan", *plan_timer(plan, sets)))

    def times() -> dict:
        return {name: time_three_ways(call, loop, repeats, 3, dev).kernel_ms.median for name, call, loop in subjects}

    out = {"before": times()}
    for k in (1, 2):
        _cupti_per_row([(0, lambda: subjects[0][1](0))], {0: 1}, dev)
        out[f"after_{k}"] = times()
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.environ.get("OUT", "out"))
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        print("RESULT " + json.dumps(child(a.repeats)))
        return 0
    res = {}
    for mode, env in (("default", {}), ("TEARDOWN_CUPTI=1", {"TEARDOWN_CUPTI": "1"})):
        r = subprocess.run([sys.executable, __file__, "--child", "--repeats", str(a.repeats)], capture_output=True,
                           text=True, timeout=300, env={**os.environ, **env})
        line = next((x for x in r.stdout.splitlines() if x.startswith("RESULT ")), None)
        res[mode] = json.loads(line[7:]) if line else {"error": (r.stderr or "")[-600:], "rc": r.returncode}
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "profiler_effect.json").write_text(json.dumps(res, indent=1))
    print("profiler effect: kernel-clock median (ms) before any profiler session -> after 1st -> after 2nd, "
          "per fresh process")
    ratios = {}
    for mode, r in res.items():
        if "error" in r:
            print(f"  [{mode}] FAILED rc={r['rc']}: {r['error'].strip().splitlines()[-1] if r['error'].strip() else ''}")
            continue
        ratios[mode] = []
        for name, before in r["before"].items():
            a1, a2 = r["after_1"][name], r["after_2"][name]
            ratios[mode].append(a2 / before)
            print(f"  [{mode}] {name}: {before:.4f} -> {a1:.4f} -> {a2:.4f} ms ({100 * (a2 / before - 1):+.1f}%)")
    for mode, rs in ratios.items():
        print(f"profiler effect [{mode}]: median change after a session {100 * (statistics.median(rs) - 1):+.1f}% "
              f"(max {100 * (max(rs) - 1):+.1f}%) over {len(rs)} timings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
