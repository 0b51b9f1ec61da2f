"""profile(model, example_input, fusion=True): a model's fusible chains (model.fusion.find_chains on its traced graph,
in eval mode), each searched by find_fused at the input its convolution receives in one forward pass (discovery),
with the fused best, the unfused best and torch's eager time per chain, sums over the model and the memory traffic
each fusion saves; the chains cuDNN cannot fuse, and the convolutions no chain starts from, with why.

Note [one search per distinct chain]: chains of the same convolution spec, input, dtype, layout and epilogue are
one search (a ResNet stage repeats its blocks); the report keeps one row per chain, each with that search's numbers.
"""
from __future__ import annotations

import datetime as _dt
import time
from dataclasses import replace
from typing import Any

import torch

from ..backend import environment
from ..fused import find_fused
from ..problem import DTYPES, check_module, device_index, parse_dtype, parse_memory_format
from ..progress import Progress
from ..results import ChainRow, FusionReport
from .fusion import Chain, scan_in_eval, why_not_fused


def profile_fusion(model: torch.nn.Module, example_input: Any, *, dtype: Any = None, memory_format: Any = None,
                   heuristics: tuple[str, ...] = ("instant", "a"), repeats: int = 5, unfused: bool = True,
                   device: Any = None, progress: bool = True, name: str | None = None) -> FusionReport:
    """The fusible chains of `model` in eval mode (the model is put in eval mode for the scan and left as it was),
    each searched once per distinct problem (Note [one search per distinct chain]) by ``find_fused`` with these
    heuristic lists and repeats. A chain with nothing after its convolution is a row with why; so is one whose
    search failed (its error)."""
    check_module("model", model)
    scan, todo, uses = scan_in_eval(model, example_input)
    dev = device_index(device)
    dt = parse_dtype(dtype) if dtype is not None else None
    t0 = time.perf_counter()
    searches: dict[tuple, Any] = {}
    rows: list[ChainRow] = []
    bar = Progress(len(todo), progress, f"fused search of {name or type(model).__name__}", unit="chain")
    for ch, use in todo:
        rows.append(_chain_row(ch, use, dt, memory_format, heuristics, repeats, unfused, dev, searches))
        bar.update()
    bar.close()
    fmt = _fmt_of(uses, memory_format) if uses else ""
    return FusionReport(
        model=name or type(model).__name__, chains=tuple(rows),
        dtype=DTYPES[dt] if dt is not None else (DTYPES[uses[0].dtype] if uses else ""), memory_format=fmt,
        env=environment(dev), not_chained=tuple(scan.not_chained.items()), trace_error=scan.error,
        search_s=time.perf_counter() - t0, created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))


def _fmt_of(uses, memory_format) -> str:
    u = uses[0]
    return parse_memory_format(memory_format, u.spec.ndim) if memory_format is not None else u.memory_format


def _chain_row(ch: Chain, use, dt, memory_format, heuristics, repeats, unfused, dev, searches) -> ChainRow:
    if use is None:
        return ChainRow(ch.conv, ch.spec, (), ch.ops, why="the forward pass did not call this convolution")
    row = ChainRow(ch.conv, ch.spec, tuple(use.input_shape), ch.ops)
    if why := why_not_fused(ch.ops):
        return replace(row, why=why)
    dtype = dt or use.dtype
    fmt = parse_memory_format(memory_format, use.spec.ndim) if memory_format is not None else use.memory_format
    key = (ch.spec, tuple(use.input_shape), DTYPES[dtype], fmt, ch.ops)
    if key not in searches:
        try:
            searches[key] = find_fused(ch.spec, use.input_shape, ch.ops, dtype=dtype, memory_format=fmt,
                                       heuristics=heuristics, repeats=repeats, unfused=unfused, device=dev)
        except (ValueError, RuntimeError) as e:  # a problem the search refuses (CudnnError is a RuntimeError)
            searches[key] = f"the fused search failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
    res = searches[key]
    if isinstance(res, str):
        return replace(row, why=res)
    b, u, t = res.best, res.best_unfused, res.torch_eager
    out_elems = 1
    for d in ch.spec.shapes(use.input_shape).output_shape:
        out_elems *= d
    return replace(row, fused_name=b.name if b else "", fused_ms=b.kernel_ms if b else None,
                 fused_build_ms=b.build_ms if b else None, unfused_name=u.name if u else "",
                 unfused_ms=u.kernel_ms if u else None, eager_ms=t.kernel_ms if t else None,
                 bytes_saved=ch.bytes_saved(out_elems, torch.empty((), dtype=dtype).element_size()),
                 why="" if b else _no_fused(res))


def _no_fused(res) -> str:
    statuses = sorted({r.status for r in res.of_kind("fused")})
    return res.note or f"no fused configuration ran right (statuses: {', '.join(statuses) or 'none'})"


__all__ = ["profile_fusion"]
