"""The public verbs: ``find`` (search every legacy cuDNN algorithm of a convolution) and ``run`` (execute one).

Every argument is validated before any GPU work, so bad input raises the same typed error on a machine without a
GPU. Shapes, dtypes and layouts follow torch's conventions; see ConvSpec for the layer side.
"""
from __future__ import annotations

import datetime as _dt
import functools
import os
from dataclasses import replace
from typing import Any, Sequence

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from . import _ext
from .errors import CudaUnavailableError, CudnnError
from .results import DIRECTIONS, AlgoResult, Environment, SearchResult, SearchResults
from .spec import ConvShapes, ConvSpec

if TYPE_CHECKING:  # pragma: no cover
    from .engines import EngineRow

MODES = ("find", "find_ex", "heuristic")
MATH_TYPES = ("default", "tensor_op", "tensor_op_allow_conversion", "fma")
DTYPES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float64: "float64"}
_DTYPE_ALIASES = {"float32": torch.float32, "float": torch.float32, "fp32": torch.float32, "float16": torch.float16,
                  "half": torch.float16, "fp16": torch.float16, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
                  "float64": torch.float64, "double": torch.float64, "fp64": torch.float64}
MEMORY_FORMATS = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last,
                  "channels_last_3d": torch.channels_last_3d}

# The cuDNN direction that computes each of a layer's directions, and the roles of its three cuDNN operands.
# Non-transposed: y = conv(x, w) with x the (pre-padded) input. Transposed: the layer's forward is the adjoint of
# the mirrored convolution, so x is the layer's output (or its gradient) and y its input.
_CUDNN_DIRECTION = {
    (False, "forward"): "forward",
    (False, "backward_data"): "backward_data",
    (False, "backward_filter"): "backward_filter",
    (True, "forward"): "backward_data",
    (True, "backward_data"): "forward",
    (True, "backward_filter"): "backward_filter",
}
_OUTPUT_OPERAND = {"forward": "y", "backward_data": "x", "backward_filter": "w"}


# ---------------------------------------------------------------------------------------------- validation
def _check_choice(name: str, value: Any, valid: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in valid:
        raise ValueError(f"{name}={value!r} is not one of: {', '.join(valid)}")
    return value


def _dtype(dtype: Any, spec_default: torch.dtype | None) -> torch.dtype:
    if dtype is None:
        dtype = spec_default if spec_default is not None else torch.float32
    if isinstance(dtype, str):
        if dtype not in _DTYPE_ALIASES:
            raise ValueError(f"dtype={dtype!r} is not one of: {', '.join(_DTYPE_ALIASES)}")
        dtype = _DTYPE_ALIASES[dtype]
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype={dtype!r} must be a torch.dtype or its name")
    if dtype not in DTYPES:
        kind = "integer" if not dtype.is_floating_point and not dtype.is_complex else (
            "complex" if dtype.is_complex else "floating")
        raise TypeError(
            f"dtype={dtype} ({kind}) is not supported by cuDNN convolutions here; use one of "
            f"{', '.join(str(d) for d in DTYPES)}"
        )
    return dtype


def _memory_format(memory_format: Any, ndim: int) -> str:
    """Returns 'contiguous', 'channels_last' or 'channels_last_3d' after checking it fits the layer's rank."""
    if memory_format is None:
        return "contiguous"
    if isinstance(memory_format, torch.memory_format):
        names = {v: k for k, v in MEMORY_FORMATS.items()}
        if memory_format not in names:
            raise ValueError(f"memory_format={memory_format} is not one of: {', '.join(MEMORY_FORMATS)}")
        memory_format = names[memory_format]
    _check_choice("memory_format", memory_format, tuple(MEMORY_FORMATS))
    fits = {"contiguous": True, "channels_last": ndim == 2, "channels_last_3d": ndim == 3}
    if not fits[memory_format]:
        valid = ["contiguous"] + (["channels_last"] if ndim == 2 else []) + (["channels_last_3d"] if ndim == 3 else [])
        raise ValueError(
            f"memory_format={memory_format!r} does not fit a {ndim}-d convolution (tensors of rank {ndim + 2}); "
            f"valid: {', '.join(valid)}"
        )
    return memory_format


def default_math(dtype: torch.dtype) -> str:
    """The math type torch's own cuDNN convolution uses: fp16/bf16 -> tensor_op; fp32 -> default (TF32 allowed)
    when ``torch.backends.cudnn.allow_tf32`` else fma; fp64 -> default."""
    if dtype in (torch.float16, torch.bfloat16):
        return "tensor_op"
    if dtype == torch.float32 and not torch.backends.cudnn.allow_tf32:
        return "fma"
    return "default"


def _workspace_limit(limit: Any) -> int:
    if limit is None:
        return -1
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"workspace_limit={limit!r} must be an int number of bytes or None")
    if limit < 0:
        raise ValueError(f"workspace_limit={limit} must be >= 0 bytes (None for no limit)")
    return limit


def _device_index(device: Any) -> int:
    """Resolves `device` after checking that CUDA is usable at all."""
    if device is not None and not isinstance(device, (int, str, torch.device)) or isinstance(device, bool):
        raise TypeError(f"device={device!r} must be an int, a 'cuda:N' string, a torch.device or None")
    if device is not None:
        dev = torch.device(device) if not isinstance(device, int) else torch.device("cuda", device)
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


def require_cuda() -> None:
    if not torch.cuda.is_available():
        vis = os.environ.get("CUDA_VISIBLE_DEVICES")
        raise CudaUnavailableError(
            "no CUDA GPU is visible: torch.cuda.is_available() is False "
            f"(torch {torch.__version__}, built for CUDA {torch.version.cuda}; "
            f"CUDA_VISIBLE_DEVICES={vis!r}; torch.cuda.device_count()={torch.cuda.device_count()})"
        )


# ---------------------------------------------------------------------------------------------- environment
def _driver_release() -> str | None:
    try:
        with open("/proc/driver/nvidia/version") as f:
            for tok in f.read().split():
                if tok.count(".") >= 1 and tok.replace(".", "").isdigit():
                    return tok
    except OSError:
        pass
    try:
        import pynvml  # nvidia-ml-py

        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else v
    except Exception:
        return None


def loaded_cudnn_library() -> str | None:
    """Path of the libcudnn.so the process has loaded (from /proc/self/maps), if any."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if line.strip() else ""
                base = os.path.basename(path)
                if base.startswith("libcudnn.so"):
                    return path
    except OSError:
        pass
    return None


@functools.lru_cache(maxsize=None)
def environment(device: int) -> Environment:
    ext = _ext.load()
    v = ext.versions()
    props = torch.cuda.get_device_properties(device)
    return Environment(
        gpu_name=props.name,
        compute_capability=f"{props.major}.{props.minor}",
        device_index=device,
        driver_version=_driver_release(),
        cuda_driver_api=int(v["cuda_driver"]),
        cuda_runtime=int(v["cuda_runtime"]),
        cudnn_runtime=int(v["cudnn_runtime"]),
        cudnn_build=int(v["cudnn_build"]),
        cudnn_library=loaded_cudnn_library(),
        torch_version=torch.__version__,
        torch_cuda=torch.version.cuda,
    )


# ---------------------------------------------------------------------------------------------- problem building
class _Problem:
    """A validated problem: spec, shapes, dtype, layout, math, and its cuDNN description (built lazily)."""

    def __init__(self, spec: ConvSpec, shapes: ConvShapes, dtype: torch.dtype, memory_format: str, math: str):
        self.spec, self.shapes, self.dtype, self.memory_format, self.math = spec, shapes, dtype, memory_format, math

    @property
    def torch_format(self) -> torch.memory_format:
        return MEMORY_FORMATS[self.memory_format]

    def lift(self, shape: Sequence[int]) -> list[int]:
        """cuDNN's legacy API wants >= 4-d tensors: a 1-d convolution runs as 2-d with H = 1 (as ATen does)."""
        shape = list(shape)
        return shape[:2] + [1] + shape[2:] if self.spec.ndim == 1 else shape

    def cudnn(self, ext):
        s, sh = self.spec, self.shapes
        one = self.spec.ndim == 1
        lift = (lambda v, fill: [fill, *v]) if one else (lambda v, fill: list(v))
        return ext.ConvProblem(
            dtype=DTYPES[self.dtype],
            layout="nchw" if self.memory_format == "contiguous" else "nhwc",
            x=self.lift(sh.x_shape),
            w=self.lift(sh.w_shape),
            y=self.lift(sh.y_shape),
            padding=lift(sh.padding, 0),
            stride=lift(s.stride, 1),
            dilation=lift(s.dilation, 1),
            groups=s.groups,
            math=self.math,
        )

    def operand_shape(self, role: str) -> tuple[int, ...]:
        return {"x": self.shapes.x_shape, "w": self.shapes.w_shape, "y": self.shapes.y_shape}[role]

    def random_operand(self, role: str, device: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """Fresh standard-normal data (never zeros), cuDNN-shaped (lifted) and laid out as the problem says."""
        t = torch.randn(self.lift(self.operand_shape(role)), dtype=self.dtype, device=f"cuda:{device}",
                        generator=generator)
        return t.contiguous(memory_format=self.torch_format)

    def poisoned_operand(self, role: str, device: int) -> torch.Tensor:
        """An output buffer filled with NaN, so that any element cuDNN fails to write shows."""
        t = torch.empty(self.lift(self.operand_shape(role)), dtype=self.dtype, device=f"cuda:{device}",
                        memory_format=self.torch_format)
        return t.fill_(float("nan"))

    def describe(self, direction: str) -> str:
        return (f"{self.spec} {direction} on input {self.shapes.input_shape} {DTYPES[self.dtype]} "
                f"{self.memory_format} math={self.math}")


def _problem(conv, input_shape, dtype, memory_format, math) -> _Problem:
    spec = ConvSpec.coerce(conv)
    weight_dtype = None
    if isinstance(conv, torch.nn.Module) and getattr(conv, "weight", None) is not None:
        if not isinstance(conv.weight, torch.nn.parameter.UninitializedParameter):
            weight_dtype = conv.weight.dtype
    dt = _dtype(dtype, weight_dtype)
    mf = _memory_format(memory_format, spec.ndim)
    m = default_math(dt) if math is None else _check_choice("math", math, MATH_TYPES)
    shapes = spec.shapes(input_shape)
    return _Problem(spec, shapes, dt, mf, m)


def _with_context(err: CudnnError, problem: _Problem, direction: str) -> CudnnError:
    return CudnnError(f"{err} [convolution: {problem.describe(direction)}]", err.status, err.code)


def _nbytes(problem: _Problem) -> int:
    n = 0
    for role in "xwy":
        k = 1
        for v in problem.operand_shape(role):
            k *= v
        n += k
    return n * torch.empty((), dtype=problem.dtype).element_size()


def _allocate_operands(problem: _Problem, device: int, direction: str) -> dict[str, torch.Tensor]:
    """Random x, w, y for find_ex; a clear OOM (and nothing left allocated) when they do not fit."""
    tensors: dict[str, torch.Tensor] = {}
    err = None
    try:
        for role in "xwy":
            tensors[role] = problem.random_operand(role, device)
    except torch.OutOfMemoryError as e:
        err = str(e).splitlines()[0]
        tensors.clear()
    if err is None:
        return tensors
    free, total = torch.cuda.mem_get_info(device)
    raise torch.OutOfMemoryError(
        f"find(): the operands of {problem.describe(direction)} need {_nbytes(problem) / 2**30:.2f} GiB, which "
        f"cuda:{device} cannot give ({free / 2**30:.2f} of {total / 2**30:.2f} GiB free). Torch said: {err}"
    )


# ---------------------------------------------------------------------------------------------- find
def find(
    conv: ConvSpec | torch.nn.Module,
    input_shape: Sequence[int],
    *,
    direction: str = "forward",
    dtype: torch.dtype | str | None = None,
    memory_format: torch.memory_format | str | None = None,
    math: str | None = None,
    mode: str = "find",
    workspace_limit: int | None = None,
    device: int | str | torch.device | None = None,
    measure: bool = False,
    repeats: int = 10,
    warmup: int = 3,
    l2: str = "warm",
    reference: str = "cuda",
    cupti: bool = False,
) -> SearchResult | SearchResults:
    """Asks cuDNN for every legacy algorithm of one convolution and returns them all, failures included.

    conv: ``nn.Conv1d/2d/3d``, ``nn.ConvTranspose1d/2d/3d`` or a :class:`ConvSpec`; only its hyper-parameters are
        read (the module may live on any device).
    input_shape: the layer's input, ``(N, C, *spatial)``.
    direction: the layer's ``"forward"``, ``"backward_data"`` (grad wrt input), ``"backward_filter"`` (grad wrt
        weight), or ``"all"`` (returns :class:`SearchResults` with the three).
    dtype: float32 / float16 / bfloat16 / float64 (default: the module's weight dtype, else float32).
    memory_format: ``"contiguous"`` (default), ``"channels_last"`` (2-d) or ``"channels_last_3d"`` (3-d).
    math: cuDNN math type set on the descriptor before the search (default: what torch would use, see
        :func:`default_math`).
    mode: ``"find"`` (cudnnFind…Algorithm: cuDNN allocates and times), ``"find_ex"`` (cudnnFind…AlgorithmEx on
        fresh random tensors and a workspace from torch's allocator), ``"heuristic"`` (cudnnGet…_v7: ranking only).
    workspace_limit: bytes; algorithms needing more become ``WORKSPACE_LIMIT_EXCEEDED`` rows (in ``find_ex`` no more
        than this is handed to cuDNN).
    device: CUDA device (default: the current one).
    measure: re-time every successful algorithm ourselves (kernel, throughput and host time: median/min/max/
        spread over ``repeats`` samples after ``warmup`` calls), with its relative and max-abs error against a
        float64 reference computed by torch (on ``reference``: "cuda" or "cpu"), achieved TFLOP/s and % of this
        device's measured matmul peak, and its heuristic and measured ranks (see cudnn_algos.measure).
    l2: "warm" (the same operands every call) or "cold" (rotate operand sets totalling > 3x the L2 cache).
    cupti: also read CUPTI kernel records for every row (the independent clock, and the kernels' names); costs a
        profiler session per search. Without it the CUPTI column is empty unless graph capture failed.

    ``time_ms`` is milliseconds as cuDNN reported it; workspace is in bytes.
    """
    cfg = None
    if measure:
        from .measure import MeasureConfig, check_config

        check_config(repeats, warmup, l2, reference)
        cfg = MeasureConfig(repeats=repeats, warmup=warmup, l2=l2, cupti=bool(cupti), reference=reference)
    problem, directions, limit, dev = validate(conv, input_shape, direction=direction, dtype=dtype,
                                              memory_format=memory_format, math=math, mode=mode,
                                              workspace_limit=workspace_limit, device=device)
    results = tuple(_search_one(problem, d, mode, limit, dev, cfg) for d in directions)
    return results[0] if direction != "all" else SearchResults(results)


def validate(conv, input_shape, *, direction="forward", dtype=None, memory_format=None, math=None, mode="find",
             workspace_limit=None, device=None) -> tuple[_Problem, tuple[str, ...], int, int]:
    """All of find()'s argument checks, in order, with no GPU work but the final check that CUDA is usable.
    Raises ValueError / TypeError naming the argument, or CudaUnavailableError."""
    problem = _problem(conv, input_shape, dtype, memory_format, math)
    _check_choice("direction", direction, DIRECTIONS + ("all",))
    directions = DIRECTIONS if direction == "all" else (direction,)
    _check_choice("mode", mode, MODES)
    limit = _workspace_limit(workspace_limit)
    return problem, directions, limit, _device_index(device)


def _order(rows: list[AlgoResult], mode: str) -> tuple[AlgoResult, ...]:
    """Successful rows first (by our kernel median when measured, else cuDNN's time, or its rank in heuristic
    mode), then the others by algorithm id."""
    ok = [r for r in rows if r.ok]
    rest = [r for r in rows if not r.ok]
    if any(r.kernel_ms is not None for r in ok):
        ok.sort(key=lambda r: (r.kernel_ms is None, r.kernel_ms or 0.0))
    elif mode == "heuristic":
        ok.sort(key=lambda r: (r.rank if r.rank is not None else 1 << 30))
    else:
        ok.sort(key=lambda r: (r.time_ms is None, r.time_ms or 0.0, r.rank or 0))
    rest.sort(key=lambda r: (r.algo_id, r.rank if r.rank is not None else 1 << 30))
    return tuple(ok + rest)


def _search_one(problem: _Problem, direction: str, mode: str, limit: int, dev: int, cfg=None) -> SearchResult:
    ext = _ext.load()
    cdir = _CUDNN_DIRECTION[(problem.spec.transposed, direction)]
    cp = problem.cudnn(ext)
    tensors = _allocate_operands(problem, dev, direction) if mode == "find_ex" else {}
    try:
        with torch.cuda.device(dev):
            out = ext.search(cdir, cp, mode, tensors.get("x"), tensors.get("w"), tensors.get("y"),
                             workspace_limit=limit, device=dev)
    except CudnnError as e:
        err = _with_context(e, problem, direction)
    else:
        err = None
    finally:
        tensors.clear()  # a traceback must not keep the operands alive
    if err is not None:
        raise err
    rows = [AlgoResult(direction=cdir, **r) for r in out["rows"]]
    result = SearchResult(
        rows=_order(rows, mode),
        spec=problem.spec,
        shapes=problem.shapes,
        direction=direction,
        cudnn_direction=cdir,
        mode=mode,
        dtype=DTYPES[problem.dtype],
        memory_format=problem.memory_format,
        math=problem.math,
        workspace_limit=None if limit < 0 else limit,
        workspace_given=out["workspace_given"],
        search_ms=float(out["search_ms"]),
        env=environment(dev),
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    )
    if cfg is None:
        return result
    from .measure import measure_search

    with torch.cuda.device(dev):
        result = measure_search(result, problem, cfg, dev)
    return replace(result, rows=_order(list(result.rows), mode))


# ---------------------------------------------------------------------------------------------- run
def _algo_id(algo: AlgoResult | str | int, cdir: str, ext) -> tuple[int, str | None]:
    names = ext.algo_names(cdir)
    if isinstance(algo, AlgoResult):
        if algo.direction != cdir:
            raise ValueError(f"algo is a {algo.direction} row but this call runs cuDNN's {cdir}")
        return algo.algo_id, algo.math_type
    if isinstance(algo, str):
        if algo not in names:
            raise ValueError(f"algo={algo!r} is not a {cdir} algorithm; valid: {', '.join(names)}")
        return names.index(algo), None
    if isinstance(algo, int) and not isinstance(algo, bool):
        if not 0 <= algo < len(names):
            raise ValueError(f"algo={algo} is out of range for {cdir} (0..{len(names) - 1})")
        return algo, None
    raise TypeError(f"algo={algo!r} must be an AlgoResult row, an algorithm name or an id")


def _format_of(t: torch.Tensor) -> str:
    if t.dim() == 4 and not t.is_contiguous() and t.is_contiguous(memory_format=torch.channels_last):
        return "channels_last"
    if t.dim() == 5 and not t.is_contiguous() and t.is_contiguous(memory_format=torch.channels_last_3d):
        return "channels_last_3d"
    return "contiguous"


def run(
    conv: ConvSpec | torch.nn.Module,
    algo: "AlgoResult | str | int | EngineRow",
    *,
    direction: str = "forward",
    input: torch.Tensor | None = None,
    weight: torch.Tensor | None = None,
    grad_output: torch.Tensor | None = None,
    input_shape: Sequence[int] | None = None,
    math: str | None = None,
    memory_format: torch.memory_format | str | None = None,
    workspace_limit: int | None = None,
) -> torch.Tensor:
    """Computes one direction of the layer with one chosen legacy cuDNN algorithm.

    direction ``"forward"`` needs ``input`` and ``weight`` and returns the layer's output (no bias);
    ``"backward_data"`` needs ``weight``, ``grad_output`` and ``input_shape`` (or ``input``) and returns the
    gradient wrt the input; ``"backward_filter"`` needs ``input`` and ``grad_output`` and returns the gradient wrt
    the weight. ``algo`` is a row of a search (its algorithm and math type are used), a name or an id, or an
    engine configuration from :func:`find_engines` (its execution plan runs). The tensors
    must be CUDA tensors of one dtype on one device; their layout is taken from ``memory_format`` or, by default,
    from the first tensor given. Returns a new tensor, in that layout.
    """
    spec = ConvSpec.coerce(conv)
    _check_choice("direction", direction, DIRECTIONS)
    need = {"forward": ("input", "weight"), "backward_data": ("weight", "grad_output"),
            "backward_filter": ("input", "grad_output")}[direction]
    given = {"input": input, "weight": weight, "grad_output": grad_output}
    for name in need:
        t = given[name]
        if t is None:
            raise ValueError(f"direction={direction!r} needs {name}=")
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, not {type(t).__name__}")
    first = given[need[0]]
    if input_shape is None:
        if input is None:
            raise ValueError(f"direction={direction!r} needs input_shape= (or input=) to know the input's size")
        input_shape = tuple(input.shape)
    fmt = _format_of(first) if memory_format is None else memory_format
    problem = _problem(spec, input_shape, first.dtype, fmt, math)
    if weight is not None and tuple(weight.shape) != problem.shapes.weight_shape:
        raise ValueError(f"weight has shape {tuple(weight.shape)} but {spec} needs {problem.shapes.weight_shape}")
    if grad_output is not None and tuple(grad_output.shape) != problem.shapes.output_shape:
        raise ValueError(
            f"grad_output has shape {tuple(grad_output.shape)} but the layer's output is {problem.shapes.output_shape}"
        )
    for name in need:
        t = given[name]
        if not t.is_cuda:
            raise ValueError(f"{name} is on {t.device}; run() needs CUDA tensors")
        if t.dtype != problem.dtype:
            raise ValueError(f"{name} has dtype {t.dtype} but {need[0]} has {problem.dtype}")
    limit = _workspace_limit(workspace_limit)
    dev = first.device.index if first.device.index is not None else torch.cuda.current_device()
    ext = _ext.load()
    cdir = _CUDNN_DIRECTION[(spec.transposed, direction)]
    from .engines import EngineRow

    if isinstance(algo, EngineRow):  # a graph-API engine configuration: run its execution plan
        if algo.direction != cdir:
            raise ValueError(f"algo is a {algo.direction} engine configuration but this call runs cuDNN's {cdir}")
        if not algo.ok or algo.plan is None:
            raise ValueError(f"engine configuration {algo.name} has no plan to run (status {algo.status}; plans "
                             "are not saved with JSON)")

        def execute(x, w, y):
            algo.plan.execute(x, w, y)
    else:
        algo_id, row_math = _algo_id(algo, cdir, ext)
        exec_math = math if math is not None else (row_math or problem.math)
        _check_choice("math", exec_math, MATH_TYPES)

        def execute(x, w, y):
            ext.execute(cdir, cp, algo_id, exec_math, x, w, y, workspace_limit=limit)

    # the layer's tensors in cuDNN's roles
    sh = problem.shapes
    layer_in = input
    if layer_in is not None and not spec.transposed and sh.has_pre_pad:
        layer_in = _pre_pad(layer_in, sh)
    if spec.transposed:
        roles = {"forward": {"y": input, "w": weight}, "backward_data": {"x": grad_output, "w": weight},
                 "backward_filter": {"x": grad_output, "y": input}}[direction]
    else:
        roles = {"forward": {"x": layer_in, "w": weight}, "backward_data": {"y": grad_output, "w": weight},
                 "backward_filter": {"x": layer_in, "y": grad_output}}[direction]
    out_role = _OUTPUT_OPERAND[cdir]
    ops = {r: t.reshape(problem.lift(t.shape)).contiguous(memory_format=problem.torch_format) for r, t in roles.items()}
    ops[out_role] = problem.poisoned_operand(out_role, dev)
    cp = problem.cudnn(ext)
    try:
        with torch.cuda.device(dev):
            execute(ops["x"], ops["w"], ops["y"])
    except CudnnError as e:
        err = _with_context(e, problem, direction)
    else:
        err = None
    if err is not None:
        raise err
    result = ops[out_role]
    if spec.ndim == 1:
        result = result.squeeze(2)
    if not spec.transposed and direction == "backward_data" and sh.has_pre_pad:
        result = _unpad_grad(result, sh)
    return result


def _pre_pad(t: torch.Tensor, sh: ConvShapes) -> torch.Tensor:
    pads = [v for lo_hi in reversed(sh.pre_pad) for v in lo_hi]  # F.pad: last dim first
    return F.pad(t, pads, mode=sh.pre_pad_mode) if sh.pre_pad_mode != "constant" else F.pad(t, pads)


def _unpad_grad(grad_x: torch.Tensor, sh: ConvShapes) -> torch.Tensor:
    """Gradient wrt the layer's input from the gradient wrt its pre-padded input (F.pad's adjoint)."""
    with torch.enable_grad():
        probe = torch.empty(sh.input_shape, dtype=grad_x.dtype, device=grad_x.device).normal_().requires_grad_(True)
        (g,) = torch.autograd.grad(_pre_pad(probe, sh), probe, grad_x)
    return g
