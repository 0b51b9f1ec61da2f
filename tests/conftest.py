"""Tests marked `gpu` need a CUDA GPU with cuDNN; elsewhere they are skipped with the reason.

CPU tests (no marker) cover what needs no GPU: argument handling, specs from modules, result formatting and JSON,
reports, the CLI, the measuring path's orchestration, and that the extension builds and loads. They never claim
anything about cuDNN's behaviour on a GPU. The builders below make hand-made results for them (fixtures).
"""
from __future__ import annotations

import os

import pytest
import torch

from cudnn_algos import (AlgoResult, ConvSpec, EngineRow, EngineSearchResult, Environment, Measurement,
                         SearchResult, Stats, TorchRun)


def _gpu_reason() -> str | None:
    if not torch.cuda.is_available():
        return (f"no CUDA GPU visible (torch {torch.__version__}, CUDA {torch.version.cuda}): "
                "GPU tests run on the device machine via scripts/gpu-check")
    if not torch.backends.cudnn.is_available():
        return "torch reports cuDNN unavailable"
    return None


def pytest_collection_modifyitems(config, items):
    gpu = [item for item in items if "gpu" in item.keywords]
    if hasattr(config, "workerinput"):
        # a pytest-xdist worker (scripts/test where cores are spare): the GPU tests, the long ones, are handed out
        # first; every worker orders the items the same way, as xdist requires
        items[:] = gpu + [item for item in items if "gpu" not in item.keywords]
    reason = _gpu_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=reason)
    for item in gpu:
        item.add_marker(skip)


@pytest.fixture(autouse=True)
def _gpu_turn(request):
    """Under pytest-xdist the workers share the GPU: a GPU test holds a shared lock on one file for the run, and a
    `gpu_alone` test (one that compares timings) an exclusive one, so it waits until no other test uses the GPU and
    none starts beside it. In one process, nothing to do."""
    config = request.config
    if "gpu" not in request.node.keywords or not hasattr(config, "workerinput"):
        yield
        return
    import fcntl
    import tempfile

    path = os.path.join(tempfile.gettempdir(), f"cudnn_algos-gpu-{config.workerinput.get('testrunuid', 'run')}.lock")
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX if "gpu_alone" in request.node.keywords else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


_TIMES_WRITER = True  # under xdist each report reaches the controller too: only the controller writes


def pytest_configure(config):
    global _TIMES_WRITER
    _TIMES_WRITER = not hasattr(config, "workerinput")


def pytest_runtest_logreport(report):
    """$CUDNN_ALGOS_TEST_TIMES=PATH: one line per test phase as it ends (seconds, phase, outcome, test; a failed
    phase also its failure's message), so a run stopped by a time limit still
    says where its time went and why a test failed (scripts/gpu-check keeps the file)."""
    path = os.environ.get("CUDNN_ALGOS_TEST_TIMES")
    if path and _TIMES_WRITER and (report.when == "call" or report.duration > 0.5 or report.failed):
        why = ""
        if report.failed:
            crash = getattr(report.longrepr, "reprcrash", None)
            lines = [ln for ln in str(report.longrepr).splitlines() if ln.strip()]
            why = " | " + " ".join(str(getattr(crash, "message", None) or (lines[-1] if lines else "")).split())[:300]
        with open(path, "a") as f:
            f.write(f"{report.duration:8.2f} {report.when:8} {report.outcome:7} {report.nodeid}{why}\n")


ENV = Environment(
    gpu_name="Test GPU", compute_capability="9.0", device_index=0, driver_version="580.1", cuda_driver_api=13000,
    cuda_runtime=13000, cudnn_runtime=91900, cudnn_build=91900, cudnn_library="/x/libcudnn.so.9",
    torch_version="2.11.0", torch_cuda="13.0",
)


def measurement(ms: float, host: float | None = None, ref: float | None = None, kernels=(), **kw) -> Measurement:
    st = Stats(median=ms, min=ms * 0.98, max=ms * 1.05, spread=0.01, n=5,
               samples=(ms, ms * 0.98, ms * 1.05, ms, ms * 1.01))
    h = Stats(host, host, host, 0.0, 5) if host is not None else st
    return Measurement(kernel_ms=st, throughput_ms=st, host_ms=h, calls_per_sample=4, kernel_calls=4,
                       kernels=tuple(kernels), activities_per_call=1.0, reference_kernel_ms=ref, rel_err=1e-4, **kw)


def algo_row(algo, algo_id, status="SUCCESS", t=None, ws=0, det=True, math="default", rank=0, note="",
             direction="forward", measured=None):
    ok = status == "SUCCESS"
    return AlgoResult(direction=direction, algo=algo, algo_id=algo_id, status=status, time_ms=t if ok else None,
                      workspace_bytes=ws if ok else None, deterministic=det if ok else None,
                      math_type=math if ok else None, rank=rank, note=note, measured=measured)


def legacy_result(mode="find", direction="forward", rows=None) -> SearchResult:
    spec = ConvSpec(64, 128, (3, 3), padding=1)
    rows = rows or (
        algo_row("IMPLICIT_PRECOMP_GEMM", 1, t=0.20, ws=1 << 20, math="tensor_op", rank=0),
        algo_row("WINOGRAD_NONFUSED", 7, t=0.25, ws=300 << 20, det=False, rank=1),
        algo_row("FFT", 4, status="NOT_SUPPORTED", rank=2),
        AlgoResult(direction="forward", algo="DIRECT", algo_id=3, status="NOT_RETURNED", time_ms=None,
                   workspace_bytes=None, deterministic=None, math_type=None, rank=None,
                   note="absent from cuDNN's result list"),
    )
    return SearchResult(
        rows=tuple(rows), spec=spec, shapes=spec.shapes((32, 64, 56, 56)), direction=direction,
        cudnn_direction=direction, mode=mode, dtype="float16", memory_format="channels_last", math="tensor_op",
        workspace_limit=None, workspace_given=None, search_ms=12.5, env=ENV, created="2026-11-29T00:00:00+00:00")


def engine_row(eid, ranks=(), status="SUCCESS", notes=(), kernels=(), ms=None, name=None, host=None, ref=None,
               direction="forward", **kw):
    m = measurement(ms, host=host, ref=ref, kernels=kernels) if ms is not None else None
    if m is None and kernels:
        m = Measurement(kernel_ms=None, throughput_ms=None, host_ms=None, calls_per_sample=0, kernel_clock="none",
                        kernels=tuple(kernels))
    return EngineRow(direction=direction, engine_id=eid, knobs=(("WORKSPACE", eid % 3),), name=name or f"eng{eid}",
                     numerical_notes=tuple(notes), behavior_notes=(), family="IMPLICIT_GEMM", deterministic=True,
                     status=status, stage="" if status == "SUCCESS" else "plan", workspace_bytes=1024 * eid,
                     sources=("heuristic_a",), heuristic_ranks=tuple(ranks), measured=m, **kw)


def torch_run(mode="benchmark_on", ms=0.021, kernels=("sm90_xmma_a",), matches=("eng0",), host=0.03, **kw):
    return TorchRun(mode=mode, kernels=tuple(kernels), matches=tuple(matches), match="exact" if matches else "none",
                    first_call_ms=50.0, benchmark_limit=10,
                    measured=measurement(ms, host=host, kernels=kernels) if ms is not None else None, **kw)


def engine_result(direction="forward", spec=None, shape=(2, 8, 8, 8), torch_runs=None, rows=None
                  ) -> EngineSearchResult:
    rows = rows or (
        engine_row(0, [("heuristic_instant", 0)], ms=0.020, torch_rank=0, torch_ran=("benchmark_on",),
                   kernels=("sm90_xmma_a",), host=0.01),
        engine_row(1, [("heuristic_a", 3)], ms=0.015, notes=("DOWN_CONVERT_INPUTS",),
                   torch_filter="down-converts inputs"),
        engine_row(2, [("heuristic_b", 1)], ms=0.018, host=0.012),
        engine_row(3, [("fallback", 0)], status="NOT_SUPPORTED"),
    )
    spec = spec or ConvSpec(8, 8, (3, 3), padding=1)
    return EngineSearchResult(rows=tuple(rows), spec=spec, shapes=spec.shapes(shape), direction=direction,
                              cudnn_direction=direction, dtype="float16", memory_format="channels_last",
                              engine_count=60, search_ms=12.0, exhaustive=False, env=ENV,
                              torch_runs=(torch_run(),) if torch_runs is None else torch_runs)


class Builders:
    env = ENV
    measurement = staticmethod(measurement)
    algo_row = staticmethod(algo_row)
    legacy_result = staticmethod(legacy_result)
    engine_row = staticmethod(engine_row)
    engine_result = staticmethod(engine_result)
    torch_run = staticmethod(torch_run)


@pytest.fixture
def make():
    """Builders of hand-made results (they claim nothing about cuDNN)."""
    return Builders


def model_report(e2e=True):
    """Two problems, two directions; the second problem's layer used twice; torch off measured for one."""
    from cudnn_algos.results import EndToEnd, ModelReport, ProblemEntry

    off = torch_run("benchmark_off", ms=0.025, matches=("eng2",), where="fresh process")
    p0 = ProblemEntry(spec=ConvSpec(8, 8, (3, 3), padding=1), input_shape=(2, 8, 8, 8), dtype="float16",
                      memory_format="channels_last", layers=("a",),
                      engines={"forward": engine_result(torch_runs=(torch_run(), off)),
                               "backward_data": engine_result("backward_data")},
                      legacy={"forward": legacy_result()})
    spec1 = ConvSpec(8, 16, (1, 1))
    p1 = ProblemEntry(spec=spec1, input_shape=(2, 8, 4, 4), dtype="float16", memory_format="channels_last",
                      layers=("b.0", "b.1"),
                      engines={"forward": engine_result(spec=spec1, shape=(2, 8, 4, 4),
                                                        torch_runs=(torch_run(ms=0.040),))})
    e = EndToEnd(backward=True, iterations=10, step_ms_off=10.0, step_ms_on=10.5, first_step_s_off=0.5,
                 first_step_s_on=12.0) if e2e else None
    return ModelReport(model="Net", problems=(p0, p1), directions=("forward", "backward_data"), env=ENV, e2e=e,
                       search_s=3.0, torch_search_ms=150.0, wall_s=9.0, n_conv_calls=3, created="2026-11-30")


Builders.model_report = staticmethod(model_report)


def run_cli(*args, cwd=None):
    """`cudnn-algos ARGS` run in this process (cli.main, stdout and stderr captured): what the subprocess would print
    and return, without a second interpreter importing torch for every call. A few tests still run the real entry
    point in a subprocess (tests/test_cli.py)."""
    import contextlib
    import io
    import os
    import subprocess
    import warnings

    from cudnn_algos import cli

    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            warnings.simplefilter("default")
            warnings.showwarning = lambda m, c, f, n, file=None, line=None: print(  # as a process would show it
                warnings.formatwarning(m, c, f, n, line), end="", file=err)
            try:
                code = cli.main([str(a) for a in args])
            except SystemExit as e:  # argparse: --help, --version, its own usage errors
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess(["cudnn-algos", *map(str, args)], code, out.getvalue(), err.getvalue())
