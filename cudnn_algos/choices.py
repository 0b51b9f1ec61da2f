"""The names a problem and a search are spelled with — directions, legacy modes, math types, dtypes, heuristic
lists, L2 modes — in one place, with no torch import: the API validates against them and the CLI's parser offers
them as its choices."""
from __future__ import annotations

import re
from dataclasses import dataclass
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


@dataclass(frozen=True)
class HeuristicList:
    """One of cuDNN's ranked engine lists (``cudnnBackendHeurMode_t``), as every part of the package names it:
    ``name`` in the API and the CLI ("instant"), ``source`` on the rows and plans it named ("heuristic_instant"),
    ``label`` in reports, ``letter`` in a search's text table; ``rank_column`` and ``query_column`` in the long-form
    records and the dataset's shards. The extension's table of the same lists (csrc/search/engine_search.cpp,
    kLists) maps each name to cuDNN's mode; tests/test_choices_cpu.py checks that the two agree."""

    name: str
    source: str
    label: str
    letter: str

    @property
    def rank_column(self) -> str:
        """The record's column holding a configuration's position in this list."""
        return f"rank_{self.name}"

    @property
    def query_column(self) -> str:
        """The record's column holding the host ms of this list's query."""
        return f"query_{self.name}_ms"


# cuDNN's heuristic lists, in the order a search asks them by default (cuDNN 9's mode INSTANT ranks as mode A)
LISTS = (HeuristicList("instant", "heuristic_instant", "INSTANT", "I"), HeuristicList("a", "heuristic_a", "A", "A"),
         HeuristicList("b", "heuristic_b", "B", "B"), HeuristicList("fallback", "fallback", "fallback", "F"))
SEARCH_LISTS = tuple(h.name for h in LISTS)  # every list's name, in that order (what find_engines(heuristics=) takes)
TORCH_LISTS = ("instant", "fallback")  # the lists torch's convolution takes its candidates from, in its order


def heuristic_list(name: str) -> HeuristicList:
    """The list of this name or row source ("b" or "heuristic_b"); KeyError naming the known ones otherwise."""
    for h in LISTS:
        if name in (h.name, h.source):
            return h
    raise KeyError(f"{name!r} is not a heuristic list (one of {', '.join(SEARCH_LISTS)})")


BUILTIN_MODEL_NAMES = ("resnet50",)  # the models zoo.BUILTIN_MODELS builds (no torchvision needed)
L2_MODES = ("warm", "cold")  # one operand set, or sets that together exceed 3x the L2 cache


def split_config_name(name: str) -> tuple[int, list[tuple[str, str]]] | None:
    """An engine configuration's stable name split, nothing looked up: ``eng62{TILE_SIZE=0,TILEK=1}`` ->
    (62, [("TILE_SIZE", "0"), ("TILEK", "1")]); None where it is not such a name (engines.parse_config checks the
    knobs and values)."""
    m = re.fullmatch(r"eng(\d+)(?:\{(.*)\})?", name.strip()) if isinstance(name, str) else None
    if m is None:
        return None
    parts = (part.partition("=") for part in filter(None, (m.group(2) or "").split(",")))
    return int(m.group(1)), [(k.strip(), v) for k, _, v in parts]
