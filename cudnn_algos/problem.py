"""The validated problem: one convolution with its dtype, layout and math type, in cuDNN's terms.

Everything a search, a run or a report needs to know about a problem before any GPU work lives here: argument
parsing with messages that name the argument and the value, the layer directions and the cuDNN direction and
operand roles that compute each, the lifting of 1-d convolutions to 2-d, operand allocation (fresh random data,
never zeros; poisoned outputs), and the environment a result records. Importing it needs no GPU.
"""
from __future__ import annotations

import math
import os
from enum import Enum
from typing import Any, Sequence

import torch

from .choices import DIRECTIONS, DTYPE_NAMES, MATH_TYPES, MODES, Direction, MathType, Mode  # noqa: F401 (API)
from .environment import Environment, driver_release, git_commit, loaded_cudnn_library, package_version  # noqa: F401 (API)
from .errors import CudaUnavailableError, CudnnError, cudnn_error
from .spec import ConvShapes, ConvSpec



DTYPES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float64: "float64"}
DTYPE_ALIASES = {"float32": torch.float32, "float": torch.float32, "fp32": torch.float32, "float16": torch.float16,
                 "half": torch.float16, "fp16": torch.float16, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
                 "float64": torch.float64, "double": torch.float64, "fp64": torch.float64}
MEMORY_FORMATS = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last,
                  "channels_last_3d": torch.channels_last_3d}

# The cuDNN direction that computes each of a layer's directions. Non-transposed: y = conv(x, w) with x the
# (pre-padded) input. Transposed: the layer's forward is the adjoint of the mirrored convolution, so x is the
# layer's output (or its gradient) and y its input.
CUDNN_DIRECTION = {
    (False, "forward"): "forward",
    (False, "backward_data"): "backward_data",
    (False, "backward_filter"): "backward_filter",
    (True, "forward"): "backward_data",
    (True, "backward_data"): "forward",
    (True, "backward_filter"): "backward_filter",
}
OUTPUT_OPERAND = {"forward": "y", "backward_data": "x", "backward_filter": "w"}  # what each cuDNN direction writes


# ---------------------------------------------------------------------------------------------- argument parsing
def check_choice(name: str, value: Any, valid: Sequence[str]) -> str:
    """`value` as a plain string (an enum member such as Direction.FORWARD gives its value) when it is one of
    `valid`; ValueError naming the argument, the value and the choices otherwise."""
    if isinstance(value, Enum):
        value = value.value
    if not isinstance(value, str) or value not in valid:
        raise ValueError(f"{name}={value!r} is not one of: {', '.join(valid)}")
    return str(value)


def check_int(name: str, value: Any, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}={value!r} must be an int")
    if value < lo:
        raise ValueError(f"{name}={value} must be >= {lo}")
    return value


def check_module(name: str, value: Any) -> torch.nn.Module:
    """TypeError naming the argument unless `value` is a torch.nn.Module."""
    if not isinstance(value, torch.nn.Module):
        raise TypeError(f"{name} must be a torch.nn.Module, not {type(value).__name__}")
    return value


def fused_call(fn: Any, args: dict[str, Any], flag: str, keep: Sequence[str]) -> bool:
    """For fn(..., flag=True/False) called with `args` (its arguments by name): TypeError naming the flag unless it is
    a bool; where it is True, ValueError naming the arguments given other than their defaults that the fused path
    does not take (all but `keep`; those without a default are always taken). Returns the flag."""
    import inspect

    on = args[flag]
    if not isinstance(on, bool):
        raise TypeError(f"{flag}={on!r} must be True or False")
    if on:
        given = [f"{n}={args[n]!r}" for n, p in inspect.signature(fn).parameters.items()
                 if n not in (*keep, flag) and n in args and p.default is not p.empty and not _same(args[n], p.default)]
        if given:
            raise ValueError(f"{fn.__name__}({flag}=True) does not take: {', '.join(given)}")
    return on


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) or (isinstance(b, tuple) and tuple(a) == b)
    except Exception:  # noqa: BLE001 (a value that does not compare: not the default)
        return False


def parse_dtype(dtype: Any, default: torch.dtype | None = None) -> torch.dtype:
    if dtype is None:
        dtype = default if default is not None else torch.float32
    if isinstance(dtype, str):
        if dtype not in DTYPE_ALIASES:
            raise ValueError(f"dtype={dtype!r} is not one of: {', '.join(DTYPE_ALIASES)}")
        dtype = DTYPE_ALIASES[dtype]
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype={dtype!r} must be a torch.dtype or its name")
    if dtype not in DTYPES:
        kind = "complex" if dtype.is_complex else ("floating" if dtype.is_floating_point else "integer")
        raise TypeError(f"dtype={dtype} ({kind}) is not supported by cuDNN convolutions here; use one of "
                        f"{', '.join(str(d) for d in DTYPES)}")
    return dtype


def parse_memory_format(memory_format: Any, ndim: int) -> str:
    """'contiguous', 'channels_last' or 'channels_last_3d', after checking that it fits the layer's rank."""
    if memory_format is None:
        return "contiguous"
    if isinstance(memory_format, torch.memory_format):
        names = {v: k for k, v in MEMORY_FORMATS.items()}
        if memory_format not in names:
            raise ValueError(f"memory_format={memory_format} is not one of: {', '.join(MEMORY_FORMATS)}")
        memory_format = names[memory_format]
    check_choice("memory_format", memory_format, tuple(MEMORY_FORMATS))
    fits = {"contiguous": True, "channels_last": ndim == 2, "channels_last_3d": ndim == 3}
    if not fits[memory_format]:
        valid = ["contiguous"] + (["channels_last"] if ndim == 2 else []) + (["channels_last_3d"] if ndim == 3 else [])
        raise ValueError(f"memory_format={memory_format!r} does not fit a {ndim}-d convolution (tensors of rank "
                         f"{ndim + 2}); valid: {', '.join(valid)}")
    return memory_format


def layout_of(t: torch.Tensor) -> str:
    """The memory format torch's convolution reads a tensor as: its suggest_memory_format (strides like channels-last
    -> 'channels_last'/'channels_last_3d', else 'contiguous'), the rule the extension's operator applies too. A tensor
    whose size-1 dims make it fit both layouts goes by its strides, as torch does (an (N, C, 1, 1) tensor a
    channels-last convolution wrote is channels-last)."""
    try:
        from torch._prims_common import suggest_memory_format  # torch's own rule, in Python
    except ImportError:  # an older or newer torch without it: the plain test, which differs only on size-1 dims
        suggest_memory_format = None
    if suggest_memory_format is not None and t.dim() in (4, 5):
        fmt = suggest_memory_format(t)
        if fmt == torch.channels_last:
            return "channels_last"
        if fmt == torch.channels_last_3d:
            return "channels_last_3d"
        return "contiguous"
    if t.dim() == 4 and not t.is_contiguous() and t.is_contiguous(memory_format=torch.channels_last):
        return "channels_last"
    if t.dim() == 5 and not t.is_contiguous() and t.is_contiguous(memory_format=torch.channels_last_3d):
        return "channels_last_3d"
    return "contiguous"


def conv_layout(x: torch.Tensor, w: torch.Tensor) -> str:
    """The layout torch's cuDNN convolution runs for input `x` and weight `w`: channels-last when either is (its
    cudnn_conv_suggest_memory_format), else contiguous; the extension's operator decides the same way."""
    lx = layout_of(x)
    if lx != "contiguous" or w.dim() not in (4, 5):
        return lx
    return layout_of(w)


def default_math(dtype: torch.dtype) -> str:
    """The math type torch's own cuDNN convolution uses: fp16/bf16 -> tensor_op; fp32 -> default (TF32 allowed)
    when ``torch.backends.cudnn.allow_tf32`` else fma; fp64 -> default."""
    if dtype in (torch.float16, torch.bfloat16):
        return "tensor_op"
    if dtype == torch.float32 and not torch.backends.cudnn.allow_tf32:
        return "fma"
    return "default"


def parse_workspace_limit(limit: Any) -> int:
    """Bytes, or -1 for no limit (None)."""
    if limit is None:
        return -1
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"workspace_limit={limit!r} must be an int number of bytes or None")
    if limit < 0:
        raise ValueError(f"workspace_limit={limit} must be >= 0 bytes (None for no limit)")
    if limit >= 2**63:
        raise ValueError(f"workspace_limit={limit} bytes does not fit cuDNN's 64-bit size (< 2**63; None for no "
                         "limit)")
    return limit


def require_cuda() -> None:
    if not torch.cuda.is_available():
        vis = os.environ.get("CUDA_VISIBLE_DEVICES")
        raise CudaUnavailableError(
            "no CUDA GPU is visible: torch.cuda.is_available() is False "
            f"(torch {torch.__version__}, built for CUDA {torch.version.cuda}; "
            f"CUDA_VISIBLE_DEVICES={vis!r}; torch.cuda.device_count()={torch.cuda.device_count()})")


def device_index(device: Any) -> int:
    """The CUDA device index `device` names (None: the current one), after checking that CUDA is usable at all."""
    if device is not None and not isinstance(device, (int, str, torch.device)) or isinstance(device, bool):
        raise TypeError(f"device={device!r} must be an int, a 'cuda:N' string, a torch.device or None")
    if device is not None:
        try:
            dev = torch.device(device) if not isinstance(device, int) else torch.device("cuda", device)
        except (RuntimeError, ValueError, TypeError) as e:  # 'cuda:abc', -1: torch's own message, our type
            raise ValueError(f"device={device!r} is not a CUDA device: {str(e).splitlines()[0]}") from None
        if dev.type != "cuda":
            raise ValueError(f"device={device!r} is not a CUDA device")
    require_cuda()
    if device is None:
        return torch.cuda.current_device()
    idx = dev.index if dev.index is not None else torch.cuda.current_device()
    n = torch.cuda.device_count()
    if not 0 <= idx < n:
        raise ValueError(f"device={device!r}: only {n} CUDA device(s) are visible (0..{n - 1})")
    return idx


# ---------------------------------------------------------------------------------------------- the problem
class Problem:
    """A validated problem: spec, shapes, dtype, layout, math, and its cuDNN description (built on demand).

    Operands are in cuDNN's roles (x, w, y of y = conv(x, w)) and lifted: cuDNN wants >= 4-d tensors, so a 1-d
    convolution runs as a 2-d one with H = 1, as ATen does."""

    def __init__(self, spec: ConvSpec, shapes: ConvShapes, dtype: torch.dtype, memory_format: str, math_type: str):
        self.spec, self.shapes, self.dtype, self.memory_format, self.math = spec, shapes, dtype, memory_format, math_type

    @property
    def dtype_name(self) -> str:
        return DTYPES[self.dtype]

    @property
    def torch_format(self) -> torch.memory_format:
        return MEMORY_FORMATS[self.memory_format]

    def cudnn_direction(self, direction: str) -> str:
        return CUDNN_DIRECTION[(self.spec.transposed, direction)]

    def lift(self, shape: Sequence[int]) -> list[int]:
        shape = list(shape)
        return shape[:2] + [1] + shape[2:] if self.spec.ndim == 1 else shape

    def conv_args(self) -> tuple[list[int], list[int], list[int]]:
        """(stride, padding, dilation) of the lifted cross-correlation cuDNN runs."""
        s = self.spec
        lift = (lambda v, fill: [fill, *v]) if s.ndim == 1 else (lambda v, fill: list(v))
        return lift(s.stride, 1), lift(self.shapes.padding, 0), lift(s.dilation, 1)

    def operand_shape(self, role: str) -> tuple[int, ...]:
        return {"x": self.shapes.x_shape, "w": self.shapes.w_shape, "y": self.shapes.y_shape}[role]

    @property
    def nbytes(self) -> int:
        """Bytes of the three operands."""
        n = sum(math.prod(self.operand_shape(r)) for r in "xwy")
        return n * torch.empty((), dtype=self.dtype).element_size()

    def flops(self) -> int:
        """2 * N * K * prod(out spatial) * (C / groups) * prod(kernel): one multiply-add per filter tap per output
        element of the cross-correlation cuDNN runs (dilation spaces the taps but adds none; padded taps are
        counted). Backward-data and backward-filter have the same multiply-adds, so the same count."""
        return 2 * math.prod(self.shapes.y_shape) * math.prod(self.shapes.w_shape[1:])

    def random_operand(self, role: str, device: int) -> torch.Tensor:
        """Fresh standard-normal data (never zeros), lifted and laid out as the problem says."""
        t = torch.randn(self.lift(self.operand_shape(role)), dtype=self.dtype, device=f"cuda:{device}")
        return t.contiguous(memory_format=self.torch_format)

    def poisoned_operand(self, role: str, device: int) -> torch.Tensor:
        """An output buffer filled with NaN, so that any element cuDNN fails to write shows."""
        t = torch.empty(self.lift(self.operand_shape(role)), dtype=self.dtype, device=f"cuda:{device}",
                        memory_format=self.torch_format)
        return t.fill_(float("nan"))

    def operands(self, device: int, what: str) -> dict[str, torch.Tensor]:
        """Random x, w, y; torch's OutOfMemoryError naming the problem and sizes (nothing left allocated) when they
        do not fit."""
        tensors: dict[str, torch.Tensor] = {}
        err = None
        try:
            for role in "xwy":
                tensors[role] = self.random_operand(role, device)
        except torch.OutOfMemoryError as e:
            err = str(e).splitlines()[0]
            tensors.clear()
        if err is None:
            return tensors
        free, total = torch.cuda.mem_get_info(device)
        raise torch.OutOfMemoryError(
            f"{what}: the operands of {self.describe('')} need {self.nbytes / 2**30:.2f} GiB, which cuda:{device} "
            f"cannot give ({free / 2**30:.2f} of {total / 2**30:.2f} GiB free). Torch said: {err}")

    def describe(self, direction: str) -> str:
        d = f" {direction}" if direction else ""
        return (f"{self.spec}{d} on input {self.shapes.input_shape} {self.dtype_name} {self.memory_format} "
                f"math={self.math}")

    def with_context(self, err: CudnnError, direction: str) -> CudnnError:
        return cudnn_error(f"{err} [convolution: {self.describe(direction)}]", err.status, err.code)


def make_problem(conv: Any, input_shape: Sequence[int], dtype: Any = None, memory_format: Any = None,
                 math_type: str | None = None) -> Problem:
    """A Problem from a module or ConvSpec and the layer's input shape; dtype defaults to the module's weight dtype."""
    spec = ConvSpec.coerce(conv)
    weight_dtype = None
    if isinstance(conv, torch.nn.Module) and getattr(conv, "weight", None) is not None:
        if not isinstance(conv.weight, torch.nn.parameter.UninitializedParameter):
            weight_dtype = conv.weight.dtype
    dt = parse_dtype(dtype, weight_dtype)
    mf = parse_memory_format(memory_format, spec.ndim)
    m = default_math(dt) if math_type is None else check_choice("math", math_type, MATH_TYPES)
    return Problem(spec, spec.shapes(input_shape), dt, mf, m)
