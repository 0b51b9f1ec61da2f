"""apply(model, fuse=True) against torch eager (benchmark on) and torch.compile (default mode), inference, fp16
channels_last: per model and batch, each variant in a fresh process (--processes of them, medians over those), the
first forward pass (host wall, synchronised) and the steady forward latency (CUDA events around --iters back-to-back
passes, median of 5 such samples after a warm-up), and for apply(fuse=True) the calls that ran fused and its output
against an unfused copy of the eval model (max |diff| / max |output|, after the timings). Prints one table.

Variants: eager (torch, benchmark on), compile (torch.compile, default mode), fused (apply(fuse=True) with no
database: INSTANT's first fused plan per chain, built at its first call) and fused-db (apply(fuse=True) from a
database that tune(fuse=True) filled in a process of its own before, its plans serialized beside it: the warm
database a later process meets; the tuning process's time is the row's tune s).

    python benchmarks/fused_models.py [--models resnet50,regnet_y_800mf,mobilenet_v3_large,efficientnet_b0]
        [--batches 1,32] [--variants eager,fused-db,compile] [--processes 3] [--json out.json]
"""
from __future__ import annotations

import argparse
import copy
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def one(model_name: str, batch: int, variant: str, iters: int, db: str = "") -> dict:
    """One fresh process's numbers for one variant (variant "tune": tune(fuse=True) into `db`, its time)."""
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
    ref_model = copy.deepcopy(model) if variant in ("fused", "fused-db") else None  # the eval model, unfused
    if variant == "tune":
        t0 = time.perf_counter()
        r = cudnn_algos.tune(model, x, db, fuse=True)
        return {"tune_s": time.perf_counter() - t0, "stored": r.stored}
    if variant in ("fused", "fused-db"):
        h = cudnn_algos.apply(model, db if variant == "fused-db" else None, fuse=True)
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
    if variant in ("fused", "fused-db"):
        c = h.counts()
        out["fused_calls"] = sum(v.get("fused", 0) for v in c.values())
        out["torch_calls"] = sum(n for v in c.values() for k, n in v.items() if k != "fused")
        out["chains"] = len(c)
        out["torch_why"] = sorted({f"{name}: {k}" for name, v in c.items() for k, n in v.items() if k != "fused" and n})
        with torch.no_grad():  # after the timings: the unfused model's search does not warm the fused model's pass
            got, ref = run(x).float(), ref_model(x).float()
        out["max_rel_err"] = float((got - ref).abs().max() / ref.abs().max().clamp_min(1e-30))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet50,regnet_y_800mf,mobilenet_v3_large,efficientnet_b0")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--variants", default="eager,fused-db,compile")
    ap.add_argument("--processes", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--budget-s", type=float, default=500.0)
    ap.add_argument("--json", default="")
    ap.add_argument("--db-dir", default="", help="where the fused-db variant's databases go (default: a temporary folder)")
    ap.add_argument("--one", default="", help=argparse.SUPPRESS)  # model,batch,variant[,db]: run in this process
    a = ap.parse_args()
    if a.one:
        m, b, v, *db = a.one.split(",")
        print("RESULT " + json.dumps(one(m, int(b), v, a.iters, db[0] if db else "")), flush=True)
        return
    db_dir = Path(a.db_dir or tempfile.mkdtemp(prefix="fused_models_"))
    db_dir.mkdir(parents=True, exist_ok=True)
    t_end = time.perf_counter() + a.budget_s
    variants = a.variants.split(",")
    rows = []

    def run_one(model: str, b: int, v: str, db: str) -> dict | None:
        p = subprocess.run([sys.executable, __file__, "--one", f"{model},{b},{v},{db}", "--iters", str(a.iters)],
                           capture_output=True, text=True, cwd=ROOT)
        line = next((x for x in p.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            print(f"{model} b{b} {v}: failed: {(p.stderr or p.stdout).strip().splitlines()[-1:]}", flush=True)
            return None
        return json.loads(line[7:])

    print(f"{'model':20} {'b':>3} {'variant':8} {'n':>1} {'first ms':>9} {'x eager1':>8} {'steady ms':>9} "
          f"{'(min-max)':>15} {'x eager':>7} {'x comp':>6} {'fused/calls':>11} {'tune s':>6}")
    for model in a.models.split(","):
        for b in (int(v) for v in a.batches.split(",")):
            if time.perf_counter() > t_end:
                break
            db = str(db_dir / f"{model}_b{b}.sqlite")
            tuned = run_one(model, b, "tune", db) if "fused-db" in variants else None
            got: dict[str, list[dict]] = {v: [] for v in variants}
            for _ in range(a.processes):  # the variants take turns, so a drift over the minutes hits each alike
                for v in variants:
                    if time.perf_counter() > t_end or (v == "fused-db" and tuned is None):
                        continue
                    r = run_one(model, b, v, db)
                    if r is not None:
                        got[v].append(r)
            res = {}
            for v in variants:
                g = got[v]
                if not g:
                    continue
                steady = [x["steady_ms"] for x in g]
                r = {"model": model, "batch": b, "variant": v, "processes": len(g),
                     "first_ms": statistics.median(x["first_ms"] for x in g),
                     "steady_ms": statistics.median(steady), "steady_min": min(steady), "steady_max": max(steady),
                     "first_all": [x["first_ms"] for x in g], "steady_all": steady,
                     **{k: g[0][k] for k in ("fused_calls", "torch_calls", "chains", "torch_why") if k in g[0]},
                     **({"max_rel_err": max(x["max_rel_err"] for x in g)} if "max_rel_err" in g[0] else {})}
                if v == "fused-db" and tuned:
                    r["tune_s"], r["stored"] = tuned["tune_s"], tuned["stored"]
                res[v] = r
                rows.append(r)
            for v, r in res.items():
                e, c = res.get("eager"), res.get("compile")
                x = f"{e['steady_ms'] / r['steady_ms']:.2f}" if e else "-"
                xc = f"{c['steady_ms'] / r['steady_ms']:.2f}" if c else "-"
                x1 = f"{r['first_ms'] / e['first_ms']:.2f}" if e else "-"
                fc = f"{r['fused_calls']}/{r['fused_calls'] + r['torch_calls']}" if "fused_calls" in r else "-"
                mm = f"({r['steady_min']:.3f}-{r['steady_max']:.3f})"
                ts = f"{r['tune_s']:.0f}" if "tune_s" in r else "-"
                print(f"{model:20} {b:>3} {v:8} {r['processes']:>1} {r['first_ms']:9.1f} {x1:>8} {r['steady_ms']:9.3f} "
                      f"{mm:>15} {x:>7} {xc:>6} {fc:>11} {ts:>6}", flush=True)
                if "max_rel_err" in r:  # the fused model's output against the eval model's, worst process
                    print(f"    output vs the eval model: max |diff| / max |ref| {r['max_rel_err']:.2e}", flush=True)
                for why in r.get("torch_why", [])[:4]:  # which chains ran torch's ops, and why (all in the JSON)
                    print(f"    torch's ops: {why}"[:160], flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
