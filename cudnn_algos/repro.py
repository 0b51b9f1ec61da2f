"""The command lines of the ``cudnn-algos`` CLI that other layers write out: ``repro_command`` builds the line that
measures one candidate again (the long-form tables' ``repro`` column). The CLI's parser declares the same flags;
tests/test_cli.py parses every form this module writes with it, so a renamed flag fails a test instead of leaving
commands that no longer run."""
from __future__ import annotations

import shlex
from typing import Any, Sequence

CANDIDATE_KINDS = ("engine", "legacy", "torch_on", "torch_off")


def layer_args(spec: Any, input_shape: Sequence[int], dtype: str, memory_format: str, direction: str) -> str:
    """The flags that name one layer's problem: ``--conv ... --input ... --dtype ... [--channels-last]
    --direction ...``."""
    return (f"--conv {shlex.quote(str(spec))} --input {','.join(map(str, input_shape))} --dtype {dtype}"
            + (" --channels-last" if memory_format != "contiguous" else "") + f" --direction {direction}")


def repro_command(kind: str, candidate: str, *, spec: Any, input_shape: Sequence[int], dtype: str,
                  memory_format: str, direction: str, math_type: str | None = None) -> str:
    """The command that measures this candidate again: an engine configuration alone (``--config``), torch's op
    beside the heuristics' configurations (``kind`` torch_on/torch_off), a legacy algorithm in its math type's
    search."""
    if kind not in CANDIDATE_KINDS:
        raise ValueError(f"kind must be one of {', '.join(CANDIDATE_KINDS)}, got {kind!r}")
    layer = layer_args(spec, input_shape, dtype, memory_format, direction) + " --measure"
    if kind == "engine":
        return f"cudnn-algos engines {layer} --config {shlex.quote(candidate)}"
    if kind == "legacy":
        return f"cudnn-algos find {layer}" + (f" --math {math_type}" if math_type else "")
    return f"cudnn-algos engines {layer} --torch yes --torch-benchmark {kind.replace('torch_', '')}"
