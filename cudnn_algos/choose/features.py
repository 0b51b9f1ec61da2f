"""What the selector sees: a problem-direction as a fixed vector of numbers (PROBLEM_FEATURES), and a candidate
(an engine configuration) as its engine and knob values against the vocabulary a model was trained with."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from ..configs import heuristic_list
from ..spec import ConvSpec, input_dims

PROBLEM_FEATURES = (
    "log_batch", "log_in_channels", "log_out_channels", "log_groups", "depthwise", "log_d", "log_h", "log_w",
    "kernel_d", "kernel_h", "kernel_w", "stride_max", "padding_max", "dilation_max", "log_out_d", "log_out_h",
    "log_out_w", "log_gflops", "log_mbytes", "conv1d", "conv3d", "transposed", "float16", "bfloat16", "float32",
    "channels_last", "forward", "backward_data", "backward_filter", "align_in", "align_out", "log_group_in",
    "log_group_out",
)
DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
# cuDNN's heuristic lists whose position of a candidate is one of its features (cuDNN's own prior, which the trees
# correct): the lists the operator's unseen-problem handler queries (choose/unseen.py), a few ms per problem
RANKED_LISTS = ("a", "b")
RANK_ABSENT = 64.0  # the position feature of a candidate a list does not name


def _dims3(v: Sequence[int], nd: int, fill: int = 1) -> list[int]:
    """A 1-, 2- or 3-d tuple as (d, h, w): a 1-d problem is (1, 1, w), a 2-d one (1, h, w)."""
    return [fill] * (3 - nd) + list(v)


def problem_features(spec: ConvSpec, input_shape: Sequence[int], dtype: str, memory_format: str,
                     direction: str) -> list[float]:
    """PROBLEM_FEATURES of one problem-direction (logs of sizes, so that scale is additive)."""
    shapes = spec.shapes(tuple(input_shape))
    nd = spec.ndim
    x, y = list(shapes.input_shape), list(shapes.output_shape)
    k = _dims3(spec.kernel_size, nd)
    pad = [0] * nd if isinstance(spec.padding, str) else list(spec.padding)
    n, c = x[0], x[1]
    ins, outs = _dims3(x[2:], nd), _dims3(y[2:], nd)
    macs = n * spec.out_channels * math.prod(outs) * (c // spec.groups) * math.prod(k)
    elems = math.prod(x) + math.prod(y) + math.prod(spec.weight_shape)
    lg = lambda v: math.log2(max(v, 1))  # noqa: E731
    return [lg(n), lg(c), lg(spec.out_channels), lg(spec.groups), float(spec.groups == c and spec.groups > 1),
            *(lg(v) for v in ins), *(float(v) for v in k), float(max(spec.stride)), float(max(pad, default=0)),
            float(max(spec.dilation)), *(lg(v) for v in outs), math.log2(max(2 * macs / 1e9, 1e-9)),
            math.log2(max(elems * DTYPE_BYTES.get(dtype, 4) / 1e6, 1e-9)), float(nd == 1), float(nd == 3),
            float(spec.transposed), float(dtype == "float16"), float(dtype == "bfloat16"), float(dtype == "float32"),
            float(memory_format.startswith("channels_last")), float(direction == "forward"),
            float(direction == "backward_data"), float(direction == "backward_filter"),
            float(_align(c)), float(_align(spec.out_channels)), lg(c // spec.groups),
            lg(spec.out_channels // spec.groups)]


def _align(n: int) -> int:
    """log2 of the largest power of two (up to 16) dividing n: tensor-core kernels want channels in multiples of 8
    (fp16) or 4 (tf32); others pad first (ShuffleNet's 116 channels: 23 us padded against 4.7 us unpadded)."""
    a = 0
    while a < 4 and n % (2 << a) == 0:
        a += 1
    return a


def row_problem(row: dict[str, Any]) -> tuple[ConvSpec, tuple[int, ...], str, str, str]:
    """The problem-direction a long-form row belongs to: (spec, input shape, dtype, memory format, direction)."""
    return (ConvSpec.parse(row["spec"]), tuple(input_dims(row["input_shape"])), str(row["dtype"]),
            str(row["memory_format"]), str(row["direction"]))


def row_features(row: dict[str, Any]) -> list[float]:
    return problem_features(*row_problem(row))


def list_source(name: str) -> str:
    """The source a heuristic list's configurations carry in rows and plans ("a" -> "heuristic_a")."""
    return heuristic_list(name).source


def positions(rank: Callable[[str], int | None]) -> dict[str, int | None]:
    """A candidate's position in each of RANKED_LISTS, from its position-by-source lookup (EngineRow.rank, or
    dict(plan.heuristic_ranks).get)."""
    return {n: rank(list_source(n)) for n in RANKED_LISTS}


def rank_features(ranks: dict[str, int | None] | None) -> list[float]:
    """A candidate's position in each of RANKED_LISTS (RANK_ABSENT where a list does not name it)."""
    ranks = ranks or {}
    return [float(ranks[n]) if ranks.get(n) is not None else RANK_ABSENT for n in RANKED_LISTS]


@dataclass(frozen=True)
class Vocabulary:
    """The engines and knob names a model knows; a candidate becomes [engine one-hot..., knob values..., positions
    in RANKED_LISTS...] (a knob the configuration does not have: -1)."""

    engines: tuple[int, ...]
    knobs: tuple[str, ...]

    @classmethod
    def of(cls, candidates: Iterable[tuple[int, dict[str, int]]]) -> "Vocabulary":
        engines, knobs = set(), set()
        for e, kn in candidates:
            engines.add(int(e))
            knobs.update(kn)
        return cls(tuple(sorted(engines)), tuple(sorted(knobs)))

    @property
    def names(self) -> tuple[str, ...]:
        return (tuple(f"engine_{e}" for e in self.engines) + tuple(f"knob_{k}" for k in self.knobs)
                + tuple(f"rank_{n}" for n in RANKED_LISTS))

    def encode(self, engine_id: int, knobs: dict[str, int], ranks: dict[str, int | None] | None = None
               ) -> list[float]:
        return ([float(engine_id == e) for e in self.engines]
                + [float(knobs[k]) if k in knobs else -1.0 for k in self.knobs] + rank_features(ranks))


__all__ = ["PROBLEM_FEATURES", "RANKED_LISTS", "RANK_ABSENT", "problem_features", "list_source", "positions",
           "rank_features", "row_problem", "row_features", "Vocabulary"]
