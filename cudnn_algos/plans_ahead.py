"""One search's engine configurations listed on one thread and their plans built on another (Note [building
ahead]): a profile builds the next search's plans while this one is timed. ``engines.list_ahead`` lists them;
``Listed.build`` builds them; ``find_engines(..., built=)`` takes what it built."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from . import backend
from .problem import Problem

@dataclass(frozen=True)
class Built:
    """One search's plans built ahead of it (``engines.list_ahead(...).build()``), and what they were built for."""
    key: tuple
    out: backend.EngineSearchOut


def build_key(problem: Problem, cdir: str, heuristics, exhaustive: bool, max_configs: int, runtime_compiled: bool,
              exact, dev: int) -> tuple:
    """What a search's plans were built for: the problem, its cuDNN direction and the search's settings."""
    return (problem.spec, tuple(problem.shapes.x_shape), problem.dtype_name, problem.memory_format, problem.math, cdir,
            tuple(heuristics), bool(exhaustive), max_configs, bool(runtime_compiled), repr(exact), dev)


def build_plans(problem: Problem, cdir: str, heuristics, exhaustive: bool, max_configs: int, runtime_compiled: bool,
                exact, dev: int, build_threads: int, build: bool = True) -> backend.EngineSearchOut:
    """backend.engine_search on device `dev` for `problem` (build=False: the configurations listed, none built)."""
    with torch.cuda.device(dev):
        return backend.engine_search(cdir, backend.conv_problem(problem), heuristics, exhaustive, max_configs,
                                     runtime_compiled, dev, exact=exact, build=build, build_threads=build_threads)


@dataclass(frozen=True)
class Listed:
    """A search's configurations as cuDNN's lists (and ``configs``, ``exhaustive``) name them, none built yet:
    ``list_ahead``'s answer; ``build()`` builds their plans, on any thread.

    Note [building ahead]: a profile builds the next search's plans on a thread of its own while this one is timed.
    Only the building goes to that thread: cuDNN's list B opens a CUDA stream capture inside its query, and a
    synchronizing CUDA call on another thread of the process fails while it is open (Note [lists in a helper
    process], choose/lists_process.py), so the lists are asked on the thread that times, between two searches, and
    the other thread then finalizes the plans of the very configurations they gave (``backend.build_listed``: no
    list is asked there), not configurations made again from their names."""
    key: tuple
    out: backend.EngineSearchOut
    dev: int

    def build(self, build_threads: int = 1) -> Built:
        """The plans of every configuration listed but not built, built from the configurations the lists gave
        (this thread and build_threads - 1 more), each row keeping what the lists said of it (sources, ranks); the
        search's host ms include the building."""
        return Built(self.key, backend.build_listed(self.out, build_threads, self.dev))


__all__ = ["Built", "Listed", "build_key", "build_plans"]
