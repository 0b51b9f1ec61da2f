"""A selector beside a model's profile: for each problem and direction a ModelReport measured, what the selector
would pick (apply(unseen="predict"): the configurations heuristic lists A and B named and the selector's known
configurations of the problem's class, ranked as apply() ranks them), the best of its shortlist
(unseen="measure_top_k"), and cuDNN's INSTANT first (torch with benchmark off), each as its measured kernel time over
the best configuration torch would accept; summed over the model's layer uses. Beside k=3's shortlist, k="auto"'s
(Note [the automatic shortlist]), once its runtime-compiled additions are timed. A known configuration the profile did
not time cannot be scored: where the selector ranks one first, its first timed one is counted and the row says so."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..configs import heuristic_list
from ..choose.features import positions, problem_features
from ..choose.model import AUTO, Selector
from .train import MEASURE_K, encoded_by_name


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
    untimed_first: bool = False  # the selector's first was a known configuration the profile did not time
    auto_ms: float | None = None  # the fastest of k="auto"'s shortlist (its runtime-compiled additions timed too)


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
            src = heuristic_list("instant").source
            inst = sorted((row for row in timed if row.rank(src) is not None), key=lambda row: row.rank(src))
            pick, short, auto, untimed = _ranked(selector, p, d, timed, k)
            out.append(SelectorPick(pi, d, p.count, best.kernel_ms, pick.name if pick else None,
                                    pick.kernel_ms if pick else None, short, inst[0].kernel_ms if inst else None,
                                    untimed, auto))
    return out


def _ranked(selector: Selector, p: Any, direction: str, timed: Sequence[Any], k: int
            ) -> tuple[Any, float | None, float | None, bool]:
    """(the selector's first timed pick, the fastest timed one of its shortlist of k and of k=AUTO's, whether its
    first was untimed) among the rows the lists named and the known configurations (timed rows or, untimed, by
    name), as apply() ranks them (choose.ranking.with_known: none added where the lists named nothing)."""
    listed = [row for row in timed if any(v is not None for v in positions(row.rank).values())]
    if not listed:
        return None, None, None, False
    by_name = {row.name: row for row in timed}
    have = {row.name for row in listed}
    known = [n for n in selector.known_for(direction, p.dtype, p.memory_format) if n not in have]
    rows = listed + [by_name.get(n) for n in known]
    enc = ([(row.engine_id, dict(row.knobs), positions(row.rank)) for row in listed]
           + [(by_name[n].engine_id, dict(by_name[n].knobs), {}) if n in by_name else encoded_by_name(n)
              for n in known])
    feats = problem_features(p.spec, p.input_shape, p.dtype, p.memory_format, direction)
    order = selector.rank(feats, enc)
    first = next(i for i in order if rows[i] is not None)
    shortest = [min((rows[i].kernel_ms for i in selector.shortlist(feats, enc, n, order) if rows[i] is not None),
                    default=None) for n in (k, AUTO)]
    return rows[first], shortest[0], shortest[1], rows[order[0]] is None


def selector_lines(picks: Sequence[SelectorPick], selector: Selector) -> list[str]:
    """Per direction and in all: Σ over layer uses of each method's kernel ms over the best's (where all are known)."""
    lines = [f"selector {selector.family} ({selector.trained_on.get('problems')} problems): Σ kernel ms over layer "
             "uses (/ the best torch would accept)"]
    untimed = sum(x.untimed_first for x in picks)
    if untimed:
        lines.append(f"  (in {untimed} of {len(picks)} the selector's first is a known configuration this profile "
                     "did not time: its first timed one is counted)")
    methods = (("predict", "pick_ms"), (f"measure_top_{MEASURE_K}", "shortlist_ms"), ("k=auto", "auto_ms"),
               ("INSTANT", "instant_ms"))
    lines.append(f"  {'':15s}" + "".join(f"{name:>17s}" for name, _ in methods) + f"{'best':>9s}")
    for d in sorted({x.direction for x in picks}) + ["all"]:
        xs = [x for x in picks if (d == "all" or x.direction == d)
              and None not in [getattr(x, m) for _, m in methods]]
        if not xs:
            continue
        best = sum(x.best_ms * x.uses for x in xs)
        tot = [sum(getattr(x, m) * x.uses for x in xs) for _, m in methods]
        lines.append(f"  {d:15s}" + "".join(f"{t:9.3f} ({t / best:.3f})" for t in tot) + f"{best:9.3f}")
    return lines


__all__ = ["SelectorPick", "selector_picks", "selector_lines"]
