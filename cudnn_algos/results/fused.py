"""A fused search's result (``FusedSearchResult``): every engine configuration cuDNN offers for a convolution and its
pointwise epilogue as one graph (``kind`` "fused"), beside the unfused sequence — each single-convolution
configuration followed by torch's epilogue kernels ("unfused") — and torch's eager op sequence ("torch"), all measured
in one kernel-clock session and checked against one float64 reference."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..environment import Environment
from ..spec import ConvShapes, ConvSpec
from .codec import Saved, register
from .rows import MeasureConfig, MeasuredRow, Measurement
from .tables import TEXT_WIDTH, direction_label, fit_table, format_bytes, format_ms, median_cell, measure_note, wrap_lines

KINDS = ("fused", "unfused", "torch")


@dataclass(frozen=True)
class FusedRow(MeasuredRow):
    """One candidate for the convolution and its epilogue. kind "fused": one engine configuration of the fused
    graph (``name`` eng<id>{knobs}, as find_engines names them); "unfused": a configuration of the convolution alone
    then torch's epilogue ops (``name`` "<config> + torch"); "torch": torch's eager op sequence. ``build_ms``: host
    time its plan took to finalize (runtime-compiled engines compile then: what a process pays once)."""

    kind: str
    name: str
    status: str
    stage: str = ""  # where a failed configuration stopped: graph, engine, config or plan
    engine_id: int | None = None
    knobs: tuple[tuple[str, int], ...] = ()
    numerical_notes: tuple[str, ...] = ()
    behavior_notes: tuple[str, ...] = ()
    workspace_bytes: int | None = None
    build_ms: float | None = None
    sources: tuple[str, ...] = ()
    note: str = ""
    measured: Measurement | None = None
    plan: Any = field(default=None, compare=False, repr=False, metadata={"saved": False})  # live plan, this process

    @property
    def runtime_compiled(self) -> bool:
        return "RUNTIME_COMPILATION" in self.behavior_notes


@register
@dataclass(frozen=True)
class FusedSearchResult(Saved):
    """Every fused configuration of one convolution and epilogue, with the unfused sequence and torch's eager ops.

    ``epilogue``: the ops as asked ("bn" stays "bn"); ``graph_ops``: the pointwise ops of cuDNN's graph ("bn" is a
    scale and a bias there; empty when the epilogue has no graph form, ``note`` says why)."""

    rows: tuple[FusedRow, ...]
    spec: ConvSpec
    shapes: ConvShapes
    cudnn_direction: str
    epilogue: tuple[str, ...]
    graph_ops: tuple[str, ...]
    dtype: str
    memory_format: str
    engine_count: int
    search_ms: float
    env: Environment
    flops: int = 0
    created: str = ""
    measure: MeasureConfig | None = None
    measure_s: float = 0.0
    note: str = ""

    KIND = "fused_search"

    def of_kind(self, kind: str) -> tuple[FusedRow, ...]:
        return tuple(r for r in self.rows if r.kind == kind)

    def _fastest(self, kind: str) -> FusedRow | None:
        timed = [r for r in self.of_kind(kind) if r.right_ms is not None]
        return min(timed, key=lambda r: r.kernel_ms) if timed else None

    @property
    def best(self) -> FusedRow | None:
        """The fastest fused configuration whose output is right (None when none ran)."""
        return self._fastest("fused")

    @property
    def best_unfused(self) -> FusedRow | None:
        """The fastest convolution configuration followed by torch's epilogue kernels."""
        return self._fastest("unfused")

    @property
    def torch_eager(self) -> FusedRow | None:
        return next(iter(self.of_kind("torch")), None)

    def speedup(self, over: str = "torch") -> float | None:
        """Kernel-clock time of `over` ("torch": torch's eager ops; "unfused": the best unfused sequence) over the
        best fused configuration's; None where either is missing."""
        other = self.torch_eager if over == "torch" else self.best_unfused
        b = self.best
        if b is None or other is None or other.right_ms is None:
            return None
        return other.kernel_ms / b.kernel_ms

    def title(self) -> str:
        built = sum(r.ok for r in self.of_kind("fused"))
        return (f"{self.spec} {direction_label('forward', self.cudnn_direction)} + {','.join(self.epilogue)} | input "
                f"{'x'.join(map(str, self.shapes.input_shape))} {self.dtype} {self.memory_format} | fused graph: "
                f"{self.engine_count} engines in cuDNN, {len(self.of_kind('fused'))} configurations ({built} built) | "
                f"{self.env.gpu_name} cuDNN {Environment.version_str(self.env.cudnn_runtime)} | times in ms")

    TEXT_HEADERS = ("kind", "candidate", "status", "kernel", "thrpt", "host", "rel err", "workspace", "build",
                    "notes")

    def text_table(self, width: int = TEXT_WIDTH) -> list[str]:
        order = sorted(self.rows, key=lambda r: (not r.ok, r.kernel_ms is None, r.kernel_ms or 0.0))
        rows = []
        for r in order:
            m = r.measured
            notes = ",".join(r.numerical_notes + r.behavior_notes)
            notes = "; ".join(x for x in (notes, r.note, measure_note(m)) if x)
            rows.append([r.kind, r.name, r.status + (f" ({r.stage})" if r.stage else ""), median_cell(m, "kernel_ms"),
                         median_cell(m, "throughput_ms"), median_cell(m, "host_ms"),
                         f"{m.rel_err:.1e}" if m and m.rel_err is not None else "-", format_bytes(r.workspace_bytes),
                         format_ms(r.build_ms, 3) if r.build_ms is not None else "-", notes or "-"])
        return fit_table(self.TEXT_HEADERS, rows, right={3, 4, 5, 6, 7, 8}, width=width,
                         legend={1: 16, 2: 13, 9: 18}, drop=(4, 7))

    def summary(self) -> str:
        b, u, t = self.best, self.best_unfused, self.torch_eager
        parts = [f"fused best: {b.name} {format_ms(b.kernel_ms)}" if b else
                 f"fused: none ran{f' ({self.note})' if self.note else ''}"]
        if u is not None:
            parts.append(f"unfused best: {u.name} {format_ms(u.kernel_ms)}")
        if t is not None and t.kernel_ms is not None:
            parts.append(f"torch eager {format_ms(t.kernel_ms)}")
        for over in ("torch", "unfused"):
            s = self.speedup(over)
            if s is not None:
                parts.append(f"fused {s:.2f}x vs {'torch eager' if over == 'torch' else 'unfused'}")
        return "; ".join(parts)

    def __str__(self) -> str:
        return "\n".join(wrap_lines([self.title()]) + self.text_table() + wrap_lines([self.summary()]))

    def to_dataframe(self):
        """One row per candidate: the problem, the epilogue, the candidate's columns and its measurement."""
        import pandas as pd

        recs = []
        for r in self.rows:
            m = r.measured
            recs.append({
                "spec": str(self.spec), "input_shape": "x".join(map(str, self.shapes.input_shape)),
                "dtype": self.dtype, "memory_format": self.memory_format, "epilogue": ",".join(self.epilogue),
                "kind": r.kind, "candidate": r.name, "engine_id": r.engine_id, "status": r.status, "stage": r.stage,
                "kernel_median_ms": r.kernel_ms,
                "throughput_median_ms": m.throughput_ms.median if m and m.throughput_ms else None,
                "host_median_ms": r.host_ms, "rel_err": m.rel_err if m else None,
                "max_abs_err": m.max_abs_err if m else None, "workspace_bytes": r.workspace_bytes,
                "build_ms": r.build_ms, "runtime_compiled": r.runtime_compiled,
                "notes": ",".join(r.numerical_notes + r.behavior_notes), "note": r.note,
                "measure_error": m.error if m else None, "gpu": self.env.gpu_name,
                "cudnn": Environment.version_str(self.env.cudnn_runtime), "created": self.created})
        return pd.DataFrame.from_records(recs)


__all__ = ["KINDS", "FusedRow", "FusedSearchResult"]
