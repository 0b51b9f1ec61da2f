"""Boosted trees fitted to a ranking objective (LambdaMART): each problem's candidates are a group, each tree is fitted
to the LambdaRank gradients of the group's NDCG, with Newton steps in its leaves. What matters in a pick is the order
of the near-best configurations of one problem, not how slow the slow ones are: a pointwise regression spends its
splits on the latter.

The gain of a candidate is (fastest / its time) ** GAIN_POWER: 1 for the fastest, 0.68 at 5% slower, 0.21 at 2x.
The trees predict a score where lower is better (the convention of model.Trees' predictions: log time relative to
the fastest), so a fitted model drops into the same file format. Needs scikit-learn (DecisionTreeRegressor)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..choose.trees import Trees

RANK_PARAMS = {"n_estimators": 300, "max_depth": 6, "learning_rate": 0.1, "min_samples_leaf": 20, "sigma": 1.0,
               "gain_power": 8.0, "truncation": 0, "random_state": 0}


class _Groups:
    """The groups (problems) padded to blocks of similar size, so a step is a few array operations per block."""

    def __init__(self, sizes: Sequence[int], gain_of: Sequence[float], block: int = 128):
        gain_of = np.asarray(gain_of, dtype=np.float64)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        order = np.argsort(sizes, kind="stable")
        self.blocks = []
        for b in range(0, len(order), block):
            gs = order[b:b + block]
            m = int(max(sizes[g] for g in gs))
            idx = np.full((len(gs), m), -1, dtype=np.int64)
            for r, g in enumerate(gs):
                idx[r, :sizes[g]] = np.arange(starts[g], starts[g] + sizes[g])
            mask = idx >= 0
            gain = np.where(mask, gain_of[np.maximum(idx, 0)], 0.0)
            ideal = -np.sort(-gain, axis=1)
            disc = 1.0 / np.log2(np.arange(m) + 2.0)
            idcg = (ideal * disc).sum(axis=1)
            idcg[idcg == 0] = 1.0
            self.blocks.append((idx, mask, gain, idcg))

    def gradients(self, score: np.ndarray, n: int, sigma: float, truncation: int) -> tuple[np.ndarray, np.ndarray]:
        """LambdaRank gradients (of NDCG, toward a higher `score`) and their Hessian diagonal, per row."""
        lam, hess = np.zeros(n), np.zeros(n)
        for idx, mask, gain, idcg in self.blocks:
            s = np.where(mask, score[np.maximum(idx, 0)], -np.inf)
            pos = np.empty_like(idx)
            np.put_along_axis(pos, np.argsort(-s, axis=1, kind="stable"), np.arange(idx.shape[1])[None, :], axis=1)
            disc = 1.0 / np.log2(pos + 2.0)
            if truncation:
                disc = np.where(pos < truncation, disc, 0.0)
            dg = gain[:, :, None] - gain[:, None, :]  # i better than j where > 0
            pair = (dg > 0) & mask[:, :, None] & mask[:, None, :]
            delta = np.abs(dg * (disc[:, :, None] - disc[:, None, :])) / idcg[:, None, None]
            with np.errstate(over="ignore", invalid="ignore"):
                ds = np.where(pair, s[:, :, None] - s[:, None, :], 0.0)
                rho = 1.0 / (1.0 + np.exp(sigma * ds))
            g = np.where(pair, sigma * rho * delta, 0.0)
            h = np.where(pair, sigma * sigma * rho * (1.0 - rho) * delta, 0.0)
            li = g.sum(axis=2) - g.sum(axis=1)
            hi = h.sum(axis=2) + h.sum(axis=1)
            np.add.at(lam, idx[mask], li[mask])
            np.add.at(hess, idx[mask], hi[mask])
        return lam, hess


def gains(ms: Sequence[float], power: float) -> list[float]:
    """One problem's candidates' gains: (fastest / time) ** power."""
    best = min(ms)
    return [(best / t) ** power for t in ms]


def fit(x: np.ndarray, ms_groups: Sequence[Sequence[float]], params: dict[str, Any] | None = None) -> Trees:
    """LambdaMART over groups of consecutive rows of `x` (one group per entry of `ms_groups`, its candidates' kernel
    times). The trees' predictions are lower-is-better."""
    try:
        from sklearn.tree import DecisionTreeRegressor
    except ImportError:
        raise ImportError("training a ranking selector needs scikit-learn: pip install scikit-learn") from None
    p = {**RANK_PARAMS, **(params or {})}
    x = np.asarray(x, dtype=np.float64)
    sizes = [len(g) for g in ms_groups]
    g = np.concatenate([gains(ms, p["gain_power"]) for ms in ms_groups])
    groups = _Groups(sizes, g)
    score = np.zeros(len(x))  # higher better inside
    rng = np.random.RandomState(p["random_state"])
    trees, values = [], []
    for _ in range(int(p["n_estimators"])):
        lam, hess = groups.gradients(score, len(x), p["sigma"], int(p["truncation"]))
        tree = DecisionTreeRegressor(max_depth=p["max_depth"], min_samples_leaf=p["min_samples_leaf"],
                                     random_state=rng.randint(1 << 30)).fit(x, lam)
        t = tree.tree_
        leaf = tree.apply(x)
        num = np.bincount(leaf, weights=lam, minlength=t.node_count)
        den = np.bincount(leaf, weights=hess, minlength=t.node_count)
        step = np.where(den > 1e-12, num / np.maximum(den, 1e-12), 0.0)
        score += p["learning_rate"] * step[leaf]
        trees.append(t)
        values.append(-step)  # lower is better outside
    return Trees.of(trees, values, 0.0, p["learning_rate"])


# learner="lightgbm": LightGBM's lambdarank over the same groups; a candidate's relevance is how close it is to its
# problem's fastest, in LIGHTGBM_LEVELS steps of LIGHTGBM_STEP (log2 of time / the fastest: 0.1 is 7%): the fastest
# LIGHTGBM_LEVELS, 2x slower 5, 2.8x slower and beyond 0
LIGHTGBM_PARAMS = {"n_estimators": 300, "max_depth": 6, "num_leaves": 63, "learning_rate": 0.1,
                   "min_child_samples": 20, "random_state": 0, "verbose": -1}
LIGHTGBM_LEVELS, LIGHTGBM_STEP = 15, 0.1


def relevance(ms: Sequence[float]) -> list[int]:
    """One problem's candidates' relevance labels for lambdarank (integers, the fastest LIGHTGBM_LEVELS)."""
    best = min(ms)
    return [max(0, LIGHTGBM_LEVELS - int(round(np.log2(t / best) / LIGHTGBM_STEP))) for t in ms]


def fit_lightgbm(x: np.ndarray, ms_groups: Sequence[Sequence[float]], params: dict[str, Any] | None = None) -> Trees:
    """LightGBM's lambdarank over groups of consecutive rows of `x` (as fit), exported to Trees (lower-is-better
    predictions): training needs lightgbm, the trees it makes do not."""
    try:
        import lightgbm
    except ImportError:
        raise ImportError("learner='lightgbm' needs LightGBM: pip install lightgbm") from None
    p = {**LIGHTGBM_PARAMS, **(params or {})}
    y = np.concatenate([relevance(ms) for ms in ms_groups])
    ranker = lightgbm.LGBMRanker(objective="lambdarank", label_gain=[2.0 ** i - 1 for i in range(LIGHTGBM_LEVELS + 1)],
                                 **p)
    ranker.fit(np.asarray(x, dtype=np.float64), y, group=[len(g) for g in ms_groups])
    return Trees.from_lightgbm(ranker.booster_.dump_model(), sign=-1.0)


__all__ = ["RANK_PARAMS", "LIGHTGBM_PARAMS", "gains", "fit", "fit_lightgbm", "relevance"]
