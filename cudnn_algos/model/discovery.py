"""Which convolutions a model runs: one forward pass on the meta device (no GPU, no memory; the real device when
the model cannot run there) with forward hooks on convolution modules and a dispatch mode for functional calls,
each call a ``ConvUse``; ``distinct_problems`` groups them by problem."""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch

from ..problem import DTYPES, MEMORY_FORMATS, conv_layout, layout_of, parse_memory_format
from ..spec import ConvSpec


@dataclass
class ConvUse:
    """One convolution call of a forward pass: who made it, its spec, and what it received. A convolution module's
    call is named by the module and keeps the module's spec (padding modes as written); a functional call
    (``F.conv2d`` inside some module's forward) is named ``<calling module>/F.conv2d`` and described as the
    convolution torch runs (explicit padding already applied to its input)."""

    name: str
    spec: ConvSpec
    input_shape: tuple[int, ...]
    dtype: torch.dtype
    memory_format: str
    functional: bool = False


def _functional_use(scope: str, args: tuple) -> ConvUse:
    """A ConvUse from aten.convolution's arguments (input, weight, bias, stride, padding, dilation, transposed,
    output_padding, groups)."""
    x, w, _, stride, padding, dilation, transposed, output_padding, groups = args[:9]
    nd = w.dim() - 2
    if transposed:
        cin, cout = w.shape[0], w.shape[1] * groups
    else:
        cin, cout = x.shape[1], w.shape[0]
    spec = ConvSpec(int(cin), int(cout), tuple(int(k) for k in w.shape[2:]), stride=tuple(stride),
                    padding=tuple(padding), dilation=tuple(dilation), groups=int(groups), transposed=bool(transposed),
                    output_padding=tuple(output_padding) if transposed else 0)
    op = f"F.conv{'_transpose' if transposed else ''}{nd}d"
    return ConvUse(f"{scope or '<model>'}/{op}", spec, tuple(x.shape), x.dtype, conv_layout(x, w), functional=True)


def _as_on_gpu(out: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """A convolution's output laid out as torch's cuDNN path lays it out on the GPU (channels-last when the input or
    the weight is): on the meta device it comes out contiguous, and the next layer's layout would be misread."""
    fmt = conv_layout(x, w)
    if out.device.type != "meta" or fmt == "contiguous" or layout_of(out) == fmt or out.dim() not in (4, 5):
        return out
    return torch.empty(out.shape, dtype=out.dtype, device=out.device, memory_format=MEMORY_FORMATS[fmt])


def _run_recording(m: torch.nn.Module, inp: Any) -> list[ConvUse]:
    """One forward pass of `m` under a dispatch mode that sees every aten.convolution, with hooks that keep the
    stack of modules being called (so a call is named by its module)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    uses: list[ConvUse] = []
    stack: list[tuple[str, torch.nn.Module]] = []

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten.convolution.default:
                top = stack[-1][1] if stack else None
                if not isinstance(top, torch.nn.modules.conv._ConvNd):  # a module's own call is recorded by its hook
                    uses.append(_functional_use(stack[-1][0] if stack else "", args))
                return _as_on_gpu(func(*args, **(kwargs or {})), args[0], args[1])
            return func(*args, **(kwargs or {}))

    def pre(module, args, _name=""):
        stack.append((_name, module))
        if isinstance(module, torch.nn.modules.conv._ConvNd) and args and isinstance(args[0], torch.Tensor):
            x = args[0]  # (anything else: the module's own forward says what is wrong with it)
            uses.append(ConvUse(_name, ConvSpec.from_module(module), tuple(x.shape), x.dtype,
                                conv_layout(x, module.weight)))

    def post(module, args, out):
        stack.pop()

    handles = []
    for name, mod in m.named_modules():
        handles.append(mod.register_forward_pre_hook(lambda mod_, a, _n=name: pre(mod_, a, _n)))
        handles.append(mod.register_forward_hook(post))
    try:
        with torch.no_grad(), Recorder():
            m(*inp) if isinstance(inp, tuple) else m(inp)
    finally:
        for h in handles:
            h.remove()
    return uses


def discover(model: torch.nn.Module, example_input: Any) -> list[ConvUse]:
    """Every convolution call of one forward pass — convolution modules and functional calls alike — with the real
    input it received (shape, dtype, layout), in call order.

    The pass runs on the meta device (no compute, no GPU) on a copy of the model; where the model cannot run on
    meta, it runs as given under torch.no_grad()."""
    def to_meta(x):
        if isinstance(x, torch.Tensor):
            return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
        if isinstance(x, tuple):
            return tuple(to_meta(v) for v in x)
        return x

    try:
        meta_model = copy.deepcopy(model).to("meta")
        return _run_recording(meta_model, to_meta(example_input))
    except Exception:
        pass
    try:
        return _run_recording(model, example_input)
    except Exception as e:  # the model's own error, said to be about the input it was given (same type)
        if type(e) not in (TypeError, ValueError, RuntimeError):
            raise
        raise type(e)(f"example_input={_describe(example_input)}: the model's forward pass on it failed: "
                      f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from e


def _describe(x: Any) -> str:
    """A short description of an example input for an error message."""
    if isinstance(x, torch.Tensor):
        return f"a {x.dtype} tensor of shape {tuple(x.shape)}"
    if isinstance(x, tuple):
        return "(" + ", ".join(_describe(v) for v in x[:4]) + (", ..." if len(x) > 4 else "") + ")"
    return f"{type(x).__name__} {repr(x)[:40]}"


def distinct_problems(uses: list[ConvUse], dtype, memory_format) -> dict[tuple, list[str]]:
    """(spec, input shape, dtype name, layout) -> the layer names that run it, in model order."""
    keyed: dict[tuple, list[str]] = {}
    for u in uses:
        fmt = parse_memory_format(memory_format, u.spec.ndim) if memory_format is not None else u.memory_format
        keyed.setdefault((u.spec, u.input_shape, DTYPES[dtype or u.dtype], fmt), []).append(u.name)
    return keyed
