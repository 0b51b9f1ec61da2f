"""Figures of a ModelReport (matplotlib's object API: no pyplot, no display needed).

- heatmap.*   per direction, problems x algorithms: each algorithm's time over that problem's best (log colour)
- best_vs_heuristic.*  per direction, per problem: the best algorithm's time against cuDNN's heuristic choice
- workspace_vs_time.*  every successful algorithm: time over the problem's best against its workspace
"""
from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from .profile import ModelReport

_SHORT = {"forward": "forward", "backward_data": "backward-data", "backward_filter": "backward-filter"}


def _relative_times(report: "ModelReport", direction: str):
    """(problem index, row, time / that problem's best) for every successful, timed row of one direction."""
    from .profile import row_time

    for i, p in enumerate(report.problems):
        r = p.results.get(direction)
        if r is None or r.best is None or not row_time(r.best):
            continue
        best = row_time(r.best)
        for row in r.succeeded:
            t = row_time(row)
            if t is not None:
                yield i, row, t / best


def _figure(w: float, h: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(w, h), layout="constrained")


def heatmap(report: "ModelReport"):
    import numpy as np
    from matplotlib.colors import LogNorm

    dirs = report.directions
    fig = _figure(5.5 * len(dirs), 0.32 * len(report.problems) + 2.5)
    axes = fig.subplots(1, len(dirs), squeeze=False)[0]
    for ax, d in zip(axes, dirs):
        ids: dict[str, int] = {}
        for p in report.problems:
            r = p.results.get(d)
            for row in r.rows if r else ():
                ids.setdefault(row.algo, row.algo_id)
        algos = sorted(ids, key=ids.get)  # cuDNN's enum order, the same in every panel and report
        grid = np.full((len(report.problems), len(algos)), np.nan)
        for i, row, v in _relative_times(report, d):
            j = algos.index(row.algo)
            grid[i, j] = v if math.isnan(grid[i, j]) else min(grid[i, j], v)
        masked = np.ma.masked_invalid(grid)
        cmap = _cmap()
        vmax = max(2.0, float(np.nanmax(grid))) if np.isfinite(grid).any() else 2.0
        im = ax.imshow(masked, aspect="auto", cmap=cmap, norm=LogNorm(vmin=1.0, vmax=vmax), interpolation="nearest")
        ax.set_xticks(range(len(algos)), [a.replace("_", " ").lower() for a in algos], rotation=60, ha="right",
                      fontsize=7)
        ax.set_yticks(range(len(report.problems)),
                      [f"#{i} {p.layers[0]}" for i, p in enumerate(report.problems)], fontsize=6)
        ax.set_title(f"{_SHORT[d]}: time / best (grey: not supported)", fontsize=9)
        fig.colorbar(im, ax=ax, shrink=0.6)
    fig.suptitle(f"{report.model}: every algorithm against each problem's best", fontsize=10)
    return fig


def _cmap():
    import matplotlib

    return matplotlib.colormaps["viridis_r"].with_extremes(bad="#d9d9d9")


def best_vs_heuristic(report: "ModelReport"):
    import numpy as np

    from .profile import heuristic_row, row_time

    dirs = report.directions
    fig = _figure(max(8.0, 0.35 * len(report.problems) + 3), 2.6 * len(dirs) + 0.8)
    axes = fig.subplots(len(dirs), 1, squeeze=False)[:, 0]
    x = np.arange(len(report.problems))
    for ax, d in zip(axes, dirs):
        best, heur = [], []
        for p in report.problems:
            r = p.results.get(d)
            b = r.best if r else None
            h = heuristic_row(r) if r else None
            best.append(row_time(b) if b and row_time(b) is not None else np.nan)
            heur.append(row_time(h) if h and row_time(h) is not None else np.nan)
        ax.bar(x - 0.2, heur, 0.4, label="cuDNN heuristic's choice", color="#9ecae1")
        ax.bar(x + 0.2, best, 0.4, label="measured best", color="#08519c")
        ax.set_ylabel("ms per call")
        ax.set_title(_SHORT[d], fontsize=9)
        ax.set_xticks(x, [f"#{i}" for i in x], fontsize=6)
        ax.legend(fontsize=7)
    fig.suptitle(f"{report.model}: best algorithm vs the heuristic's choice, per distinct problem", fontsize=10)
    return fig


def workspace_vs_time(report: "ModelReport"):
    fig = _figure(7, 4.5)
    ax = fig.subplots()
    colors = {"forward": "#1b9e77", "backward_data": "#d95f02", "backward_filter": "#7570b3"}
    for d in report.directions:
        xs, ys = [], []
        for _, row, v in _relative_times(report, d):
            if row.workspace_bytes is not None:
                xs.append(v)
                ys.append(row.workspace_bytes / 2**20)
        ax.scatter(xs, ys, s=14, alpha=0.7, label=_SHORT[d], color=colors[d])
    ax.set_xscale("log")
    ax.set_yscale("symlog", linthresh=1.0)
    ax.set_xlabel("time / the problem's best")
    ax.set_ylabel("workspace (MiB)")
    ax.legend(fontsize=8)
    ax.set_title(f"{report.model}: workspace against time, every successful algorithm", fontsize=10)
    return fig


def save_figures(report: "ModelReport", out_dir: str, formats: Sequence[str] = ("png", "svg")) -> list[str]:
    """Renders the three figures and saves each in every format; returns the paths written."""
    try:
        import matplotlib  # noqa: F401  (only to fail early with a clear message)
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("figures need matplotlib: pip install matplotlib") from e
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for name, make in (("heatmap", heatmap), ("best_vs_heuristic", best_vs_heuristic),
                       ("workspace_vs_time", workspace_vs_time)):
        fig = make(report)
        for fmt in formats:
            path = os.path.join(out_dir, f"{name}.{fmt}")
            fig.savefig(path, dpi=130)
            paths.append(path)
    return paths
