"""Whole searches of one problem and direction: every legacy algorithm (``SearchResult``, three directions in
``SearchResults``) and every engine configuration with torch's own op beside them (``EngineSearchResult``,
``EngineSearches``); their text, HTML and long-form tables."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

from ..configs import LISTS, heuristic_list
from ..environment import Environment
from ..spec import ConvShapes, ConvSpec
from .codec import Saved, register
from .rows import AlgoResult, EngineRow, MeasureConfig, TorchRun
from .tables import (TEXT_WIDTH, dataframe, direction_label, fit_table, format_bytes, format_ms, html_table, int_cell,
                     legacy_candidate, engine_candidate, measure_note, median_cell, record, shape_text, torch_candidate,
                     wrap_lines, yes_no)


@register
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
        ok = [r for r in self.rows if r.ok and not r.wrong]
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
        return (f"{self.spec} {direction_label(self.direction, self.cudnn_direction)} | input {shape_text(self.shapes.input_shape)} "
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
                note = "; ".join(x for x in (r.note, measure_note(m)) if x)
                out.append([r.algo, r.math_type or "-", r.status, median_cell(m, "kernel_ms"),
                            f"{100 * m.kernel_ms.spread:.0f}%" if m and m.kernel_ms else "", median_cell(m, "throughput_ms"),
                            median_cell(m, "host_ms"), format_ms(r.time_ms),
                            f"{r.kernel_ms / bk:.2f}x" if (r.kernel_ms is not None and bk) else "",
                            f"{m.tflops:.1f}" if m and m.tflops is not None else "-",
                            f"{m.pct_peak:.0f}" if m and m.pct_peak is not None else "-",
                            f"{m.rel_err:.1e}" if m and m.rel_err is not None else "-",
                            format_bytes(r.workspace_bytes), yes_no(r.deterministic),
                            int_cell(m.heuristic_rank if m else None), int_cell(m.measured_rank if m else None), note])
            return self.MEASURED_HEADERS, out, {3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15}
        bt = best.time_ms if best is not None else None
        for r in self.rows:
            rel = f"{r.time_ms / bt:.2f}x" if (r.ok and r.time_ms is not None and bt) else ""
            out.append([r.algo, str(r.algo_id), r.status, format_ms(r.time_ms), rel, format_bytes(r.workspace_bytes),
                        yes_no(r.deterministic), r.math_type or "-", int_cell(r.rank), r.note])
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
        return "\n".join(wrap_lines(lines[:1]) + self.text_table() + wrap_lines(lines[1:]))

    def _repr_html_(self) -> str:
        headers, rows, _ = self._headers_and_rows()
        return html_table(self.title(), headers, rows)

    def to_records(self, **context: Any) -> list[dict[str, Any]]:
        """Long-form records (one per algorithm row; see LONG_FORM_COLUMNS)."""
        return [record(self, legacy_candidate(r), r.measured, context) for r in self.rows]

    def to_dataframe(self):
        """The long-form table (LONG_FORM_COLUMNS): one row per algorithm with its problem, clocks (statistics and
        raw samples), accuracy and environment as columns (needs pandas)."""
        return dataframe(self.to_records())


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
        return dataframe([rec for r in self.results for rec in r.to_records()])


@register
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


@register
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
    # per heuristic list asked for ("instant", "a", "b", "fallback"): host ms of cuDNN's query (the ranked list,
    # without building or timing anything)
    heuristic_query_ms: tuple[tuple[str, float], ...] = ()

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
        """The fastest measured configuration whose output is right (Note [a wrong output]); where some were
        confirmed (measured again on fresh operands after a screen or beside torch's op), the fastest confirmed one.
        Unmeasured: heuristic A's first."""
        timed = [r for r in self.succeeded if r.right_ms is not None]
        conf = [r for r in timed if r.measured.confirmed]
        if conf or timed:
            return min(conf or timed, key=lambda r: r.kernel_ms)
        ranked = [r for r in self.succeeded if r.rank_a is not None]
        return min(ranked, key=lambda r: r.rank_a) if ranked else (self.succeeded[0] if self.succeeded else None)

    @property
    def best_eligible(self) -> EngineRow | None:
        """The fastest measured configuration torch's own convolution would also accept (not filtered out by its
        numerical rules) and whose output is right: the fair one to compare with torch. Confirmed measurements
        first."""
        timed = [r for r in self.succeeded if r.right_ms is not None and not r.torch_filter]
        conf = [r for r in timed if r.measured.confirmed]
        return min(conf or timed, key=lambda r: r.kernel_ms) if timed else None

    @property
    def torch_candidates(self) -> int:
        return sum(r.torch_rank is not None for r in self.rows)

    HEADERS = ("config", "family", "status", "kernel", "thrpt", "host", "rel err", "workspace", "det.", "heur. A",
               "torch", "sources", "notes")

    def title(self) -> str:
        return (f"{self.spec} {direction_label(self.direction, self.cudnn_direction)} | input "
                f"{'x'.join(map(str, self.shapes.input_shape))} {self.dtype} {self.memory_format} | engines: "
                f"{self.engine_count} in cuDNN, {len(self.rows)} configurations "
                f"{f'({self.refined} by refine) ' if self.refined else ''}({len(self.succeeded)} built) | "
                f"{self.env.gpu_name} cuDNN {Environment.version_str(self.env.cudnn_runtime)} | times in ms")

    def _table(self):
        rows = []
        for r in self.rows:
            m = r.measured
            notes = ",".join(r.numerical_notes + r.behavior_notes)
            notes = "; ".join(x for x in (notes, measure_note(m)) if x)
            rows.append([r.name, r.family, r.status + (f" ({r.stage})" if r.stage else ""), median_cell(m, "kernel_ms"),
                         median_cell(m, "throughput_ms"), median_cell(m, "host_ms"),
                         f"{m.rel_err:.1e}" if m and m.rel_err is not None else "-", format_bytes(r.workspace_bytes),
                         yes_no(r.deterministic), int_cell(r.rank_a), torch_cell(r),
                         ",".join(s.replace("heuristic_", "h") for s in r.sources), notes])
        return rows

    TEXT_HEADERS = ("config", "status", "kernel", "thrpt", "host", "rel err", "workspace", "det.", "A#", "torch",
                    "src", "notes")
    _SRC = {**{h.source: h.letter for h in LISTS}, "exhaustive": "X", "refine": "R", "exact": "E"}

    def text_table(self, width: int = TEXT_WIDTH) -> list[str]:
        """The rows fastest first by kernel time (unmeasured, then failed rows last) in `width` columns: long
        configuration names, statuses, torch cells and notes as keys with a legend (names stay whole, pasteable
        into --config); the full table is _repr_html_ / to_dataframe."""
        order = sorted(self.rows, key=lambda r: (not r.ok, r.kernel_ms is None, r.kernel_ms or 0.0))
        rows = []
        for r in order:
            m = r.measured
            notes = ",".join(r.numerical_notes + r.behavior_notes)
            notes = "; ".join(x for x in (notes, f"stopped at {r.stage}" if r.stage else "", measure_note(m)) if x)
            rows.append([r.name, r.status, median_cell(m, "kernel_ms"), median_cell(m, "throughput_ms"), median_cell(m, "host_ms"),
                         f"{m.rel_err:.1e}" if m and m.rel_err is not None else "-", format_bytes(r.workspace_bytes),
                         yes_no(r.deterministic), int_cell(r.rank_a), torch_cell(r),
                         "".join(self._SRC.get(x, "?") for x in r.sources), notes or "-"])
        lines = fit_table(self.TEXT_HEADERS, rows, right={2, 3, 4, 5, 6, 8}, width=width,
                          legend={0: 16, 1: 13, 9: 12, 11: 18}, drop=(10, 7, 3))
        return lines + wrap_lines(["(A#: rank in heuristic A's list; src: where a configuration came from: I, A, B heuristic"
                              " lists, F fallback, X exhaustive, R refine, E asked for by name)"], width)

    def __str__(self) -> str:
        b = self.best
        tail = f"best: {b.name}" + (f" {format_ms(b.kernel_ms)} kernel" if b and b.kernel_ms else "") if b else \
            "best: none"
        tail = f"{tail}; search (enumerate + build plans) took {self.search_ms:.0f} ms"
        return "\n".join(wrap_lines([self.title()]) + self.text_table() + wrap_lines([tail, *self.torch_lines()]))

    def _repr_html_(self) -> str:
        return html_table(self.title(), self.HEADERS, self._table())

    def torch_lines(self) -> list[str]:
        """What torch's own convolution ran and cost beside our best."""
        out = []
        for t in self.torch_runs:
            out.append(f"{t.describe()} ({t.where}); kernels: {', '.join(k[:60] for k in t.kernels) or 'none seen'}")
            b = self.best_eligible
            if t.kernel_ms is not None:
                line = (f"torch's op ({t.mode.replace('_', ' ')}): kernel {format_ms(t.kernel_ms)}, throughput "
                        f"{median_cell(t.measured, 'throughput_ms')}, host {format_ms(t.host_ms)} per call")
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
        """Long-form records: one per configuration, then one per torch run (candidate_kind torch_on/torch_off);
        each also says what each heuristic list's query cost (query_<list>_ms, the same on every row)."""
        context = {**{heuristic_list(m).query_column: ms for m, ms in self.heuristic_query_ms}, **context}
        out = [record(self, engine_candidate(r), r.measured, context) for r in self.rows]
        out += [record(self, torch_candidate(t), t.measured, context) for t in self.torch_runs]
        return out

    def to_dataframe(self):
        return dataframe(self.to_records())


@register
@dataclass(frozen=True)
class EngineSearches(ResultSet):
    """Several engine searches (``cudnn-algos engines --direction all``)."""

    results: tuple[EngineSearchResult, ...] = ()

    KIND = "engine_searches"


def torch_cell(r: EngineRow) -> str:
    parts = []
    if r.torch_ran:
        parts.append("RAN(" + ",".join(m.replace("benchmark_", "") for m in r.torch_ran) + ")")
    if r.torch_rank is not None:
        parts.append(f"#{r.torch_rank}")
    if r.torch_filter:
        parts.append(f"never ({r.torch_filter})")
    return " ".join(parts) or "-"

