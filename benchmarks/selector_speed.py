"""How long the selector takes to rank one problem's candidates on the CPU (what apply(unseen="predict") adds to a
problem's first call besides cuDNN's heuristic query and one plan build): the shipped H200 selector, problem
features computed, n candidates encoded and ranked; median and min over repeats, microseconds.

    python benchmarks/selector_speed.py [--candidates 20,60] [--repeats 200] [--model sel.npz]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--candidates", default="20,60")
    p.add_argument("--repeats", type=int, default=200)
    p.add_argument("--model", default="shipped", help="a selector file (default: the shipped H200 one)")
    a = p.parse_args(argv)
    from cudnn_algos.selector import Selector, problem_features
    from cudnn_algos.spec import ConvSpec

    sel = Selector.shipped("sm_90-cudnn-9.19") if a.model == "shipped" else Selector.load(a.model)
    engines = list(sel.vocabulary.engines)
    spec = ConvSpec(64, 128, (3, 3), padding=(1, 1))
    ev = "none" if sel.evidence is None else f"{len(sel.evidence.value)} entries, k={sel.evidence.k}"
    print(f"selector {sel.family}: {len(sel.trees.offset)} trees, {len(sel.trees.feature)} nodes; evidence: {ev}")
    print(f"{'candidates':>10} {'median us':>10} {'min us':>8}   (features + encode + rank, one problem)")
    for n in (int(x) for x in a.candidates.split(",")):
        cands = [(engines[i % len(engines)], {"TILE_SIZE": i % 7}, {"a": i, "b": n - i}) for i in range(n)]
        ts = []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            sel.rank(problem_features(spec, (32, 64, 56, 56), "float16", "channels_last", "forward"), cands)
            ts.append(time.perf_counter() - t0)
        print(f"{n:>10} {1e6 * statistics.median(ts):>10.0f} {1e6 * min(ts):>8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
