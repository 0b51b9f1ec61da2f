"""The legacy verbs: ``find`` (every legacy cuDNN algorithm of a convolution, failures included) and ``run`` (execute
one chosen algorithm or engine configuration on your tensors).

Every argument is validated before any GPU work, so bad input raises the same typed error on a machine without a
GPU. Shapes, dtypes and layouts follow torch's conventions; see ConvSpec for the layer side.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import warnings
from dataclasses import replace
from typing import Sequence

import torch
import torch.nn.functional as F

from . import backend
from .backend import LegacySearch, environment
from .errors import CudnnError
from .measure import (check_config, legacy_runnable, measure_rows, operand_sets, peak_label, peak_or_none,
                      reference_output, tensor_math)
from .problem import (DIRECTIONS, MATH_TYPES, MEMORY_FORMATS, MODES, OUTPUT_OPERAND, Problem, check_choice,
                      device_index, layout_of, make_problem, parse_workspace_limit)
from .results import AlgoResult, EngineRow, MeasureConfig, SearchResult, SearchResults
from .spec import ConvShapes, ConvSpec


def find(
    conv: ConvSpec | torch.nn.Module,
    input_shape: Sequence[int],
    *,
    direction: str = "forward",
    dtype: torch.dtype | str | None = None,
    memory_format: torch.memory_format | str | None = None,
    math: str | None = None,
    mode: str = "find",
    workspace_limit: int | None = None,
    device: int | str | torch.device | None = None,
    measure: bool = False,
    repeats: int = 10,
    warmup: int = 3,
    l2: str = "warm",
    reference: str = "cuda",
    check_clock: bool = False,
) -> SearchResult | SearchResults:
    """Asks cuDNN for every legacy algorithm of one convolution and returns them all, failures included.

    conv: ``nn.Conv1d/2d/3d``, ``nn.ConvTranspose1d/2d/3d`` or a :class:`ConvSpec`; only its hyper-parameters are
        read (the module may live on any device).
    input_shape: the layer's input, ``(N, C, *spatial)``.
    direction: the layer's ``"forward"``, ``"backward_data"`` (grad wrt input), ``"backward_filter"`` (grad wrt
        weight), or ``"all"`` (returns :class:`SearchResults` with the three).
    dtype: float32 / float16 / bfloat16 / float64 (default: the module's weight dtype, else float32).
    memory_format: ``"contiguous"`` (default), ``"channels_last"`` (2-d) or ``"channels_last_3d"`` (3-d).
    math: cuDNN math type set on the descriptor before the search (default: what torch would use).
    mode: ``"find"`` (cudnnFind…Algorithm: cuDNN allocates and times), ``"find_ex"`` (cudnnFind…AlgorithmEx on
        fresh random tensors and a workspace from torch's allocator), ``"heuristic"`` (cudnnGet…_v7: ranking only).
    workspace_limit: bytes; algorithms needing more become ``WORKSPACE_LIMIT_EXCEEDED`` rows.
    measure: time every successful algorithm ourselves with cudnn_algos.measure's clocks (kernel: CUPTI records of
        eager calls; throughput; host), ``repeats`` samples after ``warmup`` calls, its error against a float64
        reference computed by torch (on ``reference``: "cuda" or "cpu"), TFLOP/s and % of peak, ranks.
    l2: "warm" (the same operands every call) or "cold" (rotate operand sets totalling > 3x the L2 cache).
    check_clock: also time every row with the independent clock (torch.profiler) to check the kernel clock.

    ``time_ms`` is milliseconds as cuDNN reported it; workspace is in bytes.
    """
    cfg = None
    if measure:
        check_config(repeats, warmup, l2, reference)
        cfg = MeasureConfig(repeats=repeats, warmup=warmup, l2=l2, check_clock=bool(check_clock), reference=reference)
    problem, directions, limit, dev = validate(conv, input_shape, direction=direction, dtype=dtype,
                                              memory_format=memory_format, math=math, mode=mode,
                                              workspace_limit=workspace_limit, device=device)
    results = tuple(_search_one(problem, d, mode, limit, dev, cfg) for d in directions)
    return results[0] if direction != "all" else SearchResults(results)


def validate(conv, input_shape, *, direction="forward", dtype=None, memory_format=None, math=None, mode="find",
             workspace_limit=None, device=None) -> tuple[Problem, tuple[str, ...], int, int]:
    """All of find()'s argument checks, in order, with no GPU work but the final check that CUDA is usable.
    Raises ValueError / TypeError naming the argument, or CudaUnavailableError."""
    problem = make_problem(conv, input_shape, dtype, memory_format, math)
    check_choice("direction", direction, DIRECTIONS + ("all",))
    directions = DIRECTIONS if direction == "all" else (direction,)
    check_choice("mode", mode, MODES)
    limit = parse_workspace_limit(workspace_limit)
    return problem, directions, limit, device_index(device)


def _order(rows: list[AlgoResult], mode: str) -> tuple[AlgoResult, ...]:
    """Successful rows first (by our kernel median when measured, else cuDNN's time, or its rank in heuristic
    mode), then the others by algorithm id."""
    ok = [r for r in rows if r.ok]
    rest = [r for r in rows if not r.ok]
    if any(r.kernel_ms is not None for r in ok):
        ok.sort(key=lambda r: (r.kernel_ms is None, r.kernel_ms or 0.0))
    elif mode == "heuristic":
        ok.sort(key=lambda r: (r.rank if r.rank is not None else 1 << 30))
    else:
        ok.sort(key=lambda r: (r.time_ms is None, r.time_ms or 0.0, r.rank or 0))
    rest.sort(key=lambda r: (r.algo_id, r.rank if r.rank is not None else 1 << 30))
    return tuple(ok + rest)


def _cudnn_search(problem: Problem, cdir: str, mode: str, limit: int, dev: int, direction: str) -> LegacySearch:
    tensors = problem.operands(dev, "find()") if mode == "find_ex" else {}
    try:
        with torch.cuda.device(dev):
            return backend.legacy_search(cdir, backend.conv_problem(problem), mode, tensors.get("x"),
                                         tensors.get("w"), tensors.get("y"), workspace_limit=limit, device=dev)
    except CudnnError as e:
        err = problem.with_context(e, direction)
    finally:
        tensors.clear()  # a traceback must not keep the operands alive
    raise err


def _search_one(problem: Problem, direction: str, mode: str, limit: int, dev: int, cfg=None) -> SearchResult:
    cdir = problem.cudnn_direction(direction)
    out = _cudnn_search(problem, cdir, mode, limit, dev, direction)
    rows = [AlgoResult(direction=cdir, memory_format=problem.memory_format, **dataclasses.asdict(r)) for r in out.rows]
    result = SearchResult(
        rows=_order(rows, mode), spec=problem.spec, shapes=problem.shapes, direction=direction, cudnn_direction=cdir,
        mode=mode, dtype=problem.dtype_name, memory_format=problem.memory_format, math=problem.math,
        workspace_limit=None if limit < 0 else limit, workspace_given=out.workspace_given,
        search_ms=out.search_ms, env=environment(dev),
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
    if cfg is None:
        return result
    with torch.cuda.device(dev):
        result = _measure(result, problem, cfg, limit, dev)
    return replace(result, rows=_order(list(result.rows), mode))


def _measure(result: SearchResult, problem: Problem, cfg: MeasureConfig, limit: int, dev: int) -> SearchResult:
    """Every successful row measured by measure_rows; the heuristic's first choice and its regret."""
    cdir = result.cudnn_direction
    heur: dict[tuple[int, str | None], int] = {}  # (algo, math) -> rank in cudnnGet..._v7's list
    heur_first = None
    try:
        h = backend.legacy_search(cdir, backend.conv_problem(problem), "heuristic", workspace_limit=limit, device=dev)
        for r in sorted((r for r in h.rows if r.rank is not None), key=lambda r: r.rank):
            heur.setdefault((r.algo_id, r.math_type), r.rank)
            if heur_first is None and r.status == "SUCCESS":
                heur_first = (r.algo, r.math_type)
    except CudnnError:
        pass
    sets = operand_sets(problem, cfg.l2, dev)
    cfg = replace(cfg, buffer_sets=len(sets))
    ref = reference_output(problem, cdir, sets[0], cfg.reference)
    idx = [i for i, r in enumerate(result.rows) if r.ok]
    runs = []
    for i in idx:
        row = result.rows[i]
        run = legacy_runnable(problem, cdir, row.algo_id, row.math_type or problem.math, sets, limit,
                              f"{problem.describe(result.direction)} | {row.name}")
        run.heuristic_rank = heur.get((row.algo_id, row.math_type))
        runs.append(run)
    ms = measure_rows(runs, problem, cfg, ref, dev)
    rows = list(result.rows)
    for i, m in zip(idx, ms):
        rows[i] = replace(rows[i], measured=m)
    del sets, ref
    best = min((r for r in rows if r.kernel_ms is not None), key=lambda r: r.kernel_ms, default=None)
    choice = regret = None
    if heur_first is not None:
        choice = f"{heur_first[0]}/{heur_first[1]}"
        hit = next((r for r in rows if r.name == choice and r.kernel_ms is not None), None)
        if hit is not None and best is not None:
            regret = hit.kernel_ms / best.kernel_ms
    peaks = {peak_label(problem.dtype, tc): peak_or_none(dev, problem.dtype, tc and problem.dtype == torch.float32)
             for tc in {tensor_math(problem.dtype, r.math_type) for r in rows if r.kernel_ms is not None}}
    peaks = {k: v for k, v in peaks.items() if v is not None}
    return replace(result, rows=tuple(rows), measure=cfg, flops=problem.flops(), heuristic_choice=choice,
                   heuristic_regret=regret, peak_tflops=peaks)


# ---------------------------------------------------------------------------------------------- run
def _algo_id(algo: AlgoResult | str | int, cdir: str) -> tuple[int, str | None]:
    names = backend.algo_names(cdir)
    if isinstance(algo, AlgoResult):
        if algo.direction != cdir:
            raise ValueError(f"algo is a {algo.direction} row but this call runs cuDNN's {cdir}")
        return algo.algo_id, algo.math_type
    if isinstance(algo, str):
        if algo not in names:
            raise ValueError(f"algo={algo!r} is not a {cdir} algorithm; valid: {', '.join(names)}")
        return names.index(algo), None
    if isinstance(algo, int) and not isinstance(algo, bool):
        if not 0 <= algo < len(names):
            raise ValueError(f"algo={algo} is out of range for {cdir} (0..{len(names) - 1})")
        return algo, None
    raise TypeError(f"algo={algo!r} must be an AlgoResult row, an EngineRow, an algorithm name or an id")


def _run_layout(memory_format, algo, tensors: dict[str, torch.Tensor], ndim: int) -> str:
    """The layout run() computes in: `memory_format` if given, else the one the row was searched in (an engine
    plan is built for one layout), else the first tensor's. Warns when a tensor is unambiguously in another layout
    (it is copied into the row's)."""
    if memory_format is not None:
        return memory_format
    searched = getattr(algo, "memory_format", "") or ""
    if not searched:
        return layout_of(next(iter(tensors.values())))
    fmt = MEMORY_FORMATS[searched]
    odd = [n for n, t in tensors.items() if t.dim() == ndim + 2 and not t.is_contiguous(memory_format=fmt)]
    if odd:
        warnings.warn(f"run(): {', '.join(odd)} not in the layout the row was searched in ({searched}); copied into it",
                      stacklevel=3)
    return searched


def run(
    conv: ConvSpec | torch.nn.Module,
    algo: AlgoResult | EngineRow | str | int,
    *,
    direction: str = "forward",
    input: torch.Tensor | None = None,
    weight: torch.Tensor | None = None,
    grad_output: torch.Tensor | None = None,
    input_shape: Sequence[int] | None = None,
    math: str | None = None,
    memory_format: torch.memory_format | str | None = None,
    workspace_limit: int | None = None,
) -> torch.Tensor:
    """Computes one direction of the layer with one chosen legacy algorithm or engine configuration.

    direction ``"forward"`` needs ``input`` and ``weight`` and returns the layer's output (no bias);
    ``"backward_data"`` needs ``weight``, ``grad_output`` and ``input_shape`` (or ``input``) and returns the
    gradient wrt the input; ``"backward_filter"`` needs ``input`` and ``grad_output`` and returns the gradient wrt
    the weight. ``algo`` is a row of a search (a legacy row: its algorithm and math type; an engine row: its
    execution plan, alive in this process), a legacy algorithm name or id. The tensors must be CUDA tensors of one
    dtype on one device; the layout is ``memory_format``, else the one the row was searched in, else the first
    tensor's. Returns a new tensor in that layout. For checking and pinning, not a fast path (descriptors per call).
    """
    spec = ConvSpec.coerce(conv)
    check_choice("direction", direction, DIRECTIONS)
    limit = parse_workspace_limit(workspace_limit)
    need = {"forward": ("input", "weight"), "backward_data": ("weight", "grad_output"),
            "backward_filter": ("input", "grad_output")}[direction]
    given = {"input": input, "weight": weight, "grad_output": grad_output}
    for name in need:
        t = given[name]
        if t is None:
            raise ValueError(f"direction={direction!r} needs {name}=")
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, not {type(t).__name__}")
    first = given[need[0]]
    _check_input_shape(input_shape, input)
    if input_shape is None:
        if input is None:
            raise ValueError(f"direction={direction!r} needs input_shape= (or input=) to know the input's size")
        input_shape = tuple(input.shape)
    fmt = _run_layout(memory_format, algo, {n: given[n] for n in need}, spec.ndim)
    problem = make_problem(spec, input_shape, first.dtype, fmt, math)
    if weight is not None and tuple(weight.shape) != problem.shapes.weight_shape:
        raise ValueError(f"weight has shape {tuple(weight.shape)} but {spec} needs {problem.shapes.weight_shape}")
    if grad_output is not None and tuple(grad_output.shape) != problem.shapes.output_shape:
        raise ValueError(
            f"grad_output has shape {tuple(grad_output.shape)} but the layer's output is {problem.shapes.output_shape}")
    for name in need:
        t = given[name]
        if not t.is_cuda:
            raise ValueError(f"{name} is on {t.device}; run() needs CUDA tensors")
        if t.dtype != problem.dtype:
            raise ValueError(f"{name} has dtype {t.dtype} but {need[0]} has {problem.dtype}")
    dev = first.device.index if first.device.index is not None else torch.cuda.current_device()
    cdir = problem.cudnn_direction(direction)
    execute = _executor(problem, algo, cdir, math, limit)
    sh = problem.shapes
    roles = _roles(spec, sh, direction, input, weight, grad_output)
    out_role = OUTPUT_OPERAND[cdir]
    ops = {r: _aligned(t.reshape(problem.lift(t.shape)).contiguous(memory_format=problem.torch_format),
                       problem.torch_format) for r, t in roles.items()}
    ops[out_role] = problem.poisoned_operand(out_role, dev)
    try:
        with torch.cuda.device(dev):
            execute(ops["x"], ops["w"], ops["y"])
    except CudnnError as e:
        err = problem.with_context(e, direction)
    else:
        err = None
    if err is not None:
        raise err
    result = ops[out_role]
    if spec.ndim == 1:
        result = result.squeeze(2)
    if not spec.transposed and direction == "backward_data" and sh.has_pre_pad:
        result = _unpad_grad(result, sh)
    return result


def _aligned(t: torch.Tensor, fmt: torch.memory_format) -> torch.Tensor:
    """`t`, or a copy of it where its first element is not 16-byte aligned (a view at a storage offset): the plans
    are built for 16-byte aligned operands (Note [16-byte operands], csrc/pinned/ops.cpp)."""
    return t if t.data_ptr() % 16 == 0 else t.clone(memory_format=fmt)


def _check_input_shape(input_shape, input) -> None:
    """run()'s input_shape, when an input is given too, must be its shape (checked before any GPU work)."""
    if input_shape is None or not isinstance(input, torch.Tensor):
        return
    try:
        same = tuple(input_shape) == tuple(input.shape)
    except TypeError:
        raise TypeError(f"input_shape={input_shape!r} must be a sequence of ints") from None
    if not same:
        raise ValueError(f"input_shape={tuple(input_shape)} disagrees with input.shape={tuple(input.shape)} (give "
                         "one of them, or the same shape)")


def _roles(spec: ConvSpec, sh: ConvShapes, direction: str, input, weight, grad_output) -> dict[str, torch.Tensor]:
    """The layer's tensors in cuDNN's operand roles (the input pre-padded where torch pads explicitly)."""
    layer_in = input
    if layer_in is not None and not spec.transposed and sh.has_pre_pad:
        layer_in = _pre_pad(layer_in, sh)
    if spec.transposed:
        return {"forward": {"y": input, "w": weight}, "backward_data": {"x": grad_output, "w": weight},
                "backward_filter": {"x": grad_output, "y": input}}[direction]
    return {"forward": {"x": layer_in, "w": weight}, "backward_data": {"y": grad_output, "w": weight},
            "backward_filter": {"x": layer_in, "y": grad_output}}[direction]


def _executor(problem: Problem, algo, cdir: str, math: str | None, limit: int):
    if isinstance(algo, EngineRow):  # a graph-API engine configuration: run its execution plan
        if algo.direction != cdir:
            raise ValueError(f"algo is a {algo.direction} engine configuration but this call runs cuDNN's {cdir}")
        if not algo.ok or algo.plan is None:
            raise ValueError(f"engine configuration {algo.name} has no plan to run (status {algo.status}; plans "
                             "live only in the process that searched)")
        return algo.plan.execute
    algo_id, row_math = _algo_id(algo, cdir)
    exec_math = math if math is not None else (row_math or problem.math)
    check_choice("math", exec_math, MATH_TYPES)
    cp = backend.conv_problem(problem)
    return lambda x, w, y: backend.legacy_execute(cdir, cp, algo_id, exec_math, x, w, y, workspace_limit=limit)


def _pre_pad(t: torch.Tensor, sh: ConvShapes) -> torch.Tensor:
    pads = [v for lo_hi in reversed(sh.pre_pad) for v in lo_hi]  # F.pad: last dim first
    return F.pad(t, pads, mode=sh.pre_pad_mode) if sh.pre_pad_mode != "constant" else F.pad(t, pads)


def _unpad_grad(grad_x: torch.Tensor, sh: ConvShapes) -> torch.Tensor:
    """Gradient wrt the layer's input from the gradient wrt its pre-padded input (F.pad's adjoint)."""
    with torch.enable_grad():
        probe = torch.empty(sh.input_shape, dtype=grad_x.dtype, device=grad_x.device).normal_().requires_grad_(True)
        (g,) = torch.autograd.grad(_pre_pad(probe, sh), probe, grad_x)
    return g
