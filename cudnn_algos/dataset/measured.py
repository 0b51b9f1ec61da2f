"""The dataset of every measured candidate: a sweep store's rows, validated, written as Parquet partitioned by
environment (pandas, polars or duckdb read it in one line), with the environment in every row.

Validation comes before anything is written: every row has a known status, a measured time is finite and not
negative, and every problem-direction measured as done has a best (a successful row with a kernel time). A
problem-direction that fails is left out of the dataset and listed with the reason (never silently kept); the sweep
can measure it again.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from .regret import TOP1, configurations, quantile
from ..results.tables import knobs_text
from ..sweep.store import SweepStore
from ..sweep.tasks import REPEAT, is_repeat

TIME_COLUMNS = ("kernel_median_ms", "kernel_min_ms", "kernel_max_ms", "throughput_median_ms", "host_median_ms",
                "reference_kernel_ms")


@dataclass(frozen=True)
class Validation:
    """Problem-directions kept and left out (key -> why), and the rows kept."""

    kept: tuple[str, ...]
    rejected: dict[str, str] = field(default_factory=dict)
    rows: int = 0

    def __str__(self) -> str:
        head = f"{len(self.kept)} problem-directions kept ({self.rows} rows), {len(self.rejected)} left out"
        return "\n".join([head] + [f"  left out: {k}: {why}" for k, why in list(self.rejected.items())[:10]])


def problem_errors(rows: Iterable[dict[str, Any]]) -> list[str]:
    """What is wrong with one problem-direction's rows (empty: nothing)."""
    rows = list(rows)
    errors = []
    if not rows:
        return ["no rows"]
    for i, r in enumerate(rows):
        if not r.get("status"):
            errors.append(f"row {i} ({r.get('candidate')}) has no status")
        for c in TIME_COLUMNS:
            v = r.get(c)
            if v is not None and (not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v)
                                  or v < 0):
                errors.append(f"row {i} ({r.get('candidate')}) has {c}={v!r}")
        if r.get("kernel_median_ms") is not None and r.get("kernel_calls") == 0:  # an estimate, no kernel time
            # (`sweep --lean far`'s far rows: measure's Note [a first call is no time])
            errors.append(f"row {i} ({r.get('candidate')}) has a kernel time from no kernel-clock call "
                          "(kernel_calls 0)")
    if not any(r.get("status") == "SUCCESS" and r.get("kernel_median_ms") is not None for r in rows):
        errors.append("no successful row with a kernel time: no best")
    return errors


def validate(store: SweepStore) -> Validation:
    """The store's done problem-directions whose rows pass problem_errors; the others with their reasons (failed
    ones with the sweep's reason). Repeats (the noise floor's second measurements) are not part of it."""
    kept, rejected, n = [], {}, 0
    for t in store.tasks():
        if is_repeat(t.key):
            continue
        if t.status != "done":
            rejected[t.key] = f"the sweep failed it: {t.reason}"
            continue
        rows = store.rows(t.key)
        errors = problem_errors(rows)
        if errors:
            rejected[t.key] = "; ".join(errors[:3])
        else:
            kept.append(t.key)
            n += len(rows)
    return Validation(tuple(kept), rejected, n)


@dataclass(frozen=True)
class NoiseFloor:
    """The same problem-directions measured twice, by different processes: per configuration measured both times
    (regret.configurations: engine configurations and legacy algorithms, not torch's own choices), the second kernel
    median over the first; per problem-direction, whether both runs found the same best (among what torch accepts,
    the regret's best) and how far apart their bests are."""

    pairs: int  # problem-directions measured twice (both done)
    configs: int  # configurations with a kernel time in both
    median_abs_change: float | None  # median over configurations of |second/first - 1|
    p95_abs_change: float | None
    same_best: int  # pairs whose fastest configuration is the same
    best_within: float | None  # p95 over pairs of |best time second / best time first - 1|

    def __str__(self) -> str:
        if not self.pairs:
            return "noise floor: no problem-direction measured twice yet (a later sweep of the same store measures " \
                   "its sample again)"
        return (f"noise floor: {self.pairs} problem-directions measured twice in different processes, {self.configs} "
                f"configurations timed both times: {self.figures}")

    @property
    def figures(self) -> str:
        return (f"|change| median {100 * self.median_abs_change:.1f}%, p95 {100 * self.p95_abs_change:.1f}%; the same "
                f"fastest configuration in {self.same_best} of {self.pairs}; the best time moved by up to "
                f"{100 * self.best_within:.1f}% (p95)")


@dataclass(frozen=True)
class Transfer:
    """One run's fastest configurations run in another: per problem-direction, the other run's time of the first's
    best over the other's own best, minus 1 (the regret of a choice made on the first run's clock)."""

    n: int  # problem-directions whose first-run best has a time in the other run
    mean: float | None
    p95: float | None
    worst: float | None
    over_top1: int  # regrets above regret.TOP1

    def __str__(self) -> str:
        if not self.n:
            return "no best of one run has a time in the other"
        return (f"mean {100 * self.mean:.2f}%, p95 {100 * self.p95:.1f}%, worst {100 * self.worst:.1f}%, "
                f"above {TOP1:.0%} in {self.over_top1} of {self.n}")


def _transfer(regrets: list[float]) -> Transfer:
    return Transfer(len(regrets), sum(regrets) / len(regrets) if regrets else None, quantile(regrets, 0.95),
                    max(regrets, default=None), sum(r > TOP1 for r in regrets))


def _paired(pairs: Iterable[tuple[list[dict[str, Any]], list[dict[str, Any]]]]
            ) -> tuple[NoiseFloor, Transfer, Transfer]:
    """The noise floor of (first rows, second rows) pairs of the same problem-directions, and the regret of each
    run's bests in the other (first's in second, second's in first)."""
    changes, best_moves, same, n, there, back = [], [], 0, 0, [], []
    for ra, rb in pairs:
        a, b = configurations(ra), configurations(rb)
        ea, eb = configurations(ra, eligible=True), configurations(rb, eligible=True)
        if not ea or not eb:
            continue
        n += 1
        changes += [abs(b[c] / a[c] - 1) for c in a.keys() & b.keys()]
        best_a, best_b = min(ea, key=ea.get), min(eb, key=eb.get)
        same += best_a == best_b
        best_moves.append(abs(eb[best_b] / ea[best_a] - 1))
        if best_a in eb:
            there.append(eb[best_a] / eb[best_b] - 1)
        if best_b in ea:
            back.append(ea[best_b] / ea[best_a] - 1)
    floor = NoiseFloor(n, len(changes), quantile(changes, 0.5), quantile(changes, 0.95), same,
                       quantile(best_moves, 0.95))
    return floor, _transfer(there), _transfer(back)


def noise_floor(store: SweepStore) -> NoiseFloor:
    """The noise floor from the store's repeats (sweep's repeat_fraction sample) and their first measurements."""
    done = {t.key for t in store.tasks() if t.status == "done"}
    firsts = [k[: -len(REPEAT)] for k in sorted(done) if is_repeat(k) and k[: -len(REPEAT)] in done]
    return _paired((store.rows(k), store.rows(k + REPEAT)) for k in firsts)[0]


@dataclass(frozen=True)
class Comparison:
    """Two datasets' common problem-directions (two runs, two GPUs, two cuDNN versions): how far the times of the
    same configurations move between them, and what running one's fastest configurations in the other costs."""

    first: str
    second: str
    first_envs: tuple[str, ...]
    second_envs: tuple[str, ...]
    only_first: int  # problem-directions the second does not hold
    only_second: int
    floor: NoiseFloor
    there: Transfer  # the first's bests in the second
    back: Transfer  # the second's bests in the first

    def __str__(self) -> str:
        envs = lambda e: "; ".join(e) or "unknown"  # noqa: E731
        lines = [f"first:  {self.first} ({envs(self.first_envs)})",
                 f"second: {self.second} ({envs(self.second_envs)})",
                 f"{self.floor.pairs} problem-directions in both ({self.only_first} only in the first, "
                 f"{self.only_second} only in the second), {self.floor.configs} configurations timed in both"]
        if self.floor.pairs:
            lines += [self.floor.figures,
                      f"the first's fastest run in the second, regret: {self.there}",
                      f"the second's fastest run in the first, regret: {self.back}"]
        return "\n".join(lines)


def compare(first: SweepStore, second: SweepStore, names: tuple[str, str] | None = None) -> Comparison:
    """Comparison of the whole problem-directions (validate()'s; repeats left out) two stores both hold; `names`:
    what to call them (their paths where not given)."""
    a, b = dict(measured_problems(first)), dict(measured_problems(second))
    both = [k for k in a if k in b]
    floor, there, back = _paired((a[k], b[k]) for k in both)
    envs = lambda s, keys: tuple(sorted({t.env or "unknown" for t in s.tasks() if t.key in keys}))  # noqa: E731
    names = names or (str(first.path), str(second.path))
    return Comparison(*names, envs(first, a.keys()), envs(second, b.keys()),
                      len(a) - len(both), len(b) - len(both), floor, there, back)


def measured_problems(store: SweepStore, validation: Validation | None = None):
    """(key, rows) of every problem-direction the validation keeps (repeats left out), in the store's order.
    Without `validation`, validate()'s rule applied as each problem-direction's rows are read (once, not twice)."""
    if validation is not None:
        for key in validation.kept:
            yield key, store.rows(key)
        return
    yield from kept((t, lambda k=t.key: store.rows(k)) for t in store.tasks())


def kept(tasks: Iterable[tuple[Any, Callable[[], list[dict[str, Any]]]]]) -> Iterator[tuple[str, list]]:
    """(key, rows) of the problem-directions validate() keeps, from (task, a function giving its rows) pairs in
    order: done, not a repeat, rows without problem_errors; rows are asked for only for a done first measurement."""
    for t, rows_of in tasks:
        if t.status == "done" and not is_repeat(t.key):
            rows = rows_of()
            if not problem_errors(rows):
                yield t.key, rows


def to_frame(store: SweepStore, validation: Validation | None = None):
    """The kept rows as one DataFrame with the problem-direction's key and environment key on every row (lists stay
    list columns; knobs as NAME=value,...)."""
    import pandas as pd

    v = validation or validate(store)
    env = {t.key: t.env for t in store.tasks()}
    recs = []
    for key in v.kept:
        for r in store.rows(key):
            recs.append({**r, "knobs": knobs_text(r.get("knobs")) or None,
                         "task": key, "env_key": env[key] or "unknown"})
    return pd.DataFrame.from_records(recs)


def write_parquet(store: SweepStore, out_dir: str | os.PathLike) -> Validation:
    """Validates the store, then writes the kept rows as Parquet under `out_dir`, partitioned by environment
    (``env_key=.../part-0.parquet``). Returns the validation (what was left out and why)."""
    v = validate(store)
    if not v.kept:
        raise ValueError(f"{store.path}: nothing to write: {v}")
    df = to_frame(store, v)
    df.to_parquet(str(out_dir), partition_cols=["env_key"], index=False)
    return v


__all__ = ["Comparison", "NoiseFloor", "Transfer", "Validation", "compare", "kept", "measured_problems", "noise_floor",
           "problem_errors", "validate", "to_frame", "write_parquet", "TIME_COLUMNS"]
