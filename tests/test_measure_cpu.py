"""CPU: the measurement module's pure parts (statistics, FLOP count, argument checks) and how measured results
render and round-trip. The Measurement values here are hand-made; GPU truth is in test_gpu_measure.py."""
import pytest
import torch

import cudnn_algos
from cudnn_algos import ConvSpec, load_json
from cudnn_algos.api import _problem
from cudnn_algos.measure import Measurement, MeasureConfig, Stats, conv_flops

from test_results import make


def test_stats_of():
    s = Stats.of([3.0, 1.0, 2.0, 4.0, 100.0])
    assert (s.min, s.median, s.max, s.n) == (1.0, 3.0, 100.0, 5)
    assert s.spread == pytest.approx((4.0 - 2.0) / 3.0)
    assert Stats.of([2.0]).spread == 0.0


def test_flops_formula():
    # ResNet-50 3x3 256->256 @14x14, batch 32: 2 * 32*256*14*14 * 256*3*3
    p = _problem(ConvSpec(256, 256, (3, 3), padding=1), (32, 256, 14, 14), torch.float16, None, None)
    assert conv_flops(p) == 2 * 32 * 256 * 14 * 14 * 256 * 9
    # groups and dilation: a depthwise dilated 3x3 does 9 taps per output, one input channel each
    p = _problem(ConvSpec(64, 64, (3, 3), padding=2, dilation=2, groups=64), (2, 64, 10, 10), None, None, None)
    assert conv_flops(p) == 2 * 2 * 64 * 10 * 10 * 1 * 9
    # transposed: the mirrored convolution's count
    p = _problem(ConvSpec(64, 32, (4, 4), stride=2, padding=1, transposed=True), (4, 64, 16, 16), None, None, None)
    assert conv_flops(p) == 2 * 4 * 64 * 16 * 16 * 32 * 16


@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(repeats=0), ValueError, "repeats=0 must be >= 1"),
    (dict(repeats=2.5), TypeError, "repeats"),
    (dict(warmup=-1), ValueError, "warmup=-1"),
    (dict(l2="lukewarm"), ValueError, "l2='lukewarm' is not one of: warm, cold"),
    (dict(reference="tpu"), ValueError, "reference='tpu'"),
])
def test_measure_arguments_checked_before_gpu(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        cudnn_algos.find(torch.nn.Conv2d(8, 8, 3), (1, 8, 8, 8), measure=True, **kwargs)


def _measured():
    st = Stats(0.1, 0.09, 0.12, 0.05, 10)
    m = Measurement(kernel_ms=st, kernel_clock="graph", throughput_ms=Stats(0.2, 0.19, 0.3, 0.1, 10),
                    host_ms=Stats(0.17, 0.16, 0.2, 0.05, 10), cupti_kernel_ms=0.098, calls_per_sample=10,
                    kernels=("sm90_xmma_fprop_a", "b"), rel_err=3e-4, max_abs_err=0.01, tflops=123.4, pct_peak=15.6,
                    heuristic_rank=0, measured_rank=0)
    from dataclasses import replace

    base = make()
    rows = list(base.rows)
    rows[0] = replace(rows[0], measured=m)
    rows[1] = replace(rows[1], measured=replace(m, kernel_ms=Stats(0.2, 0.2, 0.2, 0.0, 10), measured_rank=1,
                                                heuristic_rank=None, kernel_clock="cupti"))
    return replace(base, rows=tuple(rows), measure=MeasureConfig(l2="cold", buffer_sets=4), flops=123456789,
                   peak_tflops={"float16 matmul": 790.0}, heuristic_choice="IMPLICIT_PRECOMP_GEMM/tensor_op",
                   heuristic_regret=1.0)


def test_measured_table_and_best():
    r = _measured()
    assert r.is_measured and r.best.algo == "IMPLICIT_PRECOMP_GEMM"
    text = str(r)
    header = text.splitlines()[1]
    for h in ("kernel ms", "thrpt ms", "host ms", "cuDNN ms", "TFLOP/s", "% peak", "rel err", "h-rank", "m-rank"):
        assert h in header
    assert "0.1000" in text and "2.00x" in text and "3.0e-04" in text and "kernel time from CUPTI" in text
    assert "regret 1.00x" in text and "L2 cold (4 operand set(s))" in text and "float16 matmul 790 TFLOP/s" in text


def test_measured_json_round_trip_and_dataframe():
    r = _measured()
    assert load_json(r.to_json()) == r
    pytest.importorskip("pandas")
    df = r.to_dataframe()
    for col in ("kernel_median_ms", "kernel_spread", "throughput_median_ms", "host_median_ms", "rel_err",
                "tflops", "pct_peak", "heuristic_rank", "measured_rank", "cupti_kernel_ms", "kernel_clock"):
        assert col in df.columns, col
    assert df.loc[0, "kernel_median_ms"] == 0.1


def test_busy_time_counts_concurrent_kernels_once():
    from cudnn_algos.measure import _busy_us

    assert _busy_us([]) == 0
    assert _busy_us([(0, 10), (12, 20)]) == 18  # sequential: the sum
    assert _busy_us([(0, 10), (2, 8), (5, 15), (20, 21)]) == 16  # overlapping: the union


def test_engine_family_and_arguments():
    from cudnn_algos.engines import legacy_family

    assert legacy_family(("TENSOR_CORE",)) == "IMPLICIT_GEMM"
    assert legacy_family(("FFT",)) == "FFT"
    assert legacy_family(("WINOGRAD", "WINOGRAD_TILE_4x4")) == "WINOGRAD"
    with pytest.raises(ValueError, match="max_configs=0"):
        cudnn_algos.find_engines(torch.nn.Conv2d(8, 8, 3), (1, 8, 8, 8), max_configs=0)
    with pytest.raises(ValueError, match="heuristics='z'"):
        cudnn_algos.find_engines(torch.nn.Conv2d(8, 8, 3), (1, 8, 8, 8), heuristics=("z",))
    with pytest.raises(ValueError, match="one direction at a time"):
        cudnn_algos.find_engines(torch.nn.Conv2d(8, 8, 3), (1, 8, 8, 8), direction="all")


@pytest.mark.parametrize("cuda,preset,expect", [("13.0", None, "1"), ("12.6", None, "1"), ("12.4", None, None),
                                                (None, None, None), ("13.0", "0", "0")])
def test_cupti_teardown_default(monkeypatch, cuda, preset, expect):
    from cudnn_algos import measure

    monkeypatch.setattr(measure.torch.version, "cuda", cuda)
    monkeypatch.setenv("TEARDOWN_CUPTI", "placeholder")  # records the original value, restored after the test
    if preset is None:
        monkeypatch.delenv("TEARDOWN_CUPTI")
    else:
        monkeypatch.setenv("TEARDOWN_CUPTI", preset)
    measure._cupti_teardown()
    import os

    assert os.environ.get("TEARDOWN_CUPTI") == expect


def test_cudnn_benchmark_sets_and_restores_only_that_flag():
    from cudnn_algos.measure import cudnn_benchmark

    c = torch.backends.cudnn
    before = (c.benchmark, c.deterministic, c.allow_tf32)
    with pytest.raises(RuntimeError):
        with cudnn_benchmark(not before[0]):
            assert c.benchmark is (not before[0]) and (c.deterministic, c.allow_tf32) == before[1:]
            raise RuntimeError("inside")
    assert (c.benchmark, c.deterministic, c.allow_tf32) == before
