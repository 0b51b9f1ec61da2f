"""Does the kernel clock read right in the first session after a torch.profiler session?

torch.profiler (kineto) registers its own CUPTI timestamp source at the start of its session and leaves it registered
afterwards unless TEARDOWN_CUPTI=1 (Note [whose timestamps] in csrc/clock/kernel_clock.cpp). Each variant runs in a fresh
process, on one small convolution (torch's op, benchmark off, 1x1 40->120 on 16x40x28x28 fp32):

  1. two kernel-clock readings (median us per call over windows of back-to-back calls), and the clock's rate: CUPTI
     timestamp units per host nanosecond across a 20 ms sleep inside the session (1.000 for a nanosecond clock);
  2. a torch.profiler session (CUDA activities) of five calls of another convolution, or an idle pause instead;
  3. three readings again; then torch.profiler's own reading of the same calls (kineto after our sessions), and
     the same inside cudnn_algos.cupti_held() (our source still registered when kineto's session starts).

A session that another CUPTI client finalized under it (KernelClockLost) is measured again, as searches do; the
last column counts those.

Variants: the fix (the session registers its nanosecond source), without it (own_timestamps=False: whatever
source was left), kineto told to tear CUPTI down (TEARDOWN_CUPTI=1: it finalizes CUPTI on the process's next CUDA
call, Note [kineto's deferred teardown]), and an idle pause instead of the profiler (without the fix: is it the
GPU's clocks rather than CUPTI?).

    python benchmarks/clock_after_profiler.py [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

VARIANTS = {  # name -> (own timestamps, what runs between the readings, TEARDOWN_CUPTI)
    "fix": (True, "profiler", "0"),
    "no_fix": (False, "profiler", "0"),
    "teardown": (True, "profiler", "1"),
    "idle": (False, "pause", "0"),
}
CALLS, WINDOWS = 200, 5


def child(variant: str) -> dict:
    import torch
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile

    import cudnn_algos
    from cudnn_algos import measure

    own, between, _ = VARIANTS[variant]
    torch.backends.cudnn.benchmark = False
    x = torch.randn(16, 40, 28, 28, device="cuda")
    w = torch.randn(120, 40, 1, 1, device="cuda")
    x2, w2 = torch.randn(8, 64, 28, 28, device="cuda"), torch.randn(64, 64, 3, 3, device="cuda")

    def loop(n=CALLS):
        for _ in range(n):
            F.conv2d(x, w)
        torch.cuda.synchronize()

    lost = []

    def session() -> tuple[float, float]:
        try:
            with measure.kernel_clock(0, own_timestamps=own) as s:
                for _ in range(WINDOWS):
                    s.window(loop)
                h0 = time.perf_counter_ns()
                i = s.window(lambda: time.sleep(0.02))
                host = time.perf_counter_ns() - h0
        except measure.KernelClockLost:
            lost.append(len(lost))
            raise
        us = statistics.median(busy / CALLS * 1e3 for busy, _, _ in s.results[:WINDOWS])
        t0, t1 = s.windows[i]
        return us, (t1 - t0) / host

    def reading() -> tuple[float, float]:
        """(kernel us per call, median of WINDOWS windows; CUPTI units per host ns over a 20 ms sleep), measured
        again when the session was lost, as measure_rows does (`lost` counts those)."""
        return measure.again_if_lost(session)

    def kineto_us() -> float:
        return measure.reference_kernel_ms([(0, loop, CALLS)], 0)[0] * 1e3

    loop()  # warm-up: cuDNN's plan, CUDA's lazy loading
    before = [reading() for _ in range(2)]
    if between == "profiler":
        with profile(activities=[ProfilerActivity.CUDA]):
            for _ in range(5):
                F.conv2d(x2, w2, padding=1)
            torch.cuda.synchronize()
    else:
        time.sleep(2.0)
    after = [reading() for _ in range(3)]
    kineto_after_ours = kineto_us()
    with cudnn_algos.cupti_held():
        held = reading()
        kineto_after_held = kineto_us()
        held_after_kineto = reading()
    return {"variant": variant, "before_us": [u for u, _ in before], "before_rate": [r for _, r in before],
            "after_us": [u for u, _ in after], "after_rate": [r for _, r in after],
            "kineto_after_ours_us": kineto_after_ours, "held_us": held[0], "kineto_after_held_us": kineto_after_held,
            "held_after_kineto_us": held_after_kineto[0], "held_after_kineto_rate": held_after_kineto[1],
            "sessions_lost": len(lost)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", choices=list(VARIANTS), help=argparse.SUPPRESS)
    ap.add_argument("--json", metavar="PATH")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child)))
        return 0
    from fresh import run_worker

    out = []
    for name, (_, _, teardown) in VARIANTS.items():
        os.environ["TEARDOWN_CUPTI"] = teardown  # the child inherits it; kineto reads it at each session's end
        out.append(run_worker(__file__, ["--child", name], timeout=180) | {"variant": name})
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    f = lambda v: " ".join(f"{x:6.2f}" for x in v)  # noqa: E731
    print("kernel clock, 1x1 40->120 @28 fp32 (torch's op): us per call; rate = CUPTI units per host ns")
    print(f"{'variant':<9} {'before':>13}  {'after (1st 2nd 3rd)':>20}  {'rate before/after1':>18}  "
          f"{'kineto':>6}  {'held':>6}  {'kineto|held':>11}  {'held|kineto':>11}  lost")
    for o in out:
        if "error" in o:
            print(f"{o['variant']:<9} error: {o['error']}")
            continue
        print(f"{o['variant']:<9} {f(o['before_us']):>13}  {f(o['after_us']):>20}  "
              f"{o['before_rate'][0]:8.3f}/{o['after_rate'][0]:<8.3f}  {o['kineto_after_ours_us']:6.2f}  "
              f"{o['held_us']:6.2f}  {o['kineto_after_held_us']:11.2f}  {o['held_after_kineto_us']:11.2f}  "
              f"{o.get('sessions_lost', '?')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
