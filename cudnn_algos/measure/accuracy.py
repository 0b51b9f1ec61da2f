"""Operands and accuracy: fresh random operand sets (warm or cold L2), the float64 reference computed by torch
(on the CPU when the GPU has no room for it), and a row's error against it."""
from __future__ import annotations

import math
import warnings

import torch

from ..problem import Problem


def operand_sets(problem: Problem, l2: str, device: int) -> list[dict[str, torch.Tensor]]:
    """Fresh random cuDNN-role operands: one set (warm L2), or enough to exceed 3x the L2 cache (cold)."""
    n_sets = 1
    if l2 == "cold":
        per_set = problem.nbytes
        l2_bytes = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 60 * 2**20
        free, _ = torch.cuda.mem_get_info(device)
        n_sets = max(2, min(64, math.ceil(3 * l2_bytes / per_set) + 1, int(0.25 * free // max(per_set, 1))))
    return [problem.operands(device, "measure") for _ in range(n_sets)]


def reference_output(problem: Problem, cdir: str, ops: dict[str, torch.Tensor], where: str,
                     dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The float64 (or `dtype`; float32 runs with TF32 off) result of cuDNN's direction `cdir` on these (lifted,
    cuDNN-role) operands, computed by torch; on the CPU instead (with a warning) when the GPU has no memory left for
    it: a search run while the GPU is nearly full still checks every row's output (on the H200, torch's float64
    convolution failed there with a CUDA out-of-memory AcceleratorError, not the allocator's OutOfMemoryError).
    After a first out-of-memory it tries the GPU once more, with torch's cached blocks handed back: several
    processes on one GPU (a sweep's workers) each keep a cache the others cannot use, and the CPU's float64
    convolution of a large layer takes many seconds."""
    if where == "cuda":
        for _ in range(2):
            try:
                return _reference(problem, cdir, ops, "cuda", dtype)
            except RuntimeError as e:
                if not freed_after_oom(e):
                    raise
                err = e
        warnings.warn(f"{problem.describe(cdir)}: the {str(dtype).replace('torch.', '')} reference did not fit "
                      f"on the GPU twice ({type(err).__name__}); computing it on the CPU", RuntimeWarning, stacklevel=2)
    return _reference(problem, cdir, ops, "cpu", dtype)


def freed_after_oom(e: RuntimeError) -> bool:
    """Whether `e` says the GPU ran out of memory — the allocator's OutOfMemoryError or a CUDA runtime
    AcceleratorError, both RuntimeErrors — and if so, torch's cached blocks handed back for what runs next."""
    if "out of memory" not in str(e):
        return False
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return True


def _reference(problem: Problem, cdir: str, ops: dict[str, torch.Tensor], where: str,
               dtype: torch.dtype = torch.float64) -> torch.Tensor:
    stride, pad, dil = problem.conv_args()
    dev = ops["x"].device if where == "cuda" else torch.device("cpu")
    x, w, y = (ops[r].to(device=dev, dtype=dtype) for r in "xwy")
    conv = torch.nn.functional.conv2d if x.dim() == 4 else torch.nn.functional.conv3d
    with torch.no_grad(), torch.backends.cudnn.flags(enabled=True, deterministic=True, benchmark=False,
                                                     allow_tf32=False):
        if cdir == "forward":
            return conv(x, w, None, stride, pad, dil, problem.spec.groups)
        mask = [cdir == "backward_data", cdir == "backward_filter", False]
        gx, gw, _ = torch.ops.aten.convolution_backward(y, x, w, None, stride, pad, dil, False, [0] * len(stride),
                                                        problem.spec.groups, mask)
        return gx if cdir == "backward_data" else gw


def error_stats(out: torch.Tensor, ref: torch.Tensor, ref_norm: torch.Tensor | None = None) -> torch.Tensor:
    """On ref's device, without waiting: [all of out finite (1/0), ||out - ref|| / ||ref||, max |out - ref|]
    (float64; the errors mean nothing where the first is 0). `ref_norm`: ||ref||, where the caller has it."""
    o = out.to(device=ref.device, dtype=torch.float64)
    d = o - ref
    norm = ref.norm() if ref_norm is None else ref_norm
    return torch.stack([torch.isfinite(o).all().to(torch.float64), d.norm() / norm.clamp_min(1e-300),
                        d.abs().max()])


def errors(out: torch.Tensor, ref: torch.Tensor) -> tuple[float | None, float | None]:
    """(||out - ref|| / ||ref||, max |out - ref|); (None, None) when out has a non-finite element."""
    finite, rel, mx = error_stats(out, ref).tolist()
    return (rel, mx) if finite else (None, None)
