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
    kernels: tuple[str, ...] = ()  # CUDA kernels one execution launched (CUPTI), when torch was compared
    torch_rank: int | None = None  # position among the configurations torch's benchmark mode times (None: not)
    torch_filter: str = ""  # why torch's convolution would never consider this configuration ("" if it would)
    torch_ran: tuple[str, ...] = ()  # "benchmark_on" / "benchmark_off": torch's own call ran these kernels
    plan: Any = field(default=None, compare=False, repr=False)  # the live execution plan (not saved)

    def rank(self, source: str) -> int | None:
        """Position in a heuristic list ("heuristic_a", "heuristic_instant", "heuristic_b", "fallback")."""
        return next((r for s, r in self.heuristic_ranks if s == source), None)

    @property
    def rank_a(self) -> int | None:
        return self.rank("heuristic_a")


@dataclass(frozen=True)
class TorchRun:
    """What torch's own cuDNN convolution ran for this problem, in this process, identified by its kernels."""

    mode: str  # "benchmark_on" or "benchmark_off": cudnn.benchmark for torch's calls here
    kernels: tuple[str, ...]  # CUDA kernels one call of torch's op launched (CUPTI records, torch.profiler)
    matches: tuple[str, ...]  # names of the configurations that launched exactly these kernels (or, see match)
    match: str  # "exact", "partial" (a configuration's kernels are a subset of torch's), or "none"
    first_call_ms: float  # host ms of torch's first call here (with benchmark mode: its search, if it searched)
    benchmark_limit: int  # torch.backends.cudnn.benchmark_limit
    measured: Measurement | None = None  # torch's op timed like the rows, with its error against float64
    cupti_ms: float | None = None  # CUPTI kernel time of the one call in the identification session
    error: str = ""  # why kernels could not be read (profiler unavailable), if so

    def describe(self) -> str:
        what = {"exact": "ran", "partial": "ran (its kernels include those of)", "none": "ran none of these "
                "configurations' kernels"}[self.match]
        names = ", ".join(self.matches[:3]) + (f" (+{len(self.matches) - 3} with the same kernels)"
                                               if len(self.matches) > 3 else "")
        return f"torch ({self.mode.replace('_', ' ')}) {what}{' ' + names if self.matches else ''}"


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
    torch: TorchRun | None = None  # what torch's own convolution ran here (compare_torch=True)
    refined: int = 0  # configurations added by refine (one-knob neighbours of the fastest ones)

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

    @property
    def best_eligible(self) -> EngineRow | None:
        """The fastest measured configuration that torch's own convolution would also accept (not filtered out
        by its numerical rules): the fair one to compare with torch."""
        timed = [r for r in self.succeeded if r.kernel_ms is not None and not r.torch_filter]
        return min(timed, key=lambda r: r.kernel_ms) if timed else None

    @property
    def torch_candidates(self) -> int:
        return sum(r.torch_rank is not None for r in self.rows)

    HEADERS = ("config", "family", "status", "kernel ms", "thrpt ms", "host ms", "rel err", "workspace", "det.",
               "heur. A", "torch", "sources", "notes")

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
                _torch_cell(r), ",".join(s.replace("heuristic_", "h") for s in r.sources),
                ",".join(r.numerical_notes + r.behavior_notes),
            ])
        d = self.direction if self.direction == self.cudnn_direction else f"{self.direction} (cuDNN {self.cudnn_direction})"
        title = (f"{self.spec} {d} | input {'x'.join(map(str, self.shapes.input_shape))} {self.dtype} "
                 f"{self.memory_format} | engines: {self.engine_count} in cuDNN, {len(self.rows)} configurations "
                 f"{f'({self.refined} by refine) ' if self.refined else ''}"
                 f"({len(self.succeeded)} built) | {self.env.gpu_name} cuDNN {Environment.version_str(self.env.cudnn_runtime)}")
        b = self.best
        tail = f"best: {b.name}" + (f" {b.kernel_ms:.4f} ms kernel" if b and b.kernel_ms else "") if b else "best: none"
        lines = [title, *_aligned(self.HEADERS, rows, right={3, 4, 5, 6, 7, 9}),
                 f"{tail}; search (enumerate + build plans) took {self.search_ms:.0f} ms"]
        lines += self.torch_lines()
        return "\n".join(lines)

    def torch_lines(self) -> list[str]:
        """What torch's own convolution ran and cost beside our best (when compare_torch ran)."""
        t = self.torch
        if t is None:
            return []
        out = [f"{t.describe()}; kernels: {', '.join(k[:60] for k in t.kernels) or 'none seen'}"]
        lim = t.benchmark_limit or "no limit"
        out.append(f"torch's benchmark mode times {self.torch_candidates} of these configurations (heuristic "
                   f"INSTANT's list then the fallback list, minus what it filters out; its limit: {lim}); this "
                   f"search built {len(self.succeeded)} of {len(self.rows)}")
        m, b = t.measured, self.best_eligible
        if m is not None and m.kernel_ms is not None:
            f = (lambda st: f"{st.median:.4f}" if st is not None else "-")
            line = (f"torch's op here: kernel {f(m.kernel_ms)} ms, throughput {f(m.throughput_ms)} ms, host "
                    f"{f(m.host_ms)} ms per call")
            if b is not None and b.measured is not None:
                line += (f"; best configuration torch would accept, {b.name}: kernel {b.kernel_ms:.4f} ms "
                         f"({b.kernel_ms / m.kernel_ms.median:.3f}x torch's), host {f(b.measured.host_ms)} ms")
            out.append(line)
        return out

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("direction", "cudnn_direction", "dtype", "memory_format", "engine_count",
                                           "search_ms", "exhaustive", "refined", "flops", "created")}
        d["spec"] = self.spec.to_dict()
        d["input_shape"] = list(self.shapes.input_shape)
        d["env"] = asdict(self.env)
        d["rows"] = [{k: v for k, v in asdict(replace(r, plan=None)).items() if k != "plan"} for r in self.rows]
        d["torch"] = asdict(self.torch) if self.torch is not None else None
        return d

    def to_json(self, path: str | None = None) -> str:
        return write_json(self.to_dict(), path)

    def to_dataframe(self):
        import pandas as pd

        recs = []
        for r in self.rows:
            d = {k: v for k, v in asdict(replace(r, plan=None)).items() if k not in ("plan", "measured")}
            d["knobs"] = ",".join(f"{k}={v}" for k, v in r.knobs)
            d["kernels"] = ";".join(r.kernels)
            d["torch_ran"] = ",".join(r.torch_ran)
            m = r.measured
            if m is not None:
                for k in ("kernel_ms", "throughput_ms", "host_ms"):
                    st = getattr(m, k)
                    d[k.replace("_ms", "_median_ms")] = st.median if st else None
                d.update(rel_err=m.rel_err, tflops=m.tflops, measured_rank=m.measured_rank)
            recs.append(d)
        return pd.DataFrame.from_records(recs)


def _torch_cell(r: EngineRow) -> str:
    parts = []
    if r.torch_ran:
        parts.append("RAN(" + ",".join(m.replace("benchmark_", "") for m in r.torch_ran) + ")")
    if r.torch_rank is not None:
        parts.append(f"#{r.torch_rank}")
    if r.torch_filter:
        parts.append(f"never ({r.torch_filter})")
    return " ".join(parts) or "-"


def torch_filter(numerical_notes: Sequence[str], dtype: str, deterministic: bool, allow_tf32: bool) -> str:
    """Why torch's cuDNN convolution would drop an engine configuration with these notes ("" if it would keep it),
    following its engine-config filter: inputs down-converted always; nondeterministic under
    cudnn.deterministic; tensor cores for float32 when cudnn.allow_tf32 is off."""
    if "DOWN_CONVERT_INPUTS" in numerical_notes:
        return "down-converts inputs"
    if deterministic and "NONDETERMINISTIC" in numerical_notes:
        return "nondeterministic"
    if dtype == "float32" and not allow_tf32 and "TENSOR_CORE" in numerical_notes:
        return "tensor cores, allow_tf32 off"
    return ""


def torch_candidates(rows: Sequence[EngineRow], limit: int) -> dict[int, int]:
    """Row index -> position among the configurations torch's benchmark mode would time: heuristic INSTANT's
    list, then the fallback list, without the ones its filter drops (``torch_filter``) or that fail to build,
    the first ``limit`` (0: all). Torch also drops plans whose workspace exceeds the largest free block of its
    allocator; that depends on the moment and is not modelled here."""
    order: list[int] = []
    for src in ("heuristic_instant", "fallback"):
        ranked = sorted((r.rank(src), i) for i, r in enumerate(rows) if r.rank(src) is not None)
        order += [i for _, i in ranked if i not in order]
    out: dict[int, int] = {}
    for i in order:
        r = rows[i]
        if r.torch_filter or not (r.ok or r.status == "SKIPPED_RUNTIME_COMPILATION"):
            continue
        out[i] = len(out)
        if limit and len(out) >= limit:
            break
    return out


def match_kernels(torch_kernels: Sequence[str], rows: Sequence[EngineRow]) -> tuple[str, tuple[int, ...]]:
    """Which rows launched the kernels torch's call launched: ("exact", rows with exactly that set), else
    ("partial", rows whose kernels are all among torch's, the largest such sets), else ("none", ())."""
    def kset(names):  # copies and fills are not what tells configurations apart
        return frozenset(n for n in names if not n.startswith(("Memset", "Memcpy", "[Memset", "[Memcpy")))

    t = kset(torch_kernels)
    sets = {i: kset(r.kernels) for i, r in enumerate(rows) if kset(r.kernels)}
    exact = tuple(i for i, k in sets.items() if k == t)
    if exact and t:
        return "exact", exact
    sub = {i: k for i, k in sets.items() if k and k < t}
    if sub:
        most = max(len(k) for k in sub.values())
        return "partial", tuple(i for i, k in sub.items() if len(k) == most)
    return "none", ()


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


def _rows(plans, cdir: str, dtype: str) -> list[EngineRow]:
    """Rows of these plans, each with why torch's convolution would never run it (as torch is set now)."""
    det, tf32 = torch.backends.cudnn.deterministic, torch.backends.cudnn.allow_tf32
    return [replace(r, torch_filter=torch_filter(r.numerical_notes, dtype, det, tf32))
            for r in (_row(p, cdir) for p in plans)]


def find_engines(
    conv, input_shape, *, direction: str = "forward", dtype=None, memory_format=None,
    heuristics: Sequence[str] = ("instant", "a", "b", "fallback"), exhaustive: bool = False, max_configs: int = 64,
    runtime_compiled: bool = True, measure: bool = False, repeats: int = 10, warmup: int = 3, l2: str = "warm",
    compare_torch: bool | None = None, torch_benchmark: bool | None = None, refine: int = 0,
    refine_max: int = 64, device=None,
) -> EngineSearchResult:
    """Enumerates the graph API's engine configurations of one convolution direction and builds their plans.

    heuristics: which of cuDNN's ranked lists to take configurations from ("instant", "a", "b", "fallback");
        torch's convolution uses "instant" then "fallback".
    exhaustive: also every engine x every knob combination (in rounds over the engines) until ``max_configs``
        configurations exist in all; engines that reject the problem are rows that do not count.
    runtime_compiled: build plans of engines that compile at run time (slow to build) too.
    measure: time and check every built plan (kernel/throughput/host, accuracy) like find(..., measure=True).
    compare_torch: run torch's own convolution on the same operands, identify the configuration it ran by its
        kernels (CUPTI, torch.profiler), and with ``measure`` time it the same three ways (default: = measure).
    torch_benchmark: cudnn.benchmark for torch's calls (default: as currently set). torch keeps the first plan it
        picks for a problem for the life of the process, so benchmark mode's choice only shows for a problem
        torch has not run yet in this process.
    refine: with measure, take this many of the fastest configurations torch would accept and build every
        one-knob neighbour of each (every other value of one knob, the rest kept), up to ``refine_max`` new
        configurations; measure them too (source "refine"). A local search beyond the heuristics' lists.
    Every row also says whether torch's benchmark mode would time it (``torch_rank``) or never consider it
    (``torch_filter``), from the heuristic lists and the notes.
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
    compare_torch = measure if compare_torch is None else compare_torch
    for name, v, lo in (("refine", refine, 0), ("refine_max", refine_max, 1)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"{name}={v!r} must be an int >= {lo}")
    if refine and not measure:
        raise ValueError(f"refine={refine} needs measure=True (it refines around the fastest measured configurations)")
    for name, v in (("compare_torch", compare_torch), ("torch_benchmark", torch_benchmark)):
        if v is not None and not isinstance(v, bool):
            raise TypeError(f"{name}={v!r} must be a bool")
    problem, _, _, dev = api.validate(conv, input_shape, direction=direction, dtype=dtype,
                                      memory_format=memory_format, device=device)
    ext = _ext.load()
    cdir = api._CUDNN_DIRECTION[(problem.spec.transposed, direction)]
    cp = problem.cudnn(ext)
    with torch.cuda.device(dev):
        out = ext.engine_search(cdir, cp, list(heuristics), exhaustive, max_configs, runtime_compiled, dev)
    rows = _rows(out["plans"], cdir, api.DTYPES[problem.dtype])
    limit = int(torch.backends.cudnn.benchmark_limit or 0)
    for i, pos in torch_candidates(rows, limit).items():
        rows[i] = replace(rows[i], torch_rank=pos)
    result = EngineSearchResult(
        rows=tuple(rows), spec=problem.spec, shapes=problem.shapes, direction=direction, cudnn_direction=cdir,
        dtype=api.DTYPES[problem.dtype], memory_format=problem.memory_format, engine_count=int(out["engine_count"]),
        search_ms=float(out["search_ms"]), exhaustive=exhaustive, env=api.environment(dev),
        flops=conv_flops(problem), created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    if measure or compare_torch:
        with torch.cuda.device(dev):
            sets = operand_sets(problem, l2, dev)
            ref = reference_output(problem, cdir, sets[0], "cuda") if measure else None  # once per search
            if measure:
                result = _measure(result, sets, ref, repeats, warmup, dev)
            if refine:
                result = _refine(result, sets, ref, ext, cp, refine, refine_max, runtime_compiled, repeats, warmup,
                                 dev)
            if compare_torch:
                bench = torch.backends.cudnn.benchmark if torch_benchmark is None else torch_benchmark
                result = _compare_torch(result, problem, sets, bench, ref, repeats, warmup, dev)
            del sets, ref
    return result


def _compare_torch(result: EngineSearchResult, problem, sets, benchmark: bool, ref, repeats: int, warmup: int,
                   dev: int) -> EngineSearchResult:
    """torch's own op (cudnn.benchmark = `benchmark`): its first call here (where it plans the problem), with a
    float64 reference `ref` (measure) its timing (before any profiler session: see identify_torch) and accuracy;
    then the identification of the configuration it ran."""
    from .measure import cudnn_benchmark, first_call_ms, python_loop, torch_call

    call = torch_call(problem, result.cudnn_direction, sets)
    with cudnn_benchmark(benchmark):
        # torch plans the problem in its first call here (benchmark mode: its search, unless it planned it before)
        first_ms = first_call_ms(call, dev)
        m = None
        if ref is not None:
            out = call(0)
            rel, mx = errors(out, ref)
            del out
            t = time_three_ways(call, python_loop(call, dev), repeats, warmup, dev)
            m = Measurement(kernel_ms=t.kernel_ms, kernel_clock=t.kernel_clock, throughput_ms=t.throughput_ms,
                            host_ms=t.host_ms, cupti_kernel_ms=None, calls_per_sample=t.calls_per_sample,
                            rel_err=rel, max_abs_err=mx, error=t.error,
                            tflops=(result.flops / (t.kernel_ms.median * 1e-3) / 1e12) if t.kernel_ms else None)
    res = _identify(result, problem, sets, benchmark, dev)
    run = replace(res.torch, first_call_ms=first_ms, measured=m and replace(
        m, cupti_kernel_ms=res.torch.cupti_ms, kernels=res.torch.kernels))
    return replace(res, torch=run)


def identify_torch(result: EngineSearchResult, *, torch_benchmark: bool | None = None) -> EngineSearchResult:
    """Marks, in a search result whose plans are alive (this process), the configuration(s) whose kernels torch's own
    convolution launches for the problem now (``torch_ran``; ``result.torch``). torch keeps the first plan it picked
    for the problem in this process; with ``torch_benchmark`` (default: cudnn.benchmark as set) it picks one if it
    has not yet.

    This opens a torch.profiler (CUPTI) session. Unless CUPTI is torn down after it (TEARDOWN_CUPTI=1), kernels
    launched later in the process may run with CUPTI's instrumentation: time first, identify last (as
    find_engines(compare_torch=True) and benchmarks/resnet50.py do)."""
    from . import api

    problem = api._problem(result.spec, result.shapes.input_shape, api._dtype(result.dtype, None),
                           result.memory_format, None)
    dev = result.env.device_index
    bench = torch.backends.cudnn.benchmark if torch_benchmark is None else torch_benchmark
    with torch.cuda.device(dev):
        sets = operand_sets(problem, "warm", dev)
        return _identify(result, problem, sets, bench, dev)


def _identify(result: EngineSearchResult, problem, sets, benchmark: bool, dev: int) -> EngineSearchResult:
    """torch's op and every built plan once each inside one profiler session; torch's kernels matched to the plans'."""
    from .measure import _cupti_per_row, cudnn_benchmark, first_call_ms, torch_call

    call = torch_call(problem, result.cudnn_direction, sets)
    o = sets[0]

    def safe(p):
        def job():
            try:
                p.execute(o["x"], o["w"], o["y"])
            except Exception:  # its measured row already says why; here it just launches nothing
                pass
        return job

    with cudnn_benchmark(benchmark):
        first_ms = first_call_ms(call, dev)  # outside the profiler: any planning (benchmark mode's search) is here
        jobs = [(-1, lambda: call(0))] + [(i, safe(r.plan)) for i, r in enumerate(result.rows) if r.ok]
        err = ""
        try:
            got = _cupti_per_row(jobs, {i: 1 for i, _ in jobs}, dev)
        except Exception as e:  # profiler unavailable: no identification, say why
            got, err = {}, f"kernels not read: {type(e).__name__}: {str(e)[:150]}"
    tk = got.get(-1, (None, ()))
    mode = "benchmark_on" if benchmark else "benchmark_off"
    rows = [replace(r, kernels=got[i][1], torch_ran=tuple(m for m in r.torch_ran if m != mode)) if i in got else r
            for i, r in enumerate(result.rows)]
    how, idx = match_kernels(tk[1], rows)
    for i in idx:
        rows[i] = replace(rows[i], torch_ran=rows[i].torch_ran + (mode,))
    run = TorchRun(mode=mode, kernels=tk[1], matches=tuple(rows[i].name for i in idx), match=how,
                   first_call_ms=first_ms, benchmark_limit=int(torch.backends.cudnn.benchmark_limit or 0),
                   cupti_ms=tk[0], error=err)
    return replace(result, rows=tuple(rows), torch=run)


def _measure(result: EngineSearchResult, sets, ref, repeats: int, warmup: int, dev: int) -> EngineSearchResult:
    from .api import _OUTPUT_OPERAND

    out_role = _OUTPUT_OPERAND[result.cudnn_direction]
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
    rows = [replace(r, measured=measured.get(i)) for i, r in enumerate(result.rows)]
    return replace(result, rows=_ranked(rows))


def _ranked(rows: Sequence[EngineRow]) -> tuple[EngineRow, ...]:
    """Built rows fastest first (measured_rank set), then the others."""
    ok = sorted((r for r in rows if r.ok), key=lambda r: (r.kernel_ms is None, r.kernel_ms or 0.0))
    out, rank = [], 0
    for r in ok:
        if r.kernel_ms is not None:
            r = replace(r, measured=replace(r.measured, measured_rank=rank))
            rank += 1
        out.append(r)
    return tuple(out + [r for r in rows if not r.ok])


def _refine(result: EngineSearchResult, sets, ref, ext, cp, seeds_n: int, cap: int, runtime_compiled: bool,
            repeats: int, warmup: int, dev: int) -> EngineSearchResult:
    """Builds every one-knob neighbour of the `seeds_n` fastest measured configurations torch would accept (up to
    `cap` new configurations), measures them like the others and merges them in."""
    seeds = sorted((r for r in result.succeeded if r.kernel_ms is not None and not r.torch_filter),
                   key=lambda r: r.kernel_ms)[:seeds_n]
    if not seeds:
        return result
    out = ext.engine_search(result.cudnn_direction, cp, [], False, cap, runtime_compiled, dev,
                            [(r.engine_id, [tuple(k) for k in r.plan.knobs]) for r in seeds])
    have = {(r.engine_id, r.knobs) for r in result.rows}
    new = _rows(out["plans"], result.cudnn_direction, result.dtype)
    new = [r for r in new if (r.engine_id, r.knobs) not in have]
    sub = _measure(replace(result, rows=tuple(new)), sets, ref, repeats, warmup, dev)
    return replace(result, rows=_ranked(result.rows + sub.rows), refined=len(new),
                   search_ms=result.search_ms + float(out["search_ms"]))


__all__ = ["find_engines", "identify_torch", "EngineRow", "EngineSearchResult", "TorchRun", "legacy_family",
           "torch_filter",
           "torch_candidates", "match_kernels", "Stats"]
