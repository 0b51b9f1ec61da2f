"""What each way of choosing a configuration would have cost, from a sweep's measured rows: per problem-direction,
the pick of each method and its regret against the fastest measured candidate (``pick / best - 1``), and their
summaries by family, dtype and direction (``cudnn-algos dataset report``).

Methods (each a rule over one problem-direction's long-form rows):
  instant, a, b, fallback   cuDNN's engine heuristic lists: the first configuration of the list that built
  torch_off                 torch's rule with benchmark off applied to the lists: INSTANT's first configuration
                            that built and that torch accepts (no torch_filter), else FALLBACK's (derived from the
                            rows, not torch's op timed: torch's op keeps one plan per process)
  legacy_heuristic          cudnnGet...Algorithm_v7's first algorithm, timed as the legacy search measured it
  legacy_find               cudnnFind...AlgorithmEx's first (cuDNN's own timing picks it), timed by us
  torch_on                  torch's op with benchmark mode on, timed in the same session as the candidates
The best is the fastest measured legacy algorithm or engine configuration that torch would accept (no
``torch_filter``: what tune() may store). A method whose pick has no time (not built, pruned, or not run) counts
as missing, never as zero regret. Regrets below the noise floor (``dataset.noise_floor``) are not differences.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from ..configs import LISTS, SEARCH_LISTS, TORCH_LISTS, heuristic_list
from ..results import wrong_output
from ..spec import input_dims

METHODS = SEARCH_LISTS + ("torch_off", "legacy_heuristic", "legacy_find", "torch_on")
GROUP_BY = ("family", "dtype", "direction")  # the report's groups unless asked otherwise
GROUPS = GROUP_BY + ("batch",)  # what it can group by
BIG = 0.05  # the share of problems with regret above this is reported
# "top-1": the pick within this of the best, the noise floor: between two processes the best time of a problem moved
# by up to 2.4-2.6% (p95) on the H200 (docs/dataset.md), so a pick closer than that is as good as the best
TOP1 = 0.03
TOP1_LEGEND = f"top-1: the share of picks within {TOP1:.0%} of the best (the noise floor)"


def timed_ms(r: dict[str, Any]) -> float | None:
    """A long-form row's kernel median where it ran (status SUCCESS, a finite positive time) and its output is right
    (Note [a wrong output] in results/rows.py: a wrong row is never the best, a training label or a known
    configuration; a method that picks one counts as missing), else None."""
    t = r.get("kernel_median_ms")
    if r.get("status") != "SUCCESS" or not isinstance(t, (int, float)) or isinstance(t, bool):
        return None
    if wrong_output(r.get("rel_err"), r.get("measure_error") or ""):
        return None
    return float(t) if math.isfinite(t) and t > 0 else None


def _first(rows: Iterable[dict[str, Any]], rank: str) -> dict[str, Any] | None:
    """The row of lowest `rank` among those that built (status SUCCESS), or None."""
    ranked = [r for r in rows if r.get(rank) is not None and r.get("status") == "SUCCESS"]
    return min(ranked, key=lambda r: r[rank]) if ranked else None


def configurations(rows: Sequence[dict[str, Any]], eligible: bool = False) -> dict[tuple[str, str], float]:
    """(kind, name) -> kernel ms of every engine configuration and legacy algorithm that ran, from one
    problem-direction's rows (torch's own candidates left out: each is a choice made in its process, not one
    configuration). `eligible`: only those torch would accept (no torch_filter), among which the best is."""
    timed = {}
    for r in rows:
        kind = r.get("candidate_kind")
        if kind == "engine" or (kind == "legacy" and r.get("stage") != "heuristic"):
            t = timed_ms(r)
            if t is not None and not (eligible and kind == "engine" and r.get("torch_filter")):
                timed[(kind, r.get("candidate"))] = t
    return timed


def picks(rows: Sequence[dict[str, Any]]) -> dict[str, tuple[str | None, float | None]]:
    """Per method (and "best"): (the candidate it picks, that candidate's measured kernel ms), from one
    problem-direction's rows. (None, None): the method picks nothing here."""
    engine = [r for r in rows if r.get("candidate_kind") == "engine"]
    legacy_timed = [r for r in rows if r.get("candidate_kind") == "legacy" and r.get("stage") != "heuristic"]
    timed = configurations(rows)
    eligible = configurations(rows, eligible=True)
    out: dict[str, tuple[str | None, float | None]] = {}
    if eligible:
        (_, name), t = min(eligible.items(), key=lambda kv: kv[1])
        out["best"] = (name, t)
    else:
        out["best"] = (None, None)
    for h in LISTS:
        r = _first(engine, h.rank_column)
        out[h.name] = (r["candidate"], timed_ms(r)) if r else (None, None)
    accepted = [r for r in engine if not r.get("torch_filter")]
    off = next(filter(None, (_first(accepted, heuristic_list(n).rank_column) for n in TORCH_LISTS)), None)
    out["torch_off"] = (off["candidate"], timed_ms(off)) if off else (None, None)
    heur = _first([r for r in rows if r.get("candidate_kind") == "legacy" and r.get("stage") == "heuristic"],
                  "heuristic_rank")
    out["legacy_heuristic"] = ((heur["candidate"], timed.get(("legacy", heur["candidate"]))) if heur
                               else (None, None))
    found = _first(legacy_timed, "heuristic_rank")
    out["legacy_find"] = (found["candidate"], timed_ms(found)) if found else (None, None)
    on = next((r for r in rows if r.get("candidate_kind") == "torch_on"), None)
    out["torch_on"] = (on["candidate"], timed_ms(on)) if on else (None, None)
    return out


@dataclass(frozen=True)
class ProblemRegret:
    """One problem-direction: its group fields, occurrence count, best time and each method's regret (None:
    no timed pick)."""

    key: str
    family: str
    dtype: str
    direction: str
    shape: str  # spec and input shape, for "where it happens"
    uses: int
    best_ms: float
    regret: dict[str, float | None]
    channels: int = 0  # the layer's input channels (the regret map's x)
    spatial: int = 0  # the input's spatial size, product of its spatial dims (the map's y)
    batch: int = 0  # the input's batch size (selector eval's groups when it leaves one batch size out)


def problem_regrets(problems: Iterable[tuple[str, Sequence[dict[str, Any]]]]) -> list[ProblemRegret]:
    """ProblemRegret per (key, rows) with a best; a problem found in several families counts once per family."""
    out = []
    for key, rows in problems:
        p = picks(rows)
        best = p["best"][1]
        if best is None or not rows:
            continue
        r0 = rows[0]
        reg = {m: (p[m][1] / best - 1 if p[m][1] is not None else None) for m in METHODS}
        dims = input_dims(r0.get("input_shape"))
        for fam in r0.get("families") or ["?"]:
            out.append(ProblemRegret(key, fam, str(r0.get("dtype")), str(r0.get("direction")),
                                     f"{r0.get('spec')} @ {r0.get('input_shape')}", int(r0.get("uses") or 1), best,
                                     reg, dims[1] if len(dims) > 1 else 0, math.prod(dims[2:]) if dims else 0,
                                     dims[0] if dims else 0))
    return out


def search_costs(problems: Iterable[tuple[str, Sequence[dict[str, Any]]]]) -> dict[str, float]:
    """What choosing costs, per method that has a recorded cost: the median over problem-directions of each
    heuristic list's query (host ms, query_<list>_ms), of lists A and B asked one after the other ("a+b": what the
    selector's candidates cost before it ranks them), and of torch's first call with benchmark on (its search
    included: first_call_ms of the torch_on row)."""
    acc: dict[str, list[float]] = {}
    for _, rows in problems:
        r0 = next((r for r in rows if r.get("candidate_kind") == "engine"), None)
        for h in LISTS:
            t = r0.get(h.query_column) if r0 else None
            if isinstance(t, (int, float)):
                acc.setdefault(h.name, []).append(float(t))
        ab = [r0.get(heuristic_list(m).query_column) for m in "ab"] if r0 else []
        if len(ab) == 2 and all(isinstance(t, (int, float)) for t in ab):
            acc.setdefault("a+b", []).append(float(ab[0] + ab[1]))
        on = next((r for r in rows if r.get("candidate_kind") == "torch_on"), None)
        if on is not None and isinstance(on.get("first_call_ms"), (int, float)):
            acc.setdefault("torch_on", []).append(float(on["first_call_ms"]))
    return {m: quantile(v, 0.5) for m, v in acc.items()}


def quantile(v: Sequence[float], q: float) -> float | None:
    """The `q` quantile of `v` (the nearest rank; None for no values)."""
    if not v:
        return None
    v = sorted(v)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


@dataclass(frozen=True)
class Summary:
    """One group's regrets for one method: problems with a timed pick (n) and without (missing), mean, mean
    weighted by occurrences, p95, the share above BIG, and top-1: the share within TOP1 of the best."""

    group: tuple[str, ...]
    method: str
    n: int
    missing: int
    mean: float | None
    weighted: float | None
    p95: float | None
    share_big: float | None
    top1: float | None


def present(regrets: Sequence[ProblemRegret], methods: Sequence[str] = METHODS) -> tuple[str, ...]:
    """The methods with a timed pick for at least one problem (the others would be rows of dashes)."""
    return tuple(m for m in methods if any(p.regret.get(m) is not None for p in regrets))


def summarize(regrets: Sequence[ProblemRegret], by: Sequence[str] = GROUP_BY,
              methods: Sequence[str] = METHODS) -> list[Summary]:
    """Summary per group (the fields in `by`; () for one overall group) and method."""
    groups: dict[tuple[str, ...], list[ProblemRegret]] = {}
    for p in regrets:
        groups.setdefault(tuple(getattr(p, f) for f in by), []).append(p)
    out = []
    for g in sorted(groups):
        ps = groups[g]
        for m in methods:
            have = [(p.regret[m], p.uses) for p in ps if p.regret[m] is not None]
            if not have:
                out.append(Summary(g, m, 0, len(ps), None, None, None, None, None))
                continue
            v = [x for x, _ in have]
            w = sum(u for _, u in have)
            out.append(Summary(g, m, len(v), len(ps) - len(v), sum(v) / len(v), sum(x * u for x, u in have) / w,
                               quantile(v, 0.95), sum(x > BIG + 1e-9 for x in v) / len(v),
                               sum(x <= TOP1 + 1e-9 for x in v) / len(v)))
    return out


def table(summaries: Sequence[Summary], by: Sequence[str] = GROUP_BY) -> str:
    """The summaries as text: one line per group and method (regrets in %), fitting 120 columns."""
    head = f"{' / '.join(by) or 'overall':<44} {'method':<17} {'n':>5} {'miss':>5} {'mean':>7} {'weighted':>9} " \
           f"{'p95':>7} {'>' + format(BIG, '.0%'):>6} {'top-1':>6}"
    lines = [head]
    last = None
    for s in summaries:
        g = " / ".join(map(str, s.group)) if s.group else "all"
        name = g if g != last else ""
        last = g
        if s.n == 0:
            lines.append(f"{name[:44]:<44} {s.method:<17} {0:>5} {s.missing:>5} {'-':>7} {'-':>9} {'-':>7} {'-':>6} "
                         f"{'-':>6}")
            continue
        lines.append(f"{name[:44]:<44} {s.method:<17} {s.n:>5} {s.missing:>5} {100 * s.mean:>6.1f}% "
                     f"{100 * s.weighted:>8.1f}% {100 * s.p95:>6.1f}% {100 * s.share_big:>5.0f}% "
                     f"{100 * s.top1:>5.0f}%")
    return "\n".join(lines)


def worse_than(rows: Sequence[ProblemRegret], methods: Sequence[str], baseline: str = "torch_off",
               by: float = BIG) -> dict[str, tuple[int, int]]:
    """Per method: in how many problem-directions its pick is more than `by` slower than `baseline`'s (its time over
    the baseline's above 1 + by), of those where both have a timed pick."""
    out = {}
    for m in methods:
        pairs = [(p.regret[m], p.regret[baseline]) for p in rows
                 if p.regret.get(m) is not None and p.regret.get(baseline) is not None]
        out[m] = (sum((1 + r) > (1 + b) * (1 + by) for r, b in pairs), len(pairs))
    return out


# the methods that choose without a search: cuDNN's ranked lists INSTANT, A and B, and the legacy heuristic
NO_SEARCH = ("instant", "a", "b", "legacy_heuristic")


def against_best_heuristic(summaries: Sequence[Summary], methods: Sequence[str], share: float = 0.5,
                           baselines: Sequence[str] = NO_SEARCH) -> dict[str, tuple[list[tuple[str, ...]],
                                                                                   list[tuple[str, ...]]]]:
    """Per method of `methods`: the groups of `summaries` (summarize's, one group set) where its mean regret is at
    most `share` of the lowest mean among `baselines` in that group, and those where it is not (a group where the
    method or every baseline has no timed pick is in neither)."""
    by = {(x.group, x.method): x.mean for x in summaries}
    groups = sorted({x.group for x in summaries})
    out = {}
    for m in methods:
        met, missed = [], []
        for g in groups:
            base = [by[(g, b)] for b in baselines if by.get((g, b)) is not None]
            if by.get((g, m)) is None or not base:
                continue
            (met if by[(g, m)] <= share * min(base) + 1e-12 else missed).append(g)
        out[m] = (met, missed)
    return out


def worst(regrets: Sequence[ProblemRegret], method: str, n: int = 5) -> list[ProblemRegret]:
    """Where a method loses most: its n problem-directions of largest regret."""
    have = {p.key: p for p in regrets if p.regret.get(method) is not None}  # once each, whatever its families
    return sorted(have.values(), key=lambda p: -p.regret[method])[:n]


def plot_cdf(regrets: Sequence[ProblemRegret], path: str, methods: Sequence[str] = METHODS, title: str = "",
             labels: dict[str, str] | None = None) -> None:
    """The regret CDF per method (x: regret, log-scaled above 0.1%; y: share of problem-directions); `labels`:
    a method's name in the legend, where not its own."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for m in methods:
        v = sorted(max(p.regret[m], 1e-4) for p in regrets if p.regret.get(m) is not None)
        if v:
            ax.step(v, [(i + 1) / len(v) for i in range(len(v))], where="post",
                    label=f"{(labels or {}).get(m, m)} (n={len(v)})")
    ax.set_xscale("log")
    ax.set_xlabel("regret against the measured best (pick / best - 1; below 0.01% drawn at 0.01%)")
    ax.set_ylabel("share of problem-directions")
    if title:
        ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_map(regrets: Sequence[ProblemRegret], path: str, methods: Sequence[str] = ("torch_off", "torch_on")) -> None:
    """Where a method loses: one panel per method, each problem-direction a point at (input channels, spatial size),
    coloured by its regret (capped at 50%)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(methods), figsize=(5.5 * len(methods), 4.2), squeeze=False)
    for ax, m in zip(axes[0], methods):
        pts = [p for p in regrets if p.regret.get(m) is not None and p.channels and p.spatial]
        sc = ax.scatter([p.channels for p in pts], [p.spatial for p in pts],
                        c=[min(max(p.regret[m], 0.0), 0.5) * 100 for p in pts], cmap="viridis", vmin=0, vmax=50,
                        s=18, alpha=0.8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xlabel("input channels")
        ax.set_ylabel("input spatial size (elements per channel)")
        ax.set_title(f"{m} (n={len(pts)})")
        ax.grid(alpha=0.3)
        fig.colorbar(sc, ax=ax, label="regret, % (capped at 50)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


__all__ = ["METHODS", "GROUP_BY", "BIG", "TOP1", "TOP1_LEGEND", "timed_ms", "configurations", "picks",
           "ProblemRegret", "problem_regrets", "present", "quantile", "search_costs", "Summary", "summarize", "table",
           "NO_SEARCH", "against_best_heuristic", "worse_than", "worst", "plot_cdf", "plot_map"]
