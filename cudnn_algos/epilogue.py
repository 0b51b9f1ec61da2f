"""The pointwise epilogue after a convolution: the ops a user names, the operands they take, what torch runs for them
in eager mode, their float64 reference, and the ops of cuDNN's fused graph they become.

Names: "bias" (a per-channel add), "bn" (an inference BatchNorm: running mean and variance, weight, bias), "scale"
(a per-channel multiply), "add" (a residual: a second tensor of the output's shape), and the activations. In cuDNN's
graph (csrc/search/graph.h, Note [fused graphs]) "bn" is a per-channel scale then a per-channel bias, the factors
folded from its statistics in float64; "hardswish" and "hardsigmoid", which have no pointwise mode of their own, are
composed of the graph's ops with constant operands (COMPOSED; Note [kept values] in graph.h).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import torch

# csrc/search/graph.h's kEpilogueOps, in its order (tests/test_fused_cpu.py checks that the two agree)
GRAPH_OPS = ("bias", "scale", "add", "relu", "relu6", "silu", "gelu", "gelu_tanh", "sigmoid", "tanh", "keep",
             "mul_kept")
ACTIVATIONS = ("relu", "relu6", "silu", "gelu", "gelu_tanh", "sigmoid", "tanh", "hardswish", "hardsigmoid")
OPS = ("bias", "bn", "scale", "add", *ACTIVATIONS)
# ops with no pointwise mode, as graph ops: (graph op, its constant per-channel operand or None) in order;
# hardsigmoid(x) = relu6(x + 3) * (1/6), hardswish(x) = x * hardsigmoid(x) (Note [kept values] in graph.h)
COMPOSED: dict[str, tuple[tuple[str, float | None], ...]] = {
    "hardsigmoid": (("bias", 3.0), ("relu6", None), ("scale", 1.0 / 6.0)),
    "hardswish": (("keep", None), ("bias", 3.0), ("relu6", None), ("scale", 1.0 / 6.0), ("mul_kept", None)),
}
# ops of OPS that have no fused graph at all, with why (none today: the place for one cuDNN cannot express)
NOT_IN_GRAPH: dict[str, str] = {}
MAX_OPS = 8
BN_EPS = 1e-5

_ACT_TORCH = {
    "relu": torch.nn.functional.relu,
    "relu6": torch.nn.functional.relu6,
    "silu": torch.nn.functional.silu,
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "hardswish": torch.nn.functional.hardswish,
    "hardsigmoid": torch.nn.functional.hardsigmoid,
}


def parse_epilogue(epilogue: Any, arg: str = "epilogue") -> tuple[str, ...]:
    """The epilogue's op names, checked: a sequence of names from OPS (or one string, comma-separated:
    "bn,relu"), 1 to MAX_OPS of them. TypeError / ValueError naming `arg` and the value."""
    if isinstance(epilogue, str):
        names = [n.strip() for n in epilogue.split(",")]
    elif isinstance(epilogue, (list, tuple)):
        names = list(epilogue)
    else:
        raise TypeError(f"{arg}={epilogue!r} must be a sequence of op names (or one comma-separated string), "
                        f"e.g. ('bn', 'relu')")
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"{arg}={epilogue!r}: {n!r} is not an op name (one of: {', '.join(OPS)})")
        if n not in OPS:
            raise ValueError(f"{arg}={epilogue!r}: {n!r} is not one of: {', '.join(OPS)}")
    if not names or len(names) > MAX_OPS:
        raise ValueError(f"{arg}={epilogue!r} must name 1 to {MAX_OPS} ops")
    return tuple(names)


def graph_ops(ops: Sequence[str]) -> tuple[str, ...]:
    """The ops of cuDNN's fused graph for these (checked) names: "bn" becomes "scale", "bias"; a COMPOSED op its graph
    ops. ValueError when one has no graph form (``not_in_graph`` says which)."""
    out: list[str] = []
    for op in ops:
        if op in NOT_IN_GRAPH:
            raise ValueError(NOT_IN_GRAPH[op])
        if op in COMPOSED:
            out += [g for g, _ in COMPOSED[op]]
        else:
            out += ["scale", "bias"] if op == "bn" else [op]
    return tuple(out)


def not_in_graph(ops: Sequence[str]) -> str:
    """Why these ops have no fused graph ("" when they have one)."""
    return next((NOT_IN_GRAPH[op] for op in ops if op in NOT_IN_GRAPH), "")


def _per_channel(values: torch.Tensor, ndim: int, dtype: torch.dtype, memory_format: torch.memory_format
                 ) -> torch.Tensor:
    """(C,) values as a (1, C, 1, ...) tensor of `ndim` dims in `dtype` (its layout is the same in every format)."""
    return values.reshape([1, -1] + [1] * (ndim - 2)).to(dtype).contiguous(memory_format=memory_format)


def make_operands(ops: Sequence[str], out_shape: Sequence[int], dtype: torch.dtype,
                  memory_format: torch.memory_format, device: Any, generator: torch.Generator | None = None
                  ) -> list[dict[str, torch.Tensor]]:
    """Fresh random operands of each op, in op order (an op without operands has {}), for an output of `out_shape`
    (cuDNN's: 4 or 5 dims) in `memory_format` (its torch format): "bias" {"bias": (C,)};
    "scale" {"scale": (C,)} in [0.5, 1.5); "bn" {"mean", "var", "weight", "bias": (C,)}, var and weight positive;
    "add" {"residual": out_shape in the layout}. Standard normal unless said, never zeros; `dtype` throughout."""
    c = out_shape[1]
    kw = dict(device=device, generator=generator)

    def normal(*shape):
        return torch.randn(*shape, dtype=torch.float32, **kw).to(dtype)

    def uniform(lo, hi, n):
        return (lo + (hi - lo) * torch.rand(n, dtype=torch.float32, **kw)).to(dtype)

    out: list[dict[str, torch.Tensor]] = []
    for op in ops:
        if op == "bias":
            out.append({"bias": normal(c)})
        elif op == "scale":
            out.append({"scale": uniform(0.5, 1.5, c)})
        elif op == "bn":
            out.append({"mean": normal(c), "var": uniform(0.5, 2.0, c), "weight": uniform(0.5, 1.5, c),
                        "bias": normal(c)})
        elif op == "add":
            out.append({"residual": normal(*out_shape).contiguous(memory_format=memory_format)})
        else:
            out.append({})
    return out


def bn_factors(o: dict[str, torch.Tensor], eps: float = BN_EPS) -> tuple[torch.Tensor, torch.Tensor]:
    """(scale, shift) in float64 of an inference BatchNorm: y = x * scale + shift."""
    scale = o["weight"].double() / torch.sqrt(o["var"].double() + eps)
    return scale, o["bias"].double() - o["mean"].double() * scale


def graph_operands(ops: Sequence[str], operands: Sequence[dict[str, torch.Tensor]], out_shape: Sequence[int],
                   dtype: torch.dtype, memory_format: torch.memory_format, device: Any = None) -> list[torch.Tensor]:
    """The fused graph's operand tensors, in its order (graph_ops), for an output of `out_shape`: per-channel ones as
    (1, C, 1, ...), "bn" as its scale and shift (folded in float64, then cast), a COMPOSED op's constants, the
    residual where its dict holds one (apply() passes its own at each call: ``residual_slot`` says where); all in
    `dtype` and the layout, on `device` (default: where the operands are, else the CPU)."""
    ndim, c = len(out_shape), out_shape[1]
    if device is None:
        device = next((t.device for o in operands for t in o.values()), torch.device("cpu"))
    out: list[torch.Tensor] = []
    for op, o in zip(ops, operands):
        if op in ("bias", "scale"):
            out.append(_per_channel(o[op].to(device), ndim, dtype, memory_format))
        elif op == "bn":
            out += [_per_channel(f.to(device), ndim, dtype, memory_format) for f in bn_factors(o)]
        elif op == "add" and "residual" in o:
            out.append(o["residual"].to(device=device, dtype=dtype).contiguous(memory_format=memory_format))
        elif op in COMPOSED:
            out += [_per_channel(torch.full((c,), v, dtype=torch.float64, device=device), ndim, dtype, memory_format)
                    for _, v in COMPOSED[op] if v is not None]
    return out


def residual_slot(ops: Sequence[str]) -> int | None:
    """Where the residual ("add") goes among the fused graph's operands for these ops (graph_operands' order), or None
    where there is no "add"."""
    gops = graph_ops(ops)  # of the graph's ops, "bias", "scale" and "add" take an operand (kEpilogueOps)
    return sum(g in ("bias", "scale") for g in gops[:gops.index("add")]) if "add" in gops else None


def _channel_view(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return t.reshape([1, -1] + [1] * (like.dim() - 2))


def apply_torch(ops: Sequence[str], out: torch.Tensor, operands: Sequence[dict[str, torch.Tensor]]) -> torch.Tensor:
    """What torch's eager mode runs after the convolution, one op (one kernel) at a time, in out's dtype."""
    for op, o in zip(ops, operands):
        if op == "bias":
            out = out + _channel_view(o["bias"], out)
        elif op == "scale":
            out = out * _channel_view(o["scale"], out)
        elif op == "bn":
            out = torch.nn.functional.batch_norm(out, o["mean"], o["var"], o["weight"], o["bias"], False, 0.0,
                                                 BN_EPS)
        elif op == "add":
            out = out + o["residual"].reshape(out.shape)
        else:
            out = _ACT_TORCH[op](out)
    return out


def apply_reference(ops: Sequence[str], out: torch.Tensor, operands: Sequence[dict[str, torch.Tensor]]
                    ) -> torch.Tensor:
    """The epilogue in float64 on the float64 convolution `out` (the fused rows' reference)."""
    out = out.double()
    for op, o in zip(ops, operands):
        if op == "bias":
            out = out + _channel_view(o["bias"].double(), out)
        elif op == "scale":
            out = out * _channel_view(o["scale"].double(), out)
        elif op == "bn":
            scale, shift = bn_factors(o)
            out = out * _channel_view(scale, out) + _channel_view(shift, out)
        elif op == "add":
            out = out + o["residual"].double().reshape(out.shape)
        elif op == "gelu":
            out = 0.5 * out * (1.0 + torch.erf(out / math.sqrt(2.0)))
        else:
            out = _ACT_TORCH[op](out)
    return out


def eager_kernels(ops: Sequence[str]) -> int:
    """Kernels torch's eager mode launches after the convolution for these ops: one each."""
    return len(ops)


__all__ = ["GRAPH_OPS", "ACTIVATIONS", "OPS", "COMPOSED", "NOT_IN_GRAPH", "MAX_OPS", "BN_EPS", "parse_epilogue",
           "graph_ops", "not_in_graph", "make_operands", "bn_factors", "graph_operands", "residual_slot",
           "apply_torch", "apply_reference", "eager_kernels"]
