"""What gets timed: ``Runnable`` (one call, a loop of K calls, one checked output) for a legacy algorithm, an
engine plan or torch's own op, with the output's guards (redzones and a NaN poison) and torch's first call."""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from .. import backend
from ..problem import OUTPUT_OPERAND, Problem


@dataclass
class Runnable:
    """Something to time: a legacy algorithm, an engine plan, or torch's own op, on the search's operand sets.

    call(i): one call on operand set i. loop(k): k back-to-back calls -> (host ms, device-event ms) for the loop
    (in C++ for our rows). output(): one call on set 0 returning its output, for the accuracy check (our rows write a
    NaN-poisoned buffer first, so an unwritten element shows)."""

    call: Callable[[int], Any]
    loop: Callable[[int], tuple[float, float]]
    output: Callable[[], torch.Tensor]
    heuristic_rank: int | None = None
    tensor_math: bool = True  # for % of peak: the dtype's tensor-core matmul rate (fp32: TF32) or plain fp32
    label: str = ""  # problem, direction and candidate: the NVTX range its timing runs in
    # output() without its check and without waiting: (the output, its guards), for checks enqueued together
    # (pipeline's lean screen, Note [a lean screen]); None: only output() (torch's op)
    guarded_output: Callable[[], tuple[torch.Tensor, list[torch.Tensor]]] | None = None


REDZONE = 4096  # elements of guard before and after an output buffer in the accuracy call (8-16 KB: alignment kept)
REDZONE_VALUE = 1337.0


class OutputCheckFailed(RuntimeError):
    """A candidate wrote outside its output buffer, or left part of it unwritten: a row saying so, never timed."""


def guarded_like(t: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """A tensor with t's shape, strides and dtype inside a larger buffer whose REDZONE elements before and after are
    filled with a known value: (the tensor, [guard before, guard after])."""
    span = 1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride())) if t.numel() else 0
    buf = torch.empty(REDZONE + span + REDZONE, dtype=t.dtype, device=t.device)
    buf[:REDZONE].fill_(REDZONE_VALUE)
    buf[REDZONE + span:].fill_(REDZONE_VALUE)
    return buf.as_strided(t.shape, t.stride(), REDZONE), [buf[:REDZONE], buf[REDZONE + span:]]


def check_counts(out: torch.Tensor, guards: Sequence[torch.Tensor]) -> torch.Tensor:
    """On the output's device, without waiting: [guard elements changed before, after, NaN-poisoned elements left]
    (int64; what check_output judges)."""
    changed = [(g != torch.full((), REDZONE_VALUE, dtype=g.dtype)).sum() for g in guards]  # as stored (bf16 rounds)
    return torch.stack(changed + [torch.isnan(out).sum()])


def output_problem(before: int, after: int, unwritten: int, numel: int) -> str | None:
    """What is wrong with an output whose check_counts are these, or None."""
    for where, changed in (("before", before), ("after", after)):
        if changed:
            return f"wrote outside its output buffer: {changed} of {REDZONE} guard elements {where} it changed"
    if unwritten:
        return f"left {unwritten} of {numel} output elements unwritten (still the NaN poison)"
    return None


def check_output(out: torch.Tensor, guards: Sequence[torch.Tensor]) -> None:
    """OutputCheckFailed when a guard changed (a write outside the buffer) or a NaN poison survived (unwritten)."""
    wrong = output_problem(*(int(n) for n in check_counts(out, guards).tolist()), out.numel())
    if wrong:
        raise OutputCheckFailed(wrong)


def own_output(problem: Problem, cdir: str, sets: list[dict[str, torch.Tensor]], call: Callable[[int], Any]):
    """(output, guarded_output): output() makes one call into a NaN-poisoned output placed between two guards
    (redzones) and checks it; guarded_output() makes the same call and returns (the output, its guards) unchecked,
    without waiting for it."""
    role = OUTPUT_OPERAND[cdir]

    def guarded_output() -> tuple[torch.Tensor, list[torch.Tensor]]:
        orig = sets[0][role]
        out, guards = guarded_like(orig)
        out.fill_(float("nan"))
        sets[0][role] = out
        try:
            call(0)
        finally:
            sets[0][role] = orig
        return out, guards

    def output() -> torch.Tensor:
        out, guards = guarded_output()
        check_output(out, guards)
        return out

    return output, guarded_output


def legacy_runnable(problem: Problem, cdir: str, algo_id: int, math_type: str, sets, limit: int,
                    label: str = "") -> Runnable:
    """One legacy algorithm under one math type; its loop runs in C++ through the legacy API."""
    cp = backend.conv_problem(problem)
    xs, ws, ys = ([s[r] for s in sets] for r in "xwy")
    n = len(sets)

    def call(i: int) -> None:
        s = sets[i % n]
        backend.legacy_execute(cdir, cp, algo_id, math_type, s["x"], s["w"], s["y"], limit)

    def loop(k: int) -> tuple[float, float]:
        t = backend.legacy_time_calls(cdir, cp, algo_id, math_type, xs, ws, ys, k, limit)
        return t.host_ms, t.gpu_ms

    output, guarded = own_output(problem, cdir, sets, call)
    return Runnable(call, loop, output, tensor_math=tensor_math(problem.dtype, math_type), label=label,
                    guarded_output=guarded)


def plan_runnable(problem: Problem, cdir: str, plan: backend.Plan, sets, heuristic_rank: int | None = None,
                  label: str = "") -> Runnable:
    """One graph-API execution plan; its loop runs in C++ (cudnnBackendExecute)."""
    xs, ws, ys = ([s[r] for s in sets] for r in "xwy")
    n = len(sets)

    def call(i: int) -> None:
        s = sets[i % n]
        plan.execute(s["x"], s["w"], s["y"])

    def loop(k: int) -> tuple[float, float]:
        t = plan.time_calls(xs, ws, ys, k)
        return t.host_ms, t.gpu_ms

    output, guarded = own_output(problem, cdir, sets, call)
    return Runnable(call, loop, output, heuristic_rank=heuristic_rank,
                    tensor_math=tensor_math(problem.dtype, problem.math), label=label, guarded_output=guarded)


def torch_runnable(problem: Problem, cdir: str, sets) -> Runnable:
    """torch's own convolution for cuDNN direction `cdir`, through the ops a model's forward and autograd run
    (aten.convolution / aten.convolution_backward), so it picks its cuDNN plan as it would in a model (cudnn.benchmark,
    deterministic and allow_tf32 as set when it first meets the problem). Its loop is a Python loop, as a model's.

    torch keeps the first plan it picks for a problem for the life of the process, whatever cudnn.benchmark says
    later (its plan cache key has no benchmark flag): to see benchmark mode's choice, the first call of a shape in a
    process must run with benchmark on."""
    call = torch_call(problem, cdir, sets)
    return Runnable(call, python_loop(call, sets[0]["x"].device.index), lambda: call(0),
                    tensor_math=tensor_math(problem.dtype, problem.math),
                    label=f"{problem.describe(cdir)} | torch's op")


def torch_call(problem: Problem, cdir: str, sets) -> Callable[[int], torch.Tensor]:
    stride, pad, dil = problem.conv_args()
    zeros, groups, n = [0] * len(stride), problem.spec.groups, len(sets)
    if cdir == "forward":
        def call(i: int) -> torch.Tensor:
            o = sets[i % n]
            return torch.ops.aten.convolution(o["x"], o["w"], None, stride, pad, dil, False, zeros, groups)
    else:
        mask = [cdir == "backward_data", cdir == "backward_filter", False]

        def call(i: int) -> torch.Tensor:
            o = sets[i % n]
            gx, gw, _ = torch.ops.aten.convolution_backward(o["y"], o["x"], o["w"], None, stride, pad, dil, False,
                                                            zeros, groups, mask)
            return gx if mask[0] else gw
    return call


def python_loop(call: Callable[[int], Any], device: int) -> Callable[[int], tuple[float, float]]:
    """loop(k) for an operation called from Python: host wall and device events around k calls."""
    def loop(k: int) -> tuple[float, float]:
        stream = torch.cuda.current_stream(device)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(stream)
        t0 = time.perf_counter()
        for i in range(k):
            call(i)
        t1 = time.perf_counter()
        e.record(stream)
        e.synchronize()
        return (t1 - t0) * 1e3, s.elapsed_time(e)

    return loop


def tensor_math(dtype: torch.dtype, math_type: str | None) -> bool:
    """Whether a row of this dtype and math type may use tensor cores (fp32: TF32), for its % of peak."""
    return dtype in (torch.float16, torch.bfloat16) or (dtype == torch.float32 and math_type != "fma")


@contextlib.contextmanager
def cudnn_benchmark(flag: bool):
    """torch.backends.cudnn.benchmark set to `flag` inside, restored after (torch's own cudnn.flags() would also
    reset deterministic and allow_tf32 to their defaults)."""
    old = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = flag
    try:
        yield
    finally:
        torch.backends.cudnn.benchmark = old


def first_call_ms(call: Callable[[int], Any], device: int) -> float:
    """Host ms of one call(0), synchronised on both sides: for torch's op, the call where it plans a new problem
    (with cudnn.benchmark: its search)."""
    torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    call(0)
    torch.cuda.synchronize(device)
    return (time.perf_counter() - t0) * 1e3
