"""Whole models: ``profile(model, example_input)`` searches every distinct convolution of a model once per direction
and reports, layer by layer, the best algorithm, cuDNN's heuristic choice, the spread, the workspace; totals; and
an end-to-end check of torch's benchmark mode (per-step time off vs on, and its one-off warm-up cost measured in a
fresh process).
"""
from __future__ import annotations

import copy
import datetime as _dt
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterable, Sequence

import torch

from .results import DIRECTIONS, AlgoResult, Environment, SearchResult, read_json, write_json
from .spec import ConvSpec

REPORT_SCHEMA = 1


# ------------------------------------------------------------------------------------------------ data
@dataclass(frozen=True)
class ProblemEntry:
    """One distinct convolution problem of the model, the layers that run it, and its searches per direction."""

    spec: ConvSpec
    input_shape: tuple[int, ...]
    dtype: str
    memory_format: str
    layers: tuple[str, ...]  # qualified module names, one per use (a module called twice appears twice)
    results: dict[str, SearchResult] = field(default_factory=dict)

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
    where: str = "fresh processes"  # where the step times come from

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
            s = (f"benchmark mode: not compared ({kind} step {self.step_ms_off:.2f} ms with it off"
                 f"{'' if not self.note else '; ' + self.note})") if self.step_ms_off else \
                f"benchmark mode: not compared ({self.note or 'no step time'})"
            return s
        s = (f"benchmark mode: {self.step_change_pct:+.1f}% per step ({self.step_ms_off:.2f} -> "
             f"{self.step_ms_on:.2f} ms, {kind}, {self.where})")
        if self.warmup_cost_s is not None:
            s += (f", {self.warmup_cost_s:.2f} s to warm up (first step in a fresh process: "
                  f"{self.first_step_s_off:.2f} s off, {self.first_step_s_on:.2f} s on)")
        elif self.note:
            s += f"; warm-up cost not measured: {self.note}"
        if self.warmup_cost_s is not None and self.step_ms_on < self.step_ms_off:
            steps = self.warmup_cost_s * 1e3 / (self.step_ms_off - self.step_ms_on)
            s += f"; pays for itself after {steps:,.0f} steps"
        return s


@dataclass(frozen=True)
class LayerRow:
    """One layer use in one direction (what the DataFrame holds)."""

    layer: str
    problem: int
    direction: str
    spec: str
    input_shape: tuple[int, ...]
    best_algo: str | None
    best_ms: float | None
    heuristic_algo: str | None
    heuristic_ms: float | None
    worst_ms: float | None
    spread: float | None  # worst / best among successful algorithms
    best_workspace_bytes: int | None
    n_algorithms: int
    n_succeeded: int
    clock: str  # "kernel" (our measured kernel median) or "cudnn" (cuDNN's reported time)


def row_time(row: AlgoResult) -> float | None:
    """The time a report uses for a row: our measured kernel median, else cuDNN's reported time."""
    return row.kernel_ms if row.kernel_ms is not None else row.time_ms


def heuristic_row(result: SearchResult) -> AlgoResult | None:
    if not result.heuristic_choice:
        return None
    algo, _, math = result.heuristic_choice.partition("/")
    cands = [r for r in result.succeeded if r.algo == algo and (r.math_type or "None") == math]
    return cands[0] if cands else None


@dataclass(frozen=True)
class ModelReport:
    model: str
    problems: tuple[ProblemEntry, ...]
    directions: tuple[str, ...]
    measured: bool
    env: Environment | None
    e2e: EndToEnd | None = None
    interrupted: bool = False
    search_s: float = 0.0
    wall_s: float = 0.0
    n_conv_calls: int = 0
    created: str = ""
    schema: int = REPORT_SCHEMA

    # ---------------------------------------------------------------- rows and totals
    def layer_rows(self) -> list[LayerRow]:
        out = []
        for pi, p in enumerate(self.problems):
            for d in self.directions:
                r = p.results.get(d)
                if r is None:
                    continue
                times = [t for t in (row_time(x) for x in r.succeeded) if t is not None]
                best, heur = r.best, heuristic_row(r)
                for name in p.layers:
                    out.append(LayerRow(
                        layer=name, problem=pi, direction=d, spec=str(p.spec), input_shape=p.input_shape,
                        best_algo=f"{best.algo}/{best.math_type}" if best else None,
                        best_ms=row_time(best) if best else None,
                        heuristic_algo=r.heuristic_choice, heuristic_ms=row_time(heur) if heur else None,
                        worst_ms=max(times) if times else None,
                        spread=(max(times) / min(times)) if times and min(times) > 0 else None,
                        best_workspace_bytes=best.workspace_bytes if best else None,
                        n_algorithms=len(r.rows), n_succeeded=len(r.succeeded),
                        clock="kernel" if self.measured else "cudnn",
                    ))
        return out

    def totals(self) -> dict[str, dict[str, float]]:
        """Per direction and overall: Σ best and Σ heuristic-choice time over every layer use (ms), saving %."""
        tot: dict[str, dict[str, float]] = {}
        for row in self.layer_rows():
            t = tot.setdefault(row.direction, {"best_ms": 0.0, "heuristic_ms": 0.0, "layers": 0, "missing": 0})
            t["layers"] += 1
            if row.best_ms is None or row.heuristic_ms is None:
                t["missing"] += 1
                continue
            t["best_ms"] += row.best_ms
            t["heuristic_ms"] += row.heuristic_ms
        if tot:
            tot["all"] = {k: sum(v[k] for v in tot.values()) for k in ("best_ms", "heuristic_ms", "layers", "missing")}
        for t in tot.values():
            t["saving_pct"] = 100.0 * (1 - t["best_ms"] / t["heuristic_ms"]) if t["heuristic_ms"] else 0.0
        return tot

    # ---------------------------------------------------------------- text
    def summary_lines(self) -> list[str]:
        clock = "our measured kernel medians" if self.measured else "cuDNN's reported times"
        lines = [f"{self.model}: {self.n_conv_calls} convolution calls, {len(self.problems)} distinct problems, "
                 f"directions {', '.join(self.directions)}; times are {clock}, ms"]
        if self.interrupted:
            lines.append("INTERRUPTED: the report covers only the problems searched before Ctrl-C")
        for d, t in self.totals().items():
            miss = f" ({int(t['missing'])} layer uses without a heuristic time)" if t["missing"] else ""
            lines.append(f"total {d:15s} best {t['best_ms']:9.3f}  heuristic {t['heuristic_ms']:9.3f}  "
                         f"per-layer best saves {t['saving_pct']:5.1f}%{miss}")
        if self.e2e is not None:
            lines.append(self.e2e.sentence())
        lines.append(f"search took {self.search_s:.1f} s of {self.wall_s:.1f} s")
        return lines

    TABLE_HEADERS = ("#", "layers", "convolution", "input")

    def table(self) -> tuple[list[str], list[list[str]]]:
        headers = list(self.TABLE_HEADERS)
        short = {"forward": "fwd", "backward_data": "bwd-data", "backward_filter": "bwd-filter"}
        for d in self.directions:
            headers += [f"{short[d]} best", "ms", "heur. ms", "spread"]
        rows = []
        for pi, p in enumerate(self.problems):
            names = p.layers[0] + (f" +{p.count - 1}" if p.count > 1 else "")
            cells = [str(pi), names, str(p.spec).replace("kernel_size=", "k="), "x".join(map(str, p.input_shape))]
            for d in self.directions:
                r = p.results.get(d)
                b = r.best if r else None
                h = heuristic_row(r) if r else None
                times = [t for t in (row_time(x) for x in r.succeeded) if t is not None] if r else []
                cells += [f"{b.algo}/{b.math_type}" if b else "-",
                          f"{row_time(b):.4f}" if b and row_time(b) is not None else "-",
                          f"{row_time(h):.4f}" if h and row_time(h) is not None else "-",
                          f"{max(times) / min(times):.1f}x" if times and min(times) > 0 else "-"]
            rows.append(cells)
        return headers, rows

    def __str__(self) -> str:
        from .results import _aligned

        headers, rows = self.table()
        right = {0} | {i for i, h in enumerate(headers) if h in ("ms", "heur. ms", "spread")}
        return "\n".join([*self.summary_lines()[:1], *_aligned(tuple(headers), rows, right), *self.summary_lines()[1:]])

    def rich_table(self):
        from rich.table import Table

        headers, rows = self.table()
        t = Table(title=self.summary_lines()[0], show_lines=False)
        for h in headers:
            t.add_column(h, justify="right" if h in ("#", "ms", "heur. ms", "spread") else "left")
        for r in rows:
            t.add_row(*r)
        t.caption = "\n".join(self.summary_lines()[1:])
        return t

    def _repr_html_(self) -> str:
        import html

        headers, rows = self.table()
        head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
        summary = "<br>".join(html.escape(s) for s in self.summary_lines())
        return f"<p>{summary}</p><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def to_html(self, path: str | None = None) -> str:
        text = f"<html><head><meta charset='utf-8'><title>{self.model}</title></head><body>{self._repr_html_()}</body></html>"
        if path:
            with open(path, "w") as f:
                f.write(text)
        return text

    # ---------------------------------------------------------------- data
    def to_dataframe(self):
        import pandas as pd

        return pd.DataFrame.from_records([asdict(r) for r in self.layer_rows()])

    def to_csv(self, path: str) -> None:
        self.to_dataframe().to_csv(path, index=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": self.schema, "model": self.model, "directions": list(self.directions),
            "measured": self.measured, "env": asdict(self.env) if self.env else None,
            "e2e": asdict(self.e2e) if self.e2e else None, "interrupted": self.interrupted,
            "search_s": self.search_s, "wall_s": self.wall_s, "n_conv_calls": self.n_conv_calls,
            "created": self.created,
            "problems": [{"spec": p.spec.to_dict(), "input_shape": list(p.input_shape), "dtype": p.dtype,
                          "memory_format": p.memory_format, "layers": list(p.layers),
                          "results": {d: r.to_dict() for d, r in p.results.items()}} for p in self.problems],
        }

    def to_json(self, path: str | None = None) -> str:
        return write_json(self.to_dict(), path)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ModelReport":
        if d.get("schema") != REPORT_SCHEMA:
            raise ValueError(f"report schema {d.get('schema')} is not {REPORT_SCHEMA}")
        problems = tuple(
            ProblemEntry(spec=ConvSpec.from_dict(p["spec"]), input_shape=tuple(p["input_shape"]), dtype=p["dtype"],
                         memory_format=p["memory_format"], layers=tuple(p["layers"]),
                         results={k: SearchResult.from_dict(v) for k, v in p["results"].items()})
            for p in d["problems"])
        return cls(model=d["model"], problems=problems, directions=tuple(d["directions"]), measured=d["measured"],
                   env=Environment(**d["env"]) if d.get("env") else None,
                   e2e=EndToEnd(**d["e2e"]) if d.get("e2e") else None, interrupted=d["interrupted"],
                   search_s=d["search_s"], wall_s=d["wall_s"], n_conv_calls=d["n_conv_calls"],
                   created=d["created"], schema=d["schema"])

    @classmethod
    def load(cls, source: str) -> "ModelReport":
        return cls.from_dict(read_json(source))

    # ---------------------------------------------------------------- figures
    def plot(self, out_dir: str, formats: Sequence[str] = ("png", "svg")) -> list[str]:
        from .plots import save_figures

        return save_figures(self, out_dir, formats)


# ------------------------------------------------------------------------------------------------ discovery
@dataclass
class _Use:
    name: str
    spec: ConvSpec
    input_shape: tuple[int, ...]
    dtype: torch.dtype
    memory_format: str


def _layout_of(t: torch.Tensor) -> str:
    if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous():
        return "channels_last"
    if t.dim() == 5 and t.is_contiguous(memory_format=torch.channels_last_3d) and not t.is_contiguous():
        return "channels_last_3d"
    return "contiguous"


def discover(model: torch.nn.Module, example_input: Any) -> list[_Use]:
    """Every convolution call of one forward pass, with the real input it received (shape, dtype, layout).

    The pass runs on the meta device (no compute, no GPU) on a copy of the model; where the model cannot run on
    meta, it runs as given under torch.no_grad()."""
    conv_types = (torch.nn.modules.conv._ConvNd,)

    def run(m: torch.nn.Module, inp: Any) -> list[_Use]:
        uses: list[_Use] = []
        handles = []
        for name, mod in m.named_modules():
            if isinstance(mod, conv_types):
                def hook(module, args, _name=name):
                    x = args[0]
                    uses.append(_Use(_name, ConvSpec.from_module(module), tuple(x.shape), x.dtype, _layout_of(x)))
                handles.append(mod.register_forward_pre_hook(hook))
        try:
            with torch.no_grad():
                m(*inp) if isinstance(inp, tuple) else m(inp)
        finally:
            for h in handles:
                h.remove()
        return uses

    def to_meta(x):
        if isinstance(x, torch.Tensor):
            return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
        if isinstance(x, tuple):
            return tuple(to_meta(v) for v in x)
        return x

    try:
        meta_model = copy.deepcopy(model).to("meta")
        return run(meta_model, to_meta(example_input))
    except Exception:
        return run(model, example_input)


# ------------------------------------------------------------------------------------------------ progress
class _Progress:
    def __init__(self, total: int, enabled: bool, desc: str):
        self.bar = None
        if not enabled:
            return
        try:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc=desc, unit="problem", file=sys.stderr)
        except ImportError:
            self.bar = None

    def update(self, text: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(text, refresh=False)
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# ------------------------------------------------------------------------------------------------ end to end
def _example_to(example_input: Any, device: str, dtype: torch.dtype | None, fmt: str | None):
    def conv(x):
        if isinstance(x, torch.Tensor):
            x = x.to(device=device, dtype=dtype if (dtype and x.is_floating_point()) else x.dtype)
            if fmt and fmt != "contiguous" and x.dim() in (4, 5):
                x = x.contiguous(memory_format=torch.channels_last if x.dim() == 4 else torch.channels_last_3d)
            return x
        if isinstance(x, tuple):
            return tuple(conv(v) for v in x)
        return x

    return conv(example_input)


def _model_to(model: torch.nn.Module, device: str, dtype: torch.dtype | None, fmt: str | None):
    m = copy.deepcopy(model).to(device=device)
    if dtype is not None:
        m = m.to(dtype=dtype)
    if fmt and fmt != "contiguous":
        m = m.to(memory_format=torch.channels_last if fmt == "channels_last" else torch.channels_last_3d)
    return m


def _step(model, inp, backward: bool):
    out = model(*inp) if isinstance(inp, tuple) else model(inp)
    if backward:
        out = out[0] if isinstance(out, (tuple, list)) else out
        out.float().sum().backward()


def time_steps(model, inp, backward: bool, iterations: int, benchmark: bool, device: int) -> float:
    """Median step time (ms) with cudnn.benchmark set, after 3 warm-up steps (the first one runs any search)."""
    old = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = benchmark
    try:
        ctx = torch.enable_grad() if backward else torch.no_grad()
        with ctx:
            for _ in range(3):
                _step(model, inp, backward)
            torch.cuda.synchronize(device)
            times = []
            for _ in range(iterations):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                _step(model, inp, backward)
                e.record()
                e.synchronize()
                times.append(s.elapsed_time(e))
        return statistics.median(times)
    finally:
        torch.backends.cudnn.benchmark = old
        model.zero_grad(set_to_none=True)


def steps_fresh_process(model_file: str, input_file: str, backward: bool, benchmark: bool, device: int,
                        iterations: int = 10, timeout: float = 600) -> tuple[float, float]:
    """(seconds for the first step, median ms of the next `iterations` steps after 2 more warm-up steps) in a fresh
    python process (cuDNN loading included in the first step) with cudnn.benchmark set from the start."""
    code = (
        "import sys, time, statistics, torch\n"
        "m = torch.load(sys.argv[1], weights_only=False); x = torch.load(sys.argv[2], weights_only=False)\n"
        f"torch.backends.cudnn.benchmark = {benchmark!r}\n"
        f"dev = 'cuda:{device}'\n"
        "torch.zeros(1, device=dev); torch.cuda.synchronize()\n"  # CUDA context before the clock starts
        "m = m.to(dev); x = tuple(v.to(dev) for v in x) if isinstance(x, tuple) else x.to(dev)\n"
        "def step():\n"
        f"    with torch.{'enable_grad' if backward else 'no_grad'}():\n"
        "        out = m(*x) if isinstance(x, tuple) else m(x)\n"
        f"        if {backward!r}:\n"
        "            out = out[0] if isinstance(out, (tuple, list)) else out\n"
        "            out.float().sum().backward()\n"
        "    m.zero_grad(set_to_none=True)\n"
        "t = time.perf_counter(); step(); torch.cuda.synchronize()\n"
        "print('FIRST_STEP_S', time.perf_counter() - t)\n"
        "step(); step(); torch.cuda.synchronize()\n"
        "ts = []\n"
        f"for _ in range({int(iterations)}):\n"
        "    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)\n"
        "    s.record(); step(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))\n"
        "print('STEP_MS', statistics.median(ts))\n"
    )
    r = subprocess.run([sys.executable, "-c", code, model_file, input_file], capture_output=True, text=True,
                       timeout=timeout)
    got = {}
    for line in r.stdout.splitlines():
        k, _, v = line.partition(" ")
        if k in ("FIRST_STEP_S", "STEP_MS"):
            got[k] = float(v)
    if len(got) != 2:
        raise RuntimeError("fresh-process steps failed: "
                           f"{r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}")
    return got["FIRST_STEP_S"], got["STEP_MS"]


def end_to_end(model, example_input, *, backward: bool, dtype, fmt, device: int, iterations: int = 10,
               fresh_process: bool = True) -> EndToEnd:
    """Benchmark mode off vs on for the whole model, each in its own fresh process. Without a fresh process (or a
    model that cannot be saved for one), only the step time with benchmark off is measured here: this process
    cannot run benchmark mode's choice for shapes torch has already planned."""
    dev = f"cuda:{device}"

    def in_process(note: str) -> EndToEnd:
        m, inp = _model_to(model, dev, dtype, fmt), _example_to(example_input, dev, dtype, fmt)
        off = time_steps(m, inp, backward, iterations, torch.backends.cudnn.benchmark, device)
        mode = "on" if torch.backends.cudnn.benchmark else "off"
        return EndToEnd(backward=backward, iterations=iterations, step_ms_off=off if mode == "off" else None,
                        step_ms_on=off if mode == "on" else None, where="this process",
                        note=f"{note}; measured in this process with benchmark {mode} only")

    if not fresh_process:
        return in_process("fresh-process measurement disabled")
    with tempfile.TemporaryDirectory() as d:
        mf, xf = os.path.join(d, "model.pt"), os.path.join(d, "input.pt")
        try:
            torch.save(_model_to(model, "cpu", dtype, fmt), mf)
            torch.save(_example_to(example_input, "cpu", dtype, fmt), xf)
        except Exception as ex:  # e.g. a model class defined in __main__ or a lambda inside
            return in_process(f"the model could not be saved for a fresh process ({type(ex).__name__})")
        try:
            first_off, off = steps_fresh_process(mf, xf, backward, False, device, iterations)
            first_on, on = steps_fresh_process(mf, xf, backward, True, device, iterations)
        except Exception as ex:
            return in_process(str(ex)[:200])
    return EndToEnd(backward=backward, iterations=iterations, step_ms_off=off, step_ms_on=on,
                    first_step_s_off=first_off, first_step_s_on=first_on)


# ------------------------------------------------------------------------------------------------ profile
def profile(
    model: torch.nn.Module,
    example_input: Any,
    *,
    directions: Iterable[str] = DIRECTIONS,
    dtype: torch.dtype | str | None = None,
    memory_format: torch.memory_format | str | None = None,
    measure: bool = True,
    mode: str = "find",
    repeats: int = 5,
    end_to_end_check: bool = True,
    fresh_process: bool = True,
    progress: bool = True,
    device: int | str | torch.device | None = None,
    name: str | None = None,
) -> ModelReport:
    """Searches every distinct convolution of `model` (as one forward pass on `example_input` meets them), once per
    direction, and returns a :class:`ModelReport`.

    dtype / memory_format: override what the layers receive (default: what they receive in the forward pass).
    measure: time every algorithm ourselves (find(..., measure=True)); else use cuDNN's reported times.
    end_to_end_check: also time the whole model's step with cudnn.benchmark off and on, and (fresh_process) the
        first step of a fresh process each way, whose difference is benchmark mode's warm-up cost.
    Ctrl-C during the search stops it and returns the report of what was done (``interrupted=True``).
    """
    from . import api

    directions = tuple(directions)
    for d in directions:
        api._check_choice("direction", d, DIRECTIONS)
    if not directions:
        raise ValueError("directions must name at least one of: " + ", ".join(DIRECTIONS))
    dt = api._dtype(dtype, None) if dtype is not None else None
    api._check_choice("mode", mode, api.MODES)
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, not {type(model).__name__}")
    t_start = time.perf_counter()
    uses = discover(model, example_input)
    if not uses:
        raise ValueError(f"{name or type(model).__name__} ran no convolution on this input: nothing to profile")
    keyed: dict[tuple, list[str]] = {}
    meta: dict[tuple, tuple] = {}
    for u in uses:
        fmt = u.memory_format
        if memory_format is not None:
            fmt = api._memory_format(memory_format, u.spec.ndim)
        udt = dt or u.dtype
        key = (u.spec, u.input_shape, str(udt), fmt)
        keyed.setdefault(key, []).append(u.name)
        meta[key] = (udt, fmt)
    dev = api._device_index(device)
    env = api.environment(dev)
    problems: list[ProblemEntry] = []
    interrupted = False
    bar = _Progress(len(keyed), progress, f"searching {name or type(model).__name__}")
    t_search = time.perf_counter()
    try:
        for key, names in keyed.items():
            spec, shape, _, fmt = key
            udt, _ = meta[key]
            results = {}
            for d in directions:
                r = api.find(spec, shape, direction=d, dtype=udt, memory_format=fmt, mode=mode, measure=measure,
                             repeats=repeats, device=dev)
                if not measure:
                    h = api.find(spec, shape, direction=d, dtype=udt, memory_format=fmt, mode="heuristic", device=dev)
                    first = next((x for x in h.rows if x.ok), None)
                    r = replace(r, heuristic_choice=f"{first.algo}/{first.math_type}" if first else None)
                results[d] = r
            problems.append(ProblemEntry(spec=spec, input_shape=shape, dtype=api.DTYPES[udt], memory_format=fmt,
                                         layers=tuple(names), results=results))
            bar.update(str(spec))
    except KeyboardInterrupt:
        interrupted = True
    finally:
        bar.close()
    search_s = time.perf_counter() - t_search
    e2e = None
    if end_to_end_check and not interrupted:
        try:
            e2e = end_to_end(model, example_input, backward=any(d != "forward" for d in directions), dtype=dt,
                             fmt=memory_format if isinstance(memory_format, str) or memory_format is None
                             else {torch.channels_last: "channels_last",
                                   torch.channels_last_3d: "channels_last_3d"}.get(memory_format, "contiguous"),
                             device=dev, fresh_process=fresh_process)
        except KeyboardInterrupt:
            interrupted = True
    return ModelReport(
        model=name or type(model).__name__, problems=tuple(problems), directions=directions, measured=measure,
        env=env, e2e=e2e, interrupted=interrupted, search_s=search_s, wall_s=time.perf_counter() - t_start,
        n_conv_calls=len(uses), created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    )


def load_report(source: str) -> ModelReport:
    """Reads what ModelReport.to_json wrote (a JSON string or a path)."""
    return ModelReport.load(source)


__all__ = ["profile", "ModelReport", "ProblemEntry", "EndToEnd", "LayerRow", "load_report", "discover"]
