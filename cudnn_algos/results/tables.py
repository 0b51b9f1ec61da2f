"""Text, HTML and long-form DataFrame rendering shared by every result type: number formats, tables that fit a
width (keys and a legend for long cells, columns dropped in a stated order), and one long-form record per
candidate (LONG_FORM_COLUMNS). pandas is imported only to build a DataFrame."""
from __future__ import annotations

import html
import textwrap
from typing import Any, Sequence

from ..configs import LISTS
from ..repro import repro_command
from ..environment import Environment
from .rows import AlgoResult, EngineRow, Measurement, TorchRun

TEXT_WIDTH = 120  # what printed tables fit (the widest a terminal or a pasted block usually shows)


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


def median_cell(m: Measurement | None, attr: str) -> str:
    st = getattr(m, attr) if m is not None else None
    return format_ms(st.median) if st is not None else "-"


def measure_note(m: Measurement | None) -> str:
    if m is None:
        return ""
    notes = [m.error] if m.error else []
    if m.wrong and m.rel_err is not None:  # Note [a wrong output] (a non-finite one says so in its error)
        notes.append(f"WRONG OUTPUT: {m.rel_err:.2g} from float64, never a best")
    if m.pruned:
        notes.append("one sample: far slower than the fastest at its first call")
    if m.host_bound:
        notes.append("host-bound: a call costs more host time than GPU time")
    return "; ".join(notes)


LONG_FORM_COLUMNS = (
    "model", "layers", "uses", "spec", "input_shape", "dtype", "memory_format", "math", "direction",
    "cudnn_direction", "candidate_kind", "candidate", "repro", "engine_id", "knobs", "algo", "algo_id", "math_type", "status",
    "stage", "note", "workspace_bytes", "deterministic", "sources", "heuristic_rank",
    *(h.rank_column for h in LISTS), *(h.query_column for h in LISTS), "torch_rank", "torch_filter", "torch_ran", "first_call_ms", "kernel_median_ms", "kernel_min_ms", "kernel_max_ms", "kernel_spread", "kernel_samples_ms",
    "throughput_median_ms", "throughput_min_ms", "throughput_max_ms", "throughput_spread", "throughput_samples_ms",
    "host_median_ms", "host_min_ms", "host_max_ms", "host_spread", "host_samples_ms", "calls_per_sample",
    "kernel_calls", "kernel_clock", "kernels", "activities_per_call", "reference_kernel_ms", "rel_err", "max_abs_err",
    "tflops", "pct_peak", "measured_rank", "confirmed", "pruned", "host_bound", "measure_error", "gpu",
    "compute_capability", "driver", "cuda_runtime", "cudnn", "torch", "package_version", "host", "git_commit",
    "created")


def legacy_candidate(r: AlgoResult) -> dict[str, Any]:
    return {"candidate_kind": "legacy", "candidate": r.name, "algo": r.algo, "algo_id": r.algo_id,
            "math_type": r.math_type, "status": r.status, "note": r.note, "workspace_bytes": r.workspace_bytes,
            "deterministic": r.deterministic, "heuristic_rank": r.rank}


def engine_candidate(r: EngineRow) -> dict[str, Any]:
    return {"candidate_kind": "engine", "candidate": r.name, "engine_id": r.engine_id,
            "knobs": dict(r.knobs), "status": r.status, "stage": r.stage,
            "note": ",".join(r.numerical_notes + r.behavior_notes), "workspace_bytes": r.workspace_bytes,
            "deterministic": r.deterministic, "sources": list(r.sources), "heuristic_rank": r.rank_a,
            **{h.rank_column: r.rank(h.source) for h in LISTS},
            "torch_rank": r.torch_rank, "torch_filter": r.torch_filter, "torch_ran": list(r.torch_ran)}


def torch_candidate(t: TorchRun) -> dict[str, Any]:
    return {"candidate_kind": "torch_" + t.mode.replace("benchmark_", ""), "candidate": "torch " + t.mode,
            "status": "SUCCESS" if t.measured is not None and t.measured.kernel_ms is not None else "NOT_MEASURED",
            "first_call_ms": t.first_call_ms,
            "note": f"ran {', '.join(t.matches) or t.match} ({t.where})" + (f"; {t.error}" if t.error else "")}


def record(search: Any, candidate: dict[str, Any], m: Measurement | None, context: dict[str, Any]) -> dict[str, Any]:
    """One long-form record: the search's problem and environment, the candidate's columns, its measurement."""
    e = search.env
    d = dict.fromkeys(LONG_FORM_COLUMNS)
    d.update(model=None, layers=[], uses=1, spec=str(search.spec), input_shape="x".join(map(str, search.shapes.input_shape)),
             dtype=search.dtype, memory_format=search.memory_format, math=getattr(search, "math", None),
             direction=search.direction, cudnn_direction=search.cudnn_direction, gpu=e.gpu_name,
             compute_capability=e.compute_capability, driver=e.driver_version, cuda_runtime=e.cuda_runtime,
             cudnn=Environment.version_str(e.cudnn_runtime), torch=e.torch_version, package_version=e.package_version,
             host=e.hostname, git_commit=e.git_commit, created=search.created)
    d.update(context)
    d.update(candidate)
    d["repro"] = repro_command(candidate["candidate_kind"], candidate["candidate"], spec=search.spec,
                               input_shape=search.shapes.input_shape, dtype=search.dtype,
                               memory_format=search.memory_format, direction=search.direction,
                               math_type=candidate.get("math_type"))
    if m is not None:
        for k in ("kernel", "throughput", "host"):
            st = getattr(m, f"{k}_ms")
            if st is not None:
                d.update({f"{k}_median_ms": st.median, f"{k}_min_ms": st.min, f"{k}_max_ms": st.max,
                          f"{k}_spread": st.spread, f"{k}_samples_ms": list(st.samples)})
        d.update(calls_per_sample=m.calls_per_sample, kernel_calls=m.kernel_calls, kernel_clock=m.kernel_clock,
                 kernels=list(m.kernels), activities_per_call=m.activities_per_call,
                 reference_kernel_ms=m.reference_kernel_ms, rel_err=m.rel_err, max_abs_err=m.max_abs_err,
                 tflops=m.tflops, pct_peak=m.pct_peak, measured_rank=m.measured_rank, confirmed=m.confirmed,
                 pruned=m.pruned, host_bound=m.host_bound, measure_error=m.error)
    return d


# The long-form table's dtypes: lists as list columns (Arrow writes them as lists), integers that may be missing
# as pandas' nullable Int64, flags as nullable boolean, the environment as categories (one value per run, repeated on
# its rows so that tables of several runs concatenate), text missing as None (never ""); the rest float64 or text.
LIST_COLUMNS = ("layers", "sources", "torch_ran", "kernel_samples_ms", "throughput_samples_ms", "host_samples_ms",
                "kernels")
INT_COLUMNS = ("uses", "engine_id", "algo_id", "workspace_bytes", "heuristic_rank", *(h.rank_column for h in LISTS),
               "torch_rank", "calls_per_sample", "kernel_calls", "measured_rank", "cuda_runtime")
BOOL_COLUMNS = ("deterministic", "confirmed", "pruned", "host_bound")
CATEGORY_COLUMNS = ("model", "dtype", "memory_format", "math", "direction", "cudnn_direction", "candidate_kind",
                    "status", "kernel_clock", "gpu", "compute_capability", "driver", "cudnn", "torch",
                    "package_version", "host", "git_commit")
FLOAT_COLUMNS = tuple(c for c in LONG_FORM_COLUMNS if c.endswith(("_ms", "_spread")) and c not in LIST_COLUMNS) + (
    "activities_per_call", "reference_kernel_ms", "rel_err", "max_abs_err", "tflops", "pct_peak")
ENV_COLUMNS = ("gpu", "compute_capability", "driver", "cuda_runtime", "cudnn", "torch", "package_version", "host",
               "git_commit")


def dataframe(records: list[dict[str, Any]]):
    """A DataFrame of records; the long form (LONG_FORM_COLUMNS) with its dtypes (above) and the environments it
    holds in ``attrs["environments"]``."""
    try:
        import pandas as pd
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("to_dataframe() needs pandas: pip install pandas") from e
    if records and set(records[0]) != set(LONG_FORM_COLUMNS):
        return pd.DataFrame.from_records(records)
    df = pd.DataFrame.from_records(records, columns=LONG_FORM_COLUMNS)
    for c in LONG_FORM_COLUMNS:
        if c in LIST_COLUMNS:
            df[c] = [list(v) if isinstance(v, (list, tuple)) else [] for v in df[c]]
        elif c in INT_COLUMNS:
            df[c] = pd.array([None if v is None or v != v else int(v) for v in df[c]], dtype="Int64")
        elif c in BOOL_COLUMNS:
            df[c] = pd.array([None if v is None or v != v else bool(v) for v in df[c]], dtype="boolean")
        elif c in FLOAT_COLUMNS:
            df[c] = pd.to_numeric(df[c], errors="coerce").astype("float64")
        elif c == "knobs":
            df[c] = [v if isinstance(v, dict) else None for v in df[c]]
        else:
            df[c] = [None if v is None or v == "" or v != v else v for v in df[c]]
            if c in CATEGORY_COLUMNS:
                df[c] = df[c].astype("category")
    envs = dict.fromkeys(tuple(r.get(c) or None for c in ENV_COLUMNS) for r in records)
    df.attrs["environments"] = [dict(zip(ENV_COLUMNS, e)) for e in envs]
    return df


def knobs_text(knobs: Any) -> str:
    """An engine row's knobs as flat text, NAME=value,... ("" for none): CSV and Parquet cells."""
    return ",".join(f"{k}={v}" for k, v in knobs.items()) if isinstance(knobs, dict) else ""


def csv_text(df) -> str:
    """The long-form table as CSV: list columns as space-separated values, knobs as NAME=value,... ."""
    out = df.copy()
    for c in LIST_COLUMNS:
        if c in out:
            out[c] = [" ".join(f"{x:.6g}" if isinstance(x, float) else str(x) for x in v) for v in out[c]]
    if "knobs" in out:
        out["knobs"] = [knobs_text(d) for d in out.knobs]
    return out.to_csv(index=False)


def html_table(title: str, headers: Sequence[str], rows: list[list[str]], escaped: bool = False) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    t = title if escaped else f"<b>{html.escape(title)}</b>"
    return f"<p>{t}</p><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def direction_label(direction: str, cudnn_direction: str) -> str:
    return direction if direction == cudnn_direction else f"{direction} (cuDNN {cudnn_direction})"


def yes_no(v: bool | None) -> str:
    return {True: "yes", False: "no", None: "-"}[v]


def int_cell(v: int | None) -> str:
    return "-" if v is None else str(v)


def shape_text(t: tuple[int, ...]) -> str:
    return "(" + ",".join(str(v) for v in t) + ")"


def fit_table(headers: Sequence[str], rows: list[list[str]], right: set[int], *, width: int = TEXT_WIDTH,
              legend: dict[int, int] | None = None, drop: Sequence[int] = ()) -> list[str]:
    """Text table lines no wider than `width` where possible. A cell of a column in `legend` (index -> widest cell)
    longer than that is printed as a key, ``[1]`` (a configuration keeps its engine: ``eng62[1]``), and its whole
    text once in a legend under the table, unbroken (a configuration name stays pasteable into ``--config``); then,
    while the table is still too wide, the columns in `drop` are left out in that order, and a last line names them.
    The data behind the table keeps everything (to_dataframe, to_html, JSON)."""
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


def wrap_lines(lines: Sequence[str], width: int = TEXT_WIDTH) -> list[str]:
    """Prose lines wrapped to `width` (table lines are already that narrow); words are never broken, so a
    configuration name stays whole."""
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


