"""The sampled halves (CPU, stored times): how the selector carries to sampled shapes its training never had.

The dataset's sampled problem-directions split in two by the low bit of sha1(key)'s first byte; one half is held
out from a model trained with the shipped recipe (learner "hist": selector.train's defaults) on everything else, and
scored as `selector eval --model` scores (selector.train.score). `score` writes each held-out problem-direction's
regrets (every method choose() scores) as JSON; with --bag SEED the model learns from a share of its training
problem-directions only (chosen by sha1(SEED:key)), one member of an ensemble.

`compare` reads a model's file and its bags' and measures ensemble disagreement as a guard (issue 53: "where the
model is not confident ... it takes INSTANT's first"): where a bag's predict pick differs from the model's, INSTANT's
first instead; the regrets on the problems where they agree and where they do not. Two picks count as the same when
their kernel times are (a time is its configuration's, so two configurations timed exactly alike read as one).

    python benchmarks/sampled_halves.py score data/sm_90-cudnn-9.19 --half 0 --out h0.json   # ~8 min, ~12 GB
    python benchmarks/sampled_halves.py score data/sm_90-cudnn-9.19 --half 0 --bag a --out h0a.json
    python benchmarks/sampled_halves.py compare h0.json h0a.json [h0b.json]
"""
from __future__ import annotations

import argparse
import gc
import glob
import hashlib
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SLOWER = 0.05  # "slower than benchmark off": more than this slower than INSTANT's first (torch, benchmark off)
BAG_SHARE = 0.75  # a bag's share of the training problem-directions


def half_of(key: str) -> int:
    """The half a sampled problem-direction belongs to: the low bit of sha1(key)'s first byte."""
    return hashlib.sha1(key.encode()).digest()[0] & 1


def in_bag(key: str, seed: str, share: float = BAG_SHARE) -> bool:
    """Whether a training problem-direction is in bag `seed`: sha1(seed:key)'s first byte under share x 256."""
    return hashlib.sha1(f"{seed}:{key}".encode()).digest()[0] < share * 256


def is_sampled(rows: Sequence[dict[str, Any]]) -> bool:
    return "sampled" in (rows[0].get("families") or [])


def score(directory: str, half: int, out: str, bag: str | None = None, share: float = BAG_SHARE) -> None:
    """Trains on all but sampled half `half` (a bag of it with `bag`) and writes the held-out regrets to `out`."""
    from cudnn_algos.dataset import shards
    from cudnn_algos.selector.train import score as score_model, train

    t0 = time.perf_counter()
    probs = shards.measured(sorted(glob.glob(os.path.join(directory, "*.parquet"))))
    held = [(k, r) for k, r in probs if is_sampled(r) and half_of(k) == half]
    trainset = [(k, r) for k, r in probs if not (is_sampled(r) and half_of(k) == half)
                and (bag is None or in_bag(k, bag, share))]
    del probs
    gc.collect()
    print(f"held out {len(held)}, training {len(trainset)} ({time.perf_counter() - t0:.0f} s to load)", flush=True)
    t0 = time.perf_counter()
    sel = train(trainset, learner="hist")
    del trainset
    gc.collect()
    print(f"trained in {time.perf_counter() - t0:.0f} s", flush=True)
    seen, new = score_model(sel, held)
    with open(out, "w") as f:
        json.dump({"half": half, "bag": bag, "share": share if bag else 1.0,
                   "problems": [{"key": p.key, "dtype": p.dtype, "regret": p.regret, "best_ms": p.best_ms}
                                for p in seen + new]}, f)
    print(f"wrote {out}: {len(seen) + len(new)} held-out problem-directions")


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else math.nan


def disagreement(base: dict[str, dict], bags: Sequence[dict[str, dict]]) -> dict[str, Any]:
    """The figures `compare` prints, from per-key regret dicts ({key: {"dtype", "regret"}}): per method the mean
    regret and the share more than SLOWER slower than benchmark off; "agree"/"disagree": the problems where every
    bag's predict reads the model's and the others, with their means."""
    same = lambda a, b: a is not None and b is not None and abs(a - b) <= 1e-12 * max(1.0, abs(b))  # noqa: E731
    rows = []
    for key, d in base.items():
        r = d["regret"]
        p, inst = r.get("predict"), r.get("instant")
        if p is None or inst is None or not all(key in b for b in bags):
            continue
        others = [b[key]["regret"].get("predict") for b in bags]
        rows.append({"dtype": d["dtype"], "predict": p, "instant": inst, "torch_on": r.get("torch_on"),
                     "known_auto": r.get("known_auto"), "agree": all(same(o, p) for o in others),
                     "bags": others})
    out: dict[str, Any] = {"n": len(rows)}

    def figures(sel: Sequence[dict], pick) -> dict[str, float]:
        got = [(pick(x), x["instant"]) for x in sel]
        got = [(v, i) for v, i in got if v is not None]
        return {"mean": _mean([v for v, _ in got]),
                "slower": _mean([float(1 + v > (1 + SLOWER) * (1 + i)) for v, i in got])}

    methods = {"predict": lambda x: x["predict"], "instant": lambda x: x["instant"],
               "torch_on": lambda x: x["torch_on"], "known_auto": lambda x: x["known_auto"],
               "predict, disagreement -> INSTANT": lambda x: x["predict"] if x["agree"] else x["instant"]}
    for i in range(len(bags)):
        methods[f"bag {i}'s predict"] = lambda x, i=i: x["bags"][i]
    out["all"] = {m: figures(rows, f) for m, f in methods.items()}
    for name, want in (("agree", True), ("disagree", False)):
        sel = [x for x in rows if x["agree"] == want]
        out[name] = {"n": len(sel), **{m: figures(sel, f)["mean"] for m, f in methods.items()}}
    for dt in sorted({x["dtype"] for x in rows}):
        sel = [x for x in rows if x["dtype"] == dt]
        out[dt] = {"n": len(sel), **{m: figures(sel, f)["mean"] for m, f in methods.items()}}
    return out


def _load(path: str) -> dict[str, dict]:
    with open(path) as f:
        d = json.load(f)
    return {p["key"]: p for p in (d["problems"] if isinstance(d, dict) else d)}


def compare(base: str, bags: Sequence[str]) -> None:
    got = disagreement(_load(base), [_load(b) for b in bags])
    print(f"{got['n']} held-out problem-directions scored by the model and {len(bags)} bag(s)")
    print(f"{'method':36s} {'mean':>8s} {'> 5% slower than off':>21s}")
    for m, f in got["all"].items():
        print(f"{m:36s} {100 * f['mean']:7.1f}% {100 * f['slower']:20.1f}%")
    for part in ("agree", "disagree", *sorted(k for k in got if k.startswith(("bfloat", "float")))):
        g = got[part]
        means = ", ".join(f"{m} {100 * v:.1f}%" for m, v in g.items() if m != "n")
        print(f"{part} ({g['n']}): {means}")


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("score", help="train without a sampled half (or a bag of it) and score that half")
    s.add_argument("directory", help="the dataset's shard directory (data/sm_90-cudnn-9.19)")
    s.add_argument("--half", type=int, choices=(0, 1), required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--bag", default=None, help="a seed: train on a share of the training problem-directions")
    s.add_argument("--share", type=float, default=BAG_SHARE)
    c = sub.add_parser("compare", help="a model's scores beside its bags': ensemble disagreement as a guard")
    c.add_argument("base")
    c.add_argument("bags", nargs="+")
    a = ap.parse_args(argv)
    if a.cmd == "score":
        if not 0 < a.share <= 1:
            ap.error(f"--share {a.share}: must be in (0, 1]")
        score(a.directory, a.half, a.out, a.bag, a.share)
    else:
        compare(a.base, a.bags)


if __name__ == "__main__":
    main()
