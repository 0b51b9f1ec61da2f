"""Where measure_top_k's choosing time goes, stage by stage, on one GPU: for each problem-direction of a model
(ResNet-50's 23 unique convolutions x 3 directions by default), host wall ms of cuDNN's operation graph alone, of each
heuristic list's query (asked twice: the second shows what cuDNN keeps between queries), of building a shortlist's 3
plans (1 and 3 build threads), of making fresh random operands, and of timing the 3 plans as choose/shortlist_clock.py
does (one warm-up call, then samples x calls back to back). Medians and sums over the problem-directions.

    python benchmarks/choosing_cost.py [--batch 32] [--size 224] [--dtype float16] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

LISTS = (("a",), ("b",), ("a", "b"), ("instant",))
SHORTLIST = 3


def _ms(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, 1e3 * (time.perf_counter() - t0)


def one(direction: str, problem, args) -> dict[str, float]:
    """The stages' host ms for one problem-direction."""
    import torch

    from cudnn_algos import backend
    from cudnn_algos.measure import operand_sets
    from cudnn_algos.choose.shortlist_clock import time_on

    cp = backend.conv_problem(problem)
    row: dict[str, float] = {}
    _, row["graph"] = _ms(lambda: backend.engine_search(direction, cp, (), build=False))
    listed = None
    for lists in LISTS:
        name = "+".join(lists)
        out, row[f"{name} first"] = _ms(lambda: backend.engine_search(direction, cp, lists, build=False))
        _, row[f"{name} again"] = _ms(lambda: backend.engine_search(direction, cp, lists, build=False))
        if lists == ("a", "b"):
            listed = out.plans
    exact = [(p.engine_id, [tuple(k) for k in p.knobs]) for p in (listed or ())[:SHORTLIST]]
    for threads in (1, SHORTLIST):
        built, row[f"build {threads} thread(s)"] = _ms(lambda: backend.engine_search(
            direction, cp, (), exact=exact, build_threads=threads, runtime_compiled=False))
    plans = [p for p in built.plans if p.status == "SUCCESS"]
    sets, row["operands"] = _ms(lambda: operand_sets(problem, "warm", 0))
    _, row["timing"] = _ms(lambda: time_on(plans, sets[0], args.calls, args.samples))
    row["plans timed"] = float(len(plans))
    torch.cuda.synchronize()
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--dtype", default="float16")
    p.add_argument("--calls", type=int, default=5, help="back-to-back calls per sample (shortlist_clock's)")
    p.add_argument("--samples", type=int, default=3)
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    import torch

    from cudnn_algos.problem import make_problem
    from cudnn_algos.builtin_models import resnet50_convs

    torch.manual_seed(0)
    rows = []
    t0 = time.perf_counter()
    for _, spec, shape, _ in resnet50_convs(a.batch, a.size):
        problem = make_problem(spec, shape, a.dtype, "channels_last")
        for d in ("forward", "backward_data", "backward_filter"):
            rows.append(one(d, problem, a))
    wall = time.perf_counter() - t0
    stages = list(rows[0])
    print(f"choosing cost: ResNet-50 batch {a.batch} at {a.size}, {a.dtype} channels_last, {len(rows)} "
          f"problem-directions ({wall:.1f} s); host ms per problem-direction, timing {a.samples} x {a.calls} calls")
    print(f"{'stage':>24} {'median':>8} {'sum':>9}")
    summary = {}
    for s in stages:
        v = [r[s] for r in rows]
        summary[s] = {"median": statistics.median(v), "sum": sum(v)}
        print(f"{s:>24} {statistics.median(v):>8.2f} {sum(v):>9.1f}")
    if a.json:
        Path(a.json).write_text(json.dumps({"args": vars(a), "summary": summary, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
