"""What apply() pins for problems no training model had, timed beside the fullest search's best in one call (issue
53's held-out evaluation, through the public API).

For N problem-directions drawn from a corpus (default: data/corpora/sampled-heldout-seed2-600.json.gz, problems in
the held-out ranges, never swept for training), each in turn:
1. find_engines with cuDNN's four lists, refine, and every engine's knobs up to --max-configs, measured, torch's op
   beside it with benchmark on (its first call of the problem in this process is its search): the search's best
   that torch would accept, and INSTANT's first that torch accepts (what torch runs with benchmark off);
2. per mode (predict; measure_top_k with k="auto"): a one-layer model of the problem, apply(model, a fresh database,
   unseen=mode, background=False), three passes that reach the problem's direction, and the configuration the
   operator pinned for it (Applied.counts()' config under the problem's key; none: it ran torch's op);
3. one more find_engines of those configurations by name (the best, INSTANT's first, the pinned ones), measured in
   one call beside torch's op (the plan torch chose in step 1): each pick's regret over the best on that clock.

    python benchmarks/heldout_picks.py [CORPUS] --n 40 [--seed 0] [--skip K] [--json out.json] [--budget-s S]
    python benchmarks/heldout_picks.py data/corpora/11-families-batch8-fp16nhwc-fp32.json.gz --selector no-b8.npz
    python benchmarks/heldout_picks.py data/corpora/11-families-batch1-fp16nhwc-fp32.json.gz --family timm \
        --selector no-timm.npz

--selector: the model apply() ranks with (default: the shipped one), e.g. one `cudnn-algos selector train
--leave-out` trained without the corpus's batch size or family (the leave-one-out sets, through apply()); --family:
only the corpus's problems of that family; --skip K: the seeded order's first K left out (a later call goes on).

Needs a GPU. Prints per pick the mean and median regret and the share more than 5% off, per dtype.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DEFAULT_CORPUS = "data/corpora/sampled-heldout-seed2-600.json.gz"
MODES = ("predict", "measure_top_k")
PICKS = ("predict", "measure_top_k", "instant", "torch_on")


def regrets(times: dict[str, float | None], best: float) -> dict[str, float | None]:
    """Each pick's regret over `best` (pick / best - 1); None where the pick has no time."""
    return {k: (t / best - 1 if t is not None and best > 0 else None) for k, t in times.items()}


def summary(rows: list[dict]) -> list[str]:
    """Per dtype and in all: each pick's mean and median regret and the share of problem-directions over 5%."""
    out = []
    groups: dict[str, list[dict]] = {"all": rows}
    for r in rows:
        groups.setdefault(r["dtype"], []).append(r)
    for g, rs in groups.items():
        cells = []
        for p in PICKS:
            v = [r["regret"][p] for r in rs if r["regret"].get(p) is not None]
            if v:
                cells.append(f"{p} {100 * statistics.mean(v):.1f}% ({100 * statistics.median(v):.1f}%, "
                             f">5% {100 * sum(x > 0.05 for x in v) / len(v):.0f}%)")
        out.append(f"{g} ({len(rs)}): " + "; ".join(cells))
    return out


def instant_first(rows):
    """Of built rows torch would accept (no ``torch_filter``), the one cuDNN's INSTANT list ranks first (the list's
    source is "heuristic_instant"); None when INSTANT listed none of them."""
    ranked = [r for r in rows if not r.torch_filter and dict(r.heuristic_ranks).get("heuristic_instant") is not None]
    return min(ranked, key=lambda r: dict(r.heuristic_ranks)["heuristic_instant"], default=None)


def _passes(spec, shape, dtype: str, fmt: str, direction: str, db: str, mode: str, selector: str | None
            ) -> str | None:
    """The configuration apply(unseen=mode) pinned for this problem-direction after three passes reaching it."""
    import torch

    import cudnn_algos
    from cudnn_algos.problem import make_problem
    from cudnn_algos.tuning.keys import problem_key

    dt = getattr(torch, dtype)
    m = spec.to_module(device="cuda", dtype=dt)
    x = torch.randn(shape, device="cuda", dtype=dt)
    if fmt == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last if x.dim() == 4 else torch.channels_last_3d)
        m = m.to(memory_format=torch.channels_last if x.dim() == 4 else torch.channels_last_3d)
    key = problem_key(make_problem(spec, tuple(shape), dtype, fmt, None), direction)
    k = "auto" if mode == "measure_top_k" else 3
    with cudnn_algos.apply(m, db, unseen=mode, background=False, k=k, selector=selector) as h:
        for _ in range(3):
            xi = x.detach().requires_grad_(direction == "backward_data")
            m.weight.requires_grad_(direction == "backward_filter")
            if direction == "forward":
                with torch.no_grad():
                    m(xi)
            else:
                y = m(xi)
                y.backward(torch.randn_like(y))
        torch.cuda.synchronize()
        got = [c for c in h.counts() if c["key"] == key]
    return got[0]["config"] if got and got[0]["pinned"] else None


def one(p, direction: str, max_configs: int, selector: str | None = None) -> dict:
    import cudnn_algos
    from cudnn_algos.configs import SEARCH_LISTS

    kw = dict(direction=direction, dtype=p.dtype, memory_format=p.memory_format)
    full = cudnn_algos.find_engines(p.spec, p.input_shape, heuristics=SEARCH_LISTS, exhaustive=True,
                                    max_configs=max_configs, measure=True, screen=3, refine=3, repeats=5,
                                    compare_torch=True, torch_benchmark=True, **kw)
    best = full.best_eligible
    inst = instant_first(full.succeeded)
    pinned = {}
    with tempfile.TemporaryDirectory() as d:
        for mode in MODES:
            pinned[mode] = _passes(p.spec, p.input_shape, p.dtype, p.memory_format, direction, f"{d}/{mode}.sqlite",
                                   mode, selector)
    names = {"best": best.name if best else None, "instant": inst.name if inst else None, **pinned}
    again = cudnn_algos.find_engines(p.spec, p.input_shape, configs=sorted({n for n in names.values() if n}),
                                     measure=True, repeats=7, compare_torch=True, torch_benchmark=True, **kw)
    t = {r.name: r.kernel_ms for r in again.succeeded}
    times = {k: t.get(n) if n else None for k, n in names.items()}
    times["torch_on"] = again.torch.kernel_ms if again.torch else None
    b = times.pop("best")
    return {"problem": f"{p.spec} @ {'x'.join(map(str, p.input_shape))}", "dtype": p.dtype, "direction": direction,
            "names": names, "times_ms": {**times, "best": b}, "regret": regrets(times, b) if b else {}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpus", nargs="?", default=DEFAULT_CORPUS)
    ap.add_argument("--n", type=int, default=40, help="problem-directions drawn (seeded)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip", type=int, default=0, help="leave out the seeded order's first K (a later call goes on)")
    ap.add_argument("--family", default=None, help="only the corpus's problems of this family")
    ap.add_argument("--selector", default=None, help="the model file apply() ranks with (default: the shipped one)")
    ap.add_argument("--max-configs", type=int, default=64, help="the full search's exhaustive cap")
    ap.add_argument("--json", default=None, help="every row so far, written again after each problem-direction")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="no new problem-direction after this many seconds (the rows so far are summarized)")
    a = ap.parse_args()
    if a.n < 1 or a.max_configs < 1 or a.skip < 0:
        ap.error(f"--n {a.n} and --max-configs {a.max_configs} must be at least 1, --skip {a.skip} at least 0")
    if a.selector is not None and not Path(a.selector).is_file():
        ap.error(f"--selector {a.selector}: no such file")
    if a.budget_s is not None and a.budget_s <= 0:
        ap.error(f"--budget-s {a.budget_s} must be positive")
    import torch

    from cudnn_algos.corpus import Corpus
    from cudnn_algos.problem import DIRECTIONS

    problems = [p for p in Corpus.load(a.corpus).problems if a.family is None or a.family in p.families]
    if not problems:
        print(f"heldout_picks: {a.corpus} has no problem of family {a.family!r}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("heldout_picks: needs a CUDA GPU (none visible)", file=sys.stderr)
        return 2
    pairs = [(p, d) for p in problems for d in DIRECTIONS]
    random.Random(a.seed).shuffle(pairs)
    pairs = pairs[a.skip:]
    rows = []
    t0 = time.monotonic()
    for p, d in pairs[:a.n]:
        if a.budget_s is not None and time.monotonic() - t0 > a.budget_s:
            print(f"stopped: --budget-s {a.budget_s:g} spent")
            break
        try:
            rows.append(one(p, d, a.max_configs, a.selector))
        except Exception as e:  # one problem's failure is a line, the run goes on
            print(f"failed: {p.spec} @ {p.input_shape} {p.dtype} {d}: {type(e).__name__}: {str(e)[:200]}")
            continue
        print(json.dumps(rows[-1]["regret"]), rows[-1]["problem"], d, flush=True)
        if a.json:  # a run cut short keeps what it measured
            Path(a.json).write_text(json.dumps(rows, indent=1))
    which = (f", family {a.family}" if a.family else "") + (f", skipped {a.skip}" if a.skip else "")
    print(f"held-out picks ({a.corpus}{which}, selector {a.selector or 'shipped'}, {len(rows)} of {a.n} "
          f"problem-directions), regret over the best (mean (median, share > 5%)):")
    print("\n".join(summary([r for r in rows if r["regret"]])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
