"""The keys a winner is stored and looked up under: the environment's (``Environment.key()``) and the problem's,
which the extension computes (the pinned operator computes the same string from a call's tensors)."""
from __future__ import annotations

import torch

from .. import backend
from ..problem import Environment, Problem


def env_key(env: Environment) -> str:
    """What must match for a stored winner to be used: the GPU and every version that can change the answer."""
    return env.key()


def problem_key(problem: Problem, direction: str, deterministic: bool | None = None,
                allow_tf32: bool | None = None) -> str:
    """The key a winner of `problem` and `direction` is stored under; the torch flags default to what is set now."""
    det = torch.backends.cudnn.deterministic if deterministic is None else deterministic
    tf32 = torch.backends.cudnn.allow_tf32 if allow_tf32 is None else allow_tf32
    return backend.problem_key(problem.cudnn_direction(direction), backend.conv_problem(problem), bool(det),
                               bool(tf32))
