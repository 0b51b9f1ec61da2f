"""A whole model's report: its distinct convolution problems (``ProblemEntry``), each direction's engine search
beside torch's op, per-layer rows (``LayerRow``), totals, the end-to-end benchmark-mode check (``EndToEnd``), and
its text, rich, HTML and DataFrame forms."""
from __future__ import annotations

import html
import textwrap
from dataclasses import dataclass, field, fields
from typing import Any, Iterator, Sequence

from ..files import atomic_write
from ..environment import Environment
from ..spec import ConvSpec
from .codec import Saved, register
from .rows import MeasureConfig, TorchRun
from .searches import EngineSearchResult, SearchResult
from .tables import csv_text, dataframe, fit_table, format_ms, html_table


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


@register
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
    stopped_by: str = ""  # with interrupted: "budget" (budget_s ran out: a re-run with the store continues), "ctrl-c"
    # or "context-lost" (a kernel faulted; errors say where)
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
            why = {"budget": "the time budget ran out", "ctrl-c": "Ctrl-C",
                   "context-lost": "a kernel faulted and the CUDA context is lost: see the failed search"
                   }.get(self.stopped_by, "Ctrl-C or the time budget")
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
        """One direction's rows, compact: the problem as `Cin>Cout kxk s p g`, the input's spatial size (batch in
        the title, channels in the problem), the best configuration (its full name), its kernel time and host time
        per call and torch on's (ms, three significant figures), the ratios to torch on and off."""
        headers = ["#", "layers", "problem", "input", "best", "kernel", "best host", "torch", "torch host", "/on",
                   "/off"]
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
            rows.append([str(pi), names, _compact_spec(p.spec), "x".join(map(str, p.input_shape[2:])),
                         b.name if b else "-", ms(b.kernel_ms if b else None), ms(b.host_ms if b else None),
                         ms(on.kernel_ms if on else None), ms(on.host_ms if on else None),
                         f"{ron:.3f}" if ron else "-", f"{roff:.3f}" if roff else "-"])
        return headers, rows

    def __str__(self) -> str:
        """The summary, then one table per direction in 120 columns: a layer name or configuration too long for its
        column is a key, written whole under the table (a configuration pasteable into --config)."""
        s = [textwrap.fill(line, 120, subsequent_indent="    ") for line in self.summary_lines()]
        batches = sorted({p.input_shape[0] for p in self.problems})
        out = [s[0]]
        for d in self.directions:
            headers, rows = self.direction_table(d)
            out += ["", f"{d} (ms per call, batch {','.join(map(str, batches))}; best: the fastest configuration "
                        "torch would accept; torch: its op, benchmark on)",
                    *fit_table(headers, rows, right={0, 5, 6, 7, 8, 9, 10}, legend={1: 17, 2: 19, 4: 16}, drop=(6, 8))]
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
        return html_table("<br>".join(html.escape(s) for s in self.summary_lines()), headers, rows, escaped=True)

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
            ctx = {"model": self.model, "layers": list(p.layers), "uses": p.count}
            for s in list(p.engines.values()) + list(p.legacy.values()):
                out += s.to_records(**ctx)
        return out

    def to_dataframe(self):
        """The long-form table (LONG_FORM_COLUMNS), comparable with any other result's (needs pandas)."""
        return dataframe(self.to_records())

    def summary_dataframe(self):
        """One row per layer use and direction: the best configuration, torch on and off, ratios (the text table)."""
        recs = []
        for r in self.layer_rows():
            d = {f.name: getattr(r, f.name) for f in fields(r)}
            d.update(ratio_on=r.ratio_on, ratio_off=r.ratio_off, model=self.model,
                     gpu=self.env.gpu_name if self.env else None,
                     cudnn=Environment.version_str(self.env.cudnn_runtime) if self.env else None)
            recs.append(d)
        return dataframe(recs)

    def to_csv(self, path: str) -> None:
        """The long-form table as CSV (lists as space-separated values: cudnn_algos.results.tables.csv_text)."""
        atomic_write(path, csv_text(self.to_dataframe()))

    def plot(self, out_dir: str, formats: Sequence[str] = ("png", "svg")) -> list[str]:
        from ..plots import save_figures

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

