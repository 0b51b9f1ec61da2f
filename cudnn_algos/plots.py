"""Figures of a ModelReport (matplotlib's object API: no pyplot, no display needed).

- vs_torch.*  per direction, per distinct problem (labelled by its first layer): the best configuration's kernel
              time over torch's (benchmark on, and off where measured), bars from parity; below 1 is faster
- configs.*   every measured configuration: its kernel time over its problem's best, against its workspace
"""
from __future__ import annotations

import os
from typing import Sequence

_SHORT = {"forward": "forward", "backward_data": "backward-data", "backward_filter": "backward-filter"}


def _figure(w: float, h: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(w, h), layout="constrained")


def _label(p) -> str:
    return p.layers[0] + (f" +{p.count - 1}" if p.count > 1 else "")


def vs_torch(report):
    """Per direction, per distinct problem: bars from 1.0 (parity with torch) to the best configuration's kernel time
    over torch's, benchmark on and off; below 1 is faster than torch. Bars start at parity, so their length is the
    difference; the problems are labelled by their first layer."""
    import numpy as np

    dirs = report.directions
    fig = _figure(max(8.0, 0.32 * len(report.problems) + 3), 2.4 * len(dirs) + 2.2)
    axes = fig.subplots(len(dirs), 1, squeeze=False, sharex=True, sharey=True)[:, 0]  # one scale for every direction
    x = np.arange(len(report.problems))
    spread = 0.02
    for ax, d in zip(axes, dirs):
        on, off = [], []
        for p in report.problems:
            r = p.engines.get(d)
            b = r.best_eligible if r else None
            t_on, t_off = (r.torch_run("benchmark_on"), r.torch_run("benchmark_off")) if r else (None, None)
            on.append(b.kernel_ms / t_on.kernel_ms if b and b.kernel_ms and t_on and t_on.kernel_ms else np.nan)
            off.append(b.kernel_ms / t_off.kernel_ms if b and b.kernel_ms and t_off and t_off.kernel_ms else np.nan)
        on, off = np.array(on), np.array(off)
        ax.bar(x - 0.2, on - 1.0, 0.4, bottom=1.0, label="best / torch, benchmark on", color="#08519c")
        ax.bar(x + 0.2, off - 1.0, 0.4, bottom=1.0, label="best / torch, benchmark off", color="#9ecae1")
        ax.axhline(1.0, color="black", linewidth=0.8)
        finite = np.abs(np.concatenate([on, off])[np.isfinite(np.concatenate([on, off]))] - 1.0)
        spread = max([spread, *finite])
        ax.set_ylabel("best / torch")
        ax.set_title(f"{_SHORT[d]} (below 1: the best configuration is faster)", fontsize=9)
        ax.grid(axis="y", linewidth=0.3)
    for ax in axes:
        ax.set_ylim(1.0 - 1.1 * spread, 1.0 + 1.1 * spread)  # symmetric about parity: up and down read alike
    axes[-1].set_xticks(x, [_label(p) for p in report.problems], rotation=90, fontsize=6)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=2, fontsize=8, frameon=False)
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
    top = max([1.0, *(c.get_offsets()[:, 1].max() for c in ax.collections if len(c.get_offsets()))])
    ax.set_ylim(0, top * 1.5)  # symlog's autoscale can stop short of the largest workspaces
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
