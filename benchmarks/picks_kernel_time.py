"""The convolution share of what varying_shapes.py's kernel clock compares, layer by layer: for every problem-direction
ResNet-50's training step runs at the varying-shapes benchmark's shapes (fp16 channels_last), the kernel ms of the
shipped selector's pick (apply(unseen="predict"): cuDNN's lists A and B and the selector's known configurations,
ranked as apply() ranks them), of the fastest of measure_top_k's shortlist (k=3), and of cuDNN's first that torch
accepts from INSTANT (torch's op with benchmark off); each plan built here and timed on the same fresh random
operands (one warm-up call, then the median of --samples runs of --calls back-to-back calls, device events), summed
over the step with each layer's use count. Beside them, variants of predict's rule for the known configurations:
"trees" (the trees' own first, without Note [known configurations first]), "lists" (the trees' first among the
lists' candidates only) and "nearD" (that Note's rule at radius D). The problem-directions where predict's pick is
slowest against torch's come last. A pick is the first of its order that builds, as the operator takes it.

    python benchmarks/picks_kernel_time.py [--batches 16,32,48,64] [--sizes 192,224] [--json out.json]
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DTYPE, FMT = "float16", "channels_last"


def one(sel, spec, shape, direction: str, a) -> dict | str:
    """The picks' kernel ms for one problem-direction, or why there are none (a list offers nothing torch accepts,
    or a pick did not build). Each pick is the first of its order that builds, as the operator takes it."""
    from cudnn_algos import backend
    from cudnn_algos.measure import operand_sets
    from cudnn_algos.problem import make_problem
    from cudnn_algos.selector import problem_features
    from cudnn_algos.choose.model import listed
    from cudnn_algos.choose.ranking import candidates_of, rank
    from cudnn_algos.choose.shortlist_clock import rows_for, time_on

    problem = make_problem(spec, shape, DTYPE, FMT)
    cp = backend.conv_problem(problem)
    lists = candidates_of(backend.engine_search(direction, cp, ("a", "b"), build=False).plans, DTYPE, False, True)
    instant = candidates_of(backend.engine_search(direction, cp, ("instant",), build=False).plans, DTYPE, False, True)
    if not lists or not instant:
        return "lists A/B or INSTANT offer nothing torch accepts"
    feats = problem_features(spec, shape, DTYPE, FMT, direction)
    ranked, short = rank(lists, sel, feats, 3, sel.known_for(direction, DTYPE, FMT, False, True))
    # the trees' own order, before Note [known configurations first] (cuDNN's outside the reach, as predict's)
    enc = [c.encoded for c in ranked]
    idx = ([int(i) for i in np.argsort(sel.predict(feats, enc), kind="stable")] if sel.within_reach(feats)
           else list(range(len(ranked))))
    trees = [ranked[i] for i in idx]
    orders = {"predict": ranked, "trees": trees, "lists": [c for c in trees if listed(c.encoded)], "off": instant[:4]}
    for d in a.near:  # the rule at other radii
        orders[f"near{d:g}"] = [ranked[i] for i in sel.known_first(feats, enc, idx, d)]
    orders = {k: v[:4] for k, v in orders.items()}
    want = [c for v in orders.values() for c in v] + short
    uniq = list({c.name: c for c in reversed(want)}.values())  # a configuration named twice is built once
    out = backend.engine_search(direction, cp, (), exact=[(c.engine_id, list(c.knobs)) for c in uniq],
                                build_threads=4)
    rows = rows_for(uniq, out.plans)
    s = operand_sets(problem, "warm", 0)[0]
    by_name = dict(zip((c.name for c in uniq), time_on([rows.get(c) for c in uniq], s, a.calls, a.samples)))
    row = {"shape": list(shape), "layer": f"{spec.in_channels}->{spec.out_channels} k{spec.kernel_size[0]} "
           f"s{spec.stride[0]}", "direction": direction}
    for k, v in orders.items():
        got = next((c for c in v if by_name.get(c.name) is not None), None)
        if got is None:
            return f"none of the first {len(v)} of the {k!r} order built"
        row[k], row[f"{k}_name"] = by_name[got.name], got.name
    short_ms = [by_name[c.name] for c in short if by_name.get(c.name) is not None]
    if not short_ms:
        return "no configuration of the shortlist built"
    row["top3"] = min(short_ms)
    return row


def summary(rows: list[dict], why: collections.Counter, a) -> str:
    """Each pick's kernel ms summed with use counts, against torch off's; where predict loses most to it."""
    picks = ["off", "predict", "trees", "lists"] + [f"near{d:g}" for d in a.near] + ["top3"]
    tot = {m: sum(r[m] * r["uses"] for r in rows) for m in picks}
    if not rows:
        return f"picks' kernel time: no problem-direction has every pick (left out: {dict(why)})"
    out = [f"picks' kernel time: ResNet-50 {DTYPE} {FMT}, batches {a.batches} x sizes {a.sizes}, {len(rows)} "
           f"problem-directions (left out: {dict(why) or 'none'}); summed with use counts, ms (x torch off's):",
           "  " + ", ".join(f"{m} {tot[m]:.2f} ({tot[m] / tot['off']:.3f}x)" for m in picks),
           f"  predict's pick is INSTANT's first in {sum(r['predict_name'] == r['off_name'] for r in rows)} of "
           f"{len(rows)}", "  where predict loses most against torch off (uses x ms): off ms -> predict ms"]
    for r in sorted(rows, key=lambda r: (r["predict"] - r["off"]) * r["uses"])[-6:]:
        out.append(f"    {'x'.join(map(str, r['shape']))} {r['layer']} {r['direction']} x{r['uses']}: "
                   f"{r['off']:.4f} -> {r['predict']:.4f} ({r['predict_name']} vs {r['off_name']})")
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batches", default="16,32,48,64")
    p.add_argument("--sizes", default="192,224")
    p.add_argument("--calls", type=int, default=5)
    p.add_argument("--samples", type=int, default=3)
    p.add_argument("--near", default="0.5,2", type=lambda t: [float(x) for x in t.split(",") if x],
                   help="also predict's pick where a configuration no list names ranks first only if it was the "
                   "fastest of a training problem within this distance (each, comma-separated)")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    import torch

    from cudnn_algos.backend import environment
    from cudnn_algos.selector import Selector
    from cudnn_algos.builtin_models import resnet50_convs

    torch.manual_seed(0)
    sel = Selector.shipped(environment(0).selector_family())
    rows, why = [], collections.Counter()
    for b in (int(x) for x in a.batches.split(",")):
        for r in (int(x) for x in a.sizes.split(",")):
            for _, spec, shape, uses in resnet50_convs(b, r):
                # the stem's input needs no gradient: torch runs no backward_data there
                dirs = ("forward", "backward_filter") if spec.in_channels == 3 else (
                    "forward", "backward_data", "backward_filter")
                for d in dirs:
                    row = one(sel, spec, shape, d, a)
                    if isinstance(row, str):
                        why[row] += 1
                    else:
                        rows.append({**row, "uses": uses})
    print(summary(rows, why, a))
    if a.json:
        Path(a.json).write_text(json.dumps({"args": vars(a), "left_out": dict(why), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
