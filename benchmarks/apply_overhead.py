"""Host cost of one module call under apply() beside the same module without it, in one process: forward with
autograd recording, forward + backward, and forward under no_grad, on a tiny layer (so the convolution's own work is
small and the layers around it show). On a machine without a GPU the operator's CPU kernel is torch's own
convolution, so the difference is exactly what apply() adds around it (the Python forward, the binding, the
dispatcher, the autograd node); on a GPU it is the whole per-call path (csrc/pinned).

    python benchmarks/apply_overhead.py [--device cuda] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def per_call_us(fn, n: int, rounds: int = 7, sync=lambda: None) -> float:
    """Median over `rounds` of the wall time of `n` back-to-back calls, per call, in microseconds."""
    for _ in range(max(1, n // 10)):  # warm-up: first-call work (plans, caches) out of the timed loops
        fn()
    sync()
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        out.append((time.perf_counter() - t) / n * 1e6)
    return statistics.median(out)


def measure(device: str, n: int) -> dict[str, dict[str, float]]:
    import torch

    import cudnn_algos

    torch.manual_seed(0)
    m = torch.nn.Conv2d(4, 4, 1).to(device)
    x = torch.randn(1, 4, 2, 2, device=device, requires_grad=True)
    g = torch.randn(1, 4, 2, 2, device=device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def fwd():
        m(x)

    def fwd_bwd():
        torch.autograd.backward(m(x), g)

    def fwd_nograd():
        with torch.no_grad():
            m(x)

    cases = {"forward": fwd, "forward+backward": fwd_bwd, "forward, no_grad": fwd_nograd}
    out: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as d:
        for label in ("torch", "apply", "torch again"):  # torch timed before and after: drift shows
            handle = cudnn_algos.apply(m, str(Path(d) / "empty.sqlite")) if label == "apply" else None
            out[label] = {k: per_call_us(f, n, sync=sync) for k, f in cases.items()}
            if handle is not None:
                handle.undo()
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--calls", type=int, default=3000, help="calls per timed loop (default 3000)")
    p.add_argument("--json")
    a = p.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    r = measure(a.device, a.calls)
    print(f"Conv2d(4, 4, 1) on 1x4x2x2 ({a.device}), us per module call, median of 7 loops of {a.calls}:")
    print(f"{'':<12}" + "".join(f"{k:>20}" for k in next(iter(r.values()))))
    for label, row in r.items():
        print(f"{label:<12}" + "".join(f"{v:>20.2f}" for v in row.values()))
    if a.json:
        Path(a.json).write_text(json.dumps({"device": a.device, "calls": a.calls, "us": r}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
