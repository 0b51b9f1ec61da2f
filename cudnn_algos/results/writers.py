"""The output formats of a result, one function each (``WRITERS``: name -> Writer). The CLI's `show` and `profile`
take one flag per writer (``--<name> PATH``) from this registry, so a new format is one function here. Every writer
takes any result (a search, a set of searches, an engine search, a model report) and writes what it has; one that
cannot write a result raises ValueError saying why (nothing written)."""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any, Callable

from ..files import atomic_write
from .tables import csv_text


@dataclass(frozen=True)
class Writer:
    name: str  # the format, and the CLI's flag --<name>
    help: str  # the flag's help
    needs: tuple[str, ...]  # the packages it needs (the CLI checks them before the run)
    write: Callable[[Any, str], str]  # (result, path) -> what it wrote, for "wrote PATH (...)"; "" when nothing


def _csv(obj: Any, path: str) -> str:
    df = obj.to_dataframe()
    atomic_write(path, csv_text(df))
    return f"{len(df)} rows"


def _html(obj: Any, path: str) -> str:
    to_html, rich = getattr(obj, "to_html", None), getattr(obj, "_repr_html_", None)
    if to_html:
        page = to_html()
    elif rich:
        page = f"<html><body>{rich()}</body></html>"
    else:  # a result with no table of its own in HTML (the fused ones): its text, as printed
        page = f"<html><body><pre>{html.escape(str(obj))}</pre></body></html>"
    atomic_write(path, page)
    return ""


def _parquet(obj: Any, path: str) -> str:
    import io

    df = obj.to_dataframe()
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    atomic_write(path, buf.getvalue())
    return f"{len(df)} rows"


def _trace(obj: Any, path: str) -> str:
    from ..trace import write_chrome_trace

    try:
        return f"{write_chrome_trace(obj, path)} phase slices"
    except TypeError as e:  # a kind of result with no timeline (the fused ones)
        raise ValueError(str(e)) from None


WRITERS: dict[str, Writer] = {w.name: w for w in (
    Writer("csv", "the long-form table as CSV", ("pandas",), _csv),
    Writer("parquet", "the long-form table as Parquet (typed columns; pandas, polars and duckdb read it)",
           ("pandas", "pyarrow"), _parquet),
    Writer("html", "the table as an HTML page", (), _html),
    Writer("trace", "the search's timeline as a Chrome trace (chrome://tracing, Perfetto)", (), _trace),
)}


__all__ = ["Writer", "WRITERS"]
