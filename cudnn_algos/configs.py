"""An engine configuration, its one type and its one text form (``EngineConfig``: engine id and cuDNN's knob
choices; ``name``/``parse``: ``eng62{TILE_SIZE=0,TILEK=1}``; ``key``: the selector's evidence key), the names of
cuDNN's knob types and engine notes, torch's rule for which configurations its convolution accepts, and the registry
of cuDNN's heuristic lists (``LISTS``). No torch import: the CLI's parser, the selector's files and the dataset use
them without a GPU."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

# cuDNN's names of its enum values, by value (cudnnBackendNumericalNote_t, cudnnBackendBehaviorNote_t,
# cudnnBackendKnobType_t): append-only, as the extension's tables checked against the headers at build time
# (csrc/common/knobs.h); the extension built with an older cuDNN names a prefix of them (tests/test_configs_cpu.py)
NUMERICAL_NOTES = ("TENSOR_CORE", "DOWN_CONVERT_INPUTS", "REDUCED_PRECISION_REDUCTION", "FFT", "NONDETERMINISTIC",
                   "WINOGRAD", "WINOGRAD_TILE_4x4", "WINOGRAD_TILE_6x6", "WINOGRAD_TILE_13x13", "STRICT_NAN_PROP")
BEHAVIOR_NOTES = ("RUNTIME_COMPILATION", "REQUIRES_FILTER_INT8x32_REORDER", "REQUIRES_BIAS_INT8x32_REORDER",
                  "SUPPORTS_CUDA_GRAPH_NATIVE_API", "CUBLASLT_DEPENDENCY")
RUNTIME_COMPILATION = BEHAVIOR_NOTES.index("RUNTIME_COMPILATION")  # cuDNN's behaviour note: NVRTC at plan build
KNOBS = ("SPLIT_K", "SWIZZLE", "TILE_SIZE", "USE_TEX", "EDGE", "KBLOCK", "LDGA", "LDGB", "CHUNK_K", "SPLIT_H",
         "WINO_TILE", "MULTIPLY", "SPLIT_K_BUF", "TILEK", "STAGES", "REDUCTION_MODE", "CTA_SPLIT_K_MODE",
         "SPLIT_K_SLC", "IDX_MODE", "SLICED", "SPLIT_RS", "SINGLEBUFFER", "LDGC", "SPECFILT", "KERNEL_CFG",
         "WORKSPACE", "TILE_CGA", "TILE_CGA_M", "TILE_CGA_N", "BLOCK_SIZE", "OCCUPANCY", "ARRAY_SIZE_PER_THREAD",
         "NUM_C_PER_BLOCK", "SPLIT_COLS", "TILE_ROWS", "TILE_COLS", "LOAD_SIZE", "CTA_COUNT", "STREAM_K",
         "SPLIT_P_SLC", "TILE_M", "TILE_N", "WARP_SPEC_CFG", "SWAP_AB", "INPUT_TMA_ENABLE", "OUTPUT_TMA_ENABLE")


def enum_name(table: Sequence[str], v: int, prefix: str) -> str:
    return table[v] if 0 <= v < len(table) else f"{prefix}{v}"


def behavior_note_names(notes: Sequence[int]) -> tuple[str, ...]:
    return tuple(enum_name(BEHAVIOR_NOTES, v, "BEHAVIOR_") for v in notes)


def numerical_note_names(notes: Sequence[int]) -> tuple[str, ...]:
    return tuple(enum_name(NUMERICAL_NOTES, v, "NOTE_") for v in notes)


def named_knobs(knobs: Sequence[tuple[int, int]]) -> tuple[tuple[str, int], ...]:
    """cuDNN's (knob type, value) pairs as (name, value): ``(2, 0)`` -> ``("TILE_SIZE", 0)``."""
    return tuple((enum_name(KNOBS, t, "KNOB_"), v) for t, v in knobs)


def split_config_name(name: str) -> tuple[int, list[tuple[str, str]]] | None:
    """An engine configuration's stable name split, nothing looked up: ``eng62{TILE_SIZE=0,TILEK=1}`` ->
    (62, [("TILE_SIZE", "0"), ("TILEK", "1")]); None where it is not such a name (parse_config checks the
    knobs and values)."""
    m = re.fullmatch(r"eng(\d+)(?:\{(.*)\})?", name.strip()) if isinstance(name, str) else None
    if m is None:
        return None
    parts = (part.partition("=") for part in filter(None, (m.group(2) or "").split(",")))
    return int(m.group(1)), [(k.strip(), v) for k, _, v in parts]


def parse_config(name: str) -> tuple[int, list[tuple[int, int]]]:
    """An engine configuration's stable name -> (engine id, [(knob type, value), ...]):
    ``eng62{TILE_SIZE=0,TILEK=1}`` -> (62, [(2, 0), (13, 1)]). ValueError naming the value when it is not one."""
    split = split_config_name(name)
    if split is None:
        raise ValueError(f"configs: {name!r} is not an engine configuration name such as eng62{{TILE_SIZE=0,TILEK=1}}")
    knobs = []
    for k, v in split[1]:
        if k in KNOBS:
            t = KNOBS.index(k)
        elif k.startswith("KNOB_") and k[5:].isdigit():
            t = int(k[5:])
        else:
            raise ValueError(f"configs: {name!r} names a knob {k!r} that is not one of cuDNN's ({', '.join(KNOBS)})")
        try:
            knobs.append((t, int(v)))
        except ValueError:
            raise ValueError(f"configs: {name!r}: knob {k} needs an integer value, not {v!r}") from None
    return split[0], knobs


def config_name(engine_id: int, knobs: Sequence[tuple[int, int]]) -> str:
    """An engine configuration's stable name from cuDNN's numbers (parse_config's inverse):
    ``eng62{TILE_SIZE=0,TILEK=1}``."""
    named = named_knobs(knobs)
    return f"eng{engine_id}" + ("{" + ",".join(f"{k}={v}" for k, v in named) + "}" if named else "")


def config_key(engine_id: int, knobs: dict[str, int]) -> str:
    """A configuration as Evidence keys it: "67" or "67,SPLIT_K_SLC=1,TILE=3" (knobs by name, sorted)."""
    return ",".join([str(int(engine_id))] + [f"{k}={int(v)}" for k, v in sorted(knobs.items())])


def name_key(name: str) -> str:
    """config_key of a configuration's name ("eng67{TILE=3,SPLIT_K_SLC=1}", config_name's form); a name of
    another form as it is."""
    split = split_config_name(name)
    return name if split is None else config_key(split[0], {k: int(v) for k, v in split[1]})


@dataclass(frozen=True)
class EngineConfig:
    """One engine configuration: cuDNN's engine id and its knob choices as (knob type, value) pairs, in the order
    cuDNN lists them. ``name`` is its one text form (``parse``'s inverse: what rows, the tuning database and
    ``find_engines(configs=)`` use); ``key`` is how the selector's evidence keys it (knobs by name, sorted)."""

    engine_id: int
    knobs: tuple[tuple[int, int], ...] = ()

    @classmethod
    def parse(cls, name: str) -> "EngineConfig":
        """The configuration a name names; ValueError naming the value when it is not one."""
        engine_id, knobs = parse_config(name)
        return cls(engine_id, tuple(knobs))

    @property
    def name(self) -> str:
        return config_name(self.engine_id, self.knobs)

    @property
    def named(self) -> tuple[tuple[str, int], ...]:
        """Its knobs as (name, value): ``(("TILE_SIZE", 0),)``."""
        return named_knobs(self.knobs)

    @property
    def key(self) -> str:
        return config_key(self.engine_id, dict(self.named))


def torch_filter(numerical_notes: Sequence[str], dtype: str, deterministic: bool, allow_tf32: bool) -> str:
    """Why torch's cuDNN convolution would drop an engine configuration with these notes ("" if it would keep it),
    following its engine-config filter: inputs down-converted always; nondeterministic under
    cudnn.deterministic; tensor cores for float32 when cudnn.allow_tf32 is off."""
    if "DOWN_CONVERT_INPUTS" in numerical_notes:
        return "down-converts inputs"
    if deterministic and "NONDETERMINISTIC" in numerical_notes:
        return "nondeterministic"
    if dtype == "float32" and not allow_tf32 and "TENSOR_CORE" in numerical_notes:
        return "tensor cores, allow_tf32 off"
    return ""


@dataclass(frozen=True)
class HeuristicList:
    """One of cuDNN's ranked engine lists (``cudnnBackendHeurMode_t``), as every part of the package names it:
    ``name`` in the API and the CLI ("instant"), ``source`` on the rows and plans it named ("heuristic_instant"),
    ``label`` in reports, ``letter`` in a search's text table; ``rank_column`` and ``query_column`` in the long-form
    records and the dataset's shards. The extension's table of the same lists (csrc/search/engine_search.h,
    kHeuristicLists) maps each name to cuDNN's mode and makes its bound enum HeuristicList, which the lists cross as
    (backend.engine_search); tests/test_configs_cpu.py checks that the two agree."""

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


__all__ = ["EngineConfig", "KNOBS", "NUMERICAL_NOTES", "BEHAVIOR_NOTES", "RUNTIME_COMPILATION", "enum_name",
           "behavior_note_names", "numerical_note_names", "named_knobs", "split_config_name", "parse_config",
           "config_name", "config_key", "name_key", "torch_filter", "HeuristicList", "LISTS", "SEARCH_LISTS",
           "TORCH_LISTS", "heuristic_list"]
