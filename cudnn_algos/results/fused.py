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
from .tables import (TEXT_WIDTH, direction_label, fit_table, format_bytes, format_ms, measure_note, median_cell,
                     wrap_lines)

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





@dataclass(frozen=True)
class ChainRow:
    """One fusible chain of a model (model.fusion.Chain) and what its fused search found: the fastest right fused
    configuration, the fastest unfused sequence and torch's eager ops on the kernel clock (ms per call; None where
    none ran), the fused best's plan build time, and the memory traffic one fused call saves over eager. ``why``:
    why nothing is fused ("" when a fused configuration ran)."""

    conv: str
    spec: ConvSpec
    input_shape: tuple[int, ...]
    ops: tuple[str, ...]
    uses: int = 1
    why: str = ""
    fused_name: str = ""
    fused_ms: float | None = None
    fused_build_ms: float | None = None
    unfused_name: str = ""
    unfused_ms: float | None = None
    eager_ms: float | None = None
    bytes_saved: int = 0

    @property
    def fused(self) -> bool:
        return self.fused_ms is not None

    @property
    def best_ms(self) -> float | None:
        """What a run that fuses where fusing wins costs: the faster of the fused best and the unfused best."""
        got = [v for v in (self.fused_ms, self.unfused_ms) if v is not None]
        return min(got) if got else None


@register
@dataclass(frozen=True)
class FusionReport(Saved):
    """A model's fusible chains (profile(model, example, fusion=True)), each searched by find_fused, with totals over
    the model (each chain times its uses) and the convolutions no chain could start from, with why."""

    model: str
    chains: tuple[ChainRow, ...]
    dtype: str
    memory_format: str
    env: Environment
    not_chained: tuple[tuple[str, str], ...] = ()
    trace_error: str = ""
    search_s: float = 0.0
    created: str = ""

    KIND = "fusion_report"

    def totals(self) -> dict[str, float]:
        """Sums over the chains every column has (eager, unfused best, the faster of fused and unfused), and the
        bytes fusion saves where a fused configuration is the faster, each chain times its uses."""
        rows = [c for c in self.chains if c.eager_ms is not None and c.unfused_ms is not None]
        wins = [c for c in rows if c.fused and c.fused_ms <= c.unfused_ms]
        return {"chains": float(len(rows)),
                "eager_ms": sum(c.eager_ms * c.uses for c in rows),
                "unfused_ms": sum(c.unfused_ms * c.uses for c in rows),
                "best_ms": sum(c.best_ms * c.uses for c in rows),
                "fused_chains": float(len(wins)),
                "bytes_saved": float(sum(c.bytes_saved * c.uses for c in wins))}

    HEADERS = ("conv", "epilogue", "uses", "fused", "unfused", "eager", "x eager", "build", "saved", "why not fused")

    def text_table(self, width: int = TEXT_WIDTH) -> list[str]:
        rows = []
        for c in self.chains:
            x = f"{c.eager_ms / c.best_ms:.2f}" if c.eager_ms and c.best_ms else "-"
            rows.append([c.conv, ",".join(c.ops) or "-", str(c.uses), format_ms(c.fused_ms) if c.fused else "-",
                         format_ms(c.unfused_ms) if c.unfused_ms is not None else "-",
                         format_ms(c.eager_ms) if c.eager_ms is not None else "-", x,
                         format_ms(c.fused_build_ms, 3) if c.fused_build_ms is not None else "-",
                         format_bytes(c.bytes_saved) if c.fused else "-", c.why or "-"])
        return fit_table(self.HEADERS, rows, right={2, 3, 4, 5, 6, 7, 8}, width=width, legend={0: 24, 9: 24},
                         drop=(7, 8))

    def __str__(self) -> str:
        t = self.totals()
        head = (f"{self.model}: {len(self.chains)} chains, {self.dtype} {self.memory_format} | {self.env.gpu_name} "
                f"cuDNN {Environment.version_str(self.env.cudnn_runtime)} | kernel ms per call")
        tail = [f"sums over {int(t['chains'])} chains (x uses): eager {t['eager_ms']:.4f} ms, unfused best "
                f"{t['unfused_ms']:.4f} ms, fused where it wins {t['best_ms']:.4f} ms"
                + (f" ({t['eager_ms'] / t['best_ms']:.2f}x eager)" if t["best_ms"] else "")
                + f"; {int(t['fused_chains'])} chains fused, {format_bytes(int(t['bytes_saved']))} of memory traffic "
                  "saved per pass"]
        tail += [f"not chained: {name}: {why}" for name, why in self.not_chained]
        if self.trace_error:
            tail.append(f"no chains: {self.trace_error}")
        return "\n".join(wrap_lines([head]) + self.text_table() + wrap_lines(tail))

    def to_dataframe(self):
        import pandas as pd

        return pd.DataFrame.from_records([{
            "model": self.model, "conv": c.conv, "spec": str(c.spec), "input_shape": "x".join(map(str, c.input_shape)),
            "epilogue": ",".join(c.ops), "uses": c.uses, "fused_name": c.fused_name or None, "fused_ms": c.fused_ms,
            "fused_build_ms": c.fused_build_ms, "unfused_name": c.unfused_name or None, "unfused_ms": c.unfused_ms,
            "eager_ms": c.eager_ms, "bytes_saved": c.bytes_saved, "why": c.why or None, "dtype": self.dtype,
            "memory_format": self.memory_format, "gpu": self.env.gpu_name} for c in self.chains])

__all__ = ["KINDS", "FusedRow", "FusedSearchResult", "ChainRow", "FusionReport"]
