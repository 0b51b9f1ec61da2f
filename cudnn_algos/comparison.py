"""Two runs side by side (another cuDNN, driver, GPU, torch, or just another day): ``compare(a, b)`` lines up every
candidate the two results share — per problem, direction and candidate — with the ratio of their kernel medians and
whether the difference exceeds both the runs' own spread and a noise floor between processes. Needs pandas. No GPU:
it reads saved results.

Why a floor: a run's spread is that of a few samples in one process, where the GPU is steady; between two processes
(another day, a fresh machine) the same candidate moves more. Two MobileNetV3-small profiles on the same H200 and
versions, an hour apart (2026-11-30): 6,225 shared candidates, median B/A 1.000, 91% within 3%, 96% within 5%; yet
43% differed by more than both runs' spread."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .environment import Environment
from .results import fit_table, format_ms, wrap_lines

KEYS = ("spec", "input_shape", "dtype", "memory_format", "direction", "candidate_kind", "candidate")


@dataclass(frozen=True)
class Comparison:
    """``table``: one row per shared candidate (keys, kernel medians a and b, ratio b/a, beyond_spread: the
    difference exceeds both runs' spread and the floor);
    ``only_a`` / ``only_b``: candidates measured in one run only; ``env_a`` / ``env_b``: where each ran."""

    table: Any  # pandas.DataFrame
    only_a: int
    only_b: int
    env_a: str
    env_b: str
    floor: float = 0.03

    def summary_lines(self, top: int = 10) -> list[str]:
        t = self.table
        lines = [f"A: {self.env_a}", f"B: {self.env_b}"]
        if t.empty:
            return lines + [f"no candidate measured in both runs ({self.only_a} only in A, {self.only_b} only in B)"]
        faster = int(((t.ratio < 1) & t.beyond_spread).sum())
        slower = int(((t.ratio > 1) & t.beyond_spread).sum())
        lines.append(f"{len(t)} candidates in both runs ({self.only_a} only in A, {self.only_b} only in B); B/A kernel "
                     f"time: median {t.ratio.median():.3f}, {faster} faster and {slower} slower beyond both runs' "
                     f"spread and {100 * self.floor:.0f}%, {len(t) - faster - slower} within")
        for kind in ("torch_on", "torch_off"):
            k = t[t.candidate_kind == kind]
            if len(k):
                lines.append(f"torch's op ({kind.replace('_', ' ')}): B/A median {k.ratio.median():.3f} over {len(k)} "
                             "problems")
        moved = t[t.beyond_spread].assign(m=lambda d: (d.ratio.map(math.log)).abs()).sort_values("m", ascending=False)
        if len(moved):
            rows = [[f"{r.ratio:.3f}", format_ms(r.kernel_a_ms), format_ms(r.kernel_b_ms), r.direction, r.spec,
                     r.input_shape, r.candidate] for _, r in moved.head(top).iterrows()]
            lines.append(f"the {len(rows)} that moved most beyond both runs' spread (kernel clock, ms per call):")
            lines += fit_table(("B/A", "A ms", "B ms", "direction", "convolution", "input", "candidate"), rows,
                               right={0, 1, 2}, legend={4: 36, 6: 28})
        return wrap_lines(lines)

    def __str__(self) -> str:
        return "\n".join(self.summary_lines())


def _env(obj: Any) -> str:
    e: Environment | None = getattr(obj, "env", None)
    if e is None and getattr(obj, "results", None):
        e = obj.results[0].env
    if e is None:
        return "unknown environment"
    return (f"{e.gpu_name} (sm_{e.compute_capability.replace('.', '')}), driver {e.driver_version}, cuDNN "
            f"{Environment.version_str(e.cudnn_runtime)}, torch {e.torch_version}"
            + (f", cudnn_algos {e.package_version}" if e.package_version else ""))


def compare(a: Any, b: Any, floor: float = 0.03) -> Comparison:
    """Lines up two saved results of any kind (searches or model reports) by problem, direction and candidate.
    floor: a relative difference below this is not flagged, whatever the runs' spreads (see the module's note).
    TypeError naming the argument for a result with no such table (a fused search, a fusion report)."""
    if isinstance(floor, bool) or not isinstance(floor, (int, float)) or not 0 <= floor < 1:
        raise ValueError(f"floor={floor!r} must be a fraction in [0, 1)")
    cols = list(KEYS) + ["kernel_median_ms", "kernel_spread"]
    da, db = a.to_dataframe(), b.to_dataframe()
    for which, x, d in (("a", a, da), ("b", b, db)):
        if missing := [c for c in cols if c not in d.columns]:
            raise TypeError(f"{which}: a {type(x).__name__} has no {', '.join(missing)} columns (compare lines up "
                            "searches and model reports by problem, direction and candidate)")
    da = da[da.kernel_median_ms.notna()][cols].drop_duplicates(list(KEYS))
    db = db[db.kernel_median_ms.notna()][cols].drop_duplicates(list(KEYS))
    m = da.merge(db, on=list(KEYS), how="outer", suffixes=("_a", "_b"), indicator=True)
    both = m[m["_merge"] == "both"].copy()
    both = both.rename(columns={"kernel_median_ms_a": "kernel_a_ms", "kernel_median_ms_b": "kernel_b_ms"})
    both["ratio"] = both.kernel_b_ms / both.kernel_a_ms
    # beyond spread: the medians differ by more than either run's inter-quartile range and the floor
    noise = (both.kernel_spread_a * both.kernel_a_ms).combine(both.kernel_spread_b * both.kernel_b_ms, max)
    noise = noise.combine(floor * both.kernel_a_ms, max)
    both["beyond_spread"] = (both.kernel_b_ms - both.kernel_a_ms).abs() > noise
    both = both.drop(columns=["_merge"]).reset_index(drop=True)
    return Comparison(table=both, only_a=int((m["_merge"] == "left_only").sum()),
                      only_b=int((m["_merge"] == "right_only").sum()), env_a=_env(a), env_b=_env(b), floor=float(floor))
