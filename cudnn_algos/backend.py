"""The typed face of the C++ extension: the only module that calls ``cudnn_algos._C``.

Everything above it passes enums (Direction, Mode, MathType; str-valued, so a plain string works too), which cross
as the extension's bound enums of the same names (``_bound``), and gets frozen dataclasses back, never the
extension's structs. Loading (installed, else a JIT build from csrc/) happens on the first call that needs it
(``_ext.load``), never at import. Failures arrive as the package's own exceptions (CudnnError with the status name,
CudaError), translated once at the binding edge (csrc/bindings.cpp).
"""
from __future__ import annotations

import functools
import socket
from dataclasses import dataclass, field, fields, replace
from typing import Any, Sequence

import torch

from . import _ext
from .choices import Direction, MathType, Mode
from .configs import SEARCH_LISTS
from .environment import Environment, driver_release, git_commit, loaded_cudnn_library, package_version
from .problem import Problem

__all__ = ["Direction", "Mode", "MathType", "LegacyRow", "LegacySearch", "CallTiming", "Plan", "EngineSearchOut",
           "Versions", "WindowActivity", "KernelClockStats", "PinnedCount", "StageTimes", "HandleCounts", "how_loaded",
           "load", "conv_problem", "legacy_search", "legacy_execute", "legacy_time_calls", "algo_names",
           "engine_search", "serialize_plan", "plan_from_json", "kernel_clock_begin", "kernel_clock_now",
           "kernel_clock_end", "kernel_clock_abort", "kernel_clock_keep_attached", "kernel_clock_stats", "problem_key",
           "pinned_set", "pinned_ask_again", "pinned_clear", "pinned_counts", "pinned_reset_counts",
           "pinned_plans_built", "pinned_stage_timing", "pinned_stage_times", "MissAnswer", "pinned_set_miss_handler",
           "bound_conv", "operator_key", "versions", "environment", "probe_handle", "cudnn_handles"]

KnobList = Sequence[tuple[int, int]]  # (cuDNN knob type, value) pairs


def _as(cls: type, bound: Any, **given: Any) -> Any:
    """The frozen dataclass `cls` from the extension's bound struct of the same field names (csrc/bind/*.cpp), the
    fields in `given` as given."""
    return cls(**{f.name: given[f.name] if f.name in given else getattr(bound, f.name) for f in fields(cls)})


def load():
    """The extension module itself (loads it: a JIT build on first use when it is not installed). Importing it
    also registers the ``torch.ops.cudnn_algos.conv`` operator."""
    return _ext.load()


def how_loaded() -> str:
    """'installed', 'jit', or '' when the extension is not loaded yet."""
    return _ext.how_loaded()


# =============================================================================================== problems
def conv_problem(problem: Problem):
    """The extension's description of `problem` (lifted shapes, cuDNN layout and math): what every search, plan
    and key below takes."""
    stride, pad, dil = problem.conv_args()
    sh = problem.shapes
    return _ext.load().ConvProblem(
        dtype=problem.dtype_name,
        layout=_bound("Layout", "layout", "nchw" if problem.memory_format == "contiguous" else "nhwc"),
        x=problem.lift(sh.x_shape), w=problem.lift(sh.w_shape), y=problem.lift(sh.y_shape), padding=pad,
        stride=stride, dilation=dil, groups=problem.spec.groups, math=_bound("MathType", "math", problem.math))


def _bound(kind: str, arg: str, value: Any) -> Any:
    """The member of the extension's bound enum `kind` (Direction, SearchMode, MathType, Layout, HeuristicList,
    Epilogue) named `value` (one of the package's enums or its string): csrc/bind/glue.cpp, Note [enums across the
    boundary]. A name the extension lacks is a ValueError naming `arg`."""
    enum = getattr(_ext.load(), kind)
    name = str(getattr(value, "value", value))
    member = enum.__members__.get(name)
    if member is None:
        raise ValueError(f"{arg}={name!r} is not one of: {', '.join(enum.__members__)}")
    return member


def _dir(direction: Direction | str) -> Any:
    return _bound("Direction", "direction", direction)


# =============================================================================================== legacy API
@dataclass(frozen=True)
class LegacyRow:
    """One algorithm (under one math type) as cuDNN's legacy search returned it; None where cuDNN gave nothing."""

    algo_id: int
    algo: str
    status: str  # cuDNN's status without CUDNN_STATUS_
    status_code: int
    time_ms: float | None
    workspace_bytes: int | None
    deterministic: bool | None
    math_type: str | None
    rank: int | None
    note: str


@dataclass(frozen=True)
class LegacySearch:
    rows: tuple[LegacyRow, ...]
    workspace_given: int | None  # what a Find/FindEx search was given (None: heuristic mode)
    search_ms: float  # host ms of cuDNN's call
    returned: int  # rows cuDNN returned (the rest are algorithms it did not return)


@dataclass(frozen=True)
class CallTiming:
    """K back-to-back calls: host wall ms of the loop and device-event ms around it."""

    host_ms: float
    gpu_ms: float


def legacy_search(direction: Direction | str, cp, mode: Mode | str, x: torch.Tensor | None = None,
                  w: torch.Tensor | None = None, y: torch.Tensor | None = None, workspace_limit: int = -1,
                  device: int = 0) -> LegacySearch:
    """cuDNN's legacy Find / FindEx / Get (heuristic) for one cuDNN direction of problem `cp` (conv_problem)."""
    d = _ext.load().search(_dir(direction), cp, _bound("SearchMode", "mode", mode), x, w, y,
                           workspace_limit=workspace_limit, device=device)
    return _as(LegacySearch, d, rows=tuple(_as(LegacyRow, r) for r in d.rows))


def legacy_execute(direction: Direction | str, cp, algo_id: int, math: MathType | str, x: torch.Tensor,
                   w: torch.Tensor, y: torch.Tensor, workspace_limit: int = -1) -> None:
    """One call of a legacy algorithm, writing the direction's output operand in place."""
    _ext.load().execute(_dir(direction), cp, algo_id, _bound("MathType", "math", math), x, w, y,
                        workspace_limit=workspace_limit)


def legacy_time_calls(direction: Direction | str, cp, algo_id: int, math: MathType | str,
                      xs: Sequence[torch.Tensor], ws: Sequence[torch.Tensor], ys: Sequence[torch.Tensor], iters: int,
                      workspace_limit: int = -1) -> CallTiming:
    """`iters` back-to-back calls in C++, rotating through the operand sets."""
    return _as(CallTiming, _ext.load().time_calls(_dir(direction), cp, algo_id, _bound("MathType", "math", math),
                                                  list(xs), list(ws), list(ys), iters, workspace_limit))


def algo_names(direction: Direction | str) -> list[str]:
    """cuDNN's legacy algorithm names of a cuDNN direction, by id."""
    return list(_ext.load().algo_names(_dir(direction)))


# =============================================================================================== graph API
@dataclass(frozen=True)
class Plan:
    """One engine configuration the engine search listed: its engine, knobs and notes (cuDNN's numbers), where it
    came from, and — when ``status`` is SUCCESS — a built execution plan for this process (execute, time_calls)."""

    engine_id: int
    knobs: tuple[tuple[int, int], ...]
    numerical_notes: tuple[int, ...]
    behavior_notes: tuple[int, ...]
    sources: tuple[str, ...]
    heuristic_ranks: tuple[tuple[str, int], ...]
    status: str
    stage: str  # where a failed configuration stopped: engine, config or plan ("" when built)
    workspace_bytes: int  # -1: unknown
    plan_json: str
    live: Any = field(default=None, compare=False, repr=False)  # the extension's plan object
    build_ms: float | None = None  # host ms its plan took to finalize (None: not built)
    operand_dims: tuple[tuple[int, ...], ...] = ()  # a fused graph's epilogue operands (Note [fused graphs])

    @classmethod
    def of(cls, p: Any) -> "Plan":
        return cls(engine_id=int(p.engine_id), knobs=tuple((int(t), int(v)) for t, v in p.knobs),
                   numerical_notes=tuple(p.numerical_notes), behavior_notes=tuple(p.behavior_notes),
                   sources=tuple(p.sources), heuristic_ranks=tuple((s, int(r)) for s, r in p.heuristic_ranks),
                   status=p.status, stage=p.stage, workspace_bytes=int(p.workspace_bytes), plan_json=p.plan_json,
                   build_ms=None if p.build_ms is None else float(p.build_ms),
                   operand_dims=tuple(tuple(int(v) for v in d) for d in p.operand_dims), live=p)

    def execute(self, x: torch.Tensor, w: torch.Tensor, y: torch.Tensor, operands: Sequence[torch.Tensor] = ()
                ) -> None:
        """One execution; `operands`: a fused plan's epilogue operands, in its graph's order."""
        self.live.execute(x, w, y, list(operands))

    def time_calls(self, xs: Sequence[torch.Tensor], ws: Sequence[torch.Tensor], ys: Sequence[torch.Tensor],
                   iters: int, operands: Sequence[Sequence[torch.Tensor]] = ()) -> CallTiming:
        """`iters` back-to-back executions rotating through the sets; `operands`: one list per set (fused plans)."""
        t = self.live.time_calls(list(xs), list(ws), list(ys), iters, [list(o) for o in operands])
        return _as(CallTiming, t)


@dataclass(frozen=True)
class EngineSearchOut:
    plans: tuple[Plan, ...]
    engine_count: int  # engines cuDNN has for this operation graph
    search_ms: float  # host ms to enumerate and build
    heuristic_query_ms: tuple[tuple[str, float], ...] = ()  # per list asked for: host ms of its query


def engine_search(direction: Direction | str, cp, heuristics: Sequence[str] = SEARCH_LISTS,
                  exhaustive: bool = False, max_configs: int = 64, runtime_compiled: bool = True, device: int = 0,
                  seeds: Sequence[tuple[int, KnobList]] = (), exact: Sequence[tuple[int, KnobList]] = (),
                  build: bool = True, build_threads: int = 1, epilogue: Sequence[str] = ()) -> EngineSearchOut:
    """cuDNN 9's engine configurations for one cuDNN direction: the heuristic lists asked for, configurations
    named exactly (`exact`), every engine's knob choices (`exhaustive`, up to `max_configs`), or the one-knob
    neighbours of `seeds` (refine); each built into a plan where cuDNN can. build=False: the heuristic lists'
    configurations only (engine, knobs, notes; status "NOT_BUILT"), none built. build_threads > 1: the plans are
    finalized by that many threads, each with its own handle (the same rows; less host time). epilogue: the
    pointwise ops of a fused graph after the convolution (cudnn_algos.epilogue.GRAPH_OPS; Note [fused graphs]); a
    graph no engine runs is one row, stage "graph"."""
    lists = [_bound("HeuristicList", "heuristics", h) for h in heuristics]
    ops = [_bound("Epilogue", "epilogue", op) for op in epilogue]
    out = _ext.load().engine_search(_dir(direction), cp, lists, exhaustive, max_configs, runtime_compiled, device,
                                    [(e, [tuple(k) for k in kn]) for e, kn in seeds],
                                    [(e, [tuple(k) for k in kn]) for e, kn in exact], bool(build), int(build_threads),
                                    ops)
    return _as(EngineSearchOut, out, plans=tuple(Plan.of(p) for p in out.plans),
               heuristic_query_ms=tuple((str(m), float(t)) for m, t in out.heuristic_query_ms))


def serialize_plan(plan: Plan) -> bytes:
    """A built plan's JSON as cuDNN serializes it (Note [serialized plans] in csrc/search/engine_search.h); b"" where
    it gives none or the plan is not built."""
    return bytes(_ext.load().serialize_plan(plan.live)) if plan.live is not None else b""


def plan_from_json(direction: Direction | str, cp, epilogue: Sequence[str], json: bytes, device: int = 0) -> Plan:
    """The plan a serialized JSON describes, finalized with this process's handle for this direction, problem and
    epilogue; a JSON cuDNN refuses is a Plan whose status says so (stage "plan")."""
    ops = [_bound("Epilogue", "epilogue", op) for op in epilogue]
    return Plan.of(_ext.load().plan_from_json(_dir(direction), cp, ops, json, int(device)))


def build_listed(out: EngineSearchOut, threads: int = 1, device: int = 0) -> EngineSearchOut:
    """The plans of `out`'s unbuilt rows (an ``engine_search(build=False)`` answer) built from the very configurations
    its lists gave, by up to `threads` threads; no list is asked, so any thread may call it. The same rows, each with
    its status now; search_ms adds the building's host ms."""
    todo = [p.live for p in out.plans if p.status == "NOT_BUILT" and p.live is not None]
    if not todo:
        return out
    ms = _ext.load().build_listed(todo, max(1, int(threads)), int(device))
    return replace(out, plans=tuple(Plan.of(p.live) if p.status == "NOT_BUILT" and p.live is not None else p
                                    for p in out.plans), search_ms=out.search_ms + float(ms))


# =============================================================================================== kernel clock
@dataclass(frozen=True)
class WindowActivity:
    busy_ns: int  # union of the window's GPU activity intervals
    activities: int  # kernels, memsets and copies that started in it
    kernels: tuple[str, ...]  # their kernels' names (demangled)


@dataclass(frozen=True)
class KernelClockStats:
    sessions: int
    finalizes: int
    attached: bool
    buffers_requested: int
    buffers_completed: int
    buffers_reclaimed: int
    buffers_outstanding: int


def kernel_clock_begin(own_timestamps: bool = True) -> None:
    """Opens the extension's CUPTI session (RuntimeError when another client holds CUPTI)."""
    _ext.load().kernel_clock_begin(own_timestamps)


def kernel_clock_now() -> int:
    """A CUPTI timestamp, ns: a window is (now() before, now() after)."""
    return _ext.load().kernel_clock_now()


def kernel_clock_end(device: int, windows: Sequence[tuple[int, int]]) -> list[WindowActivity]:
    """Closes the session; what each window saw (RuntimeError "session lost" when CUPTI was finalized under it)."""
    return [_as(WindowActivity, w, kernels=tuple(w.kernels))
            for w in _ext.load().kernel_clock_end(device, list(windows))]


def kernel_clock_abort() -> None:
    _ext.load().kernel_clock_abort()


def kernel_clock_keep_attached(on: bool) -> None:
    _ext.load().kernel_clock_keep_attached(bool(on))


def kernel_clock_stats() -> KernelClockStats:
    return _as(KernelClockStats, _ext.load().kernel_clock_stats())


# =============================================================================================== pinned winners
@dataclass(frozen=True)
class PinnedCount:
    """One problem key's calls through the pinned operator since the last reset."""

    key: str
    pinned: int  # ran the stored winner's plan
    torch: int  # ran torch's own op (the stored winner is torch, or no winner is stored)
    fallback: int  # the winner's plan failed to build or run: torch's op ran instead
    reason: str  # why it fell back
    execute_ns: int  # host ns inside plan execution (stage timing on)
    timed_calls: int
    origin: str = ""  # how its winner was chosen: "stored", or the unseen handler's ("predicted", ...); "" none
    engine_id: int = -1  # the winner's configuration (-1: none, or torch's op)
    knobs: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class StageTimes:
    forward_calls: int
    backward_calls: int
    ns: dict[str, int]  # host ns per stage of the operator's call


def problem_key(direction: Direction | str, cp, deterministic: bool, allow_tf32: bool) -> str:
    """The key the pinned operator looks a call up by (the same string operator_key builds from tensors)."""
    return _ext.load().problem_key(_dir(direction), cp, bool(deterministic), bool(allow_tf32))


def operator_key(direction: Direction | str, x: torch.Tensor, w: torch.Tensor, stride: Sequence[int],
                 padding: Sequence[int], dilation: Sequence[int], groups: int, deterministic: bool, allow_tf32: bool,
                 transposed: bool = False, output_padding: Sequence[int] = ()) -> str:
    """The key the pinned operator computes for a call on these tensors (problem_key's twin, for checking)."""
    return _ext.load().operator_key(_dir(direction), x, w, list(stride), list(padding), list(dilation), int(groups),
                                    bool(deterministic), bool(allow_tf32), bool(transposed), list(output_padding))


def pinned_set(key: str, engine_id: int, knobs: KnobList, origin: str = "stored") -> None:
    _ext.load().pinned_set(key, int(engine_id), [tuple(k) for k in knobs], str(origin))


def pinned_ask_again(key: str, forget_origin: str = "") -> bool:
    """The next call of `key`'s problem asks the unseen-problem handler again (a choice made elsewhere is ready);
    with `forget_origin`, a winner of that origin (the handler's earlier answer) is forgotten first. Returns
    whether one was."""
    return bool(_ext.load().pinned_ask_again(str(key), str(forget_origin)))


def pinned_clear() -> None:
    _ext.load().pinned_clear()


def pinned_counts() -> list[PinnedCount]:
    return [_as(PinnedCount, c, knobs=tuple(tuple(k) for k in c.knobs)) for c in _ext.load().pinned_counts()]


@dataclass(frozen=True)
class MissAnswer:
    """An unseen-problem handler's answer (Note [unseen problems], csrc/pinned/pinned.h): configurations (engine id,
    knobs) most preferred first, how they were chosen, why there are none (when empty), and the extension's plans of
    some of them already built for the problem (Note [plans the handler built]: not built again)."""

    configs: Sequence[tuple[int, KnobList]] = ()
    origin: str = ""
    why: str = ""
    built: Sequence[Any] = ()


def pinned_set_miss_handler(handler) -> None:
    """Note [unseen problems] (csrc/pinned/pinned.h): `handler(query) -> MissAnswer` is asked once per problem the
    registry has no winner for (query: the extension's MissQuery); None: torch's op runs them. An answer of another
    type, or a handler that raises, leaves the problem on torch's op with that reason."""
    if handler is None:
        _ext.load().pinned_set_miss_handler(None)
        return
    bound = _ext.load().MissAnswer

    def ask(query):
        a = handler(query)
        if not isinstance(a, MissAnswer):
            raise TypeError(f"the unseen-problem handler answered a {type(a).__name__}, not a backend.MissAnswer")
        return bound(configs=list(a.configs), origin=a.origin, why=a.why, built=list(a.built))

    _ext.load().pinned_set_miss_handler(ask)


def pinned_reset_counts() -> None:
    _ext.load().pinned_reset_counts()


def pinned_plans_built() -> int:
    return int(_ext.load().pinned_plans_built())


def pinned_stage_timing(on: bool) -> None:
    _ext.load().pinned_stage_timing(bool(on))


def pinned_stage_times() -> StageTimes:
    t = _ext.load().pinned_stage_times()
    return _as(StageTimes, t, ns=dict(t.ns))


def bound_conv(stride: Sequence[int], padding: Sequence[int], output_padding: Sequence[int],
               dilation: Sequence[int], groups: int, transposed: bool):
    """A callable (x, w, bias) -> y for one convolution module's arguments, through the pinned operator."""
    return _ext.load().BoundConv(list(stride), list(padding), list(output_padding), list(dilation), int(groups),
                                 bool(transposed))


# =============================================================================================== environment
@dataclass(frozen=True)
class Versions:
    """Versions the extension sees: cuDNN loaded and built against, CUDA runtime/driver, torch it was built with."""

    cudnn_runtime: int
    cudnn_build: int
    cudnn_cudart: int
    cuda_runtime: int  # -1: unreadable
    cuda_driver: int
    cuda_build: int
    torch_build: str


@dataclass(frozen=True)
class HandleCounts:
    created: int
    pooled: int


def versions() -> Versions:
    return _as(Versions, _ext.load().versions())


@functools.lru_cache(maxsize=None)
def environment(device: int) -> Environment:
    """Where a search on `device` runs: the GPU and every version a saved result is compared by."""
    v = versions()
    props = torch.cuda.get_device_properties(device)
    return Environment(
        gpu_name=props.name, compute_capability=f"{props.major}.{props.minor}", device_index=device,
        driver_version=driver_release(), cuda_driver_api=v.cuda_driver, cuda_runtime=v.cuda_runtime,
        cudnn_runtime=v.cudnn_runtime, cudnn_build=v.cudnn_build, cudnn_library=loaded_cudnn_library(),
        torch_version=torch.__version__, torch_cuda=torch.version.cuda, package_version=package_version(),
        hostname=socket.gethostname(), git_commit=git_commit())


def probe_handle(device: int = 0) -> str:
    """Creates a cuDNN handle on `device` and says how it went (the info command's check)."""
    return _ext.load().probe_handle(device)


def cudnn_handles() -> HandleCounts:
    return _as(HandleCounts, _ext.load().cudnn_handles())
