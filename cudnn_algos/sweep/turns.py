"""Note [sharing a GPU]: sweep workers that share one GPU take turns on it.

At batch 1 a task is mostly host work: cuDNN builds ~80 plans (about half of a task's second on an H200's host)
while the GPU waits, then the plans are timed. Several workers on one GPU can overlap one's building with another's
timing, but never their GPU work: a kernel of one process running beside another's timed window would be in its
times. So a worker holds its GPU's turn (an exclusive lock on a file named after the GPU, fcntl.flock: released by
the kernel when a process dies, so a killed worker never leaves its GPU locked) for everything that runs on the GPU
after its plans are built: operands, the reference, screening, refining, confirming beside torch's op, the legacy
searches. Building plans (host work: cuDNN's heuristic queries and plan finalization) happens outside the turn, the
refine's neighbours too (find_engines leaves the turn for that building and enters it again after).

The lock is per machine (a file in the temporary directory) and per GPU (the worker's CUDA_VISIBLE_DEVICES, as the
sweep's local cluster pins it): workers on other GPUs never wait. Whether the timings stay those of a GPU used by
one worker is measured, not assumed: benchmarks/sweep_scaling.py --per-gpu compares the same problems measured
both ways against the noise floor (docs/sweep.md).

Note [timing turns]: with scope "timing", only the timed calls are exclusive. A task's turn is then a shared hold
(flock's LOCK_SH) for its untimed GPU work (operands, the reference, the screen's accuracy calls, torch's
identification), which workers of one GPU may do at once, and `timing()` makes it exclusive (LOCK_EX) around the
calls whose times are kept: kernel-clock sessions, throughput samples, first timed calls, torch's benchmark search
and the legacy find_ex. No other process's kernel runs during a timed call, as in scope "whole"; what changes is
that the untimed host work of several workers overlaps. An accuracy call's CUDA-event time, a lean screen's
first-call estimate (K and the prune), may then include another worker's kernels: it can only rise, so a row may be
pruned, but its kernel-clock sample, timed alone, still ranks it, and one that is close gets all its samples
(Note [a lean screen]).
A second lock file (the gate) keeps exclusive requests from starving behind a stream of shared ones: a shared
hold is taken through the gate, and an exclusive request holds the gate while it waits. No process waits for the
gate while it holds the turn's lock, so two upgrades cannot deadlock (each drops its shared hold first). A hold of
either kind is released only after `settle` (a sweep task's: torch.cuda.synchronize) returns: the GPU runs work
after the host enqueued it, and kernels still pending when a worker let go of its turn would run inside another
worker's timed calls."""
from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import tempfile
import time
from typing import Any, Callable, Iterator

from ..choices import TURN_SCOPES
from ..measure.steps import current_step


def gpu_name() -> str:
    """This process's GPU as the sweep pins it (CUDA_VISIBLE_DEVICES), or "all" where nothing pins it."""
    return os.environ.get("CUDA_VISIBLE_DEVICES", "").strip() or "all"


class GpuTurn:
    """A turn on this process's GPU among the processes of this machine that take one (Note [sharing a GPU]);
    re-enterable one level at a time: ``with turn:`` blocks until it may run on the GPU. scope "whole": the turn is
    exclusive; "timing" (Note [timing turns]): shared, and ``with turn.timing():`` exclusive for the timed calls.
    `waited`: seconds spent waiting so far; `held`: seconds held; `timed`: seconds held exclusively; `waited_in`,
    `timed_in`: the same two by the search's step (measure.steps.current_step) in which the hold was asked for;
    `holds`: how many exclusive holds. `settle`: called before any hold is released (Note [timing turns]: the GPU
    work this process enqueued, finished)."""

    def __init__(self, gpu: str | None = None, directory: str | None = None, scope: str = "whole",
                 settle: Callable[[], Any] | None = None):
        if scope not in TURN_SCOPES:
            raise ValueError(f"scope={scope!r} must be one of {', '.join(TURN_SCOPES)}")
        gpu = gpu or gpu_name()
        safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in gpu)
        self.path = os.path.join(directory or tempfile.gettempdir(), f"cudnn_algos_gpu_turn_{safe}.lock")
        self.gate_path = self.path + ".gate"
        self.scope = scope
        self.settle = settle
        self.waited = 0.0
        self.held = 0.0
        self.timed = 0.0
        self.waited_in: dict[str, float] = {}
        self.timed_in: dict[str, float] = {}
        self.holds = 0
        self._f: Any = None
        self._mode = 0  # the lock held now: 0, fcntl.LOCK_SH or fcntl.LOCK_EX
        self._since = 0.0
        self._where = ""

    def __enter__(self) -> "GpuTurn":
        self._open(fcntl.LOCK_EX if self.scope == "whole" else fcntl.LOCK_SH)
        return self

    def __exit__(self, *exc: Any) -> None:
        f = self._f
        try:
            self._unlock(quiet=exc[0] is not None)
        finally:
            self._f = None
            f.close()

    @property
    def exclusive(self) -> bool:
        """Whether this process holds the turn alone now (no other process's GPU work runs)."""
        return self._mode == fcntl.LOCK_EX

    @contextlib.contextmanager
    def timing(self) -> Iterator["GpuTurn"]:
        """The block exclusive on this GPU: a timed call's (Note [timing turns]). Held: in scope "whole" already
        exclusive, in "timing" made so for the block and shared again after it. Not held: the turn taken (as
        ``with turn:``, exclusive in both scopes) for the block alone."""
        if self._f is None:
            self._open(fcntl.LOCK_EX)
            try:
                yield self
            except BaseException:
                self.__exit__(*sys.exc_info())
                raise
            self.__exit__(None, None, None)
            return
        if self._mode == fcntl.LOCK_EX:
            yield self
            return
        self._unlock()
        self._lock(fcntl.LOCK_EX)
        try:
            yield self
        except BaseException:
            self._unlock(quiet=True)  # the block's error is the one to see; the hold's exit finds nothing held
            raise
        self._unlock()
        self._lock(fcntl.LOCK_SH)

    def _open(self, mode: int) -> None:
        if self._f is not None:
            raise RuntimeError(f"{self.path}: this turn is already held (enter it one level at a time)")
        self._f = open(self.path, "a+")
        try:
            self._lock(mode)
        except BaseException:
            self._f.close()
            self._f = None
            raise

    def _lock(self, mode: int) -> None:
        """Takes the turn's lock in `mode` (nothing held): an exclusive one, and in scope "timing" a shared one
        too, through the gate (Note [timing turns])."""
        t0 = time.perf_counter()
        if self.scope == "timing":
            with open(self.gate_path, "a+") as gate:
                fcntl.flock(gate, fcntl.LOCK_EX)
                try:
                    fcntl.flock(self._f, mode)
                finally:
                    fcntl.flock(gate, fcntl.LOCK_UN)
        else:
            fcntl.flock(self._f, mode)
        self._since = time.perf_counter()
        self.waited += self._since - t0
        where = current_step() or "other"
        self.waited_in[where] = self.waited_in.get(where, 0.0) + self._since - t0
        self._mode = mode
        self._where = where

    def _unlock(self, quiet: bool = False) -> None:
        """Releases the lock held, after `settle`; `quiet` (an error is already on its way): settle's own error is
        not raised."""
        if not self._mode:
            return
        try:
            if self.settle is not None:
                self.settle()
        except Exception:
            if not quiet:
                raise
        finally:
            self._release()

    def _release(self) -> None:
        s = time.perf_counter() - self._since
        self.held += s
        if self._mode == fcntl.LOCK_EX:
            self.timed += s
            self.holds += 1
            self.timed_in[self._where] = self.timed_in.get(self._where, 0.0) + s
        self._mode = 0
        fcntl.flock(self._f, fcntl.LOCK_UN)


__all__ = ["GpuTurn", "TURN_SCOPES", "gpu_name"]
