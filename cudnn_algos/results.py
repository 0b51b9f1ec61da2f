"""Results of a search: one frozen row per algorithm (and math type), and the search with its full context.

Formatting (text table, HTML, DataFrame, JSON) lives here; none of it needs a GPU. pandas is imported only by
``to_dataframe``.
"""
from __future__ import annotations

import html
import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Iterator

from .measure import MeasuredRow, Measurement, MeasureConfig, Stats
from .spec import ConvShapes, ConvSpec

SCHEMA_VERSION = 2
DIRECTIONS = ("forward", "backward_data", "backward_filter")


@dataclass(frozen=True)
class AlgoResult(MeasuredRow):
    """One algorithm under one math type, in one search.

    ``time_ms``: the time cuDNN's search reported for it (ms; on cuDNN 9 that includes host-side set-up per call);
    None in heuristic mode and for failures. ``workspace_bytes``: the scratch memory it needs. ``rank``: its position
    in cuDNN's returned list (0 = cuDNN's first choice); None when cuDNN did not return it. ``status``: cuDNN's
    status without the ``CUDNN_STATUS_`` prefix, or ``NOT_RETURNED`` / ``WORKSPACE_LIMIT_EXCEEDED``.
    """

    direction: str  # cuDNN's direction: forward / backward_data / backward_filter
    algo: str
    algo_id: int
    status: str
    time_ms: float | None
    workspace_bytes: int | None
    deterministic: bool | None
    math_type: str | None
    rank: int | None
    note: str = ""
    status_code: int = -1  # cuDNN's numeric status; -1 for NOT_RETURNED / WORKSPACE_LIMIT_EXCEEDED
    measured: Measurement | None = None  # find(..., measure=True): our own timings, accuracy and work

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "AlgoResult":
        d = dict(d)
        m = d.get("measured")
        if m is not None:
            m = dict(m)
            for k in ("kernel_ms", "throughput_ms", "host_ms"):
                if m.get(k) is not None:
                    m[k] = Stats(**m[k])
            m["kernels"] = tuple(m.get("kernels", ()))
            d["measured"] = Measurement(**m)
        return cls(**d)


@dataclass(frozen=True)
class Environment:
    """Where a search ran, so that a saved result can be compared later."""

    gpu_name: str
    compute_capability: str
    device_index: int
    driver_version: str | None  # the NVIDIA driver release, e.g. "580.159.04", when readable
    cuda_driver_api: int  # cudaDriverGetVersion, e.g. 13000
    cuda_runtime: int
    cudnn_runtime: int  # cudnnGetVersion of the loaded library, e.g. 91900
    cudnn_build: int  # CUDNN_VERSION the extension was compiled against
    cudnn_library: str | None  # path of the libcudnn the process loaded
    torch_version: str
    torch_cuda: str | None

    @staticmethod
    def version_str(v: int) -> str:
        return f"{v // 10000}.{v % 10000 // 100}.{v % 100}" if v >= 10000 else str(v)


@dataclass(frozen=True)
class SearchResult:
    """Every algorithm of one direction for one convolution problem.

    ``direction`` is the layer's (for a transposed convolution its forward is cuDNN's ``backward_data``, recorded
    in ``cudnn_direction``). ``rows``: successful rows fastest first (heuristic mode: in cuDNN's order), then the
    rest by algorithm id. ``search_ms``: host wall time of the cuDNN search call itself.
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
    schema: int = SCHEMA_VERSION
    # filled by measure=True
    measure: MeasureConfig | None = None
    flops: int | None = None
    peak_tflops: dict[str, float] | None = None  # the device's measured matmul peak(s) used for pct_peak
    heuristic_choice: str | None = None  # cudnnGet..._v7's first choice, "ALGO/math"
    heuristic_regret: float | None = None  # its kernel median / the measured best's

    # ---------------------------------------------------------------- queries
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

    def __iter__(self) -> Iterator[AlgoResult]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    # ---------------------------------------------------------------- text
    def title(self) -> str:
        d = self.direction if self.direction == self.cudnn_direction else f"{self.direction} (cuDNN {self.cudnn_direction})"
        e = self.env
        return (
            f"{self.spec} {d} | input {_shape(self.shapes.input_shape)} {self.dtype} {self.memory_format} "
            f"| math {self.math} | mode {self.mode} | {e.gpu_name} sm_{e.compute_capability.replace('.', '')} "
            f"cuDNN {Environment.version_str(e.cudnn_runtime)}"
        )

    @property
    def is_measured(self) -> bool:
        return any(r.measured is not None for r in self.rows)

    MEASURED_HEADERS = ("algorithm", "math", "status", "kernel ms", "±", "thrpt ms", "host ms", "cuDNN ms",
                        "vs best", "TFLOP/s", "% peak", "rel err", "workspace", "determ.", "h-rank", "m-rank", "note")

    def measured_table_rows(self) -> list[list[str]]:
        best = self.best
        bk = best.kernel_ms if best is not None else None
        out = []
        for r in self.rows:
            m = r.measured
            def f(st, d=4):
                return f"{st.median:.{d}f}" if st is not None else "-"
            note = r.note
            if m is not None and m.error:
                note = (note + "; " if note else "") + m.error
            if m is not None and m.kernel_clock == "cupti":
                note = (note + "; " if note else "") + "kernel time from CUPTI"
            out.append([
                r.algo, r.math_type or "-", r.status,
                f(m.kernel_ms) if m else "-",
                f"{100 * m.kernel_ms.spread:.0f}%" if m and m.kernel_ms else "",
                f(m.throughput_ms) if m else "-",
                f(m.host_ms) if m else "-",
                f"{r.time_ms:.4f}" if r.time_ms is not None else "-",
                f"{r.kernel_ms / bk:.2f}x" if (r.kernel_ms is not None and bk) else "",
                f"{m.tflops:.1f}" if m and m.tflops is not None else "-",
                f"{m.pct_peak:.0f}" if m and m.pct_peak is not None else "-",
                f"{m.rel_err:.1e}" if m and m.rel_err is not None else "-",
                format_bytes(r.workspace_bytes),
                {True: "yes", False: "no", None: "-"}[r.deterministic],
                str(m.heuristic_rank) if m and m.heuristic_rank is not None else "-",
                str(m.measured_rank) if m and m.measured_rank is not None else "-",
                note,
            ])
        return out

    def table_rows(self) -> list[list[str]]:
        best = self.best
        bt = best.time_ms if best is not None else None
        out = []
        for r in self.rows:
            rel = f"{r.time_ms / bt:.2f}x" if (r.ok and r.time_ms is not None and bt) else ""
            out.append(
                [
                    r.algo,
                    str(r.algo_id),
                    r.status,
                    f"{r.time_ms:.4f}" if r.time_ms is not None else "-",
                    rel,
                    format_bytes(r.workspace_bytes),
                    {True: "yes", False: "no", None: "-"}[r.deterministic],
                    r.math_type or "-",
                    str(r.rank) if r.rank is not None else "-",
                    r.note,
                ]
            )
        return out

    HEADERS = ("algorithm", "id", "status", "time ms", "vs best", "workspace", "determ.", "math", "rank", "note")

    def _headers_and_rows(self):
        if self.is_measured:
            return self.MEASURED_HEADERS, self.measured_table_rows(), {3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15}
        return self.HEADERS, self.table_rows(), {1, 3, 4, 5, 8}

    def __str__(self) -> str:
        lines = [self.title()]
        headers, rows, right = self._headers_and_rows()
        lines += _aligned(headers, rows, right=right)
        b = self.best
        tail = f"best: {b.algo} ({b.math_type})" if b else "best: none succeeded"
        if b is not None and b.kernel_ms is not None:
            tail += f" {b.kernel_ms:.4f} ms kernel ({b.measured.kernel_clock}, median of {b.measured.kernel_ms.n})"
        elif b is not None and b.time_ms is not None:
            tail += f" {b.time_ms:.4f} ms (cuDNN's reported time)"
        tail += f"; search took {self.search_ms:.1f} ms"
        if self.workspace_given is not None:
            tail += f"; workspace given {format_bytes(self.workspace_given)}"
        lines.append(tail)
        if self.measure is not None:
            regret = f"{self.heuristic_regret:.2f}x" if self.heuristic_regret is not None else "n/a"
            peaks = ", ".join(f"{k} {v:.0f} TFLOP/s" for k, v in (self.peak_tflops or {}).items())
            lines.append(
                f"heuristic's choice: {self.heuristic_choice or '-'} (regret {regret}); "
                f"{self.flops / 1e9:.2f} GFLOP per call; peak: {peaks or '-'}; L2 {self.measure.l2} "
                f"({self.measure.buffer_sets} operand set(s)); {self.measure.repeats} samples after "
                f"{self.measure.warmup} warm-up calls"
            )
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        headers, rows, _ = self._headers_and_rows()
        head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows
        )
        return f"<p><b>{html.escape(self.title())}</b></p><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    # ---------------------------------------------------------------- data
    def to_records(self) -> list[dict[str, Any]]:
        ctx = {
            "layer": str(self.spec),
            "layer_direction": self.direction,
            "input_shape": self.shapes.input_shape,
            "dtype": self.dtype,
            "memory_format": self.memory_format,
            "mode": self.mode,
            "gpu": self.env.gpu_name,
            "cudnn": Environment.version_str(self.env.cudnn_runtime),
        }
        out = []
        for r in self.rows:
            d = asdict(r)
            m = d.pop("measured")
            if m is not None:
                for k in ("kernel_ms", "throughput_ms", "host_ms"):
                    st = m.pop(k)
                    for f_ in ("median", "min", "max", "spread"):
                        m[f"{k.replace('_ms', '')}_{f_}" + ("_ms" if f_ != "spread" else "")] = st[f_] if st else None
                m["kernels"] = ";".join(m["kernels"])
                m["measure_error"] = m.pop("error")
                d.update(m)
            out.append({**d, **ctx})
        return out

    def to_dataframe(self):
        """One row per algorithm with the search context as columns (needs pandas)."""
        try:
            import pandas as pd
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError("to_dataframe() needs pandas: pip install pandas") from e
        return pd.DataFrame.from_records(self.to_records())

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["rows"] = [r.to_dict() for r in self.rows]
        d["measure"] = asdict(self.measure) if self.measure is not None else None
        d["spec"] = self.spec.to_dict()
        d["shapes"] = _lists(asdict(self.shapes))
        d["env"] = asdict(self.env)
        return d

    def to_json(self, path: str | None = None, **kwargs: Any) -> str:
        return write_json(self.to_dict(), path, **kwargs)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SearchResult":
        d = dict(d)
        if d.get("schema", SCHEMA_VERSION) != SCHEMA_VERSION:
            raise ValueError(f"result schema {d.get('schema')} is not {SCHEMA_VERSION}; it was saved by another version")
        d["rows"] = tuple(AlgoResult.from_dict(r) for r in d["rows"])
        if d.get("measure") is not None:
            d["measure"] = MeasureConfig(**d["measure"])
        d["spec"] = ConvSpec.from_dict(d["spec"])
        d["shapes"] = ConvShapes(**_tuples(d["shapes"]))
        d["env"] = Environment(**d["env"])
        return cls(**d)


@dataclass(frozen=True)
class SearchResults:
    """The three directions' searches of one problem (``find(..., direction="all")``)."""

    results: tuple[SearchResult, ...] = field(default_factory=tuple)

    def __iter__(self) -> Iterator[SearchResult]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

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

    def __str__(self) -> str:
        return "\n\n".join(str(r) for r in self.results)

    def _repr_html_(self) -> str:
        return "".join(r._repr_html_() for r in self.results)

    def to_dataframe(self):
        import pandas as pd

        return pd.concat([r.to_dataframe() for r in self.results], ignore_index=True)

    def to_dict(self) -> dict[str, Any]:
        return {"results": [r.to_dict() for r in self.results]}

    def to_json(self, path: str | None = None, **kwargs: Any) -> str:
        return write_json(self.to_dict(), path, **kwargs)


def write_json(d: dict[str, Any], path: str | None = None, **kwargs: Any) -> str:
    """JSON text of `d` (strict: no NaN), also written to `path` when given."""
    text = json.dumps(d, indent=kwargs.pop("indent", 1), allow_nan=False, **kwargs)
    if path is not None:
        with open(path, "w") as f:
            f.write(text)
    return text


def read_json(source: str) -> dict[str, Any]:
    """A JSON object from a string holding it or from a file path."""
    if source.lstrip().startswith("{"):
        return json.loads(source)
    with open(source) as f:
        return json.load(f)


def load_json(source: str) -> SearchResult | SearchResults:
    """Reads what ``to_json`` wrote (a JSON string or a file path) back into equal result objects."""
    d = read_json(source)
    if "results" in d and "rows" not in d:
        return SearchResults(tuple(SearchResult.from_dict(r) for r in d["results"]))
    return SearchResult.from_dict(d)


# -------------------------------------------------------------------- helpers
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


def _shape(t: tuple[int, ...]) -> str:
    return "(" + ",".join(str(v) for v in t) + ")"


def _aligned(headers: tuple[str, ...], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def fmt(cells):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return [fmt(headers), fmt(["-" * w for w in widths]), *(fmt(r) for r in rows)]


def _lists(d: dict) -> dict:
    def conv(v):
        return [conv(x) for x in v] if isinstance(v, (tuple, list)) else v

    return {k: conv(v) for k, v in d.items()}


def _tuples(d: dict) -> dict:
    def conv(v):
        return tuple(conv(x) for x in v) if isinstance(v, list) else v

    return {k: conv(v) for k, v in d.items()}
