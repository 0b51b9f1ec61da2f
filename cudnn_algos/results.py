"""Every result type, in one place: frozen rows and searches (legacy algorithms, graph-API engine configurations,
torch's own op), model reports, and one JSON codec that writes and reads them all back.

Formatting (text tables, HTML, DataFrames, JSON) lives here; none of it needs a GPU. pandas is imported only by
``to_dataframe``. Files carry ``schema`` and ``kind``; ``load_json`` reads any of them back into equal objects.
"""
from __future__ import annotations

import dataclasses
import functools
import html
import json
import statistics
import types
import typing
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Iterable, Iterator, Sequence

from .errors import ResultFileError
from .files import atomic_write, read_json_object
from .problem import DIRECTIONS, Environment
from .spec import ConvShapes, ConvSpec

SCHEMA_VERSION = 3

__all__ = ["SCHEMA_VERSION", "DIRECTIONS", "Environment", "Stats", "MeasureConfig", "Measurement", "AlgoResult",
           "SearchResult", "SearchResults", "EngineRow", "TorchRun", "EngineSearchResult", "EngineSearches",
           "ProblemEntry", "EndToEnd", "LayerRow", "ModelReport", "load_json", "write_json", "read_json",
           "format_bytes", "format_ms", "aligned", "fidelity_table", "fidelity_pairs", "encode", "decode",
           "to_dict", "from_dict", "LONG_FORM_COLUMNS"]


# ============================================================================================ measurements

TEXT_WIDTH = 120  # what printed tables fit (the widest a terminal or a pasted block usually shows)

@dataclass(frozen=True)
class Stats:
    """Summary of timing samples, ms per call. ``spread`` is the inter-quartile range over the median."""

    median: float
    min: float
    max: float
    spread: float
    n: int
    samples: tuple[float, ...] = ()  # the raw samples, in the order they were taken

    @classmethod
    def of(cls, samples: Sequence[float]) -> "Stats":
        s = sorted(samples)
        med = statistics.median(s)
        iqr = (lambda q: q[2] - q[0])(statistics.quantiles(s, n=4, method="inclusive")) if len(s) >= 4 else s[-1] - s[0]
        return cls(median=med, min=s[0], max=s[-1], spread=iqr / med if med > 0 else 0.0, n=len(s),
                   samples=tuple(float(v) for v in samples))


@dataclass(frozen=True)
class MeasureConfig:
    repeats: int = 10  # samples per clock
    warmup: int = 3  # calls before the first sample
    l2: str = "warm"  # "warm": one operand set; "cold": rotate sets totalling > 3x the L2 cache
    check_clock: bool = False  # also time every row with the independent clock (torch.profiler's CUPTI records)
    reference: str = "cuda"  # where the float64 reference is computed: "cuda" or "cpu"
    buffer_sets: int = 1  # filled in: operand sets rotated through
    prune: float = 0.0  # > 0: rows whose first call is over `prune` x the fastest first call get one sample


@dataclass(frozen=True)
class Measurement:
    """What we measured for one runnable row (legacy algorithm, engine configuration, or torch's own op).

    kernel_ms: the kernel clock, CUPTI activity records of K eager back-to-back calls (kernels, memsets, copies;
        the union of their intervals) / K: what Nsight Systems shows for the same calls.
    throughput_ms: CUDA events around K back-to-back calls / K (what a training loop sees; the host's pace when the
        host is slower). host_ms: host wall time of that loop / K (the CPU cost of one call).
    reference_kernel_ms: the independent check (``check_clock``): torch.profiler's CUPTI records of K eager calls in
        a session of its own, union / K.
    """

    kernel_ms: Stats | None
    throughput_ms: Stats | None
    host_ms: Stats | None
    calls_per_sample: int
    kernel_clock: str = "cupti"  # "cupti", or "none" when the kernel clock could not run (error says why)
    kernel_calls: int = 0  # calls per kernel-clock sample
    kernels: tuple[str, ...] = ()  # kernels one call launched, as CUPTI names them (demangled)
    activities_per_call: float | None = None  # GPU activities (kernels, memsets, copies) per call
    reference_kernel_ms: float | None = None
    rel_err: float | None = None  # ||y - ref|| / ||ref||, ref in float64
    max_abs_err: float | None = None
    tflops: float | None = None  # FLOPs / kernel median
    pct_peak: float | None = None  # of this device's measured matmul peak for the dtype and math
    heuristic_rank: int | None = None
    measured_rank: int | None = None  # position by kernel median among the measured rows (0 = fastest)
    confirmed: bool = False  # re-measured on fresh operands after a screen (find_engines(screen=...))
    pruned: bool = False  # one sample per clock: its first call was over MeasureConfig.prune x the fastest
    error: str = ""  # why something could not be measured
    # where the search's time went for this row: (phase, start as Unix time s, duration s) for "first call",
    # "throughput" and "kernel clock" (host side; cudnn_algos.chrome_trace lays them out)
    phases: tuple[tuple[str, float, float], ...] = ()

    @property
    def host_bound(self) -> bool:
        """A call costs more host time than GPU time: back-to-back calls leave the GPU idle."""
        return bool(self.host_ms and self.kernel_ms and self.host_ms.median > self.kernel_ms.median)


class Saved:
    """Saving to JSON (``to_dict``/``to_json``; gzip for a .gz path): what every result type shares. load_json reads
    any of them back."""

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    def to_json(self, path: str | None = None, **kwargs: Any) -> str:
        return write_json(self.to_dict(), path, **kwargs)


class Timed:
    """What anything with a `measured` Measurement offers: its medians."""

    measured: Measurement | None

    @property
    def kernel_ms(self) -> float | None:
        """Median kernel time (the kernel clock), ms per call; None when not measured."""
        m = self.measured
        return m.kernel_ms.median if m is not None and m.kernel_ms is not None else None

    @property
    def host_ms(self) -> float | None:
        m = self.measured
        return m.host_ms.median if m is not None and m.host_ms is not None else None


class MeasuredRow(Timed):
    """A result row (legacy algorithm or engine configuration): a status and, when measured, a Measurement."""

    status: str

    @property
    def ok(self) -> bool:
        return self.status == "SUCCESS"


# ============================================================================================ legacy searches
@dataclass(frozen=True)
class AlgoResult(MeasuredRow):
    """One legacy algorithm under one math type, in one search.

    ``time_ms``: what cuDNN's search reported (ms; on cuDNN 9 it includes host-side set-up per call); None in
    heuristic mode and for failures. ``rank``: position in cuDNN's returned list (0 = its first choice).
    ``status``: cuDNN's status without ``CUDNN_STATUS_``, or ``NOT_RETURNED`` / ``WORKSPACE_LIMIT_EXCEEDED``.
    """

    direction: str  # cuDNN's direction
    algo: str
    algo_id: int
    status: str
    time_ms: float | None
    workspace_bytes: int | None
    deterministic: bool | None
    math_type: str | None
    rank: int | None
    note: str = ""
    status_code: int = -1  # cuDNN's numeric status; -1 for our own statuses
    measured: Measurement | None = None
    memory_format: str = ""  # the layout it was searched in (run() uses it)

    @property
    def name(self) -> str:
        return f"{self.algo}/{self.math_type}"


@dataclass(frozen=True)
class SearchResult(Saved):
    """Every legacy algorithm of one direction for one convolution problem.

    ``direction`` is the layer's (a transposed convolution's forward is cuDNN's ``backward_data``, recorded in
    ``cudnn_direction``). ``rows``: successful rows fastest first, then the rest by algorithm id.
    """

    rows: tuple[AlgoResult, ...]
    spec: ConvSpec
    shapes: ConvShapes
    direction: str
    cudnn_direction: str
    mode: str
    dtype: str
    memory_format: str
    math: str
    workspace_limit: int | None
    workspace_given: int | None
    search_ms: float
    env: Environment
    created: str = ""
    measure: MeasureConfig | None = None
    flops: int | None = None
    peak_tflops: dict[str, float] | None = None  # the device's measured matmul peak(s) used for pct_peak
    heuristic_choice: str | None = None  # cudnnGet..._v7's first choice, "ALGO/math"
    heuristic_regret: float | None = None  # its kernel median / the measured best's

    KIND = "legacy_search"

    @property
    def best(self) -> AlgoResult | None:
        """The fastest successful row (heuristic mode: cuDNN's first successful choice); None if none succeeded."""
        ok = [r for r in self.rows if r.ok]
        if not ok:
            return None
        measured = [r for r in ok if r.kernel_ms is not None]
        if measured:
            return min(measured, key=lambda r: r.kernel_ms)
        if self.mode == "heuristic":
            return min(ok, key=lambda r: r.rank if r.rank is not None else 1 << 30)
        timed = [r for r in ok if r.time_ms is not None]
        return min(timed, key=lambda r: r.time_ms) if timed else ok[0]

    @property
    def succeeded(self) -> tuple[AlgoResult, ...]:
        return tuple(r for r in self.rows if r.ok)

    @property
    def is_measured(self) -> bool:
        return any(r.measured is not None for r in self.rows)

    def __iter__(self) -> Iterator[AlgoResult]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def title(self) -> str:
        e = self.env
        return (f"{self.spec} {_dir(self.direction, self.cudnn_direction)} | input {_shape(self.shapes.input_shape)} "
                f"{self.dtype} {self.memory_format} | math {self.math} | mode {self.mode} | {e.gpu_name} "
                f"sm_{e.compute_capability.replace('.', '')} cuDNN {Environment.version_str(e.cudnn_runtime)}")

    MEASURED_HEADERS = ("algorithm", "math", "status", "kernel", "±", "thrpt", "host", "cuDNN", "vs best", "TFLOP/s",
                        "% peak", "rel err", "workspace", "det.", "h-rank", "m-rank", "note")
    HEADERS = ("algorithm", "id", "status", "cuDNN", "vs best", "workspace", "det.", "math", "rank", "note")

    def _headers_and_rows(self):
        best = self.best
        out = []
        if self.is_measured:
            bk = best.kernel_ms if best is not None else None
            for r in self.rows:
                m = r.measured
                note = "; ".join(x for x in (r.note, _measure_note(m)) if x)
                out.append([r.algo, r.math_type or "-", r.status, _st(m, "kernel_ms"),
                            f"{100 * m.kernel_ms.spread:.0f}%" if m and m.kernel_ms else "", _st(m, "throughput_ms"),
                            _st(m, "host_ms"), format_ms(r.time_ms),
                            f"{r.kernel_ms / bk:.2f}x" if (r.kernel_ms is not None and bk) else "",
                            f"{m.tflops:.1f}" if m and m.tflops is not None else "-",
                            f"{m.pct_peak:.0f}" if m and m.pct_peak is not None else "-",
                            f"{m.rel_err:.1e}" if m and m.rel_err is not None else "-",
                            format_bytes(r.workspace_bytes), _yes(r.deterministic),
                            _int(m.heuristic_rank if m else None), _int(m.measured_rank if m else None), note])
            return self.MEASURED_HEADERS, out, {3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15}
        bt = best.time_ms if best is not None else None
        for r in self.rows:
            rel = f"{r.time_ms / bt:.2f}x" if (r.ok and r.time_ms is not None and bt) else ""
            out.append([r.algo, str(r.algo_id), r.status, format_ms(r.time_ms), rel, format_bytes(r.workspace_bytes),
                        _yes(r.deterministic), r.math_type or "-", _int(r.rank), r.note])
        return self.HEADERS, out, {1, 3, 4, 5, 8}

    def text_table(self, width: int = TEXT_WIDTH) -> list[str]:
        """The rows as text in `width` columns, in the result's order (find() puts them fastest kernel first when
        measured, failures last); long math types, statuses and notes as keys with a legend; TFLOP/s, % peak and
        the ranks left out first when it does not fit. The full table is _repr_html_ / to_dataframe."""
        headers, rows, right = self._headers_and_rows()
        if not self.is_measured:
            return fit_table(headers, rows, right, width=width, legend={7: 9, 2: 13, 9: 24})
        return fit_table(headers, rows, right, width=width, legend={1: 9, 2: 13, 16: 16}, drop=(9, 15, 10, 14, 5, 8, 4))

    def __str__(self) -> str:
        lines = [self.title()]
        b = self.best
        tail = f"best: {b.algo} ({b.math_type})" if b else "best: none succeeded"
        if b is not None and b.kernel_ms is not None:
            tail += f" {format_ms(b.kernel_ms)} kernel (CUPTI, median of {b.measured.kernel_ms.n})"
        elif b is not None and b.time_ms is not None:
            tail += f" {format_ms(b.time_ms)} (cuDNN's reported time)"
        tail += f"; search took {self.search_ms:.1f} ms"
        if self.workspace_given is not None:
            tail += f"; workspace given {format_bytes(self.workspace_given)}"
        lines.append(tail)
        if self.measure is not None:
            regret = f"{self.heuristic_regret:.2f}x" if self.heuristic_regret is not None else "n/a"
            peaks = ", ".join(f"{k} {v:.0f} TFLOP/s" for k, v in (self.peak_tflops or {}).items())
            lines.append(f"heuristic's choice: {self.heuristic_choice or '-'} (regret {regret}); "
                         f"{(self.flops or 0) / 1e9:.2f} GFLOP per call; peak: {peaks or '-'}; L2 {self.measure.l2} "
                         f"({self.measure.buffer_sets} operand set(s)); {self.measure.repeats} samples after "
                         f"{self.measure.warmup} warm-up calls; times in ms")
        return "\n".join(_wrap(lines[:1]) + self.text_table() + _wrap(lines[1:]))

    def _repr_html_(self) -> str:
        headers, rows, _ = self._headers_and_rows()
        return _html_table(self.title(), headers, rows)

    def to_records(self, **context: Any) -> list[dict[str, Any]]:
        """Long-form records (one per algorithm row; see LONG_FORM_COLUMNS)."""
        return [_record(self, _legacy_candidate(r), r.measured, context) for r in self.rows]

    def to_dataframe(self):
        """The long-form table (LONG_FORM_COLUMNS): one row per algorithm with its problem, clocks (statistics and
        raw samples), accuracy and environment as columns (needs pandas)."""
        return _dataframe(self.to_records())



class ResultSet(Saved):
    """What a collection of searches (``results``) offers: iteration, text, HTML, one long-form table, JSON."""

    results: tuple

    def __iter__(self) -> Iterator[Any]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __str__(self) -> str:
        return "\n\n".join(str(r) for r in self.results)

    def _repr_html_(self) -> str:
        return "".join(r._repr_html_() for r in self.results)

    def to_dataframe(self):
        return _dataframe([rec for r in self.results for rec in r.to_records()])



@dataclass(frozen=True)
class SearchResults(ResultSet):
    """The three directions' searches of one problem (``find(..., direction="all")``)."""

    results: tuple[SearchResult, ...] = field(default_factory=tuple)

    KIND = "legacy_searches"

    def __getitem__(self, key: int | str) -> SearchResult:
        if isinstance(key, str):
            for r in self.results:
                if r.direction == key:
                    return r
            raise KeyError(f"{key!r}: directions here are {[r.direction for r in self.results]}")
        return self.results[key]

    @property
    def best(self) -> dict[str, AlgoResult | None]:
        return {r.direction: r.best for r in self.results}


# ============================================================================================ engine searches
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
    sources: tuple[str, ...]  # heuristic_instant / heuristic_a / heuristic_b / fallback / exhaustive / refine
    heuristic_ranks: tuple[tuple[str, int], ...]
    measured: Measurement | None = None
    torch_rank: int | None = None  # position among the configurations torch's benchmark mode times (None: not)
    torch_filter: str = ""  # why torch's convolution would never consider this configuration ("" if it would)
    torch_ran: tuple[str, ...] = ()  # "benchmark_on" / "benchmark_off": torch's own call ran these kernels
    memory_format: str = ""  # the layout its plan was built for (run() uses it)
    plan: Any = field(default=None, compare=False, repr=False, metadata={"saved": False})  # live plan, this process

    def rank(self, source: str) -> int | None:
        """Position in a heuristic list ("heuristic_a", "heuristic_instant", "heuristic_b", "fallback")."""
        return next((r for s, r in self.heuristic_ranks if s == source), None)

    @property
    def rank_a(self) -> int | None:
        return self.rank("heuristic_a")

    @property
    def kernels(self) -> tuple[str, ...]:
        return self.measured.kernels if self.measured is not None else ()


@dataclass(frozen=True)
class TorchRun(Timed):
    """What torch's own cuDNN convolution ran for this problem, identified by its kernels, and what it cost."""

    mode: str  # "benchmark_on" or "benchmark_off": cudnn.benchmark for torch's calls
    kernels: tuple[str, ...]  # kernels one call of torch's op launched (the kernel clock's records)
    matches: tuple[str, ...]  # names of the configurations that launched exactly these kernels (or, see match)
    match: str  # "exact", "partial" (a configuration's kernels are a subset of torch's), or "none"
    first_call_ms: float | None  # host ms of torch's first call of the shape (benchmark on: its search)
    benchmark_limit: int  # torch.backends.cudnn.benchmark_limit
    measured: Measurement | None = None  # torch's op timed like the rows, with its error against float64
    where: str = "this process"  # or "fresh process" (benchmark off, for a profile)
    error: str = ""

    def describe(self) -> str:
        what = {"exact": "ran", "partial": "ran (its kernels include those of)",
                "none": "ran none of these configurations' kernels"}[self.match]
        names = ", ".join(self.matches[:3]) + (f" (+{len(self.matches) - 3} with the same kernels)"
                                               if len(self.matches) > 3 else "")
        return f"torch ({self.mode.replace('_', ' ')}) {what}{' ' + names if self.matches else ''}"


@dataclass(frozen=True)
class EngineSearchResult(Saved):
    rows: tuple[EngineRow, ...]
    spec: ConvSpec
    shapes: ConvShapes
    direction: str
    cudnn_direction: str
    dtype: str
    memory_format: str
    engine_count: int
    search_ms: float  # host ms to enumerate and build the plans (refine's included)
    exhaustive: bool
    env: Environment
    flops: int = 0
    created: str = ""
    torch_runs: tuple[TorchRun, ...] = ()  # torch's own op: benchmark on and/or off
    refined: int = 0  # configurations added by refine
    measure: MeasureConfig | None = None
    measure_s: float = 0.0  # wall seconds spent timing and checking

    KIND = "engine_search"

    @property
    def torch(self) -> TorchRun | None:
        """torch's run in this process (benchmark on or off as it was), else the first one recorded."""
        here = [t for t in self.torch_runs if t.where == "this process"]
        return (here or list(self.torch_runs) or [None])[0]

    def torch_run(self, mode: str) -> TorchRun | None:
        return next((t for t in self.torch_runs if t.mode == mode), None)

    @property
    def succeeded(self) -> tuple[EngineRow, ...]:
        return tuple(r for r in self.rows if r.ok)

    @property
    def best(self) -> EngineRow | None:
        """The fastest measured configuration (confirmed ones first when a screen ran); unmeasured: heuristic A's
        first."""
        timed = [r for r in self.succeeded if r.kernel_ms is not None]
        conf = [r for r in timed if r.measured.confirmed]
        if conf or timed:
            return min(conf or timed, key=lambda r: r.kernel_ms)
        ranked = [r for r in self.succeeded if r.rank_a is not None]
        return min(ranked, key=lambda r: r.rank_a) if ranked else (self.succeeded[0] if self.succeeded else None)

    @property
    def best_eligible(self) -> EngineRow | None:
        """The fastest measured configuration torch's own convolution would also accept (not filtered out by its
        numerical rules): the fair one to compare with torch. Confirmed measurements first."""
        timed = [r for r in self.succeeded if r.kernel_ms is not None and not r.torch_filter]
        conf = [r for r in timed if r.measured.confirmed]
        return min(conf or timed, key=lambda r: r.kernel_ms) if timed else None

    @property
    def torch_candidates(self) -> int:
        return sum(r.torch_rank is not None for r in self.rows)

    HEADERS = ("config", "family", "status", "kernel", "thrpt", "host", "rel err", "workspace", "det.", "heur. A",
               "torch", "sources", "notes")

    def title(self) -> str:
        return (f"{self.spec} {_dir(self.direction, self.cudnn_direction)} | input "
                f"{'x'.join(map(str, self.shapes.input_shape))} {self.dtype} {self.memory_format} | engines: "
                f"{self.engine_count} in cuDNN, {len(self.rows)} configurations "
                f"{f'({self.refined} by refine) ' if self.refined else ''}({len(self.succeeded)} built) | "
                f"{self.env.gpu_name} cuDNN {Environment.version_str(self.env.cudnn_runtime)} | times in ms")

    def _table(self):
        rows = []
        for r in self.rows:
            m = r.measured
            notes = ",".join(r.numerical_notes + r.behavior_notes)
            notes = "; ".join(x for x in (notes, _measure_note(m)) if x)
            rows.append([r.name, r.family, r.status + (f" ({r.stage})" if r.stage else ""), _st(m, "kernel_ms"),
                         _st(m, "throughput_ms"), _st(m, "host_ms"),
                         f"{m.rel_err:.1e}" if m and m.rel_err is not None else "-", format_bytes(r.workspace_bytes),
                         _yes(r.deterministic), _int(r.rank_a), _torch_cell(r),
                         ",".join(s.replace("heuristic_", "h") for s in r.sources), notes])
        return rows

    TEXT_HEADERS = ("config", "status", "kernel", "thrpt", "host", "rel err", "workspace", "det.", "A#", "torch",
                    "src", "notes")
    _SRC = {"heuristic_instant": "I", "heuristic_a": "A", "heuristic_b": "B", "fallback": "F", "exhaustive": "X",
            "refine": "R", "exact": "E"}

    def text_table(self, width: int = TEXT_WIDTH) -> list[str]:
        """The rows fastest first by kernel time (unmeasured, then failed rows last) in `width` columns: long
        configuration names, statuses, torch cells and notes as keys with a legend (names stay whole, pasteable
        into --config); the full table is _repr_html_ / to_dataframe."""
        order = sorted(self.rows, key=lambda r: (not r.ok, r.kernel_ms is None, r.kernel_ms or 0.0))
        rows = []
        for r in order:
            m = r.measured
            notes = ",".join(r.numerical_notes + r.behavior_notes)
            notes = "; ".join(x for x in (notes, f"stopped at {r.stage}" if r.stage else "", _measure_note(m)) if x)
            rows.append([r.name, r.status, _st(m, "kernel_ms"), _st(m, "throughput_ms"), _st(m, "host_ms"),
                         f"{m.rel_err:.1e}" if m and m.rel_err is not None else "-", format_bytes(r.workspace_bytes),
                         _yes(r.deterministic), _int(r.rank_a), _torch_cell(r),
                         "".join(self._SRC.get(x, "?") for x in r.sources), notes or "-"])
        lines = fit_table(self.TEXT_HEADERS, rows, right={2, 3, 4, 5, 6, 8}, width=width,
                          legend={0: 16, 1: 13, 9: 12, 11: 18}, drop=(10, 7, 3))
        return lines + _wrap(["(A#: rank in heuristic A's list; src: where a configuration came from: I, A, B heuristic"
                              " lists, F fallback, X exhaustive, R refine, E asked for by name)"], width)

    def __str__(self) -> str:
        b = self.best
        tail = f"best: {b.name}" + (f" {format_ms(b.kernel_ms)} kernel" if b and b.kernel_ms else "") if b else \
            "best: none"
        tail = f"{tail}; search (enumerate + build plans) took {self.search_ms:.0f} ms"
        return "\n".join(_wrap([self.title()]) + self.text_table() + _wrap([tail, *self.torch_lines()]))

    def _repr_html_(self) -> str:
        return _html_table(self.title(), self.HEADERS, self._table())

    def torch_lines(self) -> list[str]:
        """What torch's own convolution ran and cost beside our best."""
        out = []
        for t in self.torch_runs:
            out.append(f"{t.describe()} ({t.where}); kernels: {', '.join(k[:60] for k in t.kernels) or 'none seen'}")
            b = self.best_eligible
            if t.kernel_ms is not None:
                line = (f"torch's op ({t.mode.replace('_', ' ')}): kernel {format_ms(t.kernel_ms)}, throughput "
                        f"{_st(t.measured, 'throughput_ms')}, host {format_ms(t.host_ms)} per call")
                if b is not None and b.kernel_ms is not None:
                    line += (f"; best configuration torch would accept, {b.name}: kernel {format_ms(b.kernel_ms)} "
                             f"({b.kernel_ms / t.kernel_ms:.3f}x torch's), host {format_ms(b.host_ms)}")
                out.append(line)
        if self.torch_runs:
            lim = self.torch_runs[0].benchmark_limit or "no limit"
            out.append(f"torch's benchmark mode times {self.torch_candidates} of these configurations (heuristic "
                       f"INSTANT's list then the fallback list, minus what it filters out; its limit: {lim})")
        return out

    def to_records(self, **context: Any) -> list[dict[str, Any]]:
        """Long-form records: one per configuration, then one per torch run (candidate_kind torch_on/torch_off)."""
        out = [_record(self, _engine_candidate(r), r.measured, context) for r in self.rows]
        out += [_record(self, _torch_candidate(t), t.measured, context) for t in self.torch_runs]
        return out

    def to_dataframe(self):
        return _dataframe(self.to_records())



@dataclass(frozen=True)
class EngineSearches(ResultSet):
    """Several engine searches (``cudnn-algos engines --direction all``)."""

    results: tuple[EngineSearchResult, ...] = ()

    KIND = "engine_searches"


def _torch_cell(r: EngineRow) -> str:
    parts = []
    if r.torch_ran:
        parts.append("RAN(" + ",".join(m.replace("benchmark_", "") for m in r.torch_ran) + ")")
    if r.torch_rank is not None:
        parts.append(f"#{r.torch_rank}")
    if r.torch_filter:
        parts.append(f"never ({r.torch_filter})")
    return " ".join(parts) or "-"


# ============================================================================================ model reports
@dataclass(frozen=True)
class ProblemEntry:
    """One distinct convolution problem of a model, the layers that run it, and its searches per direction:
    ``engines`` (graph-API engine configurations, torch's own op beside them) and, where asked, ``legacy``."""

    spec: ConvSpec
    input_shape: tuple[int, ...]
    dtype: str
    memory_format: str
    layers: tuple[str, ...]  # qualified module names, one per use (a module called twice appears twice)
    engines: dict[str, EngineSearchResult] = field(default_factory=dict)
    legacy: dict[str, SearchResult] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)  # direction -> why its search failed as a whole

    @property
    def count(self) -> int:
        return len(self.layers)


@dataclass(frozen=True)
class EndToEnd:
    """torch's benchmark mode on the whole model: each mode in its own fresh process (first step, then the median
    step after warm-up). One process cannot compare the two: torch keeps the first cuDNN plan it picks for each
    shape for the life of the process, whatever cudnn.benchmark says later."""

    backward: bool  # a step is forward + backward when True
    iterations: int
    step_ms_off: float | None  # median step time, cudnn.benchmark = False
    step_ms_on: float | None  # median step time, cudnn.benchmark = True (after its warm-up)
    first_step_s_off: float | None = None  # a fresh process's first step, benchmark off
    first_step_s_on: float | None = None  # ... benchmark on: includes cuDNN's search for every new shape
    note: str = ""
    where: str = "fresh processes"

    @property
    def step_change_pct(self) -> float | None:
        if self.step_ms_on is None or not self.step_ms_off:
            return None
        return 100.0 * (self.step_ms_on - self.step_ms_off) / self.step_ms_off

    @property
    def warmup_cost_s(self) -> float | None:
        if self.first_step_s_on is None or self.first_step_s_off is None:
            return None
        return self.first_step_s_on - self.first_step_s_off

    def sentence(self) -> str:
        kind = "forward+backward" if self.backward else "forward"
        if self.step_change_pct is None:
            if self.step_ms_off:
                return (f"benchmark mode: not compared ({kind} step {self.step_ms_off:.2f} ms with it off"
                        f"{'' if not self.note else '; ' + self.note})")
            return f"benchmark mode: not compared ({self.note or 'no step time'})"
        s = (f"benchmark mode: {self.step_change_pct:+.1f}% per step ({self.step_ms_off:.2f} -> "
             f"{self.step_ms_on:.2f} ms, {kind}, {self.where})")
        if self.warmup_cost_s is not None:
            s += (f", {self.warmup_cost_s:.2f} s to warm up (first step in a fresh process: "
                  f"{self.first_step_s_off:.2f} s off, {self.first_step_s_on:.2f} s on)")
            if self.step_ms_on < self.step_ms_off:
                s += f"; pays for itself after {self.warmup_cost_s * 1e3 / (self.step_ms_off - self.step_ms_on):,.0f} steps"
        elif self.note:
            s += f"; warm-up cost not measured: {self.note}"
        return s


@dataclass(frozen=True)
class LayerRow:
    """One layer use in one direction of a model report (what its DataFrame holds). Times: kernel clock, ms."""

    layer: str
    problem: int
    direction: str
    spec: str
    input_shape: tuple[int, ...]
    dtype: str
    memory_format: str
    best: str | None  # the fastest configuration torch would accept
    best_source: str | None  # which list it came from (heuristic_*, fallback, refine, exhaustive)
    best_kernel_ms: float | None
    best_host_ms: float | None
    best_rel_err: float | None
    torch_on: str | None  # what torch ran with benchmark on (its configuration, by kernels)
    torch_on_kernel_ms: float | None
    torch_on_host_ms: float | None
    torch_off: str | None
    torch_off_kernel_ms: float | None
    torch_off_host_ms: float | None
    legacy_best: str | None
    legacy_best_kernel_ms: float | None
    configs: int  # configurations listed
    built: int

    @property
    def ratio_on(self) -> float | None:
        return _ratio(self.best_kernel_ms, self.torch_on_kernel_ms)

    @property
    def ratio_off(self) -> float | None:
        return _ratio(self.best_kernel_ms, self.torch_off_kernel_ms)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _run_name(t: TorchRun | None) -> str | None:
    if t is None:
        return None
    if not t.matches:
        return f"({t.match})"
    return t.matches[0] + (f" (+{len(t.matches) - 1})" if len(t.matches) > 1 else "")


@dataclass(frozen=True)
class ModelReport(Saved):
    """A model's convolutions searched in cuDNN 9's engine space, per distinct problem and direction, beside what
    torch runs with benchmark off and on; totals; the end-to-end benchmark-mode check."""

    model: str
    problems: tuple[ProblemEntry, ...]
    directions: tuple[str, ...]
    env: Environment | None
    e2e: EndToEnd | None = None
    interrupted: bool = False
    search_s: float = 0.0  # wall seconds of the searches (enumerate, build, time, check)
    stopped_by: str = ""  # with interrupted: "budget" (budget_s ran out: a re-run with the store continues) or "ctrl-c"
    torch_search_ms: float = 0.0  # Σ torch's benchmark-on first calls of each problem (its search), this process
    wall_s: float = 0.0
    n_conv_calls: int = 0
    created: str = ""
    measure: MeasureConfig | None = None

    KIND = "model_report"

    def layer_rows(self) -> list[LayerRow]:
        out = []
        for pi, p in enumerate(self.problems):
            for d in self.directions:
                r = p.engines.get(d)
                if r is None:
                    continue
                best, on, off = r.best_eligible, r.torch_run("benchmark_on"), r.torch_run("benchmark_off")
                leg = p.legacy.get(d)
                lb = leg.best if leg is not None else None
                for name in p.layers:
                    out.append(LayerRow(
                        layer=name, problem=pi, direction=d, spec=str(p.spec), input_shape=p.input_shape,
                        dtype=p.dtype, memory_format=p.memory_format, best=best.name if best else None,
                        best_source=",".join(best.sources) if best else None,
                        best_kernel_ms=best.kernel_ms if best else None, best_host_ms=best.host_ms if best else None,
                        best_rel_err=best.measured.rel_err if best and best.measured else None,
                        torch_on=_run_name(on), torch_on_kernel_ms=on.kernel_ms if on else None,
                        torch_on_host_ms=on.host_ms if on else None, torch_off=_run_name(off),
                        torch_off_kernel_ms=off.kernel_ms if off else None,
                        torch_off_host_ms=off.host_ms if off else None,
                        legacy_best=lb.name if lb else None, legacy_best_kernel_ms=lb.kernel_ms if lb else None,
                        configs=len(r.rows), built=len(r.succeeded)))
        return out

    def totals(self) -> dict[str, dict[str, float]]:
        """Per direction and "all": Σ over every layer use of the best configuration's and torch-on's kernel time
        (ms) where both are known, and of torch-off's where it is known (best_off_ms: the best's over the same
        uses); ratios best/on and best/off; Σ host time per call of the best's and torch-on's paths."""
        tot: dict[str, dict[str, float]] = {}
        for row in self.layer_rows():
            for key in (row.direction, "all"):
                t = tot.setdefault(key, {"best_ms": 0.0, "on_ms": 0.0, "off_ms": 0.0, "best_off_ms": 0.0,
                                         "layers": 0, "missing": 0, "host_best_ms": 0.0, "host_on_ms": 0.0})
                t["layers"] += 1
                if row.best_kernel_ms is None or row.torch_on_kernel_ms is None:
                    t["missing"] += 1
                    continue
                t["best_ms"] += row.best_kernel_ms
                t["on_ms"] += row.torch_on_kernel_ms
                if row.torch_off_kernel_ms:
                    t["off_ms"] += row.torch_off_kernel_ms
                    t["best_off_ms"] += row.best_kernel_ms
                t["host_best_ms"] += row.best_host_ms or 0.0
                t["host_on_ms"] += row.torch_on_host_ms or 0.0
        for t in tot.values():
            t["ratio_on"] = t["best_ms"] / t["on_ms"] if t["on_ms"] else None
            t["ratio_off"] = t["best_off_ms"] / t["off_ms"] if t["off_ms"] else None
        order = [d for d in self.directions if d in tot] + (["all"] if "all" in tot else [])
        return {k: tot[k] for k in order}

    def summary_lines(self) -> list[str]:
        lines = [f"{self.model}: {self.n_conv_calls} convolution calls, {len(self.problems)} distinct problems, "
                 f"{', '.join(self.directions)}; cuDNN's engine configurations beside torch's convolution; kernel "
                 "clock: CUPTI"]
        if self.interrupted:
            why = {"budget": "the time budget ran out", "ctrl-c": "Ctrl-C"}.get(self.stopped_by,
                                                                                 "Ctrl-C or the time budget")
            lines.append(f"STOPPED EARLY ({why}): the report covers only the searches done before it stopped")
        failed = [f"#{i} {d}: {e}" for i, p in enumerate(self.problems) for d, e in p.errors.items()]
        if failed:
            lines.append(f"{len(failed)} search(es) failed and are left out of the totals: " + "; ".join(failed[:5])
                         + (" ..." if len(failed) > 5 else ""))
        for d, t in self.totals().items():
            miss = f" ({int(t['missing'])} layer uses without both times)" if t["missing"] else ""
            off = (f", off {t['off_ms']:.3f} (best/off {t['ratio_off']:.3f})" if t["ratio_off"] else "")
            on = f"best/on {t['ratio_on']:.3f}" if t["ratio_on"] else "best/on -"
            lines.append(f"total {d:15s} best {t['best_ms']:.3f} ms, torch on {t['on_ms']:.3f} ({on}){off}; host Σ "
                         f"{t['host_best_ms']:.3f} vs {t['host_on_ms']:.3f}{miss}")
        if self.e2e is not None:
            lines.append(self.e2e.sentence())
        lines.append(f"search took {self.search_s:.1f} s of {self.wall_s:.1f} s (torch's benchmark-mode search of "
                     f"the same problems in this process: {self.torch_search_ms / 1e3:.1f} s)")
        return lines

    TABLE_HEADERS = ("#", "layers", "convolution", "input")

    def table(self) -> tuple[list[str], list[list[str]]]:
        headers = list(self.TABLE_HEADERS)
        short = {"forward": "fwd", "backward_data": "bwd-data", "backward_filter": "bwd-filter"}
        for d in self.directions:
            headers += [f"{short[d]} best", "kernel", "torch on", "/on", "/off"]
        rows = []
        for pi, p in enumerate(self.problems):
            names = p.layers[0] + (f" +{p.count - 1}" if p.count > 1 else "")
            cells = [str(pi), names, str(p.spec).replace("kernel_size=", "k="), "x".join(map(str, p.input_shape))]
            for d in self.directions:
                r = p.engines.get(d)
                b = r.best_eligible if r else None
                on = r.torch_run("benchmark_on") if r else None
                off = r.torch_run("benchmark_off") if r else None
                ron = _ratio(b.kernel_ms if b else None, on.kernel_ms if on else None)
                roff = _ratio(b.kernel_ms if b else None, off.kernel_ms if off else None)
                cells += [_short_name(b.name) if b else "-", format_ms(b.kernel_ms if b else None),
                          format_ms(on.kernel_ms if on else None), f"{ron:.3f}" if ron else "-",
                          f"{roff:.3f}" if roff else "-"]
            rows.append(cells)
        return headers, rows

    def direction_table(self, direction: str) -> tuple[list[str], list[list[str]]]:
        """One direction's rows in a compact form that fits 120 columns: the problem as `Cin>Cout kxk s p g`, the
        input's spatial size (batch in the title, channels in the problem), the best configuration (knob values only), its kernel time and
        host time per call and torch on's (ms, three significant figures), the ratios to torch on and off."""
        headers = ["#", "layers", "problem", "input", "best", "kernel", "host", "torch", "host", "/on", "/off"]
        rows = []
        for pi, p in enumerate(self.problems):
            r = p.engines.get(direction)
            if r is None:
                continue
            b, on, off = r.best_eligible, r.torch_run("benchmark_on"), r.torch_run("benchmark_off")
            names = p.layers[0] + (f" +{p.count - 1}" if p.count > 1 else "")
            ron = _ratio(b.kernel_ms if b else None, on.kernel_ms if on else None)
            roff = _ratio(b.kernel_ms if b else None, off.kernel_ms if off else None)
            ms = lambda v: format_ms(v, 3)  # noqa: E731
            rows.append([str(pi), _clip(names, 17), _clip(_compact_spec(p.spec), 19),
                         "x".join(map(str, p.input_shape[2:])), _clip(_short_name(b.name), 15) if b else "-", ms(b.kernel_ms if b else None),
                         ms(b.host_ms if b else None), ms(on.kernel_ms if on else None), ms(on.host_ms if on else None),
                         f"{ron:.3f}" if ron else "-", f"{roff:.3f}" if roff else "-"])
        return headers, rows

    def __str__(self) -> str:
        """The summary, then one compact table per direction (full names: to_dataframe, to_html, rich_table)."""
        import textwrap

        s = [textwrap.fill(line, 120, subsequent_indent="    ") for line in self.summary_lines()]
        batches = sorted({p.input_shape[0] for p in self.problems})
        out = [s[0]]
        for d in self.directions:
            headers, rows = self.direction_table(d)
            out += ["", f"{d} (ms per call, batch {','.join(map(str, batches))}; best: the fastest configuration "
                        "torch would accept; torch: its op, benchmark on)",
                    *aligned(headers, rows, right={0, 5, 6, 7, 8, 9, 10})]
        return "\n".join(out + [""] + s[1:])

    def rich_table(self):
        from rich.table import Table

        headers, rows = self.table()
        t = Table(title=self.summary_lines()[0], show_lines=False)
        for h in headers:
            t.add_column(h, justify="right" if h in ("#", "kernel", "torch on", "/on", "/off") else "left")
        for r in rows:
            t.add_row(*r)
        t.caption = "\n".join(self.summary_lines()[1:])
        return t

    def _repr_html_(self) -> str:
        headers, rows = self.table()
        return _html_table("<br>".join(html.escape(s) for s in self.summary_lines()), headers, rows, escaped=True)

    def to_html(self, path: str | None = None) -> str:
        text = (f"<html><head><meta charset='utf-8'><title>{html.escape(self.model)}</title></head><body>"
                f"{self._repr_html_()}</body></html>")
        if path:
            atomic_write(path, text)
        return text

    def to_records(self) -> list[dict[str, Any]]:
        """Long-form records of every candidate of every search (engine, legacy, torch's runs), each with the
        model, the layers that run its problem and how many uses."""
        out = []
        for p in self.problems:
            ctx = {"model": self.model, "layers": ",".join(p.layers), "uses": p.count}
            for s in list(p.engines.values()) + list(p.legacy.values()):
                out += s.to_records(**ctx)
        return out

    def to_dataframe(self):
        """The long-form table (LONG_FORM_COLUMNS), comparable with any other result's (needs pandas)."""
        return _dataframe(self.to_records())

    def summary_dataframe(self):
        """One row per layer use and direction: the best configuration, torch on and off, ratios (the text table)."""
        recs = []
        for r in self.layer_rows():
            d = {f.name: getattr(r, f.name) for f in fields(r)}
            d.update(ratio_on=r.ratio_on, ratio_off=r.ratio_off, model=self.model,
                     gpu=self.env.gpu_name if self.env else None,
                     cudnn=Environment.version_str(self.env.cudnn_runtime) if self.env else None)
            recs.append(d)
        return _dataframe(recs)

    def to_csv(self, path: str) -> None:
        """The long-form table as CSV (samples as space-separated numbers)."""
        atomic_write(path, self.to_dataframe().to_csv(index=False))


    @classmethod
    def load(cls, source: str) -> "ModelReport":
        r = load_json(source)
        if not isinstance(r, ModelReport):
            raise ValueError(f"{source!r} holds a {type(r).__name__}, not a model report")
        return r

    def plot(self, out_dir: str, formats: Sequence[str] = ("png", "svg")) -> list[str]:
        from .plots import save_figures

        return save_figures(self, out_dir, formats)

    def searches(self) -> Iterator[EngineSearchResult | SearchResult]:
        for p in self.problems:
            yield from p.engines.values()
            yield from p.legacy.values()


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "~"


def _compact_spec(spec: ConvSpec) -> str:
    """Conv2d(128, 128, kernel_size=3, stride=2, padding=1, groups=4) -> 128>128 3x3 s2 p1 g4 (T: transposed)."""
    def dims(v):
        return "x".join(map(str, v)) if len(set(v)) > 1 else str(v[0])

    out = f"{spec.in_channels}>{spec.out_channels} {'x'.join(map(str, spec.kernel_size))}"
    if any(v != 1 for v in spec.stride):
        out += f" s{dims(spec.stride)}"
    if isinstance(spec.padding, str):
        out += f" p{spec.padding}"
    elif any(spec.padding):
        out += f" p{dims(spec.padding)}"
    if any(v != 1 for v in spec.dilation):
        out += f" d{dims(spec.dilation)}"
    if spec.groups != 1:
        out += f" g{spec.groups}"
    return out + (" T" if spec.transposed else "") + ("" if spec.padding_mode == "zeros" else f" {spec.padding_mode}")


def _short_name(name: str) -> str:
    """eng62{TILE_SIZE=0,TILEK=1,...} -> eng62{0,1,...}: knob values only (the names are in the DataFrame)."""
    head, _, knobs = name.partition("{")
    if not knobs:
        return name
    return head + "{" + ",".join(kv.partition("=")[2] for kv in knobs.rstrip("}").split(",")) + "}"


# ============================================================================================ fidelity
SIZE_CLASSES = (("< 10 us", 0.0, 0.010), ("10-20 us", 0.010, 0.020), ("20-50 us", 0.020, 0.050),
                (">= 50 us", 0.050, float("inf")))


def fidelity_pairs(results: Iterable[Any]) -> list[dict[str, Any]]:
    """(row kind, kernel ms, reference ms) for every measurement that has both clocks: legacy rows, engine rows and
    torch's op, in searches and model reports."""
    out = []

    def add(kind: str, name: str, m: Measurement | None) -> None:
        if m is not None and m.kernel_ms is not None and m.reference_kernel_ms:
            out.append({"kind": kind, "name": name, "kernel_ms": m.kernel_ms.median, "reference_ms": m.reference_kernel_ms,
                        "events_ms": m.throughput_ms.median if m.throughput_ms else None,
                        "activities_per_call": m.activities_per_call})

    def visit(r: Any) -> None:
        if isinstance(r, (ModelReport, SearchResults, EngineSearches)):
            for s in (r.searches() if isinstance(r, ModelReport) else r.results):
                visit(s)
        elif isinstance(r, SearchResult):
            for row in r.rows:
                add("legacy", row.name, row.measured)
        elif isinstance(r, EngineSearchResult):
            for row in r.rows:
                add("engine", row.name, row.measured)
            for t in r.torch_runs:
                add("torch op", f"torch {t.mode}", t.measured)

    for r in results:
        visit(r)
    return out


def traced_high(p: dict[str, Any], tolerance: float = 0.05) -> bool:
    """The reference reads more than the same calls took with no CUPTI client attached (the events clock, back to back):
    no union of kernel intervals fits in more time than the calls' events window, so the tracing itself stretched the
    work (seen on candidates that launch hundreds of kernels per call; benchmarks/cupti_overhead.py measures it)."""
    return p.get("events_ms") is not None and p["reference_ms"] > p["events_ms"] * (1 + tolerance)


def fidelity_table(results: Iterable[Any], tolerance: float = 0.05) -> list[str]:
    """Agreement of the kernel clock with the independent clock (torch.profiler's CUPTI records), by kernel size
    class and by row kind: the share of rows within `tolerance`, the median |ratio - 1|, the worst. Rows whose
    reference reads above the uninstrumented events clock of the same calls (:func:`traced_high`) are counted apart,
    and the share over every row is printed too."""
    pairs = fidelity_pairs(results)
    if not pairs:
        return ["fidelity: no row has both clocks (measure with check_clock=True)"]
    traced = [p for p in pairs if traced_high(p, tolerance)]
    kept = [p for p in pairs if not traced_high(p, tolerance)]
    lines = [f"fidelity of the kernel clock against torch.profiler's CUPTI records (eager calls), {len(kept)} rows"
             + (f" ({len(traced)} more apart, below)" if traced else "")
             + f"; share within {100 * tolerance:.0f}% (target >= 95% in every class):",
             f"{'class':<10} " + " ".join(f"{k:>22}" for k in ("legacy", "engine", "torch op", "all"))]
    for label, lo, hi in SIZE_CLASSES:
        cells = []
        for kind in ("legacy", "engine", "torch op", None):
            dev = [abs(p["kernel_ms"] / p["reference_ms"] - 1) for p in kept
                   if lo <= p["reference_ms"] < hi and (kind is None or p["kind"] == kind)]
            cells.append(f"{100 * sum(d <= tolerance for d in dev) / len(dev):5.1f}% of {len(dev):4d}, "
                         f"med {100 * statistics.median(dev):4.1f}%" if dev else f"{'-':>22}")
        lines.append(f"{label:<10} " + " ".join(f"{c:>22}" for c in cells))

    def share(ps):
        return 100 * sum(abs(p["kernel_ms"] / p["reference_ms"] - 1) <= tolerance for p in ps) / len(ps)

    dev = sorted(kept, key=lambda p: -abs(p["kernel_ms"] / p["reference_ms"] - 1))
    if kept:
        lines.append(f"all: {share(kept):.1f}% within {100 * tolerance:.0f}%; worst: " + "; ".join(
            f"{p['kind']} {p['name']} {format_ms(p['kernel_ms'])} vs {format_ms(p['reference_ms'])}"
            for p in dev[:3]))
    if traced:
        acts = [p["activities_per_call"] for p in traced if p.get("activities_per_call")]
        lines.append(
            f"apart: {len(traced)} rows whose reference read above the events clock of the same calls with no CUPTI "
            f"client (median reference/events {statistics.median(p['reference_ms'] / p['events_ms'] for p in traced):.2f}"
            f", kernel clock/events {statistics.median(p['kernel_ms'] / p['events_ms'] for p in traced):.2f}"
            + (f", median {statistics.median(acts):.0f} GPU activities per call" if acts else "")
            + f"): tracing stretched them; counting them too, {share(pairs):.1f}% of {len(pairs)} rows agree")
    return _wrap(lines)  # names whole (a wrapped line breaks between words only)


# ============================================================================================ JSON
_KINDS: dict[str, type] = {}


def _register(*classes: type) -> None:
    for c in classes:
        _KINDS[c.KIND] = c


def encode(v: Any) -> Any:
    """JSON-ready data of a result object (dataclasses as dicts, tuples as lists; live plans left out)."""
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: encode(getattr(v, f.name)) for f in fields(v) if f.metadata.get("saved", True)}
    if isinstance(v, (tuple, list)):
        return [encode(x) for x in v]
    if isinstance(v, dict):
        return {str(k): encode(x) for k, x in v.items()}
    return v


def to_dict(obj: Any) -> dict[str, Any]:
    """A result as JSON-ready data, with ``schema`` and ``kind`` so that load_json knows what it holds."""
    return {"schema": SCHEMA_VERSION, "kind": obj.KIND, **encode(obj)}


def decode(tp: Any, v: Any) -> Any:
    """The object of type `tp` that encode() wrote as `v` (keys it does not know are ignored)."""
    return _decoder(tp)(v)


@functools.lru_cache(maxsize=None)
def _decoder(tp: Any) -> Callable[[Any], Any]:
    """decode() for one type, worked out once per type (type hints, origins, field lists) instead of once per
    value: that work was most of loading a large result."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return _decoder(args[0])
        dcs = [a for a in args if dataclasses.is_dataclass(a)]
        if dcs:
            inner = _decoder(dcs[0])
            return lambda v: None if v is None else inner(v) if isinstance(v, dict) else _tuples(v)
        return _tuples  # e.g. ConvSpec's `tuple | int | str` fields
    if dataclasses.is_dataclass(tp):
        return _dataclass_decoder(tp)
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            item = _decoder(args[0])
            return lambda v: None if v is None else tuple(item(x) for x in v)
        if args:
            items = [_decoder(a) for a in args]
            return lambda v: None if v is None else tuple(f(x) for f, x in zip(items, v))
        return lambda v: None if v is None else tuple(v)
    if origin is dict:
        value = _decoder(typing.get_args(tp)[1])
        return lambda v: None if v is None else {k: value(x) for k, x in v.items()}
    if tp is float:
        return lambda v: float(v) if isinstance(v, int) and not isinstance(v, bool) else v
    return lambda v: v


def _dataclass_decoder(tp: type) -> Callable[[Any], Any]:
    fields_: list[tuple[str, Callable[[Any], Any]]] = []  # filled at the first call (types may refer to each other)

    def dec(v: Any) -> Any:
        if v is None:
            return None
        if not isinstance(v, dict):
            raise ValueError(f"a {tp.__name__} is a JSON object, not {type(v).__name__}")
        if not fields_:  # one assignment: a second thread racing here computes the same list
            hints = typing.get_type_hints(tp)
            fields_[:] = [(f.name, _decoder(hints[f.name])) for f in fields(tp)
                          if f.init and f.metadata.get("saved", True)]
        return tp(**{name: f(v[name]) for name, f in fields_ if name in v})

    return dec


def _tuples(v: Any) -> Any:
    return tuple(_tuples(x) for x in v) if isinstance(v, list) else v  # (None stays None)


def from_dict(d: dict[str, Any]) -> Any:
    """The result object a to_dict() wrote; ValueError naming the schema when it was written by another version,
    or saying what is wrong when the content is not a result's (a field of the wrong type)."""
    if not isinstance(d, dict):
        raise ValueError(f"a saved result is a JSON object, not {type(d).__name__}")
    schema, kind = d.get("schema"), d.get("kind")
    if "schema" not in d and "traceEvents" in d:
        raise ValueError("this is a Chrome trace (show --trace writes them), not a saved result: open it in Perfetto "
                         "or chrome://tracing")
    if schema != SCHEMA_VERSION or kind not in _KINDS:
        raise ValueError(f"this file holds result schema {schema!r} (kind {kind!r}); this version of cudnn_algos reads "
                         f"schema {SCHEMA_VERSION} ({', '.join(_KINDS)}): re-run the search to compare")
    try:
        return decode(_KINDS[kind], d)
    except (TypeError, AttributeError, KeyError, IndexError, ValueError, RecursionError) as e:
        raise ValueError(f"not a valid saved {kind}: {type(e).__name__}: {str(e)[:200]}") from None


def write_json(d: dict[str, Any], path: str | None = None, **kwargs: Any) -> str:
    """JSON text of `d` (strict: no NaN), also written to `path` when given (gzip-compressed for a .gz path), to a
    temporary file renamed over it (a crash leaves the old file or the new one)."""
    text = json.dumps(d, indent=kwargs.pop("indent", 1), allow_nan=False, **kwargs)
    if path is not None:
        atomic_write(path, text)
    return text


def read_json(source: str) -> dict[str, Any]:
    """A JSON object from a string holding it or from a file path (gzip read by its first bytes, inflation
    bounded: cudnn_algos.files.read_text). ResultFileError names a file that is not one."""
    if source.lstrip().startswith("{"):
        return json.loads(source)
    return read_json_object(source)


def load_json(source: str) -> Any:
    """Reads what any result's ``to_json`` wrote (a JSON string or a file path) back into an equal object.
    ResultFileError (a ValueError) names a file that is damaged, foreign or not a result, and says what was
    wrong."""
    d = read_json(source)
    try:
        return from_dict(d)
    except ValueError as e:
        if source.lstrip().startswith("{"):
            raise
        raise ResultFileError(source, str(e)) from None


# ============================================================================================ formatting helpers
def format_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    if n < 1024:
        return f"{n} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024.0
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
    return str(n)  # unreachable


def format_ms(v: float | None, digits: int = 4) -> str:
    """A time in ms with `digits` significant figures (0.007312, 0.01712, 0.3146, 12.31)."""
    if v is None:
        return "-"
    return f"{v:.{digits}g}" if v >= 1e-4 else f"{v:.2e}"


def _st(m: Measurement | None, attr: str) -> str:
    st = getattr(m, attr) if m is not None else None
    return format_ms(st.median) if st is not None else "-"


def _measure_note(m: Measurement | None) -> str:
    if m is None:
        return ""
    notes = [m.error] if m.error else []
    if m.pruned:
        notes.append("one sample: far slower than the fastest at its first call")
    if m.host_bound:
        notes.append("host-bound: a call costs more host time than GPU time")
    return "; ".join(notes)


LONG_FORM_COLUMNS = (
    "model", "layers", "uses", "spec", "input_shape", "dtype", "memory_format", "math", "direction",
    "cudnn_direction", "candidate_kind", "candidate", "repro", "engine_id", "knobs", "algo", "algo_id", "math_type", "status",
    "stage", "note", "workspace_bytes", "deterministic", "sources", "heuristic_rank", "torch_rank", "torch_filter",
    "torch_ran", "kernel_median_ms", "kernel_min_ms", "kernel_max_ms", "kernel_spread", "kernel_samples_ms",
    "throughput_median_ms", "throughput_min_ms", "throughput_max_ms", "throughput_spread", "throughput_samples_ms",
    "host_median_ms", "host_min_ms", "host_max_ms", "host_spread", "host_samples_ms", "calls_per_sample",
    "kernel_calls", "kernel_clock", "kernels", "activities_per_call", "reference_kernel_ms", "rel_err", "max_abs_err",
    "tflops", "pct_peak", "measured_rank", "confirmed", "pruned", "host_bound", "measure_error", "gpu",
    "compute_capability", "driver", "cuda_runtime", "cudnn", "torch", "package_version", "host", "git_commit",
    "created")


def _legacy_candidate(r: AlgoResult) -> dict[str, Any]:
    return {"candidate_kind": "legacy", "candidate": r.name, "algo": r.algo, "algo_id": r.algo_id,
            "math_type": r.math_type, "status": r.status, "note": r.note, "workspace_bytes": r.workspace_bytes,
            "deterministic": r.deterministic, "heuristic_rank": r.rank}


def _engine_candidate(r: EngineRow) -> dict[str, Any]:
    return {"candidate_kind": "engine", "candidate": r.name, "engine_id": r.engine_id,
            "knobs": ",".join(f"{k}={v}" for k, v in r.knobs), "status": r.status, "stage": r.stage,
            "note": ",".join(r.numerical_notes + r.behavior_notes), "workspace_bytes": r.workspace_bytes,
            "deterministic": r.deterministic, "sources": ",".join(r.sources), "heuristic_rank": r.rank_a,
            "torch_rank": r.torch_rank, "torch_filter": r.torch_filter, "torch_ran": ",".join(r.torch_ran)}


def _torch_candidate(t: TorchRun) -> dict[str, Any]:
    return {"candidate_kind": "torch_" + t.mode.replace("benchmark_", ""), "candidate": "torch " + t.mode,
            "status": "SUCCESS" if t.measured is not None and t.measured.kernel_ms is not None else "NOT_MEASURED",
            "note": f"ran {', '.join(t.matches) or t.match} ({t.where})" + (f"; {t.error}" if t.error else "")}


def _repro(search: Any, c: dict[str, Any]) -> str:
    """The command that measures this candidate again: an engine configuration alone (--config), torch's op beside
    the heuristics' configurations, a legacy algorithm in its math type's search."""
    import shlex

    layer = (f"--conv {shlex.quote(str(search.spec))} --input {','.join(map(str, search.shapes.input_shape))} "
             f"--dtype {search.dtype}" + (" --channels-last" if search.memory_format != "contiguous" else "")
             + f" --direction {search.direction} --measure")
    kind = c["candidate_kind"]
    if kind == "engine":
        return f"cudnn-algos engines {layer} --config {shlex.quote(c['candidate'])}"
    if kind == "legacy":
        return f"cudnn-algos find {layer}" + (f" --math {c['math_type']}" if c.get("math_type") else "")
    return f"cudnn-algos engines {layer} --torch yes --torch-benchmark {kind.replace('torch_', '')}"


def _record(search: Any, candidate: dict[str, Any], m: Measurement | None, context: dict[str, Any]) -> dict[str, Any]:
    """One long-form record: the search's problem and environment, the candidate's columns, its measurement."""
    e = search.env
    d = dict.fromkeys(LONG_FORM_COLUMNS)
    d.update(model="", layers="", uses=1, spec=str(search.spec), input_shape="x".join(map(str, search.shapes.input_shape)),
             dtype=search.dtype, memory_format=search.memory_format, math=getattr(search, "math", None),
             direction=search.direction, cudnn_direction=search.cudnn_direction, gpu=e.gpu_name,
             compute_capability=e.compute_capability, driver=e.driver_version, cuda_runtime=e.cuda_runtime,
             cudnn=Environment.version_str(e.cudnn_runtime), torch=e.torch_version, package_version=e.package_version,
             host=e.hostname, git_commit=e.git_commit, created=search.created)
    d.update(context)
    d.update(candidate)
    d["repro"] = _repro(search, candidate)
    if m is not None:
        for k in ("kernel", "throughput", "host"):
            st = getattr(m, f"{k}_ms")
            if st is not None:
                d.update({f"{k}_median_ms": st.median, f"{k}_min_ms": st.min, f"{k}_max_ms": st.max,
                          f"{k}_spread": st.spread, f"{k}_samples_ms": " ".join(f"{v:.6g}" for v in st.samples)})
        d.update(calls_per_sample=m.calls_per_sample, kernel_calls=m.kernel_calls, kernel_clock=m.kernel_clock,
                 kernels=";".join(m.kernels), activities_per_call=m.activities_per_call,
                 reference_kernel_ms=m.reference_kernel_ms, rel_err=m.rel_err, max_abs_err=m.max_abs_err,
                 tflops=m.tflops, pct_peak=m.pct_peak, measured_rank=m.measured_rank, confirmed=m.confirmed,
                 pruned=m.pruned, host_bound=m.host_bound, measure_error=m.error)
    return d


def _dataframe(records: list[dict[str, Any]]):
    try:
        import pandas as pd
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("to_dataframe() needs pandas: pip install pandas") from e
    return pd.DataFrame.from_records(records, columns=LONG_FORM_COLUMNS if not records or set(records[0]) ==
                                     set(LONG_FORM_COLUMNS) else None)


def _html_table(title: str, headers: Sequence[str], rows: list[list[str]], escaped: bool = False) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    t = title if escaped else f"<b>{html.escape(title)}</b>"
    return f"<p>{t}</p><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _dir(direction: str, cudnn_direction: str) -> str:
    return direction if direction == cudnn_direction else f"{direction} (cuDNN {cudnn_direction})"


def _yes(v: bool | None) -> str:
    return {True: "yes", False: "no", None: "-"}[v]


def _int(v: int | None) -> str:
    return "-" if v is None else str(v)


def _shape(t: tuple[int, ...]) -> str:
    return "(" + ",".join(str(v) for v in t) + ")"


def fit_table(headers: Sequence[str], rows: list[list[str]], right: set[int], *, width: int = TEXT_WIDTH,
              legend: dict[int, int] | None = None, drop: Sequence[int] = ()) -> list[str]:
    """Text table lines no wider than `width` where possible. A cell of a column in `legend` (index -> widest cell)
    longer than that is printed as a key, ``[1]`` (a configuration keeps its engine: ``eng62[1]``), and its whole
    text once in a legend under the table, unbroken (a configuration name stays pasteable into ``--config``); then,
    while the table is still too wide, the columns in `drop` are left out in that order, and a last line names them.
    The data behind the table keeps everything (to_dataframe, to_html, JSON)."""
    import textwrap

    legend = legend or {}
    keys: dict[str, str] = {}
    rows = [list(r) for r in rows]
    blank = [i for i in range(1, len(headers)) if rows and all(r[i] in ("", "-") for r in rows) and i not in right]
    drop = [*blank, *(d for d in drop if d not in blank)]  # a column with nothing to say goes first, unnamed
    for r in rows:
        for i, cap in legend.items():
            text = r[i]
            if len(text) <= cap:
                continue
            if text not in keys:
                keys[text] = f"[{len(keys) + 1}]"
            head = text.split("{", 1)[0] if "{" in text and len(text.split("{", 1)[0]) + 4 <= cap else ""
            r[i] = head + keys[text]
    cols = list(range(len(headers)))
    dropped: list[str] = []
    lines = aligned([headers[i] for i in cols], [[r[i] for i in cols] for r in rows], {cols.index(i) for i in right})
    for d in drop:
        if max(map(len, lines)) <= width:
            break
        cols.remove(d)
        if d not in blank:
            dropped.append(headers[d])
        lines = aligned([headers[i] for i in cols], [[r[i] for i in cols] for r in rows],
                        {cols.index(i) for i in right if i in cols})
    for text, key in keys.items():
        lines += textwrap.wrap(f"{key} {text}", width, subsequent_indent=" " * (len(key) + 1), break_long_words=False,
                               break_on_hyphens=False)
    if dropped:
        lines.append(f"(columns left out to fit {width}: {', '.join(dropped)}; the DataFrame, HTML and JSON keep them)")
    return lines


def _wrap(lines: Sequence[str], width: int = TEXT_WIDTH) -> list[str]:
    """Prose lines wrapped to `width` (table lines are already that narrow); words are never broken, so a
    configuration name stays whole."""
    import textwrap

    out: list[str] = []
    for line in lines:
        out += textwrap.wrap(line, width, subsequent_indent="    ", break_long_words=False, break_on_hyphens=False,
                             drop_whitespace=True) if len(line) > width else [line]
    return out


def aligned(headers: Sequence[str], rows: list[list[str]], right: set[int]) -> list[str]:
    """Text table lines: a header, a rule, the rows; columns in `right` right-aligned."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def fmt(cells):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return [fmt(headers), fmt(["-" * w for w in widths]), *(fmt(r) for r in rows)]


_register(SearchResult, SearchResults, EngineSearchResult, EngineSearches, ModelReport)
