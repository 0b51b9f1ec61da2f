"""Where a search's time goes, step by step, for a caller that asks: it opens ``recording()`` and the search's steps
(``step(name)``) add their host seconds to it. With none open (the default) a step records nothing. Per thread: a
contextvar, so sweep workers' threads do not mix."""
from __future__ import annotations

import contextlib
import contextvars
import time
from typing import Iterator

_open: contextvars.ContextVar[dict[str, float] | None] = contextvars.ContextVar("cudnn_algos_steps", default=None)
_inside: contextvars.ContextVar[str] = contextvars.ContextVar("cudnn_algos_step_now", default="")


@contextlib.contextmanager
def recording() -> Iterator[dict[str, float]]:
    """A dict that the steps run inside the block fill: step name -> host seconds (summed over its runs)."""
    into: dict[str, float] = {}
    token = _open.set(into)
    try:
        yield into
    finally:
        _open.reset(token)


@contextlib.contextmanager
def step(name: str) -> Iterator[None]:
    """The block's host seconds added to the open recording's `name` (nothing without one); inside it,
    current_step() is `name`."""
    into = _open.get()
    if into is None:
        yield
        return
    token = _inside.set(name)
    t0 = time.perf_counter()
    try:
        yield
    finally:
        into[name] = into.get(name, 0.0) + time.perf_counter() - t0
        _inside.reset(token)


def current_step() -> str:
    """The innermost step open in this thread under a recording ("" outside any)."""
    return _inside.get()


__all__ = ["current_step", "recording", "step"]
