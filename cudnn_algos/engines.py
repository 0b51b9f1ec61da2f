"""The cuDNN 9 graph API's search space: engines x knob choices (``find_engines``), measured like the legacy rows.

On cuDNN 9 the legacy algorithms are a thin view over these engines; torch's own convolution runs one of these
execution plans. Each configuration is a row: engine id, knob values, numerical and behaviour notes, the nearest
legacy family, determinism, workspace, status (a configuration that fails to finalize is a row saying where), and
with ``measure=True`` the same timing and accuracy columns as legacy rows (see cudnn_algos.measure).
"""
from __future__ import annotations

import datetime as _dt
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Sequence

import torch

from . import _ext
from .measure import (MeasuredRow, Measurement, Stats, conv_flops, errors, operand_sets, plan_timer,
                      reference_output, time_three_ways)
from .results import Environment, _aligned, format_bytes, write_json
from .spec import ConvShapes, ConvSpec

HEURISTICS = ("a", "b", "instant", "fallback")
NUMERICAL_NOTES = ("TENSOR_CORE", "DOWN_CONVERT_INPUTS", "REDUCED_PRECISION_REDUCTION", "FFT", "NONDETERMINISTIC",
                   "WINOGRAD", "WINOGRAD_TILE_4x4", "WINOGRAD_TILE_6x6", "WINOGRAD_TILE_13x13", "STRICT_NAN_PROP")
BEHAVIOR_NOTES = ("RUNTIME_COMPILATION", "REQUIRES_FILTER_INT8x32_REORDER", "REQUIRES_BIAS_INT8x32_REORDER",
                  "SUPPORTS_CUDA_GRAPH_NATIVE_API", "CUBLASLT_DEPENDENCY")
KNOBS = ("SPLIT_K", "SWIZZLE", "TILE_SIZE", "USE_TEX", "EDGE", "KBLOCK", "LDGA", "LDGB", "CHUNK_K", "SPLIT_H",
         "WINO_TILE", "MULTIPLY", "SPLIT_K_BUF", "TILEK", "STAGES", "REDUCTION_MODE", "CTA_SPLIT_K_MODE",
         "SPLIT_K_SLC", "IDX_MODE", "SLICED", "SPLIT_RS", "SINGLEBUFFER", "LDGC", "SPECFILT", "KERNEL_CFG",
         "WORKSPACE", "TILE_CGA", "TILE_CGA_M", "TILE_CGA_N", "BLOCK_SIZE", "OCCUPANCY", "ARRAY_SIZE_PER_THREAD",
         "NUM_C_PER_BLOCK", "SPLIT_COLS", "TILE_ROWS", "TILE_COLS", "LOAD_SIZE", "CTA_COUNT", "STREAM_K",
         "SPLIT_P_SLC", "TILE_M")


def _name(table: Sequence[str], v: int, prefix: str) -> str:
    return table[v] if 0 <= v < len(table) else f"{prefix}{v}"


def legacy_family(notes: Sequence[str]) -> str:
    """The nearest legacy algorithm family, from an engine's numerical notes."""
    if "FFT" in notes:
        return "FFT"
    if any(n.startswith("WINOGRAD") for n in notes):
        return "WINOGRAD"
    return "IMPLICIT_GEMM"


@dataclass(frozen=True)
class EngineRow(MeasuredRow):
    """One engine configuration. ``name`` is stable across runs: ``eng<id>`` plus its knob values."""

    direction: str  # cuDNN's direction
    engine_id: int
    knobs: tuple[tuple[str, int], ...]
    name: str
    numerical_notes: tuple[str, ...]
    behavior_notes: tuple[str, ...]
    family: str
    deterministic: bool
    status: str
    stage: str  # where a failed configuration stopped: engine, config or plan
    workspace_bytes: int | None
    sources: tuple[str, ...]  # heuristic_a / heuristic_b / fallback / exhaustive
    heuristic_ranks: tuple[tuple[str, int], ...]
    measured: Measurement | None = None
    plan: Any = field(default=None, compare=False, repr=False)  # the live execution plan (not saved)

    @property
    def rank_a(self) -> int | None:
        return next((r for s, r in self.heuristic_ranks if s == "heuristic_a"), None)


@dataclass(frozen=True)
class EngineSearchResult:
    rows: tuple[EngineRow, ...]
    spec: ConvSpec
    shapes: ConvShapes
    direction: str
    cudnn_direction: str
    dtype: str
    memory_format: str
    engine_count: int
    search_ms: float
    exhaustive: bool
    env: Environment
    flops: int = 0
    created: str = ""

    @property
    def succeeded(self) -> tuple[EngineRow, ...]:
        return tuple(r for r in self.rows if r.ok)

    @property
    def best(self) -> EngineRow | None:
        timed = [r for r in self.succeeded if r.kernel_ms is not None]
        if timed:
            return min(timed, key=lambda r: r.kernel_ms)
        ranked = [r for r in self.succeeded if r.rank_a is not None]
        return min(ranked, key=lambda r: r.rank_a) if ranked else (self.succeeded[0] if self.succeeded else None)

    HEADERS = ("config", "family", "status", "kernel ms", "thrpt ms", "host ms", "rel err", "workspace", "det.",
               "heur. A", "sources", "notes")

    def __str__(self) -> str:
        rows = []
        for r in self.rows:
            m = r.measured
            f = (lambda st: f"{st.median:.4f}" if st is not None else "-")
            rows.append([
                r.name, r.family, r.status + (f" ({r.stage})" if r.stage else ""),
                f(m.kernel_ms) if m else "-", f(m.throughput_ms) if m else "-", f(m.host_ms) if m else "-",
                f"{m.rel_err:.1e}" if m and m.rel_err is not None else "-", format_bytes(r.workspace_bytes),
                "yes" if r.deterministic else "no", str(r.rank_a) if r.rank_a is not None else "-",
                ",".join(s.replace("heuristic_", "h") for s in r.sources), ",".join(r.numerical_notes + r.behavior_notes),
            ])
        d = self.direction if self.direction == self.cudnn_direction else f"{self.direction} (cuDNN {self.cudnn_direction})"
        title = (f"{self.spec} {d} | input {'x'.join(map(str, self.shapes.input_shape))} {self.dtype} "
                 f"{self.memory_format} | engines: {self.engine_count} in cuDNN, {len(self.rows)} configurations "
                 f"({len(self.succeeded)} built) | {self.env.gpu_name} cuDNN {Environment.version_str(self.env.cudnn_runtime)}")
        b = self.best
        tail = f"best: {b.name}" + (f" {b.kernel_ms:.4f} ms kernel" if b and b.kernel_ms else "") if b else "best: none"
        return "\n".join([title, *_aligned(self.HEADERS, rows, right={3, 4, 5, 6, 7, 9}),
                          f"{tail}; search (enumerate + build plans) took {self.search_ms:.0f} ms"])

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("direction", "cudnn_direction", "dtype", "memory_format", "engine_count",
                                           "search_ms", "exhaustive", "flops", "created")}
        d["spec"] = self.spec.to_dict()
        d["input_shape"] = list(self.shapes.input_shape)
        d["env"] = asdict(self.env)
        d["rows"] = [{k: v for k, v in asdict(replace(r, plan=None)).items() if k != "plan"} for r in self.rows]
        return d

    def to_json(self, path: str | None = None) -> str:
        return write_json(self.to_dict(), path)

    def to_dataframe(self):
        import pandas as pd

        recs = []
        for r in self.rows:
            d = {k: v for k, v in asdict(replace(r, plan=None)).items() if k not in ("plan", "measured")}
            d["knobs"] = ",".join(f"{k}={v}" for k, v in r.knobs)
            m = r.measured
            if m is not None:
                for k in ("kernel_ms", "throughput_ms", "host_ms"):
                    st = getattr(m, k)
                    d[k.replace("_ms", "_median_ms")] = st.median if st else None
                d.update(rel_err=m.rel_err, tflops=m.tflops, measured_rank=m.measured_rank)
            recs.append(d)
        return pd.DataFrame.from_records(recs)


def _row(plan, cdir: str) -> EngineRow:
    knobs = tuple((_name(KNOBS, t, "KNOB_"), v) for t, v in plan.knobs)
    nn = tuple(_name(NUMERICAL_NOTES, v, "NOTE_") for v in plan.numerical_notes)
    bn = tuple(_name(BEHAVIOR_NOTES, v, "BEHAVIOR_") for v in plan.behavior_notes)
    name = f"eng{plan.engine_id}" + ("{" + ",".join(f"{k}={v}" for k, v in knobs) + "}" if knobs else "")
    return EngineRow(direction=cdir, engine_id=plan.engine_id, knobs=knobs, name=name, numerical_notes=nn,
                     behavior_notes=bn, family=legacy_family(nn), deterministic="NONDETERMINISTIC" not in nn,
                     status=plan.status, stage=plan.stage,
                     workspace_bytes=plan.workspace_bytes if plan.workspace_bytes >= 0 else None,
                     sources=tuple(plan.sources), heuristic_ranks=tuple(plan.heuristic_ranks), plan=plan)


def find_engines(
    conv, input_shape, *, direction: str = "forward", dtype=None, memory_format=None,
    heuristics: Sequence[str] = ("a", "b", "fallback"), exhaustive: bool = False, max_configs: int = 64,
    runtime_compiled: bool = True, measure: bool = False, repeats: int = 10, warmup: int = 3, l2: str = "warm",
    device=None,
) -> EngineSearchResult:
    """Enumerates the graph API's engine configurations of one convolution direction and builds their plans.

    heuristics: which of cuDNN's ranked lists to take configurations from ("a", "b", "instant", "fallback").
    exhaustive: also every engine x every knob combination, until ``max_configs`` configurations exist in all.
    runtime_compiled: build plans of engines that compile at run time (slow to build) too.
    measure: time and check every built plan (kernel/throughput/host, accuracy) like find(..., measure=True).
    """
    from . import api
    from .measure import check_config

    if direction == "all":
        raise ValueError("find_engines searches one direction at a time: forward, backward_data or backward_filter")
    for h in heuristics:
        api._check_choice("heuristics", h, HEURISTICS)
    if isinstance(max_configs, bool) or not isinstance(max_configs, int) or max_configs < 1:
        raise ValueError(f"max_configs={max_configs!r} must be a positive int")
    if measure:
        check_config(repeats, warmup, l2, "cuda")
    problem, _, _, dev = api.validate(conv, input_shape, direction=direction, dtype=dtype,
                                      memory_format=memory_format, device=device)
    ext = _ext.load()
    cdir = api._CUDNN_DIRECTION[(problem.spec.transposed, direction)]
    cp = problem.cudnn(ext)
    with torch.cuda.device(dev):
        out = ext.engine_search(cdir, cp, list(heuristics), exhaustive, max_configs, runtime_compiled, dev)
    rows = [_row(p, cdir) for p in out["plans"]]
    result = EngineSearchResult(
        rows=tuple(rows), spec=problem.spec, shapes=problem.shapes, direction=direction, cudnn_direction=cdir,
        dtype=api.DTYPES[problem.dtype], memory_format=problem.memory_format, engine_count=int(out["engine_count"]),
        search_ms=float(out["search_ms"]), exhaustive=exhaustive, env=api.environment(dev),
        flops=conv_flops(problem), created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    if measure:
        with torch.cuda.device(dev):
            result = _measure(result, problem, repeats, warmup, l2, dev)
    return result


def _measure(result: EngineSearchResult, problem, repeats: int, warmup: int, l2: str, dev: int) -> EngineSearchResult:
    from .api import _OUTPUT_OPERAND

    sets = operand_sets(problem, l2, dev)
    out_role = _OUTPUT_OPERAND[result.cudnn_direction]
    ref = reference_output(problem, result.cudnn_direction, sets[0], "cuda")
    measured = {}
    for i, row in enumerate(result.rows):
        if not row.ok:
            continue
        plan = row.plan
        try:
            sets[0][out_role].fill_(float("nan"))
            plan.execute(sets[0]["x"], sets[0]["w"], sets[0]["y"])
            rel, mx = errors(sets[0][out_role], ref)

            call, loop = plan_timer(plan, sets)
            t = time_three_ways(call, loop, repeats, warmup, dev)
            err = "output has non-finite values" if rel is None else ""
            measured[i] = Measurement(
                kernel_ms=t.kernel_ms, kernel_clock=t.kernel_clock, throughput_ms=t.throughput_ms,
                host_ms=t.host_ms, cupti_kernel_ms=None, calls_per_sample=t.calls_per_sample, rel_err=rel,
                max_abs_err=mx, error="; ".join(e for e in (err, t.error) if e), heuristic_rank=row.rank_a,
                tflops=(result.flops / (t.kernel_ms.median * 1e-3) / 1e12) if t.kernel_ms else None)
        except Exception as e:  # a plan that fails to run is a row saying so, never a crash
            measured[i] = Measurement(kernel_ms=None, kernel_clock="none", throughput_ms=None, host_ms=None,
                                      cupti_kernel_ms=None, calls_per_sample=0, error=f"{type(e).__name__}: {e}"[:200])
    order = sorted((i for i, m in measured.items() if m.kernel_ms is not None), key=lambda i: measured[i].kernel_ms.median)
    for rank, i in enumerate(order):
        measured[i] = replace(measured[i], measured_rank=rank)
    rows = [replace(r, measured=measured.get(i)) for i, r in enumerate(result.rows)]
    ok = sorted((r for r in rows if r.ok), key=lambda r: (r.kernel_ms is None, r.kernel_ms or 0.0))
    return replace(result, rows=tuple(ok + [r for r in rows if not r.ok]))


__all__ = ["find_engines", "EngineRow", "EngineSearchResult", "legacy_family", "Stats"]
