"""Training a selector on measured problem-directions (a sweep store's rows) and evaluating it honestly: leave one
group out (a model family, or a batch size), train on the rest, and read each held-out problem's regret against its
measured best beside cuDNN's heuristics and torch's benchmark mode (cudnn_algos.dataset.regret's methods).

Training needs scikit-learn (GradientBoostingRegressor); the trained model is arrays (choose.model), so using it
needs numpy only."""
from __future__ import annotations

import collections
import datetime as _dt
import math
import time
from dataclasses import replace
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ..dataset.regret import ProblemRegret, timed_ms
from ..choose.features import RANKED_LISTS, Vocabulary, row_features, row_problem
from ..choose.model import (AUTO, BLEND, EVIDENCE_K, GUARD, GUARD_CAP, GUARD_FAR, REACH, Evidence, Neighbours,
                            Selector, auto_parts, evidence_class, heuristic_order, instant_first, problem_class)
from ..choose.ranking import Candidate
from ..choose.trees import Trees
from ..configs import config_key

TREE_PARAMS = {"n_estimators": 300, "max_depth": 6, "learning_rate": 0.08, "subsample": 0.8, "random_state": 0}
# learner="hist" (HistGradientBoostingRegressor: features binned to 255 values, far less work a split): the same
# trees' shape
HIST_PARAMS = {"max_iter": 300, "max_depth": 6, "max_leaf_nodes": None, "learning_rate": 0.08,
               "early_stopping": False, "random_state": 0}
LEARNERS = ("exact", "hist", "lightgbm")  # train()'s learner: "exact" / "hist" regression, or "lightgbm" (rank only)
# the trees' target, log2(time / the problem's fastest), is capped here: how much slower than 2^0.5 = 1.41x the best a
# configuration is does not change a pick, and fitting it took the trees' splits from the near-best ones (held out by
# family on the 1,011-problem store, mean regret 6.4% against 6.8% uncapped: docs/results/selector-2026-12-01-to-03.md)
TARGET_CAP = 0.5


def engine_candidates(rows: Sequence[dict[str, Any]], listed: bool = False) -> list[Candidate]:
    """Every timed engine configuration torch would accept; `listed`: only those RANKED_LISTS name (what apply()'s
    unseen handler is offered by cuDNN)."""
    out = [Candidate.of_name(r["candidate"], {n: r.get(f"rank_{n}") for n in RANKED_LISTS}, t) for r in rows
           if r.get("candidate_kind") == "engine" and not r.get("torch_filter") and r.get("engine_id") is not None
           and (t := timed_ms(r)) is not None]
    return [c for c in out if c.listed] if listed else out


def _problems(problems: Iterable[tuple[str, Sequence[dict[str, Any]]]]):
    """(key, rows, features, candidates) of the problems with at least one timed engine configuration."""
    for key, rows in problems:
        cands = engine_candidates(rows)
        if cands:
            yield key, rows, row_features(rows[0]), cands


def targets(ms: Sequence[float], cap: float = TARGET_CAP) -> list[float]:
    """What the trees learn for one problem's candidates (their kernel ms): log2(time / the fastest), at most `cap`."""
    best = min(ms)
    return [min(math.log2(t / best), cap) for t in ms]


KNOWN_CAP = 64  # Selector.known: at most this many configurations per problem class (the most often fastest)


def class_of(row: dict[str, Any]) -> str:
    """A long-form row's problem class (model.problem_class), by the direction cuDNN runs (a transposed layer's
    forward is cuDNN's backward data: its configurations are backward-data engines, as apply()'s queries name it)."""
    direction = row.get("cudnn_direction") or row.get("direction")
    return problem_class(str(direction), str(row.get("dtype")), str(row.get("memory_format")))


def known_configurations(ps: Iterable[tuple[str, Sequence[dict[str, Any]], Any, Sequence[Candidate]]],
                         cap: int = KNOWN_CAP) -> dict[str, tuple[tuple[str, bool], ...]]:
    """Note [known configurations]: per problem class, the configurations that were the fastest of some problem
    of `ps` ((key, rows, features, candidates), as _problems yields), the most often fastest first (ties: the
    first seen), at most `cap`, each with whether its row said it was deterministic."""
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    det: dict[str, bool] = {}
    for _, rows, _, cands in ps:
        best = min(cands, key=lambda c: c.ms).name
        counts[class_of(rows[0])][best] += 1
        row = next((r for r in rows if r.get("candidate") == best and r.get("candidate_kind") == "engine"), {})
        det[best] = det.get(best, True) and bool(row.get("deterministic"))
    return {c: tuple((n, det[n]) for n, _ in cnt.most_common(cap)) for c, cnt in sorted(counts.items())}


OBJECTIVES = ("regression", "rank")  # train()'s objective: the trees' capped log time (targets), or LambdaMART (rank)


def _check_reach(reach: float) -> None:
    if isinstance(reach, bool) or not isinstance(reach, (int, float)) or not reach > 0:
        raise ValueError(f"reach={reach!r} must be a number > 0 (inf: the trees everywhere)")


def _check_target_cap(cap: float, name: str = "target_cap") -> None:
    if not (isinstance(cap, (int, float)) and not isinstance(cap, bool) and 0 < cap < math.inf):
        raise ValueError(f"{name}={cap!r}: give a cap > 0 (log2 of time over the fastest: 0.5 is 1.41x)")


def _check_learner(learner: str) -> None:
    if learner not in LEARNERS:
        raise ValueError(f"learner={learner!r} must be one of {', '.join(LEARNERS)}")


def _check_objective(objective: str) -> None:
    if objective not in OBJECTIVES:
        raise ValueError(f"objective={objective!r} must be one of {', '.join(OBJECTIVES)}")


def train(problems: Iterable[tuple[str, Sequence[dict[str, Any]]]], family: str = "",
          params: dict[str, Any] | None = None, objective: str = "regression", known_cap: int = KNOWN_CAP,
          evidence_k: int = EVIDENCE_K, reach: float = REACH, learner: str = "exact",
          guard: float | None = GUARD, target_cap: float = TARGET_CAP, guard_far: float | None = GUARD_FAR,
          guard_cap: float | None = GUARD_CAP, blend: float = BLEND) -> Selector:
    """A selector trained on `problems` ((key, long-form rows) pairs) and the nearest-neighbour baseline. The trees
    see the problem's features and the candidate; objective "regression": they predict log2(time / the problem's
    fastest), capped (targets); "rank": they are fitted to order each problem's candidates (selector.rank,
    LambdaMART). `params` override TREE_PARAMS or rank.RANK_PARAMS. `known_cap`: Selector.known's size per problem
    class (known_configurations; 0: none). `evidence_k`: Note [neighbour evidence]'s K (0: no evidence features);
    a training problem's own evidence leaves it out. `reach`: Note [the selector's reach] (inf: the trees' ranking
    everywhere). `learner` (regression): "exact" (GradientBoostingRegressor, TREE_PARAMS) or "hist"
    (HistGradientBoostingRegressor, HIST_PARAMS: binned features, much faster on many problems); (rank) "exact"
    (rank.fit, our LambdaMART on scikit-learn's trees) or "lightgbm" (LightGBM's lambdarank, rank.fit_lightgbm;
    the saved trees need no LightGBM). `guard`: Selector.guard (Note [a guard against INSTANT's first]; None:
    none). `target_cap`: the regression target's cap (targets; log2 of time over the fastest, > 0). `guard_far`:
    Selector.guard_far (the margin beyond the reach; None: the guard's everywhere). `guard_cap`: with a guard, the
    guard's own trees fitted with this cap (Selector.guard_trees: regression trees of the same learner and params,
    hist beside rank trees; None: the guard reads the ranking trees). `blend`: Selector.blend, with guard trees (Note
    [the guard trees in the ranking]; 0: the ranking trees alone)."""
    _check_objective(objective)
    _check_reach(reach)
    _check_learner(learner)
    _check_target_cap(target_cap)
    if guard_cap is not None:
        _check_target_cap(guard_cap, "guard_cap")
    if (objective == "regression") == (learner == "lightgbm") and learner != "exact":
        raise ValueError(f"learner={learner!r} does not fit objective={objective!r}: 'hist' is for the regression "
                         "objective, 'lightgbm' for rank (LightGBM's lambdarank)")
    try:
        import sklearn.ensemble  # noqa: F401 (_regression's)
    except ImportError:
        raise ImportError("training a selector needs scikit-learn: pip install scikit-learn") from None
    ps = list(_problems(problems))
    if not ps:
        raise ValueError("no problem-direction with a timed engine configuration to train on")
    vocab = Vocabulary.of((c.engine_id, c.named) for *_, cands in ps for c in cands)
    f = np.array([feats for _, _, feats, _ in ps], dtype=np.float64)
    mean, scale = f.mean(axis=0), f.std(axis=0)
    scale[scale == 0] = 1.0
    nb = Neighbours((f - mean) / scale, tuple(min(c, key=lambda c: c.ms).name for *_, c in ps), mean, scale)
    groups = [[c.ms for c in cands] for *_, cands in ps]
    evidence = None
    if evidence_k > 0:
        evidence = Evidence.of([[(config_key(c.engine_id, c.named), v) for c, v in zip(cands, targets(ms, target_cap))]
                                for (*_, cands), ms in zip(ps, groups)], [evidence_class(v) for v in f], evidence_k)
    rows_of = Selector(vocab, None, nb, family, evidence=evidence).rows  # the trees' input, before there are trees
    x = np.concatenate([rows_of(feats, [c.encoded for c in cands], exclude=i)
                        for i, (_, _, feats, cands) in enumerate(ps)])
    y = [t for ms in groups for t in targets(ms, target_cap)]
    if objective == "rank" and learner == "lightgbm":
        from .rank import LIGHTGBM_PARAMS, fit_lightgbm

        used = {**LIGHTGBM_PARAMS, **(params or {})}
        trees = fit_lightgbm(x, groups, used)
    elif objective == "rank":
        from .rank import RANK_PARAMS, fit

        used = {**RANK_PARAMS, **(params or {})}
        trees = fit(x, groups, used)
    else:
        trees, used = _regression(learner, params, x, y)
    guard_trees = None
    if guard is not None and guard_cap is not None:  # Note [a guard against INSTANT's first]: its own trees
        regression = objective == "regression"  # the ranking's learner and params; hist's defaults beside rank trees
        guard_trees = _regression(learner if regression else "hist", params if regression else None, x,
                                  [t for ms in groups for t in targets(ms, guard_cap)])[0]
    families = sorted({fam for _, rows, _, _ in ps for fam in rows[0].get("families") or []})
    info = {"problems": len(ps), "candidates": len(y), "families": families,
            "trained_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "objective": objective,
            **({"learner": learner} if objective == "regression" or learner == "lightgbm" else {}), "params": used,
            **({"target_cap": target_cap} if objective == "regression" else {}),
            **({"guard_cap": guard_cap} if guard_trees is not None else {}), "evidence_k": evidence_k}
    known = known_configurations(ps, known_cap) if known_cap > 0 else {}
    return Selector(vocab, trees, nb, family, info, reach=float(reach), known=known, evidence=evidence, guard=guard,
                    guard_far=guard_far if guard is not None else None, guard_trees=guard_trees,
                    blend=blend if guard_trees is not None else 0.0)


def _regression(learner: str, params: dict[str, Any] | None, x: np.ndarray, y: Sequence[float]
                ) -> tuple[Trees, dict[str, Any]]:
    """Regression trees fitted to `y` by `learner` ("hist": HIST_PARAMS, else TREE_PARAMS; `params` over them)."""
    from sklearn.ensemble import GradientBoostingRegressor, HistGradientBoostingRegressor

    if learner == "hist":
        used = {**HIST_PARAMS, **(params or {})}
        return Trees.from_sklearn_hist(HistGradientBoostingRegressor(**used).fit(x, np.array(y))), used
    used = {**TREE_PARAMS, **(params or {})}
    return Trees.from_sklearn(GradientBoostingRegressor(**used).fit(x, np.array(y))), used


MEASURE_K = 3  # apply(unseen="measure_top_k")'s default k, as evaluated


def choose(selector: Selector, rows: Sequence[dict[str, Any]], k: int = MEASURE_K) -> dict[str, Any]:
    """The selector's pick (unseen="predict"), what measure_top_k would time (its shortlist of k), the nearest
    neighbour's pick and the fastest it is offered ("offered": a perfect ranker's pick, the candidates' floor),
    among one problem's configurations that the heuristic lists it is given name (RANKED_LISTS: what apply()'s
    unseen handler is offered), every timed one where none is.

    The same with the selector's known configurations of the problem's class added to the candidates (Note [known
    configurations]): "known", its shortlist "known_shortlist", and "offered_known". Only the known configurations
    this problem has a time for can be scored: the ranking is over those, and "known_untimed" says whether the
    trees ranked one without a time first among all of them (what apply() would build; its time is unknown here).
    "known_auto": what measure_top_k with k="auto" times among those (Note [the automatic shortlist]), once the
    runtime-compiled ones it builds later are timed; "known_auto_first": what it times at once (auto_parts: beyond
    its first two, none the rows' notes say compile at run time); "known_auto_torch": k="auto"'s shortlist and the
    candidates torch's benchmark mode itself would time (the rows' torch_rank), together.
    Those are the selector's without its guard (Selector.unguarded). "predict": what apply(unseen="predict") pins,
    the selector's own ranking of the same candidates with its guard where it has one (Note [a guard against
    INSTANT's first]; "known" where it has none), its first that has a time.
    "rank_ms": the host ms of that one ranking (Selector.rank over every candidate, apply()'s own step)."""
    guarded_by = selector
    selector = selector.unguarded
    cands = engine_candidates(rows, listed=True) or engine_candidates(rows)
    if not cands:
        return {**{f"guard_{m:g}": None for m in GUARD_MARGINS}, **dict.fromkeys(OFF_GUARD_METHODS),
                "selector": None, "predict": None, "nearest": None, "offered": None,
                "shortlist": [], "known": None,
                "known_shortlist": [], "known_auto": [], "known_auto_first": [], "known_auto_torch": [],
                "offered_known": None, "known_untimed": False, "rank_ms": None}
    feats = row_features(rows[0])
    have = {c.name for c in cands}
    timed = {c.name: c for c in engine_candidates(rows)}
    known = [n for n, _ in selector.known.get(class_of(rows[0]), ()) if n not in have]
    more = cands + [timed[n] for n in known if n in timed]
    enc = [c.encoded for c in more]
    # one ranking of every candidate: each candidate's place depends on it alone, so the lists' candidates and the
    # timed ones keep their relative order within it
    untimed = [encoded_by_name(n) for n in known if n not in timed]
    t0 = time.perf_counter()
    ranked, predicted = selector.ranked(feats, enc + untimed)
    rank_ms = 1e3 * (time.perf_counter() - t0)
    order = [i for i in ranked if i < len(cands)]
    order_more = [i for i in ranked if i < len(more)]
    # the trees' predictions of every candidate, inside the reach or not (one call: the guarded ranking, k="auto" and
    # the guards against INSTANT's first read them; each candidate's prediction depends on it alone)
    # (`predicted` stays None outside the reach: the guard_M methods read that as "no predictions")
    every = selector.predict(feats, enc + untimed) if predicted is None else predicted
    pinned = order_more
    if guarded_by is not selector:
        pinned = [i for i in guarded_by.ranked(feats, enc + untimed, every)[0] if i < len(more)]
    rtc = runtime_compiled(rows)
    everywhere = every[:len(more)]
    auto = selector.shortlist(feats, enc, AUTO, order_more, everywhere)
    auto_first = auto_parts(auto, lambda i: more[i].name in rtc)[0]
    cudnn_order = heuristic_order(enc[:len(cands)])
    guards = {f"guard_{m:g}": cands[guarded(order, predicted, cudnn_order, m)].name for m in GUARD_MARGINS}
    # Note [a guard against INSTANT's first]: the trees' first only where they predict it `m` ahead of INSTANT's first
    # (torch's pick with benchmark off), else INSTANT's first; "off_guard" inside the reach alone (outside it INSTANT's
    # first), "off_guard_all" with the trees' predictions everywhere
    inst = instant_first(enc[:len(cands)]) or cudnn_order[:1]
    everywhere = everywhere[:len(cands)]
    trees_first = int(np.argmin(everywhere))
    for m in OFF_GUARD_MARGINS:
        guards[f"off_guard_{m:g}"] = cands[guarded(order, predicted, inst, m, fallback=inst)].name
        guards[f"off_guard_all_{m:g}"] = cands[guarded([trees_first], everywhere, inst, m, fallback=inst)].name
    return {**guards, "selector": cands[order[0]].name,
            "nearest": selector.neighbours.pick(feats, [c.name for c in cands]),
            "offered": min(cands, key=lambda c: c.ms).name,
            "shortlist": [cands[i].name for i in selector.shortlist(feats, enc[:len(cands)], k, order)],
            "known": more[order_more[0]].name, "predict": more[pinned[0]].name,
            "offered_known": min(more, key=lambda c: c.ms).name,
            "known_shortlist": [more[i].name for i in selector.shortlist(feats, enc, k, order_more)],
            "known_auto": [more[i].name for i in auto], "known_auto_first": [more[i].name for i in auto_first],
            "known_auto_torch": list(dict.fromkeys([more[i].name for i in auto] + torch_timed(rows))),
            "known_untimed": ranked[0] >= len(more), "rank_ms": rank_ms}


def torch_timed(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The configurations torch's benchmark mode would time for the problem (rows with a torch_rank), in its order."""
    ranked = [r for r in rows if r.get("candidate_kind") == "engine" and r.get("torch_rank") is not None]
    return [r["candidate"] for r in sorted(ranked, key=lambda r: r["torch_rank"])]


# the margins choose() scores the guard at (guarded): the trees' first only where they predict it this much (log2 of
# time relative to the fastest: 0.1 is 7%, 0.3 is 23%) faster than cuDNN's first, otherwise cuDNN's first
GUARD_MARGINS = (0.1, 0.3)
# Note [a guard against INSTANT's first]: issue 53 asks that predict never be a bet against cuDNN: where the model is
# not confident, it takes what torch runs with benchmark off (INSTANT's first configuration). guard_M measures a
# margin against list B's first (heuristic_order); off_guard_M against INSTANT's first: the trees' first where they
# predict it at least M (log2 of time over the fastest) ahead of INSTANT's first, else INSTANT's first; outside the
# reach (no predictions) INSTANT's first. off_guard_all_M predicts everywhere (the reach ignored) and keeps the
# margin alone as the guard. The evaluation says which, if any, predict should become.
# OFF_GUARD_MARGINS: the margins scored; 0: the trees' first wherever they put it ahead at all
OFF_GUARD_MARGINS = (0.0, 0.1, 0.2, 0.3, 0.5)
OFF_GUARD_METHODS = tuple(f"off_guard{w}_{m:g}" for w in ("", "_all") for m in OFF_GUARD_MARGINS)


def guarded(order: Sequence[int], predicted: np.ndarray | None, cudnn_order: Sequence[int], margin: float,
            fallback: Sequence[int] | None = None) -> int:
    """The pick of a guarded predict: the trees' first (`order[0]`) where their predictions put it at least `margin`
    below cuDNN's first (`cudnn_order[0]`), else cuDNN's first; with no predictions (outside the reach) `fallback`'s
    first where one is given, else `order[0]` (cuDNN's first already). Indices into the same candidates."""
    if predicted is None:
        return fallback[0] if fallback else order[0]
    if not cudnn_order or order[0] == cudnn_order[0]:
        return order[0]
    return order[0] if predicted[cudnn_order[0]] - predicted[order[0]] >= margin else cudnn_order[0]


def runtime_compiled(rows: Sequence[dict[str, Any]]) -> set[str]:
    """The configurations among a problem's rows whose notes say they compile at run time (RUNTIME_COMPILATION)."""
    return {r["candidate"] for r in rows if "RUNTIME_COMPILATION" in str(r.get("note") or "").split(",")}


def encoded_by_name(name: str) -> tuple[int, dict[str, int], dict[str, int | None]]:
    """A configuration's name as Selector.rank's candidate (engine id, knobs by name, in no list)."""
    from ..configs import named_knobs, parse_config

    engine_id, knobs = parse_config(name)
    return engine_id, dict(named_knobs(knobs)), {}


KNOWN_UNTIMED = "known_untimed"  # with_selector's flag in ProblemRegret.regret (1.0: "known"'s true first untimed)
RANK_MS = "rank_ms"  # with_selector's: choose()'s rank_ms in ProblemRegret.regret (not a regret: the ranking's cost)
AUTO_K = "auto_k"  # with_selector's: how many k="auto" timed (not a regret: its cost)
AUTO_LATER = "auto_later"  # with_selector's: how many of them it builds later (runtime-compiled; not a regret)
AUTO_TORCH_K = "auto_torch_k"  # with_selector's: how many known_auto_torch times (not a regret: its cost)
# the regret methods with_selector adds beside regret.METHODS, in the order tables show them
SELECTOR_METHODS = ("selector", "predict", *(f"guard_{m:g}" for m in GUARD_MARGINS), *OFF_GUARD_METHODS,
                    f"selector_top{MEASURE_K}", "nearest", "offered", "known", f"known_top{MEASURE_K}",
                    "known_auto_first", "known_auto", "known_auto_torch", "offered_known")


def with_selector(regrets_of: Callable, selector: Selector, key: str, rows: Sequence[dict[str, Any]]
                  ) -> list[ProblemRegret]:
    """The problem's ProblemRegrets (regret.problem_regrets) with the selector's and the neighbour's regrets."""
    out = regrets_of([(key, rows)])
    if not out:
        return out
    chosen = choose(selector, rows)
    rank_ms = chosen.pop("rank_ms")
    times = {c.name: c.ms for c in engine_candidates(rows)}
    best = out[0].best_ms
    short = [times[c] for c in chosen.pop("shortlist") if c in times]
    short_known = [times[c] for c in chosen.pop("known_shortlist") if c in times]
    auto = chosen.pop("known_auto")
    auto_known = [times[c] for c in auto if c in times]
    auto_first = [times[c] for c in chosen.pop("known_auto_first") if c in times]
    auto_torch = chosen.pop("known_auto_torch")
    auto_torch_ms = [times[c] for c in auto_torch if c in times]
    untimed = chosen.pop("known_untimed")
    extra = {m: (times[c] / best - 1 if c in times else None) for m, c in chosen.items()}
    extra[f"selector_top{MEASURE_K}"] = min(short) / best - 1 if short else None
    extra[f"known_top{MEASURE_K}"] = min(short_known) / best - 1 if short_known else None
    extra["known_auto"] = min(auto_known) / best - 1 if auto_known else None
    extra["known_auto_first"] = min(auto_first) / best - 1 if auto_first else None
    extra["known_auto_torch"] = min(auto_torch_ms) / best - 1 if auto_torch_ms else None
    extra[AUTO_TORCH_K] = float(len(auto_torch))  # not a regret: how many it timed
    extra[AUTO_K] = float(len(auto))  # not a regret: how many it timed
    extra[AUTO_LATER] = float(len(auto) - len(auto_first))  # not a regret: how many of them later
    extra[KNOWN_UNTIMED] = float(untimed)  # not a regret: a flag selector eval counts
    extra[RANK_MS] = rank_ms  # not a regret: what ranking cost, selector eval's choosing costs
    return [replace(p, regret={**p.regret, **extra}) for p in out]


def score(selector: Selector, problems: Sequence[tuple[str, Sequence[dict[str, Any]]]],
          regrets_of: Callable | None = None) -> tuple[list[ProblemRegret], list[ProblemRegret]]:
    """A trained selector's regrets on `problems` without training anything (with_selector): those it was trained
    on (a training problem at distance 0: the same features) and those it was not. Only the second are held out."""
    from ..dataset.regret import problem_regrets

    regrets_of = regrets_of or problem_regrets
    seen, new = [], []
    for k, rows in problems:
        rs = with_selector(regrets_of, selector, k, rows)
        (seen if selector.neighbours.distance(row_features(rows[0])) < 1e-6 else new).extend(rs)
    return seen, new


def group_of(rows: Sequence[dict[str, Any]], by: str) -> set[str]:
    """The groups a problem is in: its families (by="family") or its batch size (by="batch")."""
    if by == "family":
        return set(rows[0].get("families") or ["?"])
    if by == "batch":
        return {str(row_problem(rows[0])[1][0])}
    raise ValueError(f"by={by!r} must be 'family' or 'batch'")


def _named_groups(problems: Sequence[tuple[str, Sequence[dict[str, Any]]]], by: str, names: Iterable[Any],
                  arg: str) -> list[str]:
    """`names` as group names (str) of `by`, each one a group some problem is in; else a ValueError naming `arg`
    and the groups the problems have."""
    have = sorted({g for _, rows in problems for g in group_of(rows, by)})
    names = [str(g) for g in names]
    unknown = [g for g in names if g not in have]
    if unknown or not names:
        raise ValueError(f"{arg}={names!r}: {', '.join(unknown) or 'nothing'} is not a {by} of these problems "
                         f"(they have: {', '.join(have)})")
    return names


def outside(problems: Sequence[tuple[str, Sequence[dict[str, Any]]]], by: str, groups: Iterable[Any]
            ) -> list[tuple[str, Sequence[dict[str, Any]]]]:
    """The problems in none of `groups` (group_of's, by family or batch size): what a model held out from those
    groups trains on. A group no problem is in is a ValueError (as leave_one_out's `only`)."""
    drop = set(_named_groups(problems, by, groups, "groups"))
    return [(k, rows) for k, rows in problems if not drop & group_of(rows, by)]


def leave_one_out(problems: Sequence[tuple[str, Sequence[dict[str, Any]]]], by: str = "family",
                  params: dict[str, Any] | None = None, regrets_of: Callable | None = None,
                  objective: str = "regression", evidence_k: int = EVIDENCE_K, reach: float = REACH,
                  learner: str = "exact", only: Iterable[str] | None = None, guard: float | None = GUARD,
                  target_cap: float = TARGET_CAP, guard_far: float | None = GUARD_FAR,
                  guard_cap: float | None = GUARD_CAP) -> list[ProblemRegret]:
    """For each group in turn: train on the problems outside it, and record the regrets of its problems (the
    selector's, the neighbour's and every regret method's). A group whose complement has nothing to train on is
    left out. `reach`: the trained models' (Note [the selector's reach]; inf: the trees' ranking everywhere);
    `guard`, `guard_far`, `guard_cap`: theirs (Note [a guard against INSTANT's first]); `target_cap`: train()'s.
    `only`: hold out these groups alone (each still trained on everything outside it); a name no problem has is a
    ValueError."""
    from ..dataset.regret import problem_regrets

    _check_objective(objective)  # here, not only in train(): a fold that cannot train is skipped below
    _check_reach(reach)
    _check_learner(learner)
    _check_target_cap(target_cap)
    regrets_of = regrets_of or problem_regrets
    groups = sorted({g for _, rows in problems for g in group_of(rows, by)})
    if only is not None:
        named = set(_named_groups(problems, by, only, "only"))
        groups = [g for g in groups if g in named]
    out = []
    for g in groups:
        held = [(k, rows) for k, rows in problems if g in group_of(rows, by)]
        rest = [(k, rows) for k, rows in problems if g not in group_of(rows, by)]
        try:
            sel = train(rest, params=params, objective=objective, evidence_k=evidence_k, reach=reach,
                        learner=learner, guard=guard, target_cap=target_cap, guard_far=guard_far, guard_cap=guard_cap)
        except ValueError:
            continue
        for k, rows in held:
            out += [p for p in with_selector(regrets_of, sel, k, rows) if by != "family" or p.family == g]
    return out


__all__ = ["TREE_PARAMS", "HIST_PARAMS", "LEARNERS", "TARGET_CAP", "OBJECTIVES", "MEASURE_K", "KNOWN_CAP",
           "KNOWN_UNTIMED", "RANK_MS", "AUTO_K", "AUTO_LATER", "AUTO_TORCH_K", "SELECTOR_METHODS",
           "targets", "Candidate", "engine_candidates", "encoded_by_name", "class_of", "known_configurations", "train",
           "choose", "with_selector", "score", "group_of", "outside", "leave_one_out"]
