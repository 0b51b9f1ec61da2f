"""GPU (H200): find() over a covering sample of layers, dtypes, layouts and all three directions, with every
algorithm that reports success executed through the extension and compared with PyTorch (float64 reference)."""
from __future__ import annotations

import gc
import time

import pytest
import torch

import cudnn_algos
from cudnn_algos import ConvSpec, CudnnError

from reference import ERR_FACTOR, N_ALGOS, TOL, Case, rel_err

pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore:Using padding=.same. with even kernel")]

CL, CL3, C = torch.channels_last, torch.channels_last_3d, torch.contiguous_format

CASES = {
    "stem7x7s2": (torch.nn.Conv2d(3, 64, 7, stride=2, padding=3), (8, 3, 64, 64)),
    "3x3": (torch.nn.Conv2d(64, 64, 3, padding=1), (8, 64, 28, 28)),
    "1x1s2": (torch.nn.Conv2d(64, 128, 1, stride=2), (8, 64, 28, 28)),
    "3x3dil2": (torch.nn.Conv2d(64, 64, 3, padding=2, dilation=2), (8, 64, 28, 28)),
    "5x5same": (torch.nn.Conv2d(64, 64, 5, padding="same"), (4, 64, 20, 20)),
    "4x4same_odd": (torch.nn.Conv2d(64, 64, 4, padding="same"), (4, 64, 20, 20)),
    "3x3g2": (torch.nn.Conv2d(64, 64, 3, padding=1, groups=2), (8, 64, 28, 28)),
    "3x3dw": (torch.nn.Conv2d(64, 64, 3, padding=1, groups=64), (8, 64, 28, 28)),
    "256_3x3": (torch.nn.Conv2d(256, 256, 3, padding=1), (8, 256, 14, 14)),
    "3x3p0": (torch.nn.Conv2d(64, 32, 3), (4, 64, 17, 17)),
    "reflect": (torch.nn.Conv2d(16, 16, 3, padding=1, padding_mode="reflect"), (2, 16, 16, 16)),
    "conv1d": (torch.nn.Conv1d(80, 256, 5), (4, 80, 1000)),
    "conv3d": (torch.nn.Conv3d(3, 64, 3, padding=1), (2, 3, 8, 56, 56)),
    "convT2d": (torch.nn.ConvTranspose2d(64, 32, 4, stride=2, padding=1), (4, 64, 16, 16)),
}


def _matrix():
    out = []
    for name, (m, shape) in CASES.items():
        nd = len(shape) - 2
        out.append((name, torch.float32, C))
        out.append((name, torch.float16, CL if nd == 2 else (CL3 if nd == 3 else C)))
    for name in ("3x3", "conv1d", "conv3d", "convT2d"):
        out += [(name, torch.float64, C), (name, torch.bfloat16, C)]
    for name in ("3x3", "4x4same_odd", "convT2d"):
        out += [(name, torch.float16, C), (name, torch.float32, CL), (name, torch.bfloat16, CL)]
    return out


def _id(v):
    if isinstance(v, torch.dtype):
        return str(v).replace("torch.", "")
    if isinstance(v, torch.memory_format):
        return {C: "nchw", CL: "nhwc", CL3: "ndhwc"}[v]
    return v


@pytest.mark.parametrize("name,dtype,fmt", _matrix(), ids=_id)
def test_find_ex_every_successful_algorithm_matches_pytorch(name, dtype, fmt):
    module, shape = CASES[name]
    spec = ConvSpec.from_module(module)
    res = cudnn_algos.find(spec, shape, direction="all", dtype=dtype, memory_format=fmt, mode="find_ex")
    case = Case(spec, shape, dtype, fmt)
    failures = []
    for r in res:
        ids = {row.algo_id for row in r.rows}
        assert ids == set(range(N_ALGOS[r.cudnn_direction])), f"{r.direction}: every algorithm must be a row"
        assert r.succeeded, f"{r.direction}: no algorithm succeeded:\n{r}"
        assert r.best is not None and r.best.time_ms > 0
        ref = case.reference(r.direction)
        tol = max(TOL[dtype], ERR_FACTOR * rel_err(case.torch_gpu(r.direction), ref))
        for row in r.succeeded:
            assert row.workspace_bytes is not None and row.workspace_bytes >= 0
            assert isinstance(row.deterministic, bool) and row.math_type in cudnn_algos.MATH_TYPES
            out = cudnn_algos.run(spec, row, direction=r.direction, **case.run_kwargs(r.direction))
            assert tuple(out.shape) == tuple(ref.shape)
            if not torch.isfinite(out).all():
                failures.append(f"{r.direction} {row.algo}/{row.math_type}: non-finite output (unwritten?)")
                continue
            e = rel_err(out, ref)
            if e > tol:
                failures.append(f"{r.direction} {row.algo}/{row.math_type}: rel err {e:.2e} > tol {tol:.2e}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("name", ["3x3", "conv1d", "convT2d"])
def test_find_mode_rows_and_best_runs_correctly(name):
    module, shape = CASES[name]
    res = cudnn_algos.find(module, shape, direction="all", mode="find")
    case = Case(ConvSpec.from_module(module), shape, torch.float32, C)
    for r in res:
        assert {row.algo_id for row in r.rows} == set(range(N_ALGOS[r.cudnn_direction]))
        assert all(row.time_ms is not None and row.time_ms > 0 for row in r.succeeded)
        times = [row.time_ms for row in r.succeeded]
        assert times == sorted(times), "successful rows come fastest first"
        assert r.search_ms > 0 and r.env.cudnn_runtime == torch.backends.cudnn.version()
        out = cudnn_algos.run(module, r.best, direction=r.direction, **case.run_kwargs(r.direction))
        assert rel_err(out, case.reference(r.direction)) < 1e-3


def test_transposed_records_the_cudnn_direction():
    module, shape = CASES["convT2d"]
    res = cudnn_algos.find(module, shape, direction="all", mode="heuristic")
    assert [(r.direction, r.cudnn_direction) for r in res] == [
        ("forward", "backward_data"), ("backward_data", "forward"), ("backward_filter", "backward_filter")]
    assert all(row.direction == r.cudnn_direction for r in res for row in r.rows)


def test_heuristic_mode_ranks_without_times():
    module, shape = CASES["256_3x3"]
    r = cudnn_algos.find(module, shape, mode="heuristic", dtype=torch.float16, memory_format=CL)
    assert all(row.time_ms is None for row in r.rows)
    ranks = [row.rank for row in r.rows if row.rank is not None]
    assert 0 in ranks and len(ranks) == len(set(ranks))
    assert r.best is not None and r.best.rank == min(row.rank for row in r.succeeded)


def test_workspace_limit_leaves_rows_saying_so():
    module, shape = CASES["3x3"]
    r = cudnn_algos.find(module, shape, mode="find_ex", workspace_limit=0)
    assert r.workspace_given == 0
    assert {row.algo_id for row in r.rows} == set(range(8))
    assert r.succeeded and all(row.workspace_bytes == 0 for row in r.succeeded)
    over = [row for row in r.rows if row.status == "WORKSPACE_LIMIT_EXCEEDED"]
    assert over, f"3x3 conv: some algorithm (FFT, Winograd non-fused) should need workspace:\n{r}"
    assert all("over the limit of 0 B" in row.note for row in over)
    r2 = cudnn_algos.find(module, shape, mode="find", workspace_limit=0)
    assert all(row.workspace_bytes == 0 for row in r2.succeeded)


def test_cudnn_rejection_is_a_cudnn_error_with_status():
    from cudnn_algos import backend

    ext = backend.load()
    bad = ext.ConvProblem(dtype="float32", layout=ext.Layout.nchw, x=[2, 4, 8, 8], w=[4, 4, 3, 3], y=[2, 4, 6, 6],
                          padding=[-1, 0], stride=[1, 1], dilation=[1, 1], groups=1, math=ext.MathType.default)
    with pytest.raises(CudnnError) as ei:
        backend.legacy_search("forward", bad, "find")
    assert ei.value.status.startswith("CUDNN_STATUS_BAD_PARAM")
    # through the public API: an algorithm that cannot run this problem
    module, shape = CASES["1x1s2"]
    case = Case(ConvSpec.from_module(module), shape, torch.float32, C)
    with pytest.raises(CudnnError) as ei:
        cudnn_algos.run(module, "FFT", **case.run_kwargs("forward"))
    assert ei.value.status.startswith("CUDNN_STATUS_") and "Conv2d(64, 128" in str(ei.value)


def test_run_checks_tensors():
    module, shape = CASES["3x3"]
    case = Case(ConvSpec.from_module(module), shape, torch.float32, C)
    with pytest.raises(ValueError, match="dtype"):
        cudnn_algos.run(module, "GEMM", input=case.gpu["input"], weight=case.gpu["weight"].half())


def _settled_allocated() -> int:
    gc.collect()  # earlier tests' tensors must not be counted (or freed) inside the measurement
    torch.cuda.synchronize()
    return torch.cuda.memory_allocated()


def test_out_of_memory_is_clean_and_the_process_lives_on():
    base = _settled_allocated()
    spec = ConvSpec(256, 256, (3, 3), padding=1)
    torch.cuda.set_per_process_memory_fraction(0.01)  # ~1.4 GiB on an H200: x fits, y does not
    try:
        with pytest.raises(torch.OutOfMemoryError, match=r"find\(\): the operands of"):
            cudnn_algos.find(spec, (512, 256, 64, 64), mode="find_ex")
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
    assert _settled_allocated() == base
    assert cudnn_algos.find(spec, (2, 256, 8, 8), mode="find_ex").best is not None


def test_no_leak_over_repeated_searches_and_runs():
    module, shape = CASES["3x3"]
    case = Case(ConvSpec.from_module(module), shape, torch.float16, CL)
    r = cudnn_algos.find(module, shape, dtype=torch.float16, memory_format=CL, mode="find_ex")
    base = _settled_allocated()
    for _ in range(5):
        cudnn_algos.find(module, shape, dtype=torch.float16, memory_format=CL, mode="find_ex", direction="all")
        out = cudnn_algos.run(module, r.best, **case.run_kwargs("forward"))
        del out
    assert _settled_allocated() == base


def test_threads_that_come_and_go_reuse_the_handles_of_ended_threads():
    """One cuDNN handle per thread and device; an ended thread's handles go to a pool, so threads that come and go
    (a DataLoader's, a server's) make at most as many handles as ever ran at once."""
    import threading

    from cudnn_algos import backend

    module, shape = CASES["3x3"]
    errors = []

    def search(together):
        try:
            cudnn_algos.find(module, shape, mode="heuristic")
            together.wait(timeout=60)  # every thread of the round holds its handle at once, whatever the scheduling
        except Exception as e:  # noqa: BLE001 (the assertion below names it)
            errors.append(e)

    def round_of(n):
        before = backend.load().cudnn_handles()
        together = threading.Barrier(n)
        ts = [threading.Thread(target=search, args=(together,)) for _ in range(n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        # join() returns when Python is done with a thread; its C++ thread_local (which gives the handles back)
        # is destroyed at the OS thread's exit, a moment later: wait until every handle the round held is back
        deadline = time.monotonic() + 10
        while True:
            now = backend.load().cudnn_handles()
            if now.pooled >= before.pooled + now.created - before.created or time.monotonic() > deadline:
                return now
            time.sleep(0.01)

    first = round_of(4)
    assert not errors and first.pooled >= 4, errors
    for _ in range(3):
        later = round_of(4)
        assert later.created == first.created and later.pooled == first.pooled
    assert not errors


def test_nothing_hidden_for_unusual_combinations():
    # fp64 channels_last: whatever cuDNN says, every algorithm is a row with a status
    module, shape = CASES["3x3"]
    r = cudnn_algos.find(module, shape, dtype=torch.float64, memory_format=CL, mode="find")
    assert {row.algo_id for row in r.rows} == set(range(8))
    assert all(row.status for row in r.rows)
