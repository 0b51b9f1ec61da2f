"""What apply()'s unseen-problem handler ranks (choose/unseen.py): the configurations of cuDNN's heuristic lists
that torch would accept (``candidates_of``), in the selector's predicted order, and measure_top_k's shortlist
(``rank``). Pure functions of the lists' answer and the problem: they run where the lists are asked, in the helper
process (Note [ranking in the helper] in lists_process.py), or in the model's process for a selector the helper
cannot rebuild from its file."""
from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Any, Sequence

from ..configs import RUNTIME_COMPILATION, config_name, named_knobs, numerical_note_names, parse_config, torch_filter
from .features import RANKED_LISTS, positions
from .model import AUTO, Selector

Knobs = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Candidate:
    """One engine configuration offered for a problem: what the run-time chooser ranks (from the lists' answer) and
    what training learns from (from a dataset row, with its measured ``ms``)."""

    engine_id: int
    knobs: Knobs  # cuDNN's (knob type, value)
    ranks: tuple[tuple[str, int], ...] = ()  # (heuristic list of RANKED_LISTS, position); lists without it left out
    compiled: bool = False  # cuDNN's behaviour note RUNTIME_COMPILATION (as far as the lists said: a known one, no)
    ms: float | None = None  # its measured kernel time, where one is known (training's candidates)

    @classmethod
    def of_name(cls, name: str, ranks: dict[str, int | None] | None = None, ms: float | None = None
                ) -> "Candidate":
        """The candidate a configuration's name (configs.config_name's form) names, with its positions by list
        (None: not in that list) and its measured time; ValueError naming the name when it is not one."""
        engine_id, knobs = parse_config(name)
        return cls(engine_id, _pairs(tuple(itertools.chain.from_iterable(knobs))),
                   tuple((n, int(p)) for n, p in (ranks or {}).items() if p is not None and p == p), False, ms)

    @property
    def listed(self) -> bool:
        """Named by one of the lists the unseen handler queries (what it can be offered)."""
        return bool(self.ranks)

    @functools.cached_property
    def name(self) -> str:
        return _name(self.engine_id, self.knobs)

    @property
    def named(self) -> dict[str, int]:
        return dict(_named(self.knobs))

    @functools.cached_property
    def encoded(self) -> tuple[int, dict[str, int], dict[str, int]]:
        """What Selector.rank takes: engine id, knobs by name, positions by list."""
        return self.engine_id, self.named, dict(self.ranks)

    def row(self) -> tuple[Any, ...]:
        """Plain values in one flat tuple (a reply of the helper process: Note [few objects per reply]): engine id,
        compiled, the number of knobs, each knob's type and value, each position's list and place."""
        return (self.engine_id, self.compiled, len(self.knobs), *itertools.chain.from_iterable(self.knobs),
                *itertools.chain.from_iterable(self.ranks))

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> "Candidate":
        e, compiled, n = row[:3]
        end = 3 + 2 * int(n)
        return cls(int(e), _pairs(tuple(row[3:end])), _pairs(tuple(row[end:])), bool(compiled))


# Note [few objects per reply]: the model's process keeps each problem's ranking from the helper's reply until the
# problem's next call, and in the first pass over new shapes hundreds of replies arrive. Python's collector counts the
# container objects made: a reply of nested lists (about a dozen per candidate) made a young collection about every
# problem, and enough of them a collection of the oldest generation, which walks every object of the process (torch's,
# the model's, the user's) with the GIL held: the training step waits for it
# (docs/results/selector-2026-12-01-to-03.md). So a candidate travels as one flat tuple (Candidate.row), and its knobs
# and positions come back as tuples made once per process and shared (_pairs): what lives on of a candidate read back is
# the one Candidate.
@functools.lru_cache(maxsize=1 << 14)
def _pairs(flat: tuple[Any, ...]) -> tuple[tuple[Any, Any], ...]:
    return tuple(zip(flat[::2], flat[1::2]))


# a problem's candidates are new objects, their configurations mostly not: names made once per process
@functools.lru_cache(maxsize=1 << 14)
def _name(engine_id: int, knobs: Knobs) -> str:
    return config_name(engine_id, knobs)


@functools.lru_cache(maxsize=1 << 14)
def _named(knobs: Knobs) -> tuple[tuple[str, int], ...]:
    return tuple(named_knobs(knobs))


def candidates_of(plans: Sequence[Any], dtype: str, deterministic: bool, allow_tf32: bool) -> list[Candidate]:
    """The distinct configurations of the heuristic lists' answer (backend.Plan rows) that torch would accept
    (configs.torch_filter), in the order the lists gave them, each marked where it compiles at run time."""
    seen: set[tuple[int, Knobs]] = set()
    out = []
    for p in plans:
        c = (p.engine_id, tuple(p.knobs))
        if c in seen or p.status not in ("NOT_BUILT", "SUCCESS"):
            continue
        seen.add(c)
        if not torch_filter(numerical_note_names(p.numerical_notes), dtype, deterministic, allow_tf32):
            pos = positions(dict(p.heuristic_ranks).get)
            out.append(Candidate(*c, tuple((n, int(r)) for n, r in pos.items() if r is not None),
                                 RUNTIME_COMPILATION in p.behavior_notes))
    return out


@functools.lru_cache(maxsize=4096)
def _known_candidate(name: str) -> Candidate:
    """A known configuration's name as a Candidate in no list (parsed once per process)."""
    engine_id, knobs = parse_config(name)
    return Candidate(engine_id, tuple(knobs))


def with_known(cands: list[Candidate], known: Sequence[str]) -> list[Candidate]:
    """`cands` and after them the configurations named in `known` (Selector.known_for: Note [known configurations])
    that are not among them, in no list. They join the lists' candidates, never replace them: where the lists offer
    nothing torch would accept, nothing is added."""
    if not cands:
        return cands
    have = {c.name for c in cands}
    out = list(cands)
    for name in known:
        if name not in have:
            out.append(_known_candidate(name))
            have.add(name)
    return out


def rank(cands: list[Candidate], selector: Any, features: Sequence[float], shortlist_k: int = 0,
         known: Sequence[str] = ()) -> tuple[list[Candidate], list[Candidate]]:
    """`cands` and the `known` configurations not among them (with_known) in the selector's predicted order
    (fastest first), and with shortlist_k (an int > 0, or "auto") the shortlist measure_top_k times
    (Selector.shortlist: its first k - 1, cuDNN's first and INSTANT's; Note [the automatic shortlist])."""
    cands = with_known(cands, known)
    if len(cands) < 2:
        return cands, cands
    enc = [c.encoded for c in cands]
    if shortlist_k == AUTO and type(selector).rank is Selector.rank:  # the order and k="auto" from one prediction
        order, predicted = selector.ranked(features, enc)
        short = selector.shortlist(features, enc, shortlist_k, order, predicted)
    else:  # a subclass's own rank is asked (Note [ranking in the helper])
        order = selector.rank(features, enc)
        short = selector.shortlist(features, enc, shortlist_k, order) if shortlist_k else []
    return [cands[i] for i in order], [cands[i] for i in short]


__all__ = ["Candidate", "candidates_of", "with_known", "rank", "RANKED_LISTS"]
