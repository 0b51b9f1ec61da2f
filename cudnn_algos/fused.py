"""cuDNN's fused graphs for one layer: a convolution and its pointwise epilogue (bias, an inference BatchNorm, a
per-channel scale, a residual add, activations) as one operation graph, every engine configuration cuDNN offers for
it built and — with ``measure`` — timed on the kernel clock and checked against a float64 reference, beside the
unfused sequence (each configuration of the convolution alone, then torch's epilogue kernels) and torch's eager op
sequence, all in one kernel-clock session (``find_fused``).

Note [fused against unfused]: the three kinds of candidate are measured by the same pipeline (measure.measure_rows)
on the same operands, so their kernel-clock times are the union of every kernel each call launches: the fused
configuration's one (or few) kernels; the convolution's kernels plus one per epilogue op; torch's convolution plus
one per op. torch's eager convolution with a bias adds it in a kernel of its own after cuDNN's call, so "bias" is a
separate op in both sequences. The reference is the float64 convolution followed by the epilogue in float64; a fused
configuration rounds once (its intermediates are float), the sequences round after every op.
"""
from __future__ import annotations

import datetime as _dt
import time
from dataclasses import replace
from typing import Any, Sequence

import torch

from . import backend
from .backend import environment
from .choices import MAX_BUILD_THREADS
from .configs import SEARCH_LISTS, behavior_note_names, config_name, named_knobs, numerical_note_names
from .epilogue import (apply_reference, apply_torch, graph_operands, graph_ops, make_operands, not_in_graph,
                       parse_epilogue)
from .measure import PRUNE, check_config, measure_rows, operand_sets, reference_output
from .measure.runnable import (Runnable, check_output, guarded_like, own_output, python_loop, tensor_math,
                               torch_call)
from .problem import OUTPUT_OPERAND, Problem, check_choice, check_int, device_index, make_problem
from .results import FusedRow, FusedSearchResult, MeasureConfig


def validate_fused(conv: Any, input_shape: Sequence[int], epilogue: Any, *, dtype: Any = None,
                   memory_format: Any = None, heuristics: Sequence[str] | None = None, exhaustive: bool = False,
                   max_configs: int = 64,
                   measure: bool = True, repeats: int = 10, warmup: int = 3, device: Any = None,
                   build_threads: int = 1) -> tuple[Problem, tuple[str, ...], tuple[str, ...], int]:
    """find_fused's argument checks, with no GPU work but the last (CUDA usable): (problem, the epilogue's ops, the
    heuristic lists, the device index); TypeError / ValueError naming the argument and the value."""
    ops = parse_epilogue(epilogue)
    if heuristics is None:
        heuristics = SEARCH_LISTS
    if isinstance(heuristics, str):
        raise TypeError(f"heuristics={heuristics!r} must be a sequence of names, e.g. ('instant', 'a')")
    for h in heuristics:
        check_choice("heuristics", h, SEARCH_LISTS)
    if not heuristics and not exhaustive:
        raise ValueError("nothing to search: heuristics is empty and exhaustive is off")
    check_int("max_configs", max_configs, 1)
    if not isinstance(measure, bool):
        raise TypeError(f"measure={measure!r} must be a bool")
    if measure:
        check_config(repeats, warmup, "warm")
    if check_int("build_threads", build_threads, 1) > MAX_BUILD_THREADS:
        raise ValueError(f"build_threads={build_threads} must be <= {MAX_BUILD_THREADS}")
    problem = make_problem(conv, input_shape, dtype, memory_format, None)
    return problem, ops, tuple(heuristics), device_index(device)


def find_fused(conv: Any, input_shape: Sequence[int], epilogue: Any, *, dtype: Any = None, memory_format: Any = None,
               heuristics: Sequence[str] | None = None, exhaustive: bool = False, max_configs: int = 64,
               runtime_compiled: bool = True, measure: bool = True, unfused: bool = True, repeats: int = 10,
               warmup: int = 3, check_clock: bool = False, device: Any = None, build_threads: int = 1
               ) -> FusedSearchResult:
    """The fused graph of a convolution's forward pass and its epilogue: every engine configuration cuDNN's lists
    (and, with ``exhaustive``, its engines x knobs up to ``max_configs``) offer for it, built (each row's ``build_ms``:
    the plan's finalize time, runtime compilation in it) and, with ``measure``, timed and checked beside the unfused
    sequences (``unfused``: each configuration of the convolution alone from the same lists, then torch's epilogue
    ops) and torch's eager ops, in one kernel-clock session (Note [fused against unfused]).

    epilogue: op names in order, e.g. ("bn", "relu") or "bias,silu" (cudnn_algos.epilogue.OPS): "bias", "bn" (an
        inference BatchNorm), "scale", "add" (a residual of the output's shape), "relu", "relu6", "silu", "gelu",
        "gelu_tanh", "sigmoid", "tanh", "hardswish", "hardsigmoid" (these two composed of the others:
        epilogue.COMPOSED).
    A transposed convolution's forward is cuDNN's backward-data graph with the epilogue after it. A graph no engine
    runs is a row (kind "fused", stage "graph") with its status, never an empty result."""
    problem, ops, heuristics, dev = validate_fused(
        conv, input_shape, epilogue, dtype=dtype, memory_format=memory_format, heuristics=heuristics,
        exhaustive=exhaustive, max_configs=max_configs, measure=measure, repeats=repeats, warmup=warmup, device=device,
        build_threads=build_threads)
    cdir = problem.cudnn_direction("forward")
    why = not_in_graph(ops)
    gops = () if why else graph_ops(ops)
    cp = backend.conv_problem(problem)
    with torch.cuda.device(dev):
        if why:
            rows, engines, search_ms = [FusedRow(kind="fused", name="fused graph", status="NOT_SUPPORTED",
                                                 stage="graph", note=why)], 0, 0.0
        else:
            out = backend.engine_search(cdir, cp, heuristics, exhaustive, max_configs, runtime_compiled, dev,
                                        build_threads=build_threads, epilogue=gops)
            rows, engines, search_ms = [_fused_row(p) for p in out.plans], out.engine_count, out.search_ms
        result = FusedSearchResult(
            rows=tuple(rows), spec=problem.spec, shapes=problem.shapes, cudnn_direction=cdir, epilogue=ops,
            graph_ops=gops, dtype=problem.dtype_name, memory_format=problem.memory_format, engine_count=engines,
            search_ms=search_ms, env=environment(dev), flops=problem.flops(), note=why,
            created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
        if not measure:
            return result
        plain = (backend.engine_search(cdir, cp, heuristics, False, max_configs, runtime_compiled, dev,
                                       build_threads=build_threads).plans if unfused else ())
        cfg = MeasureConfig(repeats=repeats, warmup=warmup, check_clock=check_clock, prune=PRUNE)
        return _measured(result, problem, ops, gops, plain, cfg, dev)


def _plan_row(kind: str, p: backend.Plan, name: str = "", note: str = "") -> FusedRow:
    """A row of one listed configuration (a fused graph's, or the convolution's alone for kind "unfused")."""
    return FusedRow(
        kind=kind, name=name or config_name(p.engine_id, p.knobs), status=p.status, stage=p.stage,
        engine_id=p.engine_id if p.engine_id >= 0 else None, knobs=named_knobs(p.knobs),
        numerical_notes=numerical_note_names(p.numerical_notes), behavior_notes=behavior_note_names(p.behavior_notes),
        workspace_bytes=p.workspace_bytes if p.workspace_bytes >= 0 else None, build_ms=p.build_ms,
        sources=tuple(p.sources), note=note, plan=p)


def _fused_row(p: backend.Plan) -> FusedRow:
    if p.engine_id < 0:  # the graph itself: no engine runs it
        return _plan_row("fused", p, "fused graph", "no engine of cuDNN's offers this graph")
    return _plan_row("fused", p)


def _measured(result: FusedSearchResult, problem: Problem, ops: tuple[str, ...], gops: tuple[str, ...],
              plain: Sequence[backend.Plan], cfg: MeasureConfig, dev: int) -> FusedSearchResult:
    t0 = time.perf_counter()
    cdir = result.cudnn_direction
    sets = operand_sets(problem, cfg.l2, dev)
    role = OUTPUT_OPERAND[cdir]
    out_shape = tuple(sets[0][role].shape)
    eops = make_operands(ops, out_shape, problem.dtype, problem.torch_format, f"cuda:{dev}")
    gtensors = (graph_operands(ops, eops, out_shape, problem.dtype, problem.torch_format, f"cuda:{dev}")
                if gops else [])
    ref = apply_reference(ops, reference_output(problem, cdir, sets[0], "cuda"), eops)
    label = f"{problem.describe('forward')} + {','.join(ops)}"

    rows = list(result.rows)
    runs: list[Runnable] = []
    slots: list[int] = []
    for i, r in enumerate(rows):
        if r.ok and r.plan is not None:
            runs.append(fused_runnable(problem, cdir, r.plan, sets, gtensors, f"{label} | {r.name}"))
            slots.append(i)
    for p in plain:
        if p.status != "SUCCESS":
            continue
        rows.append(_plan_row("unfused", p, f"{config_name(p.engine_id, p.knobs)} + torch"))
        runs.append(unfused_runnable(problem, cdir, p, sets, ops, eops, f"{label} | {rows[-1].name}"))
        slots.append(len(rows) - 1)
    rows.append(FusedRow(kind="torch", name="torch eager", status="SUCCESS",
                         note=f"torch's convolution, then {len(ops)} op{'s' if len(ops) > 1 else ''} of its own"))
    runs.append(eager_runnable(problem, cdir, sets, ops, eops, f"{label} | torch eager"))
    slots.append(len(rows) - 1)
    ms = measure_rows(runs, problem, replace(cfg, buffer_sets=len(sets)), ref, dev)
    for i, m in zip(slots, ms):
        rows[i] = replace(rows[i], measured=m)
    return replace(result, rows=tuple(rows), measure=cfg, measure_s=time.perf_counter() - t0)


def fused_runnable(problem: Problem, cdir: str, plan: backend.Plan, sets, operands: Sequence[torch.Tensor],
                   label: str = "") -> Runnable:
    """One fused plan: the convolution and its epilogue in one cudnnBackendExecute; its loop runs in C++."""
    xs, ws, ys = ([s[k] for s in sets] for k in "xwy")
    ops = list(operands)
    n = len(sets)

    def call(i: int) -> None:
        s = sets[i % n]
        plan.execute(s["x"], s["w"], s["y"], ops)

    def loop(k: int) -> tuple[float, float]:
        t = plan.time_calls(xs, ws, ys, k, [ops] * n)
        return t.host_ms, t.gpu_ms

    output, guarded = own_output(problem, cdir, sets, call)
    return Runnable(call, loop, output, tensor_math=tensor_math(problem.dtype, problem.math), label=label,
                    guarded_output=guarded)


def unfused_runnable(problem: Problem, cdir: str, plan: backend.Plan, sets, ops: Sequence[str],
                     operands: Sequence[dict[str, torch.Tensor]], label: str = "") -> Runnable:
    """A configuration of the convolution alone, then torch's epilogue ops on its output; its loop is Python's."""
    role, n = OUTPUT_OPERAND[cdir], len(sets)

    def call(i: int) -> torch.Tensor:
        s = sets[i % n]
        plan.execute(s["x"], s["w"], s["y"])
        return apply_torch(ops, s[role], operands)

    def output() -> torch.Tensor:
        orig = sets[0][role]
        out, guards = guarded_like(orig)
        out.fill_(float("nan"))
        sets[0][role] = out
        try:
            plan.execute(sets[0]["x"], sets[0]["w"], sets[0]["y"])
        finally:
            sets[0][role] = orig
        check_output(out, guards)
        return apply_torch(ops, out, operands)

    return Runnable(call, python_loop(call, sets[0]["x"].device.index), output,
                    tensor_math=tensor_math(problem.dtype, problem.math), label=label)


def eager_runnable(problem: Problem, cdir: str, sets, ops: Sequence[str], operands: Sequence[dict[str, torch.Tensor]],
                   label: str = "") -> Runnable:
    """torch's eager sequence: its own convolution (as a model's forward calls it), then one op per epilogue op."""
    conv = torch_call(problem, cdir, sets)

    def call(i: int) -> torch.Tensor:
        return apply_torch(ops, conv(i), operands)

    return Runnable(call, python_loop(call, sets[0]["x"].device.index), lambda: call(0),
                    tensor_math=tensor_math(problem.dtype, problem.math), label=label)


__all__ = ["find_fused", "validate_fused", "fused_runnable", "unfused_runnable", "eager_runnable"]
