"""A trained selector as plain arrays: gradient-boosted regression trees (their nodes as flat arrays, evaluated with
numpy) predicting a candidate's kernel time relative to its problem's fastest, and the nearest-neighbour baseline
(each training problem's features and fastest configuration). One ``.npz`` file (``numpy.savez_compressed``, read
with ``allow_pickle=False``: no library object is unpickled) holding the arrays and a JSON header: the feature and
vocabulary names, the environment family it was trained for, and what it was trained on."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .features import PROBLEM_FEATURES, Vocabulary

FORMAT = 1


@dataclass(frozen=True)
class Trees:
    """Regression trees as flat arrays: node i of tree t is at offset[t] + i; a leaf has left == -1. The prediction
    is base + rate * sum over trees of the leaf values."""

    feature: np.ndarray  # int32 per node
    threshold: np.ndarray  # float64 per node: go left when x[feature] <= threshold
    left: np.ndarray  # int32 per node, relative to its tree's offset; -1 at a leaf
    right: np.ndarray
    value: np.ndarray  # float64 per node
    offset: np.ndarray  # int64 per tree
    base: float
    rate: float

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Predictions for the rows of `x` (2-d)."""
        x = np.asarray(x, dtype=np.float64)
        if not len(x):
            return np.zeros(0)
        rows = np.arange(len(x))[:, None]
        node = np.broadcast_to(self.offset, (len(x), len(self.offset))).copy()  # every row in every tree at once
        while True:  # one level of every tree per pass: as many passes as the deepest tree
            left = self.left[node]
            leaf = left < 0
            if leaf.all():
                break
            go_left = x[rows, self.feature[node]] <= self.threshold[node]
            node = np.where(leaf, node, self.offset + np.where(go_left, left, self.right[node]))
        return self.base + self.rate * self.value[node].sum(axis=1)

    @classmethod
    def from_sklearn(cls, gbr: Any) -> "Trees":
        """A fitted sklearn GradientBoostingRegressor (squared error) as arrays: its public tree_ attributes."""
        feature, threshold, left, right, value, offset = [], [], [], [], [], []
        n = 0
        for est in gbr.estimators_[:, 0]:
            t = est.tree_
            offset.append(n)
            feature.append(np.maximum(t.feature, 0))
            threshold.append(t.threshold)
            left.append(t.children_left)
            right.append(t.children_right)
            value.append(t.value[:, 0, 0])
            n += t.node_count
        base = float(gbr.init_.constant_.ravel()[0])  # the default init: the training targets' mean
        return cls(np.concatenate(feature).astype(np.int32), np.concatenate(threshold).astype(np.float64),
                   np.concatenate(left).astype(np.int32), np.concatenate(right).astype(np.int32),
                   np.concatenate(value).astype(np.float64), np.asarray(offset, dtype=np.int64), base,
                   float(gbr.learning_rate))


@dataclass(frozen=True)
class Neighbours:
    """The nearest-neighbour baseline: each training problem's standardized features and its fastest
    configuration's name; a new problem takes the fastest configuration of the nearest training problem that it can
    build."""

    features: np.ndarray  # (problems, PROBLEM_FEATURES), standardized
    best: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray

    def order(self, problem: Sequence[float]) -> np.ndarray:
        z = (np.asarray(problem, dtype=np.float64) - self.mean) / self.scale
        return np.argsort(((self.features - z) ** 2).sum(axis=1), kind="stable")

    def pick(self, problem: Sequence[float], candidates: Sequence[str]) -> str | None:
        have = set(candidates)
        for i in self.order(problem):
            if self.best[i] in have:
                return self.best[i]
        return None


@dataclass(frozen=True)
class Selector:
    """Trees and neighbours for one environment family (GPU architecture x cuDNN major.minor)."""

    vocabulary: Vocabulary
    trees: Trees
    neighbours: Neighbours
    family: str  # e.g. "sm_90 cudnn 9.19"
    trained_on: dict[str, Any] = field(default_factory=dict)  # problems, candidates, families, when

    def predict(self, problem: Sequence[float], candidates: Sequence[tuple[int, dict[str, int]]]) -> np.ndarray:
        """Predicted log2(kernel time / the problem's fastest) of each candidate (engine id, knobs)."""
        x = np.array([list(problem) + self.vocabulary.encode(e, k) for e, k in candidates], dtype=np.float64)
        return self.trees.predict(x) if len(x) else np.zeros(0)

    def rank(self, problem: Sequence[float], candidates: Sequence[tuple[int, dict[str, int]]]) -> list[int]:
        """Candidate indices, predicted fastest first."""
        return [int(i) for i in np.argsort(self.predict(problem, candidates), kind="stable")]

    # ------------------------------------------------------------------------------------------- the file
    def save(self, path: str | os.PathLike) -> None:
        header = {"format": FORMAT, "features": list(PROBLEM_FEATURES), "engines": list(self.vocabulary.engines),
                  "knobs": list(self.vocabulary.knobs), "family": self.family, "trained_on": self.trained_on,
                  "base": self.trees.base, "rate": self.trees.rate, "best": list(self.neighbours.best)}
        t, nb = self.trees, self.neighbours
        with open(path, "wb") as f:
            np.savez_compressed(f, header=np.frombuffer(json.dumps(header).encode(), dtype=np.uint8),
                                feature=t.feature, threshold=t.threshold, left=t.left, right=t.right, value=t.value,
                                offset=t.offset, nb_features=nb.features, nb_mean=nb.mean, nb_scale=nb.scale)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Selector":
        """A saved selector; ValueError for a file of another format or features than this version reads."""
        with np.load(path, allow_pickle=False) as z:
            try:
                h = json.loads(bytes(z["header"]).decode())
            except (KeyError, ValueError) as e:
                raise ValueError(f"{path}: not a cudnn_algos selector ({e})") from None
            if h.get("format") != FORMAT or tuple(h.get("features", ())) != PROBLEM_FEATURES:
                raise ValueError(f"{path}: a selector of format {h.get('format')} with other features; this version "
                                 f"reads format {FORMAT}: train it again")
            trees = Trees(z["feature"], z["threshold"], z["left"], z["right"], z["value"], z["offset"],
                          float(h["base"]), float(h["rate"]))
            nb = Neighbours(z["nb_features"], tuple(h["best"]), z["nb_mean"], z["nb_scale"])
        return cls(Vocabulary(tuple(h["engines"]), tuple(h["knobs"])), trees, nb, h["family"], h["trained_on"])


__all__ = ["FORMAT", "Trees", "Neighbours", "Selector"]
