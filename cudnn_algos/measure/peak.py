"""This device's measured dense matmul peak per dtype (the % of peak column), once per process."""
from __future__ import annotations

import functools
import statistics
import warnings

import torch

from .accuracy import freed_after_oom


@functools.lru_cache(maxsize=None)
def peak_tflops(device: int, dtype: torch.dtype, tf32: bool) -> float:
    """This device's dense matmul rate through torch for the dtype (fp32: with or without TF32), TFLOP/s: median of
    10 event-timed 8192^3 products after 3 warm-ups, on random data. Measured once per process."""
    n = 8192 if dtype != torch.float64 else 4096
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        with torch.cuda.device(device):
            a = torch.randn(n, n, device=f"cuda:{device}", dtype=dtype)
            b = torch.randn(n, n, device=f"cuda:{device}", dtype=dtype)
            for _ in range(3):
                a @ b
            times = []
            for _ in range(10):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                a @ b
                e.record()
                e.synchronize()
                times.append(s.elapsed_time(e))
            del a, b
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.backends.cuda.matmul.allow_tf32 = old
    return 2 * n**3 / (statistics.median(times) * 1e-3) / 1e12


def peak_or_none(device: int, dtype: torch.dtype, tf32: bool) -> float | None:
    """peak_tflops, or None (with a warning) when the GPU has no room for its two 8192^2 operands (128 MiB each in
    fp16): a search run while the GPU is nearly full completes without its rows' % of peak (on the H200 this was
    the only allocation of a measured engine search that failed with 64 MB free). Not cached: a later call with
    memory free measures it."""
    try:
        return peak_tflops(device, dtype, tf32)
    except RuntimeError as e:
        if not freed_after_oom(e):
            raise
        warnings.warn(f"the {peak_label(dtype, tf32)} peak did not fit on cuda:{device} ({type(e).__name__}); "
                      "rows have no % of peak", RuntimeWarning, stacklevel=2)
        return None


def peak_label(dtype: torch.dtype, tf32: bool) -> str:
    name = str(dtype).replace("torch.", "")
    if dtype == torch.float32:
        return f"{name} matmul ({'TF32 allowed' if tf32 else 'no TF32'})"
    return f"{name} matmul"
