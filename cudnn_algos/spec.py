"""ConvSpec: a convolution layer's hyper-parameters, from a torch module or plain numbers, with validation.
(torch is imported by the functions that take or make a module, not by this module: saved results load without it.)

Everything here is pure Python: it runs without a GPU and without the extension.
"""
from __future__ import annotations

import operator
from collections.abc import Mapping, Set
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    import torch


PADDING_MODES = ("zeros", "reflect", "replicate", "circular")
_INT32_MAX = 2**31 - 1


def as_int(value: Any) -> int | None:
    """`value` as a Python int when it is an integer as torch takes one (int, numpy integer, 0-d integer tensor;
    not bool, not float); else None."""
    if isinstance(value, bool) or isinstance(value, float):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _tuple(value: Any, n: int, name: str) -> tuple[int, ...]:
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int or a sequence of {n} ints, not {value!r}")
    if as_int(value) is not None:
        return (_fits(as_int(value), name),) * n
    if isinstance(value, (str, bytes, Mapping, Set)):  # a dict's keys or a set's order are no padding
        raise TypeError(f"{name} must be an int or a sequence of {n} ints, not {value!r}")
    try:
        out = tuple(value)
    except TypeError:
        raise TypeError(f"{name} must be an int or a sequence of {n} ints, not {value!r}") from None
    if len(out) == 1:
        out = out * n
    ints = [as_int(v) for v in out]
    if len(out) != n or any(v is None for v in ints):
        raise ValueError(f"{name}={value!r} must be an int or {n} ints for a {n}-d convolution")
    return tuple(_fits(v, name) for v in ints)


def _length(value: Any) -> int | None:
    """len(value), or None where it has none (a 0-d tensor's __len__ raises): _tuple then names the argument."""
    try:
        return len(value)
    except TypeError:
        return None


def _fits(v: int, name: str) -> int:
    """cuDNN's descriptors hold kernel sizes, strides, paddings, dilations and channel counts in 32-bit ints."""
    if abs(v) > _INT32_MAX:
        raise ValueError(f"{name}={v} does not fit cuDNN's 32-bit descriptor fields (|value| <= {_INT32_MAX})")
    return v


def same_padding(kernel_size: Sequence[int], dilation: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """torch's ``padding="same"`` per spatial dim as (left, right): dilation * (kernel - 1) in all, the odd one
    on the right (torch pads that one explicitly before the convolution)."""
    return tuple(((d * (k - 1)) // 2, d * (k - 1) - (d * (k - 1)) // 2) for k, d in zip(kernel_size, dilation))


@dataclass(frozen=True)
class ConvShapes:
    """Shapes of one convolution problem.

    ``input_shape``/``weight_shape``/``output_shape`` are the layer's own (what its forward receives, its
    weight, what it returns). ``x_shape``/``w_shape``/``y_shape`` are the operands of the cross-correlation cuDNN
    runs, y = conv(x, w): for a transposed convolution x is the layer's output and y its input (its forward is
    cuDNN's backward-data of that mirrored convolution); ``x_shape`` includes ``pre_pad``, the explicit padding
    torch applies before the convolution for ``padding="same"`` with an odd total or a ``padding_mode`` other than
    zeros. ``padding`` is the symmetric zero padding cuDNN applies itself.
    """

    input_shape: tuple[int, ...]
    weight_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    x_shape: tuple[int, ...]
    w_shape: tuple[int, ...]
    y_shape: tuple[int, ...]
    padding: tuple[int, ...]
    pre_pad: tuple[tuple[int, int], ...]
    pre_pad_mode: str

    @property
    def has_pre_pad(self) -> bool:
        return any(lo or hi for lo, hi in self.pre_pad)


@dataclass(frozen=True)
class ConvSpec:
    """A convolution layer, as torch defines it.

    Ints broadcast to every spatial dim; ``padding`` may also be ``"same"`` or ``"valid"`` (not for transposed).
    ``kernel_size``'s length sets the dimensionality (1, 2 or 3).
    """

    in_channels: int
    out_channels: int
    kernel_size: tuple[int, ...]
    stride: tuple[int, ...] | int = 1
    padding: tuple[int, ...] | int | str = 0
    dilation: tuple[int, ...] | int = 1
    groups: int = 1
    transposed: bool = False
    output_padding: tuple[int, ...] | int = 0
    padding_mode: str = "zeros"

    def __post_init__(self) -> None:
        ks = self.kernel_size
        if as_int(ks) is not None:  # an int, a numpy integer, a 0-d integer tensor: the dimensionality is unknown
            raise ValueError(
                f"kernel_size={ks!r}: give a tuple whose length is the dimensionality, e.g. ({int(ks)}, {int(ks)}) "
                "for 2-d"
            )
        if isinstance(ks, (bool, float, str, bytes)) or ks is None:
            raise TypeError(f"kernel_size={ks!r} must be a tuple of 1, 2 or 3 ints")
        try:
            ks = tuple(ks)
        except TypeError:
            raise TypeError(f"kernel_size={ks!r} must be a tuple of 1, 2 or 3 ints") from None
        nd = len(ks)
        if nd not in (1, 2, 3):
            raise ValueError(f"kernel_size={self.kernel_size!r}: only 1-, 2- and 3-d convolutions exist in cuDNN's legacy API here")
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731  (frozen dataclass)
        self._check_one_value_tuples(nd)
        set_("kernel_size", _tuple(ks, nd, "kernel_size"))
        for name in ("stride", "dilation", "output_padding"):
            set_(name, _tuple(getattr(self, name), nd, name))
        if isinstance(self.padding, str):
            if self.padding not in ("same", "valid"):
                raise ValueError(f"padding={self.padding!r} must be an int, a tuple, 'same' or 'valid'")
        else:
            set_("padding", _tuple(self.padding, nd, "padding"))
        for name in ("in_channels", "out_channels", "groups"):
            v = getattr(self, name)
            if as_int(v) is None or as_int(v) <= 0:
                raise ValueError(f"{name}={v!r} must be a positive int")
            set_(name, _fits(as_int(v), name))
        if not isinstance(self.transposed, bool):
            raise TypeError(f"transposed={self.transposed!r} must be a bool")
        if not isinstance(self.padding_mode, str):
            raise TypeError(f"padding_mode={self.padding_mode!r} must be a str")
        for name in ("kernel_size", "stride", "dilation"):
            if any(v <= 0 for v in getattr(self, name)):
                raise ValueError(f"{name}={getattr(self, name)} must be positive in every dim")
        if not isinstance(self.padding, str) and any(v < 0 for v in self.padding):
            raise ValueError(f"padding={self.padding} must be >= 0 in every dim")
        if any(v < 0 for v in self.output_padding):
            raise ValueError(f"output_padding={self.output_padding} must be >= 0 in every dim")
        if self.in_channels % self.groups or self.out_channels % self.groups:
            raise ValueError(
                f"groups={self.groups} must divide in_channels={self.in_channels} and "
                f"out_channels={self.out_channels}"
            )
        if self.padding_mode not in PADDING_MODES:
            raise ValueError(f"padding_mode={self.padding_mode!r} must be one of {', '.join(PADDING_MODES)}")
        if self.padding == "same" and any(s != 1 for s in self.stride):
            raise ValueError(f"padding='same' needs stride 1 (torch's rule), got stride={self.stride}")
        if self.transposed:
            if isinstance(self.padding, str):
                raise ValueError(f"padding={self.padding!r} is not supported for transposed convolutions (torch's rule)")
            if self.padding_mode != "zeros":
                raise ValueError("a transposed convolution supports only padding_mode='zeros' (torch's rule)")
            for op, s, d in zip(self.output_padding, self.stride, self.dilation):
                if op >= max(s, d):
                    raise ValueError(
                        f"output_padding={self.output_padding} must be smaller than stride or dilation in every dim"
                    )
                if op >= s:  # torch takes it (op < dilation); the mirrored convolution cannot express it
                    raise ValueError(
                        f"output_padding={self.output_padding} is not smaller than stride={self.stride} in every "
                        f"dim: torch accepts it (it is below dilation={self.dilation}), but cuDNN computes a "
                        f"transposed convolution as the mirrored convolution's backward-data, whose output dims "
                        f"cover at most stride - 1 rows of output_padding, so cudnn_algos cannot search it"
                    )
        elif any(self.output_padding):
            raise ValueError("output_padding applies only to transposed convolutions")

    def _check_one_value_tuples(self, nd: int) -> None:
        """Note [one-value tuples]: torch broadcasts a one-value tuple such as ``padding=(1,)`` to every spatial dim
        only where the convolution itself reads it. With a ``padding_mode`` other than zeros torch pads explicitly
        first, from the tuple as given: a one-value ``padding`` is refused at its forward, and ``padding="same"``
        with a one-value ``dilation`` pads the first spatial dim alone (its output is not the input's size). Neither
        can be described as a layer cuDNN runs the way torch does, so both are refused here, naming the argument;
        an int, or a tuple of one value per spatial dim, is what to give."""
        if nd == 1 or self.padding_mode == "zeros" or not isinstance(self.padding_mode, str):
            return
        names = ("padding", "dilation") if self.padding == "same" else ("padding",)
        for name in names:
            v = getattr(self, name)
            if not isinstance(v, (str, bytes)) and as_int(v) is None and _length(v) == 1:
                raise ValueError(
                    f"{name}={v!r} with padding_mode={self.padding_mode!r} on a {nd}-d convolution: torch does not "
                    f"spread a one-value {name} over the dims there ("
                    + ("it refuses it at its forward" if name == "padding" else "with padding='same' it pads the "
                       "first spatial dim alone") + f"); give an int or {nd} values")

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_module(cls, module: "torch.nn.Module") -> "ConvSpec":
        """From ``nn.Conv1d/2d/3d`` or ``nn.ConvTranspose1d/2d/3d`` (and subclasses, e.g. lazy ones once built)."""
        import torch

        conv_types = (torch.nn.modules.conv._ConvNd,)
        if not isinstance(module, conv_types):
            raise TypeError(
                f"expected nn.Conv1d/2d/3d, nn.ConvTranspose1d/2d/3d or a ConvSpec, got {type(module).__name__}"
            )
        if isinstance(module, torch.nn.modules.lazy.LazyModuleMixin) and module.has_uninitialized_params():
            raise ValueError(f"{type(module).__name__} has uninitialized parameters: run it once first")
        # what torch's forward uses: the weight's spatial shape is the kernel; attributes set after construction may
        # be plain ints (torch's functional calls take them), which _tuple broadcasts
        w = getattr(module, "weight", None)
        nd = len(module.kernel_size) if not isinstance(module.kernel_size, int) else (
            w.dim() - 2 if w is not None else 2)
        kernel = tuple(w.shape[2:]) if isinstance(w, torch.Tensor) and w.dim() == nd + 2 else _tuple(
            module.kernel_size, nd, "kernel_size")
        return cls(
            in_channels=module.in_channels,
            out_channels=module.out_channels,
            kernel_size=kernel,
            stride=module.stride,
            padding=module.padding,
            dilation=module.dilation,
            groups=module.groups,
            transposed=bool(module.transposed),
            output_padding=module.output_padding,
            padding_mode=module.padding_mode,
        )

    @classmethod
    def coerce(cls, conv: "ConvSpec | torch.nn.Module") -> "ConvSpec":
        if isinstance(conv, ConvSpec):
            return conv
        import torch

        if isinstance(conv, torch.nn.Module):
            return cls.from_module(conv)
        raise TypeError(
            f"conv must be nn.Conv1d/2d/3d, nn.ConvTranspose1d/2d/3d or a ConvSpec, got {type(conv).__name__}"
        )

    # ------------------------------------------------------------------ derived
    @property
    def ndim(self) -> int:
        return len(self.kernel_size)

    @property
    def weight_shape(self) -> tuple[int, ...]:
        if self.transposed:
            return (self.in_channels, self.out_channels // self.groups, *self.kernel_size)
        return (self.out_channels, self.in_channels // self.groups, *self.kernel_size)

    @property
    def module_name(self) -> str:
        return f"Conv{'Transpose' if self.transposed else ''}{self.ndim}d"

    def __str__(self) -> str:
        parts = [str(self.in_channels), str(self.out_channels), f"kernel_size={_short(self.kernel_size)}"]
        if any(s != 1 for s in self.stride):
            parts.append(f"stride={_short(self.stride)}")
        if isinstance(self.padding, str) or any(self.padding):
            parts.append(f"padding={self.padding!r}" if isinstance(self.padding, str) else f"padding={_short(self.padding)}")
        if any(d != 1 for d in self.dilation):
            parts.append(f"dilation={_short(self.dilation)}")
        if any(self.output_padding):
            parts.append(f"output_padding={_short(self.output_padding)}")
        if self.groups != 1:
            parts.append(f"groups={self.groups}")
        if self.padding_mode != "zeros":
            parts.append(f"padding_mode={self.padding_mode!r}")
        return f"{self.module_name}({', '.join(parts)})"

    def to_module(self, **factory_kwargs) -> "torch.nn.Module":
        """The torch module this spec describes, without bias (``device=``/``dtype=`` go to its constructor)."""
        import torch

        kind = getattr(torch.nn, self.module_name)
        kw = dict(stride=self.stride, padding=self.padding, dilation=self.dilation, groups=self.groups, bias=False,
                  padding_mode=self.padding_mode, **factory_kwargs)
        if self.transposed:
            kw["output_padding"] = self.output_padding
        return kind(self.in_channels, self.out_channels, self.kernel_size, **kw)

    @classmethod
    def parse(cls, text: str) -> "ConvSpec":
        """The spec `str(spec)` printed ('Conv2d(32, 64, kernel_size=3, padding=1)'), read back without torch; only
        literal arguments (nothing is evaluated). ValueError where the text is not such a call."""
        import ast

        try:
            node = ast.parse(str(text).strip(), mode="eval").body
            name = node.func.id
            args = [ast.literal_eval(a) for a in node.args]
            kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
        except (SyntaxError, AttributeError, ValueError, TypeError, RecursionError, MemoryError):
            raise ValueError(f"{text!r} is not a layer such as Conv2d(64, 128, kernel_size=3)") from None
        kinds = {f"{base}{n}d": (n, base == "ConvTranspose") for base in ("Conv", "ConvTranspose") for n in (1, 2, 3)}
        if name not in kinds:
            raise ValueError(f"{text!r}: {name} is not one of {', '.join(kinds)}")
        nd, transposed = kinds[name]
        names = ("in_channels", "out_channels", "kernel_size")
        kwargs.update(zip(names, args))
        ks = kwargs.get("kernel_size")
        if isinstance(ks, int):
            kwargs["kernel_size"] = (ks,) * nd
        return cls(transposed=transposed, **kwargs)

    def to_dict(self) -> dict:
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, tuple):
                d[k] = list(v)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "ConvSpec":
        d = dict(d)
        for k, v in d.items():
            if isinstance(v, list):
                d[k] = tuple(v)
        return cls(**d)

    def _torch_padding(self) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
        """(symmetric padding cuDNN applies, explicit (left, right) padding torch applies first) per dim."""
        nd = self.ndim
        if self.padding == "valid":
            return (0,) * nd, ((0, 0),) * nd
        if self.padding == "same":
            left, right = (list(v) for v in zip(*same_padding(self.kernel_size, self.dilation)))
        else:
            left = right = list(self.padding)
        if self.padding_mode != "zeros":
            # torch pads explicitly with the mode, then convolves with padding 0
            return (0,) * nd, tuple(zip(left, right))
        # zeros: cuDNN pads symmetrically by `left`; an odd 'same' total needs one more on the right, explicitly
        return tuple(left), tuple((0, r - lo) for lo, r in zip(left, right))

    def shapes(self, input_shape: Sequence[int]) -> ConvShapes:
        """Validates ``input_shape`` (N, C, *spatial) against this layer and returns every derived shape."""
        nd = self.ndim
        try:
            if isinstance(input_shape, (str, bytes)):
                raise TypeError
            shape = tuple(as_int(v) for v in input_shape)
            if any(v is None for v in shape):
                raise TypeError
        except TypeError:
            raise TypeError(f"input_shape={input_shape!r} must be a sequence of ints (torch.Size, tuple, list)") from None
        if len(shape) != nd + 2:
            raise ValueError(
                f"input_shape={shape} has {len(shape)} dims but a {self.module_name} needs {nd + 2} "
                f"(N, C, {', '.join('DHW'[3 - nd:])})"
            )
        if any(v <= 0 for v in shape):
            raise ValueError(f"input_shape={shape}: every dim must be positive")
        if shape[1] != self.in_channels:
            raise ValueError(
                f"input_shape={shape} has {shape[1]} channels but the layer expects {self.in_channels}"
            )
        n, spatial = shape[0], shape[2:]
        pad, pre = self._torch_padding()
        eff_k = [d * (k - 1) + 1 for d, k in zip(self.dilation, self.kernel_size)]
        if self.transposed:
            out_sp = tuple(
                (L - 1) * s - 2 * p + ek + op
                for L, s, p, ek, op in zip(spatial, self.stride, pad, eff_k, self.output_padding)
            )
            if any(v <= 0 for v in out_sp):
                raise ValueError(f"input_shape={shape} gives output size {out_sp} for {self}: must be positive")
            output_shape = (n, self.out_channels, *out_sp)
            x_shape, y_shape = output_shape, shape
        else:
            if self.padding_mode == "circular" or self.padding_mode == "reflect":
                for (lo, hi), L in zip(pre, spatial):
                    limit = L if self.padding_mode == "circular" else L - 1
                    if max(lo, hi) > limit:
                        raise ValueError(
                            f"input_shape={shape}: padding {max(lo, hi)} is too large for padding_mode="
                            f"'{self.padding_mode}' on a dim of size {L}"
                        )
            padded = tuple(L + lo + hi for L, (lo, hi) in zip(spatial, pre))
            out_sp = tuple(
                (L + 2 * p - ek) // s + 1 for L, p, ek, s in zip(padded, pad, eff_k, self.stride)
            )
            if any(L + 2 * p - ek < 0 for L, p, ek in zip(padded, pad, eff_k)):
                raise ValueError(
                    f"input_shape={shape} is smaller than the kernel's extent {tuple(eff_k)} after padding for {self}: "
                    "output size would be <= 0"
                )
            output_shape = (n, self.out_channels, *out_sp)
            x_shape, y_shape = (n, self.in_channels, *padded), output_shape
        w_shape = self.weight_shape
        for name, s in (("input", x_shape), ("weight", w_shape), ("output", y_shape)):
            numel = 1
            for v in s:
                numel *= v
            if numel > _INT32_MAX:
                raise ValueError(
                    f"input_shape={shape}: the {name} tensor {s} has {numel} elements; cuDNN's legacy API indexes "
                    f"with 32-bit ints (at most {_INT32_MAX}): split the batch"
                )
        return ConvShapes(
            input_shape=shape,
            weight_shape=w_shape,
            output_shape=output_shape,
            x_shape=x_shape,
            w_shape=w_shape,
            y_shape=y_shape,
            padding=pad,
            pre_pad=pre,
            pre_pad_mode="constant" if self.padding_mode == "zeros" else self.padding_mode,
        )


def _short(t: tuple[int, ...]) -> str:
    return str(t[0]) if len(set(t)) == 1 else str(t)


def input_dims(shape: Any) -> list[int]:
    """An input shape as the long form writes it ("8x32x56x56") or as a list, as ints ([] where neither)."""
    try:
        return [int(v) for v in (shape.split("x") if isinstance(shape, str) else shape)]
    except (TypeError, ValueError, AttributeError):
        return []
