"""Does tracing kernels slow them? The CUDA-events clock of the same back-to-back calls with no CUPTI client, inside
the kernel clock's CUPTI session, and inside a torch.profiler session, for every configuration of a problem whose
candidates launch from one to hundreds of kernels per call (default: a depthwise 3x3 stride-2 layer of
MobileNetV3-small, backward_filter, where some engines loop over the 72 groups).

Why: in the depthwise profiles both CUPTI clocks (ours and torch.profiler's) read some many-kernel candidates above
the uninstrumented events clock of the same calls, which no union of kernel intervals can do unless the tracing itself
stretched the work. This measures that stretch directly: if the events clock rises by the same amount while a CUPTI
client is attached, the CUPTI readings of those rows describe a traced run, not the model's.

    python benchmarks/cupti_overhead.py [--direction backward_filter] [--max-rows 24] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

import cudnn_algos  # noqa: E402
from cudnn_algos.backend import environment  # noqa: E402
from cudnn_algos.problem import make_problem  # noqa: E402
from cudnn_algos.measure import kernel_clock, operand_sets, plan_runnable  # noqa: E402

CALLS = 5
REPEATS = 5


def events_ms(r, device: int) -> float:
    """Median over REPEATS of the device-events time of CALLS back-to-back calls, per call."""
    return statistics.median(r.loop(CALLS)[1] / CALLS for _ in range(REPEATS))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--conv", default="Conv2d(72, 72, 3, stride=2, padding=1, groups=72, bias=False)")
    p.add_argument("--input", default="16,72,56,56")
    p.add_argument("--dtype", default="float16")
    p.add_argument("--direction", default="backward_filter")
    p.add_argument("--max-rows", type=int, default=24)
    p.add_argument("--json")
    a = p.parse_args(argv)
    dev = 0
    spec = eval(a.conv, {"Conv2d": torch.nn.Conv2d, "Conv1d": torch.nn.Conv1d})  # noqa: S307 (a CLI arg)
    shape = tuple(int(v) for v in a.input.split(","))
    problem = make_problem(spec, shape, dtype=a.dtype, memory_format="channels_last")
    res = cudnn_algos.find_engines(spec, shape, direction=a.direction, dtype=a.dtype, memory_format="channels_last",
                                   runtime_compiled=False)
    rows = [r for r in res.rows if r.ok][: a.max_rows]
    sets = operand_sets(problem, "warm", dev)
    runs = [(r.name, plan_runnable(problem, res.cudnn_direction, r.plan, sets)) for r in rows]
    out = []
    for name, r in runs:
        try:
            r.call(0)
            torch.cuda.synchronize(dev)
        except Exception as e:  # noqa: BLE001 (a row that fails to run is reported, the rest go on)
            out.append({"name": name, "error": f"{type(e).__name__}: {e}"[:120]})
            continue
        for _ in range(3):
            r.loop(CALLS)
        plain = events_ms(r, dev)
        with kernel_clock(dev) as s:
            ours = events_ms(r, dev)
            w = s.window(lambda: r.loop(CALLS))
        busy, acts, _ = s.results[w]
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                torch.profiler.ProfilerActivity.CUDA]):
            prof = events_ms(r, dev)
        plain2 = events_ms(r, dev)
        out.append({"name": name, "activities_per_call": acts / CALLS, "events_plain_ms": min(plain, plain2),
                    "events_in_kernel_clock_ms": ours, "events_in_torch_profiler_ms": prof,
                    "cupti_union_ms": busy / CALLS})
    print(f"{spec} input {shape} {a.dtype} channels_last {a.direction}: events clock per call (ms) with no CUPTI "
          f"client, inside the kernel clock's CUPTI session, inside torch.profiler; and the CUPTI union per call")
    print(f"{'configuration':<48} {'acts':>5} {'plain':>8} {'in ours':>8} {'in prof':>8} {'union':>8}  "
          f"ours/plain prof/plain union/plain")
    for o in sorted(out, key=lambda o: o.get("activities_per_call", 0)):
        if "error" in o:
            print(f"{o['name'][:48]:<48} {o['error']}")
            continue
        pl = o["events_plain_ms"]
        print(f"{o['name'][:48]:<48} {o['activities_per_call']:5.0f} {pl:8.4f} {o['events_in_kernel_clock_ms']:8.4f} "
              f"{o['events_in_torch_profiler_ms']:8.4f} {o['cupti_union_ms']:8.4f}  "
              f"{o['events_in_kernel_clock_ms'] / pl:10.3f} {o['events_in_torch_profiler_ms'] / pl:9.3f} "
              f"{o['cupti_union_ms'] / pl:11.3f}")
    for label, sel in (("<= 4 activities per call", lambda o: o["activities_per_call"] <= 4),
                       ("> 32 activities per call", lambda o: o["activities_per_call"] > 32)):
        v = [o for o in out if "error" not in o and sel(o)]
        if v:
            print(f"median over {len(v)} rows with {label}: in ours/plain "
                  f"{statistics.median(o['events_in_kernel_clock_ms'] / o['events_plain_ms'] for o in v):.3f}, "
                  f"in profiler/plain {statistics.median(o['events_in_torch_profiler_ms'] / o['events_plain_ms'] for o in v):.3f}, "
                  f"union/plain {statistics.median(o['cupti_union_ms'] / o['events_plain_ms'] for o in v):.3f}")
    if a.json:
        Path(a.json).write_text(json.dumps({"env": environment(dev).__dict__, "rows": out}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
