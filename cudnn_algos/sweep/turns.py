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
both ways against the noise floor (docs/sweep.md)."""
from __future__ import annotations

import fcntl
import os
import tempfile
import time
from typing import Any


def gpu_name() -> str:
    """This process's GPU as the sweep pins it (CUDA_VISIBLE_DEVICES), or "all" where nothing pins it."""
    return os.environ.get("CUDA_VISIBLE_DEVICES", "").strip() or "all"


class GpuTurn:
    """An exclusive turn on this process's GPU among the processes of this machine that take one (Note [sharing a
    GPU]); re-enterable one level at a time: ``with turn:`` blocks until no other process holds it. `waited`: the
    seconds spent waiting so far; `held`: the seconds held."""

    def __init__(self, gpu: str | None = None, directory: str | None = None):
        gpu = gpu or gpu_name()
        safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in gpu)
        self.path = os.path.join(directory or tempfile.gettempdir(), f"cudnn_algos_gpu_turn_{safe}.lock")
        self.waited = 0.0
        self.held = 0.0
        self._f: Any = None
        self._since = 0.0

    def __enter__(self) -> "GpuTurn":
        if self._f is not None:
            raise RuntimeError(f"{self.path}: this turn is already held (enter it one level at a time)")
        f = open(self.path, "a+")
        t0 = time.perf_counter()
        try:
            fcntl.flock(f, fcntl.LOCK_EX)
        except BaseException:
            f.close()
            raise
        self._since = time.perf_counter()
        self.waited += self._since - t0
        self._f = f
        return self

    def __exit__(self, *exc: Any) -> None:
        f, self._f = self._f, None
        self.held += time.perf_counter() - self._since
        try:
            fcntl.flock(f, fcntl.LOCK_UN)
        finally:
            f.close()


__all__ = ["GpuTurn", "gpu_name"]
