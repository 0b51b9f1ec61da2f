"""A selector beside a model's profile: for each problem and direction a ModelReport measured, what the selector
would pick among the configurations heuristic lists A and B named (apply(unseen="predict")), the best of its
shortlist (unseen="measure_top_k"), and cuDNN's INSTANT first (torch with benchmark off), each as its measured
kernel time over the best configuration torch would accept; summed over the model's layer uses."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from .features import positions, problem_features
from .model import Selector
from .train import MEASURE_K


@dataclass(frozen=True)
class SelectorPick:
    problem: int
    direction: str
    uses: int
    best_ms: float
    pick: str | None  # unseen="predict"
    pick_ms: float | None
    shortlist_ms: float | None  # the fastest of the shortlist (unseen="measure_top_k")
    instant_ms: float | None  # INSTANT's first that built and torch accepts (torch, benchmark off)


def selector_picks(report: Any, selector: Selector, k: int = MEASURE_K) -> list[SelectorPick]:
    """Per problem and direction of `report` (a ModelReport) with a measured best: the selector's picks' and
    INSTANT's measured kernel ms."""
    out = []
    for pi, p in enumerate(report.problems):
        for d, r in sorted(p.engines.items()):
            best = r.best_eligible
            if best is None or best.kernel_ms is None:
                continue
            timed = [row for row in r.rows if row.ok and not row.torch_filter and row.kernel_ms is not None]
            listed = [row for row in timed if any(v is not None for v in positions(row.rank).values())]
            inst = sorted((row for row in timed if row.rank("heuristic_instant") is not None),
                          key=lambda row: row.rank("heuristic_instant"))
            pick = short = None
            if listed:
                feats = problem_features(p.spec, p.input_shape, p.dtype, p.memory_format, d)
                enc = [(row.engine_id, dict(row.knobs), positions(row.rank)) for row in listed]
                order = selector.rank(feats, enc)
                pick = listed[order[0]]
                short = min(listed[i].kernel_ms for i in selector.shortlist(feats, enc, k, order))
            out.append(SelectorPick(pi, d, p.count, best.kernel_ms, pick.name if pick else None,
                                    pick.kernel_ms if pick else None, short,
                                    inst[0].kernel_ms if inst else None))
    return out


def selector_lines(picks: Sequence[SelectorPick], selector: Selector) -> list[str]:
    """Per direction and in all: Σ over layer uses of each method's kernel ms over the best's (where all are known)."""
    lines = [f"selector {selector.family} ({selector.trained_on.get('problems')} problems): Σ kernel ms over layer "
             "uses (/ the best torch would accept)"]
    for d in sorted({x.direction for x in picks}) + ["all"]:
        xs = [x for x in picks if (d == "all" or x.direction == d) and None not in (x.pick_ms, x.shortlist_ms,
                                                                                       x.instant_ms)]
        if not xs:
            continue
        best = sum(x.best_ms * x.uses for x in xs)
        tot = {m: sum(getattr(x, m) * x.uses for x in xs) for m in ("pick_ms", "shortlist_ms", "instant_ms")}
        lines.append(f"  {d:15s} predict {tot['pick_ms']:.3f} ({tot['pick_ms'] / best:.3f}), measure_top_{MEASURE_K} "
                     f"{tot['shortlist_ms']:.3f} ({tot['shortlist_ms'] / best:.3f}), INSTANT "
                     f"{tot['instant_ms']:.3f} ({tot['instant_ms'] / best:.3f}), best {best:.3f}")
    return lines


__all__ = ["SelectorPick", "selector_picks", "selector_lines"]
