"""Figures of a ModelReport (matplotlib's object API: no pyplot, no display needed).

- vs_torch.*  per direction, per distinct problem: the best configuration's kernel time over torch's (benchmark on,
              and off where measured); below 1 is faster than torch
- configs.*   every measured configuration: its kernel time over its problem's best, against its workspace
"""
from __future__ import annotations

import os
from typing import Sequence

_SHORT = {"forward": "forward", "backward_data": "backward-data", "backward_filter": "backward-filter"}


def _figure(w: float, h: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(w, h), layout="constrained")


def vs_torch(report):
    import numpy as np

    dirs = report.directions
    fig = _figure(max(8.0, 0.35 * len(report.problems) + 3), 2.6 * len(dirs) + 0.8)
    axes = fig.subplots(len(dirs), 1, squeeze=False, sharey=True)[:, 0]  # one scale: directions compare at a glance
    x = np.arange(len(report.problems))
    lo, hi = 1.0, 1.0
    for ax, d in zip(axes, dirs):
        on, off = [], []
        for p in report.problems:
            r = p.engines.get(d)
            b = r.best_eligible if r else None
            t_on, t_off = (r.torch_run("benchmark_on"), r.torch_run("benchmark_off")) if r else (None, None)
            on.append(b.kernel_ms / t_on.kernel_ms if b and b.kernel_ms and t_on and t_on.kernel_ms else np.nan)
            off.append(b.kernel_ms / t_off.kernel_ms if b and b.kernel_ms and t_off and t_off.kernel_ms else np.nan)
        ax.bar(x - 0.2, on, 0.4, label="best / torch benchmark on", color="#08519c")
        ax.bar(x + 0.2, off, 0.4, label="best / torch benchmark off", color="#9ecae1")
        ax.axhline(1.0, color="black", linewidth=0.8)
        finite = [v for v in on + off if np.isfinite(v)]
        lo, hi = min(finite + [lo]), max(finite + [hi])
        ax.set_ylim(max(0.0, lo - 0.05), hi + 0.05)
        ax.set_ylabel("kernel time ratio")
        ax.set_title(_SHORT[d], fontsize=9)
        ax.set_xticks(x, [f"#{i}" for i in x], fontsize=6)
        ax.legend(fontsize=7)
    fig.suptitle(f"{report.model}: best engine configuration against torch's own convolution (kernel clock)",
                 fontsize=10)
    return fig


def configs(report):
    fig = _figure(7, 4.5)
    ax = fig.subplots()
    colors = {"forward": "#1b9e77", "backward_data": "#d95f02", "backward_filter": "#7570b3"}
    for d in report.directions:
        xs, ys = [], []
        for p in report.problems:
            r = p.engines.get(d)
            b = r.best if r else None
            if b is None or not b.kernel_ms:
                continue
            for row in r.succeeded:
                if row.kernel_ms is not None and row.workspace_bytes is not None:
                    xs.append(row.kernel_ms / b.kernel_ms)
                    ys.append(row.workspace_bytes / 2**20)
        ax.scatter(xs, ys, s=10, alpha=0.6, label=_SHORT[d], color=colors[d])
    ax.set_xscale("log")
    ax.set_yscale("symlog", linthresh=1.0)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("kernel time / the problem's best")
    ax.set_ylabel("workspace (MiB)")
    ax.legend(fontsize=8)
    ax.set_title(f"{report.model}: every measured engine configuration, workspace against time", fontsize=10)
    return fig


def save_figures(report, out_dir: str, formats: Sequence[str] = ("png", "svg")) -> list[str]:
    """Renders the figures and saves each in every format; returns the paths written."""
    try:
        import matplotlib  # noqa: F401  (only to fail early with a clear message)
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("figures need matplotlib: pip install matplotlib") from e
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for name, make in (("vs_torch", vs_torch), ("configs", configs)):
        fig = make(report)
        for fmt in formats:
            path = os.path.join(out_dir, f"{name}.{fmt}")
            fig.savefig(path, dpi=130)
            paths.append(path)
    return paths
