"""The names a problem and a search are spelled with — directions, legacy modes, math types, dtypes, L2 modes — in
one place (an engine configuration's and the heuristic lists': configs.py), with no torch import: the API validates
against them and the CLI's parser offers them as its choices."""
from __future__ import annotations

from enum import Enum


class _Name(str, Enum):
    """A choice that is also its plain string (compares, hashes, formats and serialises as its value)."""

    def __str__(self) -> str:
        return self.value


class Direction(_Name):
    """A convolution's direction: forward (y from x, w), backward_data (dx from dy, w), backward_filter (dw)."""

    FORWARD = "forward"
    BACKWARD_DATA = "backward_data"
    BACKWARD_FILTER = "backward_filter"


class Mode(_Name):
    """A legacy search's mode: find (cuDNN allocates and times), find_ex (our buffers), heuristic (no timing)."""

    FIND = "find"
    FIND_EX = "find_ex"
    HEURISTIC = "heuristic"


class MathType(_Name):
    """cuDNN's math type: default (fp32: TF32 allowed), tensor_op, tensor_op_allow_conversion, fma (no tensor cores)."""

    DEFAULT = "default"
    TENSOR_OP = "tensor_op"
    TENSOR_OP_ALLOW_CONVERSION = "tensor_op_allow_conversion"
    FMA = "fma"


DIRECTIONS = tuple(d.value for d in Direction)
MODES = tuple(m.value for m in Mode)
MATH_TYPES = tuple(m.value for m in MathType)
DTYPE_NAMES = ("float32", "float16", "bfloat16", "float64")
MAX_BUILD_THREADS = 64  # an engine search's plans are finalized by at most this many threads (build_threads)
# what a sweep worker sharing its GPU holds it alone for (sweep.GpuTurn's scope): all its GPU work, or only the calls
# whose times are kept (sweep.turns Note [timing turns])
TURN_SCOPES = ("whole", "timing")
BUILTIN_MODEL_NAMES = ("resnet50",)  # the models builtin_models.BUILTIN_MODELS builds (no torchvision needed)
L2_MODES = ("warm", "cold")  # one operand set, or sets that together exceed 3x the L2 cache


