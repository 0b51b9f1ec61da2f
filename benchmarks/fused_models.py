"""apply(model, fuse=True) against torch eager (benchmark on) and torch.compile (default mode), inference, fp16
channels_last: per model and batch, each variant in a fresh process (--processes of them, medians over those), the
first forward pass (host wall, synchronised) and the steady forward latency (CUDA events around --iters back-to-back
passes, median of 5 such samples after a warm-up), and for apply(fuse=True) the calls that ran fused. Prints one table.

    python benchmarks/fused_models.py [--models resnet50,regnet_y_800mf,mobilenet_v3_large,efficientnet_b0]
        [--batches 1,32] [--variants eager,fused,compile] [--processes 3] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def one(model_name: str, batch: int, variant: str, iters: int) -> dict:
    """One fresh process's numbers for one variant."""
    import torch
    import torchvision

    import cudnn_algos
    from cudnn_algos.measure import python_loop

    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = getattr(torchvision.models, model_name)().cuda().half().to(memory_format=torch.channels_last).eval()
    x = torch.randn(batch, 3, 224, 224, device="cuda", dtype=torch.float16).contiguous(memory_format=torch.channels_last)
    out: dict = {}
    run = model
    if variant == "fused":
        h = cudnn_algos.apply(model, fuse=True)
        run = h.model
    elif variant == "compile":
        run = torch.compile(model)
    with torch.no_grad():
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        run(x)
        torch.cuda.synchronize()
        out["first_ms"] = (time.perf_counter() - t0) * 1e3
        for _ in range(10):
            run(x)
        loop = python_loop(lambda i: run(x), 0)  # (host ms, device-event ms) of k back-to-back passes
        samples = [loop(iters)[1] / iters for _ in range(5)]
    out["steady_ms"] = statistics.median(samples)
    if variant == "fused":
        c = h.counts()
        out["fused_calls"] = sum(v.get("fused", 0) for v in c.values())
        out["torch_calls"] = sum(n for v in c.values() for k, n in v.items() if k != "fused")
        out["chains"] = len(c)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet50,regnet_y_800mf,mobilenet_v3_large,efficientnet_b0")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--variants", default="eager,fused,compile")
    ap.add_argument("--processes", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--budget-s", type=float, default=500.0)
    ap.add_argument("--json", default="")
    ap.add_argument("--one", default="", help=argparse.SUPPRESS)  # model,batch,variant: run in this process
    a = ap.parse_args()
    if a.one:
        m, b, v = a.one.split(",")
        print("RESULT " + json.dumps(one(m, int(b), v, a.iters)), flush=True)
        return
    t_end = time.perf_counter() + a.budget_s
    rows = []
    print(f"{'model':20} {'b':>3} {'variant':8} {'first ms':>9} {'steady ms':>9} {'x eager':>7} {'fused/calls':>11}")
    for model in a.models.split(","):
        for b in (int(v) for v in a.batches.split(",")):
            res = {}
            for v in a.variants.split(","):
                got = []
                for _ in range(a.processes):
                    if time.perf_counter() > t_end:
                        break
                    p = subprocess.run([sys.executable, __file__, "--one", f"{model},{b},{v}", "--iters",
                                        str(a.iters)], capture_output=True, text=True, cwd=ROOT)
                    line = next((x for x in p.stdout.splitlines() if x.startswith("RESULT ")), None)
                    if line is None:
                        print(f"{model} b{b} {v}: failed: {(p.stderr or p.stdout).strip().splitlines()[-1:]}")
                        break
                    got.append(json.loads(line[7:]))
                if not got:
                    continue
                r = {"model": model, "batch": b, "variant": v, "processes": len(got),
                     "first_ms": statistics.median(g["first_ms"] for g in got),
                     "steady_ms": statistics.median(g["steady_ms"] for g in got),
                     **{k: got[0][k] for k in ("fused_calls", "torch_calls", "chains") if k in got[0]}}
                res[v] = r
                rows.append(r)
                x = res["eager"]["steady_ms"] / r["steady_ms"] if "eager" in res else None
                fc = f"{r['fused_calls']}/{r['fused_calls'] + r['torch_calls']}" if "fused_calls" in r else "-"
                print(f"{model:20} {b:>3} {v:8} {r['first_ms']:9.1f} {r['steady_ms']:9.3f} "
                      f"{(f'{x:.2f}' if x else '-'):>7} {fc:>11}", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
