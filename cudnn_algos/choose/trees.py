"""Gradient-boosted regression trees as flat arrays (node i of tree t at offset[t] + i), evaluated with numpy: the
trees of a selector (model.Selector), exported from scikit-learn's fitted models (GradientBoostingRegressor,
HistGradientBoostingRegressor, or the ranking objective's own trees: rank.fit; LightGBM's, rank.fit_lightgbm) and
saved as plain arrays: a model file never needs the library that trained it."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np


@dataclass(frozen=True, eq=False)
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
        """Predictions for the rows of `x` (2-d): every row down every tree at once, one level per pass (flat
        indices and take(): a pass is a few gathers over rows x trees)."""
        x = np.ascontiguousarray(x, dtype=np.float64)
        if not len(x):
            return np.zeros(0)
        child, feature, depth = self._walk
        if x.ndim != 2 or x.shape[1] < self.width:  # a narrower row would be read past its end, into the next
            raise ValueError(f"rows of shape {x.shape}: these trees read {self.width} features a row (a selector "
                             "of format 3 without its evidence?)")
        flat = x.ravel()
        base = (np.arange(len(x), dtype=np.intp) * x.shape[1])[:, None]
        node = np.repeat(self.offset.astype(np.intp)[None, :], len(x), axis=0)
        for _ in range(depth):  # a leaf's children are itself: it stays put
            node = child.take(2 * node + (flat.take(base + feature.take(node)) > self.threshold.take(node)))
        return self.base + self.rate * self.value.take(node).sum(axis=1)

    @functools.cached_property
    def width(self) -> int:
        """The features a row needs: one more than the highest index a split reads."""
        inner = self.left >= 0
        return int(self.feature[inner].max(initial=-1)) + 1

    @functools.cached_property
    def _walk(self) -> tuple[np.ndarray, np.ndarray, int]:
        """Children as absolute node indices, interleaved (node n's left at 2n, right at 2n + 1; a leaf's both
        itself); features as indices; and the deepest tree's depth."""
        tree = np.repeat(np.arange(len(self.offset)), np.diff(np.append(self.offset, len(self.left))))
        idx = np.arange(len(self.left))
        leaf = self.left < 0
        left = np.where(leaf, idx, self.offset[tree] + self.left)
        right = np.where(leaf, idx, self.offset[tree] + self.right)
        depth = np.zeros(len(idx), dtype=np.int64)  # children come after their parent in sklearn's node order
        for i in idx[~leaf]:
            depth[left[i]] = depth[right[i]] = depth[i] + 1
        child = np.stack([left, right], axis=1).ravel().astype(np.intp)
        return child, self.feature.astype(np.intp), int(depth.max(initial=0))

    @classmethod
    def from_sklearn(cls, gbr: Any) -> "Trees":
        """A fitted sklearn GradientBoostingRegressor (squared error) as arrays: its public tree_ attributes."""
        ts = [est.tree_ for est in gbr.estimators_[:, 0]]
        base = float(gbr.init_.constant_.ravel()[0])  # the default init: the training targets' mean
        return cls.of(ts, [t.value[:, 0, 0] for t in ts], base, float(gbr.learning_rate))

    @classmethod
    def from_sklearn_hist(cls, hgb: Any) -> "Trees":
        """A fitted sklearn HistGradientBoostingRegressor (squared error, numerical features, no missing values)
        as arrays. Its trees are not public attributes: each predictor's `nodes` record array (children after
        their parent, a split sends x <= num_threshold left, leaf values already shrunk by the learning rate) and
        the baseline prediction are read, and checked for the layout this expects."""
        preds = [p[0] for p in getattr(hgb, "_predictors", ())]
        base = np.asarray(getattr(hgb, "_baseline_prediction", np.nan), dtype=np.float64).ravel()
        need = ("value", "feature_idx", "num_threshold", "left", "right", "is_leaf")
        if not preds or base.size != 1 or any(n not in (p.nodes.dtype.names or ()) for p in preds for n in need):
            raise ValueError("this scikit-learn's HistGradientBoostingRegressor keeps its trees in a layout this "
                             "cannot read; train with learner='exact'")
        if any(p.nodes["is_categorical"].any() for p in preds if "is_categorical" in p.nodes.dtype.names):
            raise ValueError("categorical splits cannot be exported: train on numerical features")
        nodes = [p.nodes for p in preds]
        offset = np.concatenate([[0], np.cumsum([len(n) for n in nodes])[:-1]]).astype(np.int64)
        cat = np.concatenate(nodes)
        leaf = cat["is_leaf"].astype(bool)
        return cls(np.where(leaf, 0, cat["feature_idx"]).astype(np.int32), cat["num_threshold"].astype(np.float64),
                   np.where(leaf, -1, cat["left"].astype(np.int64)).astype(np.int32),
                   np.where(leaf, -1, cat["right"].astype(np.int64)).astype(np.int32),
                   cat["value"].astype(np.float64), offset, float(base[0]), 1.0)

    @classmethod
    def from_lightgbm(cls, dump: dict[str, Any], sign: float = 1.0) -> "Trees":
        """A LightGBM model as arrays, from its ``Booster.dump_model()`` (numerical splits going left when x <=
        threshold, no missing values; leaf values already shrunk): each tree's nodes in preorder (a node before its
        children, as _walk needs). `sign` -1 turns LightGBM's higher-is-better ranking scores into predictions
        where lower is better."""
        feature: list[int] = []
        threshold: list[float] = []
        left: list[int] = []
        right: list[int] = []
        value: list[float] = []
        offset: list[int] = []

        def add(node: dict[str, Any], start: int) -> int:
            i = len(feature)
            if "split_feature" not in node:  # a leaf
                feature.append(0)
                threshold.append(0.0)
                left.append(-1)
                right.append(-1)
                value.append(sign * float(node.get("leaf_value", 0.0)))
                return i
            if node.get("decision_type", "<=") != "<=" or str(node.get("missing_type", "None")) == "Zero":
                raise ValueError("LightGBM trees with categorical splits, or zero taken as missing, cannot be "
                                 "exported")  # NaN as missing: the rows a selector ranks hold none
            feature.append(int(node["split_feature"]))
            threshold.append(float(node["threshold"]))
            left.append(0)
            right.append(0)
            value.append(0.0)
            left[i] = add(node["left_child"], start) - start
            right[i] = add(node["right_child"], start) - start
            return i

        for tree in dump["tree_info"]:
            offset.append(len(feature))
            add(tree["tree_structure"], len(feature))
        return cls(np.asarray(feature, np.int32), np.asarray(threshold, np.float64), np.asarray(left, np.int32),
                   np.asarray(right, np.int32), np.asarray(value, np.float64), np.asarray(offset, np.int64), 0.0, 1.0)

    @classmethod
    def of(cls, trees: Sequence[Any], values: Sequence[np.ndarray], base: float, rate: float) -> "Trees":
        """Fitted sklearn trees (their tree_ objects) with the value of each of their nodes, as arrays."""
        offset = np.concatenate([[0], np.cumsum([t.node_count for t in trees])[:-1]]).astype(np.int64)
        cat = lambda get, dtype: np.concatenate([get(t) for t in trees]).astype(dtype)  # noqa: E731
        return cls(cat(lambda t: np.maximum(t.feature, 0), np.int32), cat(lambda t: t.threshold, np.float64),
                   cat(lambda t: t.children_left, np.int32), cat(lambda t: t.children_right, np.int32),
                   np.concatenate(values).astype(np.float64), offset, float(base), float(rate))


__all__ = ["Trees"]
