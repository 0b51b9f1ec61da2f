"""The clocks beside CUDA events (docs/measuring.md): the kernel clock — the extension's own CUPTI activity
session, whose windows give the union of a call's GPU activity and its kernels' names — and the reference clock,
torch.profiler's CUPTI records of the same calls in a session of its own (``check_clock``)."""
from __future__ import annotations

import bisect
import contextlib
import functools
import os
import threading
import warnings
from typing import Any, Callable, Sequence

import torch

from .. import backend
from .runnable import Runnable


class KernelClockUnavailable(RuntimeError):
    """The kernel clock could not open its CUPTI session (no GPU, another CUPTI client active, ...)."""


class KernelClockLost(KernelClockUnavailable):
    """Another CUPTI client finalized CUPTI during a session and its records are gone (torch.profiler with
    TEARDOWN_CUPTI=1 does so on the process's next CUDA call: Note [kineto's deferred teardown] in
    csrc/clock/kernel_clock.cpp). A session run again right after is whole."""


def _profiler_active() -> bool:
    try:
        return bool(torch.autograd.profiler._is_profiler_enabled)  # noqa: SLF001 (torch's own flag)
    except AttributeError:
        return False


@contextlib.contextmanager
def kernel_clock(device: int, own_timestamps: bool = True):
    """A CUPTI session of the extension's kernel clock. Yields window(loop_fn): runs loop_fn between two CUPTI
    timestamps and returns the window's index. After the block, ``session.results[i]`` is (busy ms, activities,
    kernel names) of window i. The session stamps records with its own nanosecond source; own_timestamps=False
    keeps whatever source another CUPTI client left registered (torch.profiler's counts TSC ticks: Note [whose
    timestamps] in csrc/clock/kernel_clock.cpp) and exists only to show that difference. With a GPU, the session
    closes with a window of its own (``_marker``, not in the results); KernelClockLost when it saw nothing."""
    if _profiler_active():
        raise KernelClockUnavailable("a torch.profiler session is open: CUPTI has one client at a time")
    try:
        backend.kernel_clock_begin(own_timestamps)
    except RuntimeError as e:
        raise KernelClockUnavailable(str(e)) from e
    session = _Session()
    marked = torch.cuda.is_available()
    try:
        yield session
        if marked:  # the session's last window: a kernel that must leave a record
            session.window(functools.partial(_marker, device))
    except BaseException:
        backend.kernel_clock_abort()
        raise
    try:
        got = backend.kernel_clock_end(device, session.windows)
    except RuntimeError as e:
        if "session lost" in str(e):
            raise KernelClockLost(str(e)) from None
        raise
    session.results = [(w.busy_ns / 1e6, w.activities, w.kernels) for w in got]
    if marked:
        session.windows.pop()
        if not session.results.pop()[1]:
            raise KernelClockLost("kernel clock: session lost: its closing marker kernel left no record (CUPTI was "
                                  "finalized during the session; the windows before may hold part of their records)")
    if session.results and not any(n for _, n, _ in session.results):  # every window launched GPU work
        raise KernelClockLost("kernel clock: session lost: no window saw any GPU activity (CUPTI was finalized "
                              "before its first record)")


def _marker(device: int) -> None:
    """One small kernel on device, waited for. Every session ends with it as its last window: when another CUPTI
    client finalizes CUPTI part-way through a session (Note [kineto's deferred teardown]), the records after that
    point are gone while earlier windows keep theirs, so a window may read 1 kernel of 200 without any window being
    empty. The marker's missing record says so, and the session is measured again (again_if_lost)."""
    with torch.cuda.device(device):
        torch.empty(1, device=device).fill_(1.0)
    torch.cuda.synchronize(device)


_held = [0]
_held_lock = threading.Lock()


@contextlib.contextmanager
def cupti_held():
    """Inside the block the kernel clock's sessions leave CUPTI attached (recording off) instead of finalizing it
    after each one; it is finalized once, when the outermost block ends. Public as ``cudnn_algos.cupti_held()``.

    Why: every attach/finalize cycle of CUPTI keeps some host memory that nothing returns, so a loop of thousands
    of measured searches (two sessions each) grows without bound; held, it does not. Why not always: an attached
    CUPTI, even idle, slows every launch, and the events and host clocks are measured between the kernel clock's
    sessions. So searches finalize by default, and this block is for long loops of measured searches where memory
    matters more than microseconds of host time per launch. The measurements: docs/reliability.md."""
    with _held_lock:
        _held[0] += 1
        if _held[0] == 1:
            backend.kernel_clock_keep_attached(True)
    try:
        yield
    finally:
        with _held_lock:
            _held[0] -= 1
            if _held[0] == 0:
                backend.kernel_clock_keep_attached(False)


class _Session:
    def __init__(self):
        self.windows: list[tuple[int, int]] = []
        self.results: list[tuple[float, int, tuple[str, ...]]] = []

    def window(self, run: Callable[[], Any]) -> int:
        t0 = backend.kernel_clock_now()
        run()
        self.windows.append((t0, backend.kernel_clock_now()))
        return len(self.windows) - 1


def kernels_of(runnables: Sequence[Runnable], device: int) -> list[tuple[str, ...] | None]:
    """The kernels one call of each runnable launches (one kernel-clock session, one call each; None where the call
    failed)."""
    def session():
        idx: list[int | None] = []
        with kernel_clock(device) as s:
            for r in runnables:
                try:
                    idx.append(s.window(lambda r=r: (r.call(0), torch.cuda.synchronize(device))))
                except Exception:
                    idx.append(None)
        return [None if i is None else s.results[i][2] for i in idx]

    return again_if_lost(session)


def cupti_teardown() -> None:
    """Unless the user decided (TEARDOWN_CUPTI set), have torch's profiler finalize CUPTI after its session: left
    attached, CUPTI's instrumentation slowed later kernels (docs/HISTORY.md has the measurement). kineto finalizes on
    the process's next CUDA call, which the kernel clock makes before it opens a session (Note [kineto's deferred
    teardown] in csrc/clock/kernel_clock.cpp). torch disables teardown before CUDA 12.6 (it crashed with CUDA graphs)."""
    cuda = torch.version.cuda or "0"
    try:
        new_enough = tuple(int(v) for v in cuda.split(".")[:2]) >= (12, 6)
    except ValueError:
        new_enough = False
    if new_enough:
        os.environ.setdefault("TEARDOWN_CUPTI", "1")


def reference_kernel_ms(jobs: Sequence[tuple[int, Callable[[], Any], int]], device: int) -> dict[int, float]:
    """The independent clock: one torch.profiler session; job (key, fn, calls) runs its calls inside a named range
    followed by a synchronize, so every GPU activity it launched starts inside that range. Returns per key the union
    of its device activities' intervals (kernels, memsets, copies) / calls, ms."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile, record_function

    cupti_teardown()
    names = {}
    with warnings.catch_warnings():  # "Profiler clears events at the end of each cycle": one cycle here
        warnings.filterwarnings("ignore", message="Profiler clears events")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for key, fn, _ in jobs:
                name = f"cudnn_algos_ref_{key}"
                names[name] = key
                with record_function(name):
                    fn()
                    torch.cuda.synchronize(device)
        events = prof.events()
    ranges = sorted((e.time_range.start, e.time_range.end, names[e.name]) for e in events if e.name in names)
    spans: dict[int, list[tuple[float, float]]] = {k: [] for _, _, k in ranges}
    starts = [lo for lo, _, _ in ranges]
    for e in events:
        # device-side activity only; kineto also mirrors each named range onto the GPU timeline: not a kernel
        if e.device_type != DeviceType.CUDA or e.name in names:
            continue
        i = bisect.bisect_right(starts, e.time_range.start) - 1
        if i >= 0 and e.time_range.start <= ranges[i][1]:
            spans[ranges[i][2]].append((e.time_range.start, e.time_range.end))
    calls = {k: c for k, _, c in jobs}
    return {k: union_length(v) / 1000.0 / calls[k] for k, v in spans.items() if v}


def union_length(intervals: Sequence[tuple[float, float]]) -> float:
    """Length of the union of [start, end) intervals (concurrent activities counted once)."""
    total, lo, hi = 0.0, None, None
    for s, e in sorted(intervals):
        if hi is None or s > hi:
            if hi is not None:
                total += hi - lo
            lo, hi = s, e
        else:
            hi = max(hi, e)
    return total + (hi - lo if hi is not None else 0.0)


def again_if_lost(session: Callable[[], Any]) -> Any:
    """session() (a function that opens a kernel-clock session and returns what it read), run once more if another
    CUPTI client finalized CUPTI under it (KernelClockLost); a second loss is raised."""
    try:
        return session()
    except KernelClockLost:
        return session()
