"""A trained selector as plain arrays: gradient-boosted regression trees (their nodes as flat arrays, evaluated with
numpy) predicting a candidate's kernel time relative to its problem's fastest, and the nearest-neighbour baseline
(each training problem's features and fastest configuration). One ``.npz`` file (``numpy.savez_compressed``, read
with ``allow_pickle=False``: no library object is unpickled) holding the arrays and a JSON header: the feature and
vocabulary names, the environment family it was trained for, and what it was trained on."""
from __future__ import annotations

import collections
import dataclasses
import functools
import io
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

import numpy as np

from ..configs import config_key, name_key
from ..environment import family_name
from .evidence import (EVIDENCE_ABSENT, EVIDENCE_CLASS, EVIDENCE_FEATURES, EVIDENCE_K, Evidence, evidence_class,
                       from_steps, value_steps)
from .features import PROBLEM_FEATURES, RANKED_LISTS, Vocabulary
from .trees import Trees

# 2: a candidate's positions in the heuristic lists (features.RANKED_LISTS) are features; 3: evidence; 4: the guard's
# own trees and its margin beyond the reach (a reader of 3 would apply the guard to the ranking trees); 5: evidence
# kept compact (values as two-byte steps of evidence.VALUE_STEP, configurations as two bytes where they fit)
FORMAT = 5
READS = (2, 3, 4, 5)  # the formats load() reads (a format-2 file has no evidence)
REACH = 2.0  # Note [the selector's reach]
# Note [the automatic shortlist]: measure_top_k's k=AUTO times the trees' first and cuDNN's first (and INSTANT's first,
# torch's benchmark-off pick, after them where it is neither: Selector.shortlist), then every candidate the trees
# predict within AUTO_SPREAD (log2 of time relative to the fastest: 2 ** 0.3 = 1.23x) of their first, AUTO_MAX at most;
# outside the reach (where predict runs cuDNN's order) also cuDNN's first AUTO_OUTSIDE. The trees rank outside the reach
# too: predict trusts their first pick less there, but the clock checks what they shortlist. Where the trees are sure it
# times two, where several are close (a kind of layer they know less) more; the settings and how it compares with a
# fixed k of the same cost, held out by family: docs/results/selector-2026-12-01-to-03.md, "The automatic shortlist" and
# "The trees' shortlist outside the reach". Where more candidates are close than AUTO_MAX takes, the shortlist takes
# other engines' before a third of one engine's (engines_first): on sampled shapes held out by halves, ten knob
# variants of one engine filled it where another engine's configuration was fastest (mean regret 3.9% -> 2.9%, the
# same count timed; held out by family and by batch size within 0.05 points of before: docs/results/
# 2026-12-07-auto-shortlist-engines.md). Of the candidates it adds beyond the first two, those of engines that
# compile at run time (cuDNN's behaviour note RUNTIME_COMPILATION: NVRTC and a module load per plan, up to seconds) are
# not built with the others on the model's own thread but later, off it (auto_parts; Note [runtime-compiled candidates
# later] in choose/unseen.py). Where they win (grouped layers) they are worth it in a long run; both sides measured:
# docs/results/selector-2026-12-01-to-03.md, "Runtime-compiled engines".
AUTO = "auto"
T = TypeVar("T")
AUTO_FIRST = 2  # the trees' first and cuDNN's first: what it times at once whatever they are, runtime-compiled or not
AUTO_SPREAD = 0.3
AUTO_MAX = 10
AUTO_PER_ENGINE = 2  # Note [the automatic shortlist]: an engine's configurations beyond so many wait for the others
AUTO_OUTSIDE = 4
# Note [known configurations first]: the trees' first goes first only where cuDNN's lists name it for the problem or it
# was the fastest of a training problem within KNOWN_NEAR (the neighbours' metric) of this one; otherwise the first
# candidate that is either goes ahead of it (it stays second, so measure_top_k's shortlist still times it). The known
# configurations (Note [known configurations]) are each the fastest of some training problem, and the trees also rank
# them for problems far from it, where nothing was measured of them: there predict would build a configuration on the
# trees' extrapolation alone (on ResNet-50's stem, one that had won a 1x3x512x512 problem and was slower than cuDNN's
# first at every batch size; benchmarks/picks_kernel_time.py and docs/results/selector-2026-12-01-to-03.md have the
# figures).
KNOWN_NEAR = 1.0
# Note [a guard against INSTANT's first]: issue 53 asks that predict never bet against cuDNN. A selector with a guard
# (Selector.guard, a margin in the trees' unit: log2 of time over the problem's fastest) ranks with its trees
# everywhere, the reach aside, and puts INSTANT's first (instant_first: what torch runs with benchmark off) ahead of
# their first unless they predict their first at least the margin faster than it. Where the trees are not sure, a
# user gets what torch would have run. Two refinements (docs/results/2026-12-07-guard-far-and-guard-trees.md):
# - the margin is read from guard trees (Selector.guard_trees) where the model has them: trees fitted to the same
#   rows with the target capped at GUARD_CAP (2: 4x) instead of the ranking's 0.5. Capped at 0.5, trees cannot tell
#   a configuration 1.5x the best from one 10x it, so where INSTANT's first is far behind (sampled shapes' tail)
#   their margin says nothing; the ranking itself stays with the 0.5 trees, which order the near-best ones better.
# - beyond the reach (Note [the selector's reach]) the margin is GUARD_FAR: a problem unlike any training problem
#   needs a clearer predicted win before the trees overrule cuDNN. Held out by family, real layers lie at distance
#   0.2-1.5 from the rest; sampled shapes at 2.1-4.0 even with half of them in training.
# GUARD, GUARD_FAR and GUARD_CAP: what train() gives a model (0.2 is 15%, 0.4 is 32%); the margins scored and why
# these: selector/train.py's OFF_GUARD_MARGINS and docs/selector.md.
GUARD, GUARD_FAR, GUARD_CAP = 0.2, 0.4, 2.0
# Note [the guard trees in the ranking]: the ranking trees (target cap 0.5) order the near-best configurations well but
# cannot tell a 1.5x one from a 10x one, and far from their data their first is sometimes the latter. A selector with
# guard trees (cap 2: 4x) ranks by the ranking trees' prediction plus BLEND times the guard trees' (Selector.blend):
# among candidates the ranking trees see as about equal, the one the guard trees think less far behind goes first.
# Held out on the sampled halves (13,368 problem-directions, CPU, stored times) 0.5 moved predict's mean from 40.0% /
# 44.1% to 38.4% / 43.2% and left a real family held out as it was (timm: 4.0%, 4.1%);
# docs/results/2026-12-07-sampled-halves-curve.md. The guard and k="auto" read the ranking trees' predictions alone.
BLEND = 0.5


def auto_parts(short: Sequence[T], compiled: Callable[[T], bool]) -> tuple[list[T], list[T]]:
    """k=AUTO's shortlist `short` as (timed at once, built and timed later): its first AUTO_FIRST and the additions
    `compiled` does not mark at once, the additions it marks (engines that compile at run time) later (Note [the
    automatic shortlist])."""
    now = [c for i, c in enumerate(short) if i < AUTO_FIRST or not compiled(c)]
    return now, [c for i, c in enumerate(short) if i >= AUTO_FIRST and compiled(c)]


SHIPPED = Path(__file__).parent / "shipped"  # the trained selectors the package ships, one file per family


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
        return np.argsort(self._squared(problem), kind="stable")

    def distance(self, problem: Sequence[float]) -> float:
        """To the nearest training problem (standardized features); inf with none."""
        d = self._squared(problem)
        return float(np.sqrt(d.min())) if len(d) else float("inf")

    def _squared(self, problem: Sequence[float]) -> np.ndarray:
        """Squared distances to every training problem: |f|^2 - 2 f.z + |z|^2 (one product, no table-sized
        temporary; clipped at 0 against rounding)."""
        z = (np.asarray(problem, dtype=np.float64) - self.mean) / self.scale
        return np.maximum(self._norms - 2.0 * (self.features @ z) + z @ z, 0.0)

    @functools.cached_property
    def _norms(self) -> np.ndarray:
        return np.einsum("ij,ij->i", self.features, self.features)

    def won_near(self, problem: Sequence[float], radius: float) -> set[str]:
        """config_key of the fastest configuration of each training problem within `radius` of `problem`."""
        near = np.nonzero(self._squared(problem) <= radius * radius)[0]
        return {self._best_keys[i] for i in near}

    @functools.cached_property
    def _best_keys(self) -> list[str]:
        return [name_key(n) for n in self.best]

    def pick(self, problem: Sequence[float], candidates: Sequence[str]) -> str | None:
        have = set(candidates)
        for i in self.order(problem):
            if self.best[i] in have:
                return self.best[i]
        return None




def listed(candidate: tuple) -> bool:
    """Whether a candidate (Selector.rank's form) is named by one of cuDNN's lists (a position in one)."""
    return len(candidate) > 2 and any(v is not None for v in (candidate[2] or {}).values())


def problem_class(direction: str, dtype: str, memory_format: str) -> str:
    """The key of Selector.known: "forward float16 channels_last"."""
    return f"{direction} {dtype} {memory_format}"


def engines_first(close: Sequence[int], short: Sequence[int], candidates: Sequence[tuple],
                  per: int = AUTO_PER_ENGINE) -> list[int]:
    """Note [the automatic shortlist]: `close` (indices into `candidates`, in the trees' order) with each engine's
    beyond `per` (counting those already in `short`) moved behind the rest, each part in its order."""
    count = collections.Counter(candidates[i][0] for i in short)
    first, behind = [], []
    for i in close:
        engine = candidates[i][0]
        (first if count[engine] < per else behind).append(i)
        count[engine] += 1
    return first + behind


def heuristic_order(candidates: Sequence[tuple]) -> list[int]:
    """Candidate indices in cuDNN's order: by position in heuristic B, then in A (features.RANKED_LISTS order
    reversed: B's answer is the better first pick in the dataset), unlisted ones last."""
    def key(i: int) -> tuple:
        ranks = candidates[i][2] if len(candidates[i]) > 2 else {}
        return tuple(ranks.get(n) if ranks.get(n) is not None else 1 << 30 for n in reversed(RANKED_LISTS)) + (i,)

    return sorted(range(len(candidates)), key=key)


def instant_first(candidates: Sequence[tuple]) -> list[int]:
    """[the index of the candidate cuDNN's INSTANT list ranks first], or [] where none is in it: what torch runs with
    benchmark off (its first configuration torch accepts; cuDNN 9's mode INSTANT is mode A, RANKED_LISTS' "a")."""
    ranked = [(c[2]["a"], i) for i, c in enumerate(candidates) if len(c) > 2 and c[2] and c[2].get("a") is not None]
    return [min(ranked)[1]] if ranked else []


@dataclass(frozen=True)
class Selector:
    """Trees and neighbours for one environment family (GPU architecture x cuDNN major.minor)."""

    vocabulary: Vocabulary
    trees: Trees
    neighbours: Neighbours
    family: str  # e.g. "sm_90-cudnn-9.19" (environment.family_name's spelling, whatever the file wrote)
    trained_on: dict[str, Any] = field(default_factory=dict)  # problems, candidates, families, when
    # Note [the selector's reach]: a problem farther than this from every training problem (Euclidean distance of
    # the standardized PROBLEM_FEATURES, the neighbours' metric) is outside what the trees learned: there the
    # ranking is cuDNN's own (heuristic B's order, then A's), not the trees'. Held out by model family, trees far
    # from their data picked configurations many times slower than cuDNN's first with confidence (a depthwise 7x7
    # layer when no family trained on had one); docs/results/selector-2026-12-01-to-03.md has the figures.
    reach: float = REACH
    # Note [known configurations]: per problem class (problem_class: cuDNN's direction, dtype, memory format), the
    # configurations that were the fastest of some training problem, the most often fastest first (train.KNOWN_CAP at
    # most), each with whether it was deterministic there. They are ranked beside the lists' candidates: no list names
    # some of the fastest configurations (for RegNet's grouped 3x3 layers, engines 70/71/78 with SPLIT_K_SLC=1:
    # docs/results/selector-2026-12-01-to-03.md), and the dataset knows them. One that cannot be built for a problem is
    # passed over there. They join the lists' candidates and never replace them: where the lists offer nothing torch
    # would accept, nothing is added (ranking.with_known).
    known: dict[str, tuple[tuple[str, bool], ...]] = field(default_factory=dict)
    evidence: Evidence | None = None  # Note [neighbour evidence]; None: trees trained without it (format 2)
    guard: float | None = None  # Note [a guard against INSTANT's first]; None: none (the reach alone, as before)
    guard_far: float | None = None  # the guard's margin beyond the reach; None: `guard` everywhere
    guard_trees: Trees | None = None  # the trees the guard's margin is read from; None: `trees`
    blend: float = 0.0  # Note [the guard trees in the ranking]: their weight in the ranking (0: none; needs them)

    def __post_init__(self) -> None:
        object.__setattr__(self, "family", family_name(self.family))
        object.__setattr__(self, "guard", _guard(self.guard, "guard"))
        object.__setattr__(self, "guard_far", _guard(self.guard_far, "guard_far"))
        object.__setattr__(self, "blend", _blend(self.blend))

    @functools.cached_property
    def unguarded(self) -> "Selector":
        """This selector without its guard (itself where it has none): the reach alone decides where the trees
        rank."""
        return self if self.guard is None else dataclasses.replace(self, guard=None)

    def known_for(self, direction: str, dtype: str, memory_format: str, deterministic: bool = False,
                  allow_tf32: bool = True) -> tuple[str, ...]:
        """The known configurations' names for this class, as torch set so would accept them: with
        `deterministic`, only those that were deterministic; float32 with `allow_tf32` off, none (whether one uses
        tensor cores is not kept)."""
        if dtype == "float32" and not allow_tf32:
            return ()
        return tuple(n for n, det in self.known.get(problem_class(direction, dtype, memory_format), ())
                     if det or not deterministic)

    def predict(self, problem: Sequence[float], candidates: Sequence[tuple]) -> np.ndarray:
        """Predicted log2(kernel time / the problem's fastest) of each candidate (of trees trained with the rank
        objective: a score, lower better): (engine id, knobs by name) or (engine id, knobs, {heuristic list:
        position}) (features.RANKED_LISTS; absent: not in that list)."""
        if not len(candidates):
            return np.zeros(0)
        return self.trees.predict(self.rows(problem, candidates))

    def rows(self, problem: Sequence[float], candidates: Sequence[tuple], exclude: int | None = None
             ) -> np.ndarray:
        """The trees' input for each candidate: the problem's features, the candidate's encoding (vocabulary) and,
        with evidence, EVIDENCE_FEATURES (`exclude`: a training problem not to count, Evidence.features)."""
        width = len(self.vocabulary.names) + (len(EVIDENCE_FEATURES) if self.evidence is not None else 0)
        x = np.empty((len(candidates), len(problem) + width))
        x[:, :len(problem)] = problem
        x[:, len(problem):len(problem) + len(self.vocabulary.names)] = [self._encoded(c) for c in candidates]
        if self.evidence is not None:
            nb = self.neighbours
            z = (np.asarray(problem, dtype=np.float64) - nb.mean) / nb.scale
            x[:, len(problem) + len(self.vocabulary.names):] = self.evidence.features(
                z, evidence_class(problem), [self._key(c) for c in candidates], nb.features, exclude)
        return x

    def _key(self, c: tuple) -> str:
        """config_key of candidate `c`, remembered as _encoded is."""
        memo = self._keys
        k = (c[0], tuple(c[1].items()))
        got = memo.get(k)
        if got is None:
            if len(memo) >= 1 << 16:
                memo.clear()
            got = memo[k] = config_key(c[0], c[1])
        return got

    @functools.cached_property
    def _keys(self) -> dict[tuple, str]:
        return {}

    def _encoded(self, c: tuple) -> list[float]:
        """vocabulary.encode of candidate `c`, remembered (the same configurations come back problem after
        problem: the known ones every time)."""
        key = (c[0], tuple(c[1].items()), tuple(c[2].items()) if len(c) > 2 and c[2] else ())
        memo = self._memo
        got = memo.get(key)
        if got is None:
            if len(memo) >= 1 << 16:
                memo.clear()
            got = memo[key] = self.vocabulary.encode(*c)
        return got

    @functools.cached_property
    def _memo(self) -> dict[tuple, list[float]]:
        return {}

    def rank(self, problem: Sequence[float], candidates: Sequence[tuple]) -> list[int]:
        """Candidate indices, predicted fastest first; with a guard, INSTANT's first ahead where the trees are not sure
        (Note [a guard against INSTANT's first]); without one, outside the selector's reach (Note [the selector's
        reach]), cuDNN's order (heuristic_order)."""
        return self.ranked(problem, candidates)[0]

    def ranked(self, problem: Sequence[float], candidates: Sequence[tuple], predicted: np.ndarray | None = None
               ) -> tuple[list[int], np.ndarray | None]:
        """rank()'s order and the predictions it sorted (None outside the reach: cuDNN's order). With a guard
        (Note [a guard against INSTANT's first]) the trees rank everywhere and guarded() has the last word.
        `predicted`: predict()'s answer for these candidates, where the caller has it."""
        if self.guard is None and not self.within_reach(problem):
            return heuristic_order(candidates), None
        score = predicted
        if self.blend and self.guard_trees is not None and len(candidates):  # Note [the guard trees in the ranking]
            x = self.rows(problem, candidates)  # both trees read the same rows: made once
            predicted = self.trees.predict(x) if predicted is None else predicted
            score = predicted + self.blend * self.guard_trees.predict(x)
        elif predicted is None:
            predicted = score = self.predict(problem, candidates)
        order = self.known_first(problem, candidates, [int(i) for i in np.argsort(score, kind="stable")])
        return (order if self.guard is None else self.guarded(candidates, order, predicted, problem)), predicted

    def guarded(self, candidates: Sequence[tuple], order: list[int], predicted: np.ndarray,
                problem: Sequence[float] | None = None) -> list[int]:
        """`order` with INSTANT's first (cuDNN's first where INSTANT names none of them) moved to the front unless
        order's first is predicted at least the margin below it (Note [a guard against INSTANT's first]): by the
        guard trees where the model has them, else by `predicted`; the margin is guard_far beyond the reach. Without
        `problem` (features), `predicted` and `guard`. `order` itself without a guard."""
        inst = instant_first(candidates) or heuristic_order(candidates)[:1]
        if self.guard is None or not order or not inst or order[0] == inst[0]:
            return order
        margin, ahead = self.guard, predicted[inst[0]] - predicted[order[0]]
        if problem is not None:
            if self.guard_far is not None and not self.within_reach(problem):
                margin = self.guard_far
            if self.guard_trees is not None:
                both = self.guard_trees.predict(self.rows(problem, [candidates[inst[0]], candidates[order[0]]]))
                ahead = both[0] - both[1]
        if ahead >= margin:
            return order
        return inst + [i for i in order if i != inst[0]]

    def known_first(self, problem: Sequence[float], candidates: Sequence[tuple], order: list[int],
                    radius: float | None = None) -> list[int]:
        """Note [known configurations first]: `order` with its first candidate that a list names or that won a
        training problem within `radius` (default KNOWN_NEAR) moved to the front (`order` itself where its first
        already is)."""
        if not order or listed(candidates[order[0]]):
            return order
        won = self.neighbours.won_near(problem, KNOWN_NEAR if radius is None else radius)
        at = next((j for j, i in enumerate(order) if listed(candidates[i]) or self._key(candidates[i]) in won), 0)
        return [order[at]] + order[:at] + order[at + 1:]

    def shortlist(self, problem: Sequence[float], candidates: Sequence[tuple], k: int | str,
                  order: Sequence[int] | None = None, predicted: np.ndarray | None = None) -> list[int]:
        """The candidates apply(unseen="measure_top_k") times. k an int: the selector's first k - 1 and cuDNN's
        own first (heuristic_order), or the selector's k-th where cuDNN's first is already among them; and after
        them INSTANT's first (instant_first: torch's pick with benchmark off) where it is not among them, so k + 1 at
        most. The fastest of them is never slower than cuDNN's first or torch's benchmark-off pick on the clock that
        times them. k=AUTO: Note [the automatic shortlist] (auto_parts says which of them are timed later). `order`
        (and `predicted`): ranked()'s answer for these candidates, where the caller has it; k=AUTO goes by the
        predictions alone, inside the reach or not."""
        if k == AUTO:
            if predicted is None:
                predicted = self.predict(problem, candidates)
            trees = [int(i) for i in np.argsort(predicted, kind="stable")]
            top = predicted[trees[0]]
            short = self.shortlist(problem, candidates, AUTO_FIRST, trees)
            short += engines_first([i for i in trees if i not in short and predicted[i] <= top + AUTO_SPREAD],
                                   short, candidates)
            if not self.within_reach(problem):
                short += [i for i in heuristic_order(candidates)[:AUTO_OUTSIDE] if i not in short]
            return short[:AUTO_MAX]
        order = list(self.rank(problem, candidates) if order is None else order)
        anchor = heuristic_order(candidates)[:1]
        head = order[:max(k - 1, 0)]
        rest = [i for i in order[len(head):] if i not in anchor]
        short = (head + [i for i in anchor if i not in head] + rest)[:k]
        return short + [i for i in instant_first(candidates) if i not in short]

    def within_reach(self, problem: Sequence[float]) -> bool:
        return self.neighbours.distance(problem) <= self.reach

    @classmethod
    def shipped(cls, family: str) -> "Selector":
        """The selector the package ships for environment family `family` ("sm_90-cudnn-9.19",
        Environment.selector_family); ValueError naming the families it has when it has none for this one."""
        if not isinstance(family, str):
            raise TypeError(f"family={family!r} is not text: give the family's name (Environment.selector_family())")
        family = family_name(family)
        path = SHIPPED / f"{family}.npz"
        if not path.is_file():
            have = sorted(p.stem for p in SHIPPED.glob("*.npz"))
            raise ValueError(f"no selector ships for {family} (shipped: {', '.join(have) or 'none'}); train one on a "
                             "sweep of this GPU (cudnn-algos selector train) and pass selector=FILE")
        return cls.load(path)

    @classmethod
    def coerce(cls, selector: Any, argument: str = "selector") -> "Selector":
        """A Selector, or the one saved in file `selector` (ValueError naming the argument otherwise)."""
        if isinstance(selector, cls):
            return selector
        if isinstance(selector, (str, os.PathLike)):
            try:
                return cls.load(selector)
            except (OSError, KeyError, ValueError) as e:
                raise ValueError(f"{argument}={str(selector)!r}: {e}") from None
        raise ValueError(f"{argument}= must be a cudnn_algos.selector.Selector or its .npz file, not {selector!r}")

    # ------------------------------------------------------------------------------------------- the file
    def save(self, path: str | os.PathLike) -> None:
        with open(path, "wb") as f:
            self._write(f)

    def to_bytes(self) -> bytes:
        """The file save() writes, as bytes (from_bytes reads them back; nothing pickled)."""
        buf = io.BytesIO()
        self._write(buf)
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> "Selector":
        return cls.load(io.BytesIO(data))

    def _write(self, f: Any) -> None:
        header = {"format": FORMAT, "features": list(PROBLEM_FEATURES), "ranked_lists": list(RANKED_LISTS),
                  "engines": list(self.vocabulary.engines),
                  "knobs": list(self.vocabulary.knobs), "family": self.family, "trained_on": self.trained_on,
                  "base": self.trees.base, "rate": self.trees.rate, "best": list(self.neighbours.best),
                  "reach": self.reach, "guard": self.guard, "guard_far": self.guard_far, "blend": self.blend,
                  "known": {c: [list(x) for x in v] for c, v in self.known.items()}}
        t, nb, ev = self.trees, self.neighbours, self.evidence
        more = {}
        if ev is not None:
            header.update(evidence_configs=list(ev.configs), evidence_k=ev.k)
            more = dict(ev_problem=ev.problem, ev_class=ev.klass,
                        ev_config=ev.config.astype(np.uint16 if len(ev.configs) <= 0xFFFF else np.int32),
                        ev_steps=value_steps(ev.value))
        if (g := self.guard_trees) is not None:
            header.update(guard_base=g.base, guard_rate=g.rate)
            more.update(g_feature=g.feature, g_threshold=g.threshold, g_left=g.left, g_right=g.right, g_value=g.value,
                        g_offset=g.offset)
        np.savez_compressed(f, header=np.frombuffer(json.dumps(header).encode(), dtype=np.uint8),
                            feature=t.feature, threshold=t.threshold, left=t.left, right=t.right, value=t.value,
                            offset=t.offset, nb_features=nb.features, nb_mean=nb.mean, nb_scale=nb.scale, **more)

    @classmethod
    def load(cls, path: str | os.PathLike | io.BytesIO) -> "Selector":
        """A saved selector (a path, or a binary file object); ValueError for a file of another format or features
        than this version reads."""
        with np.load(path, allow_pickle=False) as z:
            try:
                h = json.loads(bytes(z["header"]).decode())
            except (KeyError, ValueError) as e:
                raise ValueError(f"{path}: not a cudnn_algos selector ({e})") from None
            if (h.get("format") not in READS or tuple(h.get("features", ())) != PROBLEM_FEATURES
                    or tuple(h.get("ranked_lists", ())) != RANKED_LISTS):
                raise ValueError(f"{path}: a selector of format {h.get('format')} with other features; this version "
                                 f"reads formats {', '.join(map(str, READS))}: train it again")
            trees = Trees(z["feature"], z["threshold"], z["left"], z["right"], z["value"], z["offset"],
                          float(h["base"]), float(h["rate"]))
            nb = Neighbours(z["nb_features"], tuple(h["best"]), z["nb_mean"], z["nb_scale"])
            guard_trees = None
            if "guard_base" in h:
                guard_trees = Trees(z["g_feature"], z["g_threshold"], z["g_left"], z["g_right"], z["g_value"],
                                    z["g_offset"], float(h["guard_base"]), float(h["guard_rate"]))
            evidence = None
            if "evidence_configs" in h:
                value = from_steps(z["ev_steps"]) if "ev_steps" in z.files else z["ev_value"]  # 3, 4: float32
                evidence = Evidence(tuple(h["evidence_configs"]), z["ev_problem"], z["ev_config"].astype(np.int32),
                                    value, z["ev_class"], int(h["evidence_k"]))
        known = {str(c): tuple((str(n), bool(d)) for n, d in v) for c, v in h.get("known", {}).items()}
        return cls(Vocabulary(tuple(h["engines"]), tuple(h["knobs"])), trees, nb, h["family"], h["trained_on"],
                   float(h.get("reach", REACH)), known, evidence, _guard(h.get("guard"), f"{path}: guard"),
                   _guard(h.get("guard_far"), f"{path}: guard_far"), guard_trees, _blend(h.get("blend", 0.0), path))


def _blend(value: Any, where: str = "blend") -> float:
    """Selector.blend as a float; ValueError naming `where` for anything but a finite weight >= 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{where}: blend={value!r} must be a weight >= 0 (Note [the guard trees in the ranking])")
    return float(value)


def _guard(value: Any, where: str) -> float | None:
    """A guard as a float, or None (none; also a file written before guards were kept); ValueError naming `where`
    for anything but a finite margin >= 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{where}={value!r} must be None or a margin >= 0 (log2 of time over the fastest)")
    return float(value)


__all__ = ["instant_first", "GUARD", "GUARD_FAR", "GUARD_CAP", "BLEND",
           "FORMAT", "READS", "REACH", "AUTO", "AUTO_FIRST", "AUTO_SPREAD", "AUTO_MAX", "AUTO_OUTSIDE", "EVIDENCE_K",
           "EVIDENCE_FEATURES", "EVIDENCE_ABSENT", "EVIDENCE_CLASS", "Neighbours", "Evidence", "Selector",
           "evidence_class", "heuristic_order", "problem_class", "KNOWN_NEAR", "listed"]
