"""What `selector eval` prints beside its regret tables (the CLI only prints them): where the selector's methods
reach half of the best heuristic's mean, how often each way of choosing loses more than 5% to torch with benchmark
off, what choosing costs, and the regret CDF; one name per method (METHOD_LABELS)."""
from __future__ import annotations

from typing import Any, Sequence

from ..configs import LISTS
from ..dataset.regret import (BIG, NO_SEARCH, ProblemRegret, against_best_heuristic, plot_cdf, present, quantile,
                              search_costs, worse_than)
from .train import AUTO_K, AUTO_LATER, AUTO_TORCH_K, MEASURE_K, OFF_GUARD_METHODS, RANK_MS

# each method's name in what selector eval prints: with_selector's methods (the "known" ones are what apply() does)
# and the dataset report's
METHOD_LABELS = {"predict": "predict", "known": "predict without its guard",
                 f"known_top{MEASURE_K}": f"measure_top_k (k={MEASURE_K})",
                 "known_auto_first": "measure_top_k (k='auto'), at once", "known_auto": "measure_top_k (k='auto')",
                 "known_auto_torch": "k='auto' + benchmark mode's candidates", "nearest": "nearest neighbour",
                 "offered_known": "floor: the fastest offered", "instant": "INSTANT (torch, benchmark off)",
                 "b": "heuristic B", "legacy_heuristic": "legacy heuristic", "torch_on": "torch, benchmark on"}


def half_of_best(summaries: Sequence[Any], by: str) -> str:
    """Per selector method, the held-out groups where its mean regret is at most half of the best cuDNN heuristic
    mode's there (regret.against_best_heuristic), and those where it is not."""
    methods = ["predict", "known", f"known_top{MEASURE_K}", "known_auto"]
    lines = [f"at most half of the best heuristic's mean ({', '.join(NO_SEARCH)}), per held-out {by}:"]
    for m, (met, missed) in against_best_heuristic(summaries, methods).items():
        if met or missed:
            lines.append(f"  {METHOD_LABELS[m]}: {len(met)} of {len(met) + len(missed)}"
                         + (f" (not: {', '.join('/'.join(map(str, g)) for g in missed)})" if missed else ""))
    return "\n".join(lines)


def worse_than_off(rs: Sequence[ProblemRegret]) -> str:
    """How often each way of choosing runs a layer more than 5% slower than torch with benchmark off would
    (regret.worse_than against torch_off: INSTANT's first that torch accepts)."""
    methods = ["predict", "known", *OFF_GUARD_METHODS,
               f"known_top{MEASURE_K}", "known_auto", "known_auto_torch", "b", "torch_on"]
    cells = [f"  {METHOD_LABELS.get(m, m)}: {n} of {of} ({100 * n / of:.1f}%)"
             for m, (n, of) in worse_than(rs, methods).items() if of]
    return "\n".join([f"more than {100 * BIG:.0f}% slower than torch with benchmark off would be, "
                      "problem-directions:"] + cells) if cells else ""


def choosing_costs(problems: Any, rs: Sequence[ProblemRegret]) -> str:
    """What each method's choice costs, host ms per problem-direction (median): the lists' queries and torch's
    benchmark-mode first call as the rows recorded them on the GPU machine (regret.search_costs), and the
    selector's ranking as timed here (with_selector's RANK_MS), after lists A and B are asked."""
    cost = search_costs(problems)
    rank = quantile([p.regret[RANK_MS] for p in rs if p.regret.get(RANK_MS) is not None], 0.5)
    names = {**{h.name: h.label for h in LISTS}, "torch_on": "torch benchmark on"}
    lines = ["choosing costs, host ms per problem-direction (median):"]
    recorded = [f"{names[m]} {cost[m]:.3g}" for m in names if cost.get(m) is not None]
    if recorded:
        lines.append("  as the rows recorded them: " + ", ".join(recorded))
    if rank is not None:
        lists = f"lists A and B {cost['a+b']:.3g} + " if cost.get("a+b") is not None else ""
        lines.append(f"  predict: {lists}ranking {rank:.3g} (this CPU)")
        ks = [p.regret[AUTO_K] for p in rs if p.regret.get(AUTO_K) is not None]
        later = [p.regret.get(AUTO_LATER) or 0 for p in rs if p.regret.get(AUTO_K) is not None]
        auto = (f" (k='auto': {sum(ks) / len(ks):.2f} on average, at most {max(ks):.0f};\n    of them "
                f"{sum(later) / len(ks):.3f} runtime-compiled, built later)") if ks else ""
        lines.append(f"  measure_top_k: predict's + building and timing {MEASURE_K}{auto} on the GPU (not in the rows)")
        kt = [p.regret[AUTO_TORCH_K] for p in rs if p.regret.get(AUTO_TORCH_K) is not None]
        if kt:
            lines.append(f"  k='auto' with benchmark mode's candidates: {sum(kt) / len(kt):.2f} timed on average, "
                         f"at most {max(kt):.0f}")
    return "\n".join(lines if len(lines) > 1 else lines + ["  none recorded"])


def plot_selector(rs: Sequence[ProblemRegret], path: str, title: str) -> None:
    """The regret CDF of `rs` (selector rows: with_selector's) per method a user chooses between (no search, a
    short one, cuDNN's heuristics, torch's benchmark mode) and the candidates' floor, written to `path`."""
    methods = ("predict", "known", f"known_top{MEASURE_K}", "known_auto_first", "known_auto", "nearest",
               "offered_known", "instant", "b", "legacy_heuristic", "torch_on")
    plot_cdf(rs, path, present(rs, methods), title=title, labels={m: METHOD_LABELS[m] for m in methods})
    print(f"wrote {path}")


__all__ = ["METHOD_LABELS", "half_of_best", "worse_than_off", "choosing_costs", "plot_selector"]
