"""Note [neighbour evidence]: what each configuration achieved on a selector's training problems, as features of a
candidate for a new problem (the mean over the nearest training problems of its class that timed it, the nearest
one's value and distance). choose.model's Selector adds them to the trees' input; selector.train makes them."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .features import PROBLEM_FEATURES

EVIDENCE_K = 5  # Note [neighbour evidence]: how many of the nearest training problems that timed a configuration
EVIDENCE_FEATURES = ("evidence_mean", "evidence_first", "evidence_distance")
# an entry's value (log2 of its time over its problem's fastest, capped) in steps of this: 2 ** (1/2048) is 0.03%, far
# under the noise floor, and the model file keeps a value in two bytes (Evidence.of rounds, so training and a loaded
# file see the same values)
VALUE_STEP = 1.0 / 2048
EVIDENCE_ABSENT = (1.0, 1.0, 99.0)  # a configuration no training problem of the class timed (above the targets' cap)
# the problem features that make its evidence class: only training problems of the same direction, transposition,
# dtype and layout are a configuration's evidence (an engine's time means nothing across them)
EVIDENCE_CLASS = ("transposed", "float16", "bfloat16", "float32", "channels_last", "forward", "backward_data",
                  "backward_filter")
_CLASS_AT = [PROBLEM_FEATURES.index(n) for n in EVIDENCE_CLASS]


def evidence_class(problem: Sequence[float]) -> int:
    """A problem's evidence class (EVIDENCE_CLASS's flags of its features, as bits)."""
    return sum(1 << i for i, at in enumerate(_CLASS_AT) if problem[at] > 0.5)


@dataclass(frozen=True, eq=False)
class Evidence:
    """Note [neighbour evidence]: what each configuration achieved on the training problems — log2(its time / that
    problem's fastest), capped as the trees' targets are — as sparse entries (training problem = Neighbours' row,
    configuration, value). For a problem and a candidate, three features: the mean over the EVIDENCE_K nearest training
    problems of its evidence class that timed the candidate, the nearest one's value, and that one's distance (the
    Neighbours' metric); EVIDENCE_ABSENT where none did. The trees learn how far such evidence carries: for a layer
    unlike those they were trained on, their splits on problem features say little about a configuration, and what it
    did on the nearest layers of the class says more (docs/results/selector-2026-12-01-to-03.md: what it
    changed, families held out)."""

    configs: tuple[str, ...]  # config_key per configuration index
    problem: np.ndarray  # int32 per entry: the training problem (a row of Neighbours.features)
    config: np.ndarray  # int32 per entry: index into configs
    value: np.ndarray  # float32 per entry
    klass: np.ndarray  # int32 per training problem: its evidence_class
    k: int = EVIDENCE_K

    def features(self, z: np.ndarray, cls: int, keys: Sequence[str], points: np.ndarray,
                 exclude: int | None = None) -> np.ndarray:
        """EVIDENCE_FEATURES of each configuration of `keys` (config_key) for the problem at standardized features
        `z` of evidence class `cls`; `points`: the training problems' standardized features; `exclude`: a training
        problem not to count (the problem itself, when the training rows are made)."""
        out = np.tile(np.array(EVIDENCE_ABSENT, dtype=np.float64), (len(keys), 1))
        members, local, table = self._class(cls)
        if not len(members) or not len(keys):
            return out
        d = np.sqrt(np.maximum(((points[members] - z) ** 2).sum(axis=1), 0.0))
        if exclude is not None:
            d[members == exclude] = np.inf
        index = self._index
        cols = np.array([local[index[k]] if k in index else -1 for k in keys], dtype=np.int64)
        have = np.nonzero(cols >= 0)[0]
        n_rows = len(d) - (1 if exclude is not None and (members == exclude).any() else 0)
        if not len(have) or not n_rows:
            return out
        # the nearest HEAD first (most configurations have their K there); the whole class only for the columns
        # that do not: the same answer as one scan of the whole class in order, at a fraction of its cost
        head = min(self.HEAD, n_rows)
        near = np.argpartition(d, head - 1)[:head] if head < len(d) else np.arange(len(d))
        near = near[np.argsort(d[near], kind="stable")][:head]
        got, short = self._scan(table, near, cols[have], d)
        if head < n_rows and short.any():
            order = np.argsort(d, kind="stable")[:n_rows]
            got[short] = self._scan(table, order, cols[have][short], d)[0]
        out[have] = got
        return out

    HEAD = 64  # Evidence.features: the nearest this many training problems are scanned first

    def _scan(self, table: np.ndarray, order: np.ndarray, cols: np.ndarray, d: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
        """EVIDENCE_FEATURES of columns `cols` over the members in `order` (nearest first), and which columns
        found fewer than k there."""
        sub = table[np.ix_(order, cols)]
        ok = ~np.isnan(sub)
        take = ok & (np.cumsum(ok, axis=0) <= self.k)
        n = take.sum(axis=0)
        first = ok.argmax(axis=0)
        got = np.column_stack([np.where(take, sub, 0.0).sum(axis=0) / np.maximum(n, 1),
                               sub[first, np.arange(sub.shape[1])], d[order][first]])
        got[n == 0] = EVIDENCE_ABSENT
        return got, n < self.k

    @functools.cached_property
    def _index(self) -> dict[str, int]:
        return {k: i for i, k in enumerate(self.configs)}

    def _class(self, cls: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The class's training problems, each configuration's column in its table (-1: never timed there), and
        the table (members x columns, NaN where a member did not time it), made on first use."""
        memo = self._tables
        if cls not in memo:
            members = np.nonzero(self.klass == cls)[0]
            pos = np.full(len(self.klass), -1, dtype=np.int64)
            pos[members] = np.arange(len(members))
            mine = pos[self.problem] >= 0
            used = np.unique(self.config[mine])
            local = np.full(len(self.configs), -1, dtype=np.int64)
            local[used] = np.arange(len(used))
            table = np.full((len(members), len(used)), np.nan, dtype=np.float32)
            table[pos[self.problem[mine]], local[self.config[mine]]] = self.value[mine]
            memo[cls] = (members, local, table)
        return memo[cls]

    @functools.cached_property
    def _tables(self) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        return {}

    @classmethod
    def of(cls, entries: Sequence[Sequence[tuple[str, float]]], klass: Sequence[int], k: int = EVIDENCE_K
           ) -> "Evidence":
        """From each training problem's (config_key, value) pairs, in Neighbours' row order; entries sorted by
        problem, then configuration (stable), values rounded to VALUE_STEP (what the model file keeps)."""
        configs = sorted({key for es in entries for key, _ in es})
        index = {c: i for i, c in enumerate(configs)}
        problem = np.array([i for i, es in enumerate(entries) for _ in es], dtype=np.int32)
        config = np.array([index[key] for es in entries for key, _ in es], dtype=np.int32)
        value = quantized(np.array([v for es in entries for _, v in es], dtype=np.float64))
        order = np.lexsort((config, problem))
        return cls(tuple(configs), problem[order], config[order], value[order], np.asarray(klass, dtype=np.int32),
                   int(k))


def value_steps(value: np.ndarray) -> np.ndarray:
    """Evidence values (>= 0) as the two-byte steps of VALUE_STEP a model file keeps (uint16). ValueError for a value
    two bytes cannot keep (negative, not finite, or over 65535 steps)."""
    steps = np.round(np.asarray(value, dtype=np.float64) / VALUE_STEP)
    if len(steps) and not (np.isfinite(steps).all() and steps.min() >= 0 and steps.max() <= 0xFFFF):
        raise ValueError(f"evidence values must be finite, in [0, {0xFFFF * VALUE_STEP}] (log2 of time over the "
                         f"fastest, capped); got {float(np.nanmin(value))}..{float(np.nanmax(value))}")
    return steps.astype(np.uint16)


def from_steps(steps: np.ndarray) -> np.ndarray:
    """value_steps' steps as evidence values (float32; exact: VALUE_STEP is a power of two)."""
    return np.asarray(steps).astype(np.float32) * np.float32(VALUE_STEP)


def quantized(value: np.ndarray) -> np.ndarray:
    """Evidence values rounded to VALUE_STEP, float32: what a model file gives back (value_steps' errors)."""
    return from_steps(value_steps(value))


__all__ = ["EVIDENCE_K", "EVIDENCE_FEATURES", "EVIDENCE_ABSENT", "EVIDENCE_CLASS", "VALUE_STEP", "Evidence",
           "evidence_class", "quantized", "value_steps", "from_steps"]
