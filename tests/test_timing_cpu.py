"""CPU: the measuring path's pure parts and its orchestration with fake runnables (no cuDNN, no GPU): statistics,
FLOP counts, argument checks, the union of intervals, CUPTI teardown, the benchmark-flag context, and
measure_rows' handling of a kernel clock that cannot run and of a candidate that fails. GPU truth (the kernel clock
against CUPTI, accuracy) is in test_gpu_measure.py and the device script's fidelity table."""
import os
from types import SimpleNamespace
from dataclasses import replace

import pytest
import torch

import cudnn_algos
from cudnn_algos import ConvSpec
from cudnn_algos.problem import make_problem
from cudnn_algos.results import MeasureConfig, Stats
from cudnn_algos import backend, measure


def test_stats_of():
    s = Stats.of([3.0, 1.0, 2.0, 4.0, 100.0])
    assert (s.min, s.median, s.max, s.n) == (1.0, 3.0, 100.0, 5)
    assert s.spread == pytest.approx((4.0 - 2.0) / 3.0)
    assert Stats.of([2.0]).spread == 0.0


def test_flops_formula():
    # ResNet-50 3x3 256->256 @14x14, batch 32: 2 * 32*256*14*14 * 256*3*3
    p = make_problem(ConvSpec(256, 256, (3, 3), padding=1), (32, 256, 14, 14), torch.float16)
    assert p.flops() == 2 * 32 * 256 * 14 * 14 * 256 * 9
    # groups and dilation: a depthwise dilated 3x3 does 9 taps per output, one input channel each
    p = make_problem(ConvSpec(64, 64, (3, 3), padding=2, dilation=2, groups=64), (2, 64, 10, 10))
    assert p.flops() == 2 * 2 * 64 * 10 * 10 * 1 * 9
    # transposed: the mirrored convolution's count
    p = make_problem(ConvSpec(64, 32, (4, 4), stride=2, padding=1, transposed=True), (4, 64, 16, 16))
    assert p.flops() == 2 * 4 * 64 * 16 * 16 * 32 * 16


def test_problem_lifts_conv1d_and_names_directions():
    p = make_problem(torch.nn.Conv1d(8, 16, 3, device="meta"), (4, 8, 100))
    assert p.lift(p.shapes.x_shape) == [4, 8, 1, 100] and p.conv_args() == ([1, 1], [0, 0], [1, 1])
    t = make_problem(ConvSpec(8, 4, (2, 2), stride=2, transposed=True), (1, 8, 4, 4))
    assert t.cudnn_direction("forward") == "backward_data" and t.cudnn_direction("backward_data") == "forward"


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


def test_union_counts_concurrent_activities_once():
    assert measure.union_length([]) == 0
    assert measure.union_length([(0, 10), (12, 20)]) == 18  # sequential: the sum
    assert measure.union_length([(0, 10), (2, 8), (5, 15), (20, 21)]) == 16  # overlapping: the union


@pytest.mark.parametrize("cuda,preset,expect", [("13.0", None, "1"), ("12.6", None, "1"), ("12.4", None, None),
                                                (None, None, None), ("13.0", "0", "0")])
def test_cupti_teardown_default(monkeypatch, cuda, preset, expect):
    monkeypatch.setattr(measure.clocks.torch.version, "cuda", cuda)
    monkeypatch.setenv("TEARDOWN_CUPTI", "placeholder")  # records the original value, restored after the test
    if preset is None:
        monkeypatch.delenv("TEARDOWN_CUPTI")
    else:
        monkeypatch.setenv("TEARDOWN_CUPTI", preset)
    measure.clocks.cupti_teardown()
    assert os.environ.get("TEARDOWN_CUPTI") == expect


def test_cudnn_benchmark_sets_and_restores_only_that_flag():
    c = torch.backends.cudnn
    before = (c.benchmark, c.deterministic, c.allow_tf32)
    with pytest.raises(RuntimeError):
        with measure.cudnn_benchmark(not before[0]):
            assert c.benchmark is (not before[0]) and (c.deterministic, c.allow_tf32) == before[1:]
            raise RuntimeError("inside")
    assert (c.benchmark, c.deterministic, c.allow_tf32) == before


def _fake(per_call_ms: float, fail: bool = False):
    calls = []

    def loop(k):
        if fail:
            raise RuntimeError("CUDNN_STATUS_EXECUTION_FAILED")
        calls.append(k)
        return k * per_call_ms * 2.0, k * per_call_ms  # host twice the GPU time: host-bound

    return measure.Runnable(call=lambda i: None, loop=loop, output=lambda: torch.zeros(1)), calls


NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="checks what happens where the kernel clock cannot run")


@NO_GPU
def test_measure_rows_without_a_kernel_clock_keeps_the_other_clocks(monkeypatch):
    """On a machine where the CUPTI session cannot open (as here, no GPU), every row says so; throughput and host
    are still sampled; a failing candidate is a row with its error, not an exception."""
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    problem = make_problem(ConvSpec(8, 8, (3, 3)), (1, 8, 8, 8))
    (ok, calls), (bad, _) = _fake(0.05), _fake(0.05, fail=True)
    m_ok, m_bad = measure.measure_rows([ok, bad], problem, MeasureConfig(repeats=4, warmup=2), None, 0, peak=False)
    # one first call, the warm-up, then K = 1 ms / 0.05 ms = 20 calls per sample, 4 samples
    assert calls == [1, 2, 20, 20, 20, 20]
    assert m_ok.throughput_ms.median == pytest.approx(0.05) and m_ok.host_ms.median == pytest.approx(0.10)
    assert m_ok.kernel_ms is None and m_ok.kernel_clock == "none" and "kernel clock unavailable" in m_ok.error
    assert m_bad.throughput_ms is None and "EXECUTION_FAILED" in m_bad.error


def test_kernel_clock_refuses_inside_a_profiler_session(monkeypatch):
    monkeypatch.setattr(measure.clocks, "_profiler_active", lambda: True)
    with pytest.raises(measure.KernelClockUnavailable, match="torch.profiler session is open"):
        with measure.kernel_clock(0):
            pass


def _window(busy_ns, activities, kernels):
    """What the extension's kernel_clock_end answers per window (its bound WindowActivity's fields)."""
    return SimpleNamespace(busy_ns=busy_ns, activities=activities, kernels=kernels)


class _ClockExt:
    """A stand-in for the extension's kernel clock: kernel_clock_end answers end(windows)."""

    def __init__(self, end):
        self.end = end

    def kernel_clock_begin(self, own_timestamps=True):
        pass

    def kernel_clock_now(self):
        return 0

    def kernel_clock_abort(self):
        pass

    def kernel_clock_end(self, device, windows):
        return self.end(windows)


def test_a_session_another_cupti_client_finalized_is_measured_again(monkeypatch):
    """The Python side of a lost session (Note [kineto's deferred teardown]), with a stand-in for the extension:
    kernel_clock_end saying "session lost", or windows that saw no activity at all, raise KernelClockLost;
    again_if_lost runs the session once more, and a second loss is raised."""
    ends = []

    def end(windows):
        ends.append(len(windows))
        how = outcomes.pop(0)
        if how == "lost":
            raise RuntimeError("kernel clock: session lost: another CUPTI client finalized CUPTI during it")
        return [_window(2000, 0 if how == "silent" else 1, ["k"]) for _ in windows]

    monkeypatch.setattr(backend._ext, "load", lambda: _ClockExt(end))
    monkeypatch.setattr(measure.clocks.torch.cuda, "is_available", lambda: False)  # no marker window (below)

    def session():
        with measure.kernel_clock(0) as s:
            s.window(lambda: None)
            s.window(lambda: None)
        return s.results

    outcomes = ["lost", "ok"]
    assert measure.again_if_lost(session) == [(0.002, 1, ("k",))] * 2 and ends == [2, 2]
    outcomes = ["silent", "ok"]
    assert measure.again_if_lost(session)[0][1] == 1
    outcomes = ["lost", "silent"]
    with pytest.raises(measure.KernelClockLost, match="no window saw any GPU activity"):
        measure.again_if_lost(session)
    assert issubclass(measure.KernelClockLost, measure.KernelClockUnavailable)  # rows say "unavailable" after two


def test_a_session_finalized_part_way_is_caught_by_its_closing_marker(monkeypatch):
    """With a GPU every session closes with a marker window (a kernel of its own, run after the caller's windows);
    CUPTI finalized part-way keeps the earlier windows' records but not the marker's: KernelClockLost, measured
    again. The marker's window is not in the results. A stand-in for the extension and for the marker kernel."""
    marks, ends = [], []

    def end(windows):
        ends.append(len(windows))
        cut = outcomes.pop(0)  # windows from this index on saw nothing
        return [_window(2000, 200 if i < cut else 0, ["k"]) for i in range(len(windows))]

    monkeypatch.setattr(backend._ext, "load", lambda: _ClockExt(end))
    monkeypatch.setattr(measure.clocks.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(measure.clocks, "_marker", lambda device: marks.append(device))

    def session():
        with measure.kernel_clock(3) as s:
            s.window(lambda: None)
            s.window(lambda: None)
        return s.results

    outcomes = [1, 3]  # the first session lost everything after its first window
    assert measure.again_if_lost(session) == [(0.002, 200, ("k",))] * 2
    assert ends == [3, 3] and marks == [3, 3]
    outcomes = [2, 2]
    with pytest.raises(measure.KernelClockLost, match="closing marker kernel left no record"):
        measure.again_if_lost(session)


@NO_GPU
def test_a_screen_without_throughput_samples_goes_to_the_kernel_clock_after_the_first_calls(monkeypatch):
    """throughput=False (find_engines's screen): no warm-up or throughput/host samples, only the accuracy call and
    the first timed call; the kernel clock's plan takes K from that call and `repeats` windows; pruning as before."""
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    plans = []
    monkeypatch.setattr(measure.pipeline, "_kernel_pass", lambda runs, out, plan, dev, phases: plans.append(plan))
    problem = make_problem(ConvSpec(8, 8, (3, 3)), (1, 8, 8, 8))
    (fast, c_fast), (mid, c_mid), (slow, c_slow) = _fake(0.05), _fake(0.30), _fake(5.0)
    cfg = MeasureConfig(repeats=3, warmup=2, prune=8.0, throughput=False)
    m_fast, m_mid, m_slow = measure.measure_rows([fast, mid, slow], problem, cfg, None, 0, peak=False)
    assert c_fast == c_mid == c_slow == [1]
    assert plans == [{0: (20, 3), 1: (3, 3), 2: (1, 1)}]
    assert m_fast.throughput_ms is None and m_fast.host_ms.n == 1 and m_fast.calls_per_sample == 20
    assert m_mid.calls_per_sample == 3 and m_slow.pruned and m_slow.throughput_ms.n == 1
    assert [p[0] for p in m_fast.phases] == ["first call"]
    measure.measure_rows([fast], problem, MeasureConfig(repeats=3, warmup=2), None, 0, peak=False)
    assert c_fast == [1, 1, 2, 20, 20, 20], "the default still samples throughput"


@NO_GPU
def test_a_screen_samples_every_row_once_and_only_the_close_ones_again(monkeypatch):
    """cfg.close (find_engines's screen, SCREEN_CLOSE): one kernel-clock session with one sample of each row, then a
    second with the rest of the samples only for the rows within close x the fastest first sample; their samples
    are merged, the others keep their one; a row the second session fails keeps its first sample and says why.
    The kernel clock is a stand-in here (no GPU)."""
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    sessions = []
    per_call = {0: 0.050, 1: 0.070, 2: 0.090, 3: 0.30}

    def fake_pass(runs, out, plan, dev, phases):
        sessions.append(dict(plan))
        for i, (k, n) in plan.items():
            if len(sessions) == 2 and i == 1:
                out[i] = replace(out[i], error="kernel clock: lost")
                continue
            out[i] = replace(out[i], kernel_ms=Stats.of([per_call[i] * (1 + 0.01 * j) for j in range(n)]))

    monkeypatch.setattr(measure.pipeline, "_kernel_pass", fake_pass)
    problem = make_problem(ConvSpec(8, 8, (3, 3)), (1, 8, 8, 8))
    runs = [_fake(ms)[0] for ms in (0.05, 0.07, 0.09, 0.30)]
    cfg = MeasureConfig(repeats=3, warmup=2, prune=8.0, throughput=False, close=1.5)
    m = measure.measure_rows(runs, problem, cfg, None, 0, peak=False)
    assert sessions == [{0: (20, 1), 1: (14, 1), 2: (11, 1), 3: (3, 1)}, {0: (20, 2), 1: (14, 2)}]
    assert m[0].kernel_ms.n == 3 and m[0].kernel_ms.samples == (0.05, 0.05, 0.0505)
    assert m[1].kernel_ms.n == 1 and "lost" in m[1].error
    assert m[2].kernel_ms.n == 1 and m[3].kernel_ms.n == 1 and [x.measured_rank for x in m] == [0, 1, 2, 3]


@NO_GPU
def test_a_screen_gives_a_pruned_row_its_samples_where_its_kernel_clock_sample_is_close(monkeypatch):
    """A row pruned on a first call that was slow for another reason (a module loaded; another worker's kernels
    on a shared GPU, sweep Note [timing turns]) but whose one kernel-clock sample is within close x the fastest gets
    the rest of its samples (K from that sample) and is no longer marked pruned; a truly slow pruned row keeps its
    one sample. Stand-ins for the kernel clock (no GPU)."""
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    sessions = []
    per_call = {0: 0.050, 1: 0.060, 2: 2.0}

    def fake_pass(runs, out, plan, dev, phases):
        sessions.append(dict(plan))
        for i, (k, n) in plan.items():
            out[i] = replace(out[i], kernel_ms=Stats.of([per_call[i]] * n))

    monkeypatch.setattr(measure.pipeline, "_kernel_pass", fake_pass)
    problem = make_problem(ConvSpec(8, 8, (3, 3)), (1, 8, 8, 8))
    runs = [_fake(ms)[0] for ms in (0.05, 1.0, 2.0)]  # row 1's first call: 20x the fastest, its kernels: 1.2x
    cfg = MeasureConfig(repeats=3, warmup=2, prune=8.0, throughput=False, close=1.5)
    m = measure.measure_rows(runs, problem, cfg, None, 0, peak=False)
    assert sessions == [{0: (20, 1), 1: (1, 1), 2: (1, 1)}, {0: (20, 2), 1: (17, 2)}]
    assert m[1].kernel_ms.n == 3 and not m[1].pruned and m[1].calls_per_sample == 17
    assert m[2].kernel_ms.n == 1 and m[2].pruned and m[2].calls_per_sample == 1


@NO_GPU
def test_a_far_slower_accuracy_call_is_the_estimate_and_no_timed_call_follows(monkeypatch):
    """With prune: a candidate whose accuracy call took over max(prune x the fastest first call so far, that + 5 ms)
    is not called again before its one kernel-clock sample (the slowest cost two calls, not three); one under that
    bound gets its timed call as before. Accuracy-call times stand in for CUDA events."""
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    plans = []
    monkeypatch.setattr(measure.pipeline, "_kernel_pass", lambda runs, out, plan, dev, phases: plans.append(plan))
    problem = make_problem(ConvSpec(8, 8, (3, 3)), (1, 8, 8, 8))
    (fast, c_fast), (mid, c_mid), (slow, c_slow) = _fake(0.05), _fake(3.0), _fake(120.0)
    acc_ms = {id(fast): 0.06, id(mid): 3.0, id(slow): 120.0}
    monkeypatch.setattr(measure.pipeline, "_output",
                        lambda r, timed: (r.output(), acc_ms[id(r)] if timed else None))
    ref = torch.zeros(1, dtype=torch.float64)
    cfg = MeasureConfig(repeats=3, warmup=2, prune=8.0, throughput=False)
    m_fast, m_mid, m_slow = measure.measure_rows([fast, mid, slow], problem, cfg, ref, 0, peak=False)
    assert c_fast == [1] and c_mid == [1] and c_slow == []
    assert m_slow.pruned and m_slow.throughput_ms.median == 120.0 and m_slow.host_ms is None
    assert m_mid.pruned and m_mid.host_ms.n == 1 and plans == [{0: (20, 3), 1: (1, 1), 2: (1, 1)}]
    assert m_slow.rel_err is not None, "its accuracy is still checked"
    measure.measure_rows([slow, fast], problem, cfg, ref, 0, peak=False)
    assert c_slow == [1], "the first candidate has no fastest to compare with: it gets its timed call"


@NO_GPU
def test_a_screen_samples_far_slower_candidates_once(monkeypatch):
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    problem = make_problem(ConvSpec(8, 8, (3, 3)), (1, 8, 8, 8))
    (fast, c_fast), (mid, c_mid), (slow, c_slow) = _fake(0.05), _fake(0.30), _fake(5.0)
    cfg = MeasureConfig(repeats=3, warmup=2, prune=8.0)
    m_fast, m_mid, m_slow = measure.measure_rows([fast, mid, slow], problem, cfg, None, 0, peak=False)
    assert c_slow == [1] and m_slow.pruned and m_slow.throughput_ms.median == pytest.approx(5.0)
    assert m_slow.throughput_ms.n == 1 and m_slow.calls_per_sample == 1
    assert not m_mid.pruned and c_mid == [1, 2, 3, 3, 3]  # 6x the fastest: measured in full
    assert not m_fast.pruned and c_fast == [1, 2, 20, 20, 20]
    m = measure.measure_rows([fast, slow], problem, MeasureConfig(repeats=3, warmup=2), None, 0, peak=False)
    assert not any(x.pruned for x in m), "no pruning unless asked (find(measure=True) measures every row fully)"


def test_pruned_rows_say_so_in_the_table(make):
    from dataclasses import replace

    r = make.engine_result()
    rows = list(r.rows)
    rows[2] = replace(rows[2], measured=replace(rows[2].measured, pruned=True))
    assert "one sample: far slower than the fastest" in str(replace(r, rows=tuple(rows)))


@NO_GPU
def test_each_candidate_is_timed_inside_its_own_nvtx_range(monkeypatch):
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    names, pops = [], []
    # the label holds braces: a range helper that str.format()s its message would raise KeyError here
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", lambda msg: names.append(msg.format()) if "{" not in msg
                        else names.append(msg))
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", lambda: pops.append(1))
    problem = make_problem(ConvSpec(8, 8, (3, 3)), (1, 8, 8, 8))
    run, _ = _fake(0.05)
    run.label = "Conv2d(8, 8, kernel_size=3) forward | eng62{TILE_SIZE=1}"
    measure.measure_rows([run], problem, MeasureConfig(repeats=2, warmup=1), None, 0, peak=False)
    assert names == ["cudnn_algos throughput | Conv2d(8, 8, kernel_size=3) forward | eng62{TILE_SIZE=1}"]
    assert len(pops) == len(names)


@NO_GPU
def test_each_row_records_its_measuring_phases_and_a_search_becomes_a_chrome_trace(monkeypatch, make, tmp_path):
    import json
    from dataclasses import replace

    from cudnn_algos import chrome_trace, load_json, write_chrome_trace

    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    problem = make_problem(ConvSpec(8, 8, (3, 3)), (1, 8, 8, 8))
    runs = [_fake(0.05)[0], _fake(0.02)[0]]
    ms = measure.measure_rows(runs, problem, MeasureConfig(repeats=2, warmup=1), None, 0, peak=False)
    for m in ms:
        names = [p[0] for p in m.phases]
        assert names[:2] == ["first call", "throughput"], names
        assert all(d >= 0 and s > 1.7e9 for _, s, d in m.phases)  # Unix times, non-negative durations
    rows = tuple(replace(r, measured=m) for r, m in zip(make.engine_result().rows[:2], ms))
    res = make.engine_result(rows=rows)
    t = chrome_trace(res)
    slices = [e for e in t["traceEvents"] if e["ph"] == "X"]
    assert len(slices) == sum(len(m.phases) for m in ms)
    assert {e["name"] for e in t["traceEvents"] if e["ph"] == "M"} == {"process_name", "thread_name"}
    assert write_chrome_trace(res, tmp_path / "t.json") == len(slices)
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert load_json(res.to_json()).rows[0].measured.phases == ms[0].phases  # phases round-trip


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("fmt", [torch.contiguous_format, torch.channels_last])
def test_output_redzones_catch_writes_outside_and_unwritten_elements(dtype, fmt):
    """The accuracy call writes into a NaN-poisoned output between two guards: a candidate that writes past its
    buffer, or leaves part of it unwritten, is a failed row (never timed, never a winner); an honest one passes."""
    problem = make_problem(ConvSpec(4, 4, (3, 3), padding=1), (2, 4, 6, 6))
    y = torch.empty(2, 4, 6, 6, dtype=dtype).contiguous(memory_format=fmt)
    sets = [{"x": torch.randn(2, 4, 6, 6), "w": torch.randn(4, 4, 3, 3), "y": y}]
    flat = lambda t: t.as_strided((t.numel() + 2 * measure.runnable.REDZONE,), (1,), 0)  # noqa: E731 (the whole buffer)

    def honest(i):
        sets[0]["y"].copy_(torch.ones(2, 4, 6, 6))

    def past_the_end(i):
        honest(i)
        flat(sets[0]["y"])[measure.runnable.REDZONE + sets[0]["y"].numel() + 3] = 0.0

    def before_the_start(i):
        honest(i)
        flat(sets[0]["y"])[measure.runnable.REDZONE - 1] = 0.0

    def half(i):
        sets[0]["y"].view(-1)[: sets[0]["y"].numel() // 2].fill_(1.0) if fmt == torch.contiguous_format else \
            sets[0]["y"][:1].fill_(1.0)

    out = measure.runnable.own_output(problem, "forward", sets, honest)[0]()
    assert torch.equal(out.float(), torch.ones(2, 4, 6, 6)) and sets[0]["y"] is y  # the operand set is restored
    for call, match in ((past_the_end, "guard elements after"), (before_the_start, "guard elements before"),
                        (half, "unwritten")):
        with pytest.raises(measure.OutputCheckFailed, match=match):
            measure.runnable.own_output(problem, "forward", sets, call)[0]()
        assert sets[0]["y"] is y


@NO_GPU
def test_a_row_whose_output_check_fails_is_failed_and_never_timed(monkeypatch):
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    problem = make_problem(ConvSpec(8, 8, (3, 3)), (1, 8, 8, 8))
    run, calls = _fake(0.01)

    def bad_output():
        raise measure.OutputCheckFailed("wrote outside its output buffer: 3 of 4096 guard elements after it changed")

    run.output = bad_output
    m = measure.measure_rows([run], problem, MeasureConfig(repeats=2, warmup=1), torch.zeros(1), 0, peak=False)[0]
    assert m.kernel_ms is None and m.throughput_ms is None and "wrote outside its output buffer" in m.error
    assert calls == []  # never timed


@pytest.mark.parametrize("message,falls_back", [
    ("CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported", True),
    ("CUDA error: an illegal memory access was encountered", False),
])
def test_a_reference_that_does_not_fit_on_the_gpu_is_computed_on_the_cpu(monkeypatch, message, falls_back):
    # under memory pressure on the H200 torch's float64 convolution raised a CUDA out-of-memory AcceleratorError
    # (a RuntimeError, not the allocator's OutOfMemoryError) from inside find(measure=True); any other error stays
    p = make_problem(torch.nn.Conv2d(3, 4, 3), (2, 3, 8, 8))
    torch.manual_seed(0)
    ops = {"x": torch.randn(2, 3, 8, 8), "w": torch.randn(4, 3, 3, 3), "y": torch.randn(2, 4, 6, 6)}
    expected = torch.nn.functional.conv2d(ops["x"].double(), ops["w"].double())
    real, calls = measure.accuracy._reference, []

    def failing_on_the_gpu(problem, cdir, o, where, dtype=torch.float64):
        calls.append(where)
        if where == "cuda":
            raise RuntimeError(message)
        return real(problem, cdir, o, where, dtype)

    monkeypatch.setattr(measure.accuracy, "_reference", failing_on_the_gpu)
    if not falls_back:
        with pytest.raises(RuntimeError, match="illegal memory access"):
            measure.reference_output(p, "forward", ops, "cuda")
        assert calls == ["cuda"]
        return
    with pytest.warns(RuntimeWarning, match="did not fit on the GPU twice.*computing it on the CPU"):
        ref = measure.reference_output(p, "forward", ops, "cuda")
    assert calls == ["cuda", "cuda", "cpu"] and ref.dtype == torch.float64  # once more after the cache is freed
    torch.testing.assert_close(ref, expected)


def test_a_reference_that_fits_once_the_cache_is_freed_stays_on_the_gpu(monkeypatch):
    """An out-of-memory, then room once torch's cached blocks are handed back (freed_after_oom): the second try on
    the GPU is the reference, no warning, no CPU (CPU test: the GPU call stands in for the CPU one here)."""
    import warnings

    p = make_problem(torch.nn.Conv2d(3, 4, 3), (2, 3, 8, 8))
    torch.manual_seed(0)
    ops = {"x": torch.randn(2, 3, 8, 8), "w": torch.randn(4, 3, 3, 3), "y": torch.randn(2, 4, 6, 6)}
    real, calls = measure.accuracy._reference, []

    def room_on_the_second_try(problem, cdir, o, where, dtype=torch.float64):
        calls.append(where)
        if len(calls) == 1:
            raise RuntimeError("CUDA error: out of memory")
        return real(problem, cdir, o, "cpu", dtype)

    monkeypatch.setattr(measure.accuracy, "_reference", room_on_the_second_try)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ref = measure.reference_output(p, "forward", ops, "cuda")
    assert calls == ["cuda", "cuda"]
    torch.testing.assert_close(ref, torch.nn.functional.conv2d(ops["x"].double(), ops["w"].double()))


@pytest.mark.parametrize("exc,none", [
    (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 128.00 MiB"), True),
    (RuntimeError("CUDA error: out of memory"), True),
    (RuntimeError("CUDA error: an illegal memory access was encountered"), False),
])
def test_a_peak_that_does_not_fit_leaves_rows_without_percent_of_peak(monkeypatch, exc, none):
    # under memory pressure on the H200 the measured engine search's only failing allocation was the matmul peak's
    # two 8192^2 operands: the search must complete without % of peak, and the failure must not be cached
    calls = []

    def peak(device, dtype, tf32):
        calls.append(device)
        raise exc

    monkeypatch.setattr(measure.peak, "peak_tflops", peak)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    if not none:
        with pytest.raises(RuntimeError, match="illegal memory access"):
            measure.peak_or_none(0, torch.float16, False)
        return
    with pytest.warns(RuntimeWarning, match="peak did not fit on cuda:0.*no % of peak"):
        assert measure.peak_or_none(0, torch.float16, False) is None
    with pytest.warns(RuntimeWarning):
        measure.peak_or_none(0, torch.float16, False)
    assert calls == [0, 0]  # asked again: memory may be free by then


def test_cupti_held_keeps_cupti_attached_until_the_outermost_block_ends(monkeypatch):
    # the Python side: nested blocks (a tune inside a profile) turn keeping on once and off once, also on errors
    calls = []

    class Ext:
        def kernel_clock_keep_attached(self, on):
            calls.append(on)

    monkeypatch.setattr(backend._ext, "load", lambda: Ext())
    with measure.cupti_held():
        with measure.cupti_held():
            assert calls == [True]
        assert calls == [True]
    assert calls == [True, False]
    with pytest.raises(KeyError):
        with measure.cupti_held():
            raise KeyError("x")
    assert calls == [True, False, True, False]
    assert cudnn_algos.cupti_held is measure.cupti_held and "cupti_held" in cudnn_algos.__all__


def test_a_session_kept_attached_is_finalized_when_keeping_ends():
    # the C++ side with the real libcupti, no GPU: registering the callbacks attaches CUPTI, enabling kernel records
    # fails without a device, and the failed session's end must finalize only when not kept attached
    ext = pytest.importorskip("cudnn_algos._ext").load()
    if torch.cuda.is_available():
        pytest.skip("CPU test: on a GPU the session would open (the GPU tests cover that)")

    def failed_session():
        with pytest.raises(RuntimeError, match="kernel clock"):
            ext.kernel_clock_begin()

    s0 = ext.kernel_clock_stats()
    ext.kernel_clock_keep_attached(True)
    try:
        failed_session()
        s1 = ext.kernel_clock_stats()
        assert s1.sessions == s0.sessions + 1 and s1.finalizes == s0.finalizes and s1.attached
        failed_session()  # attached already: registers again, still no finalize
        assert ext.kernel_clock_stats().finalizes == s0.finalizes
    finally:
        ext.kernel_clock_keep_attached(False)
    s2 = ext.kernel_clock_stats()
    assert s2.finalizes == s0.finalizes + 1 and not s2.attached and s2.buffers_outstanding == 0
    failed_session()  # not kept: finalized at the session's end
    assert ext.kernel_clock_stats().finalizes == s0.finalizes + 2


def test_a_failed_candidate_row_names_the_stage_that_raised():
    # CPU test: under memory pressure a row said only "AcceleratorError: CUDA error: out of memory", not whether its
    # accuracy check, its first call or its samples failed
    def boom(*_):
        raise RuntimeError("CUDA error: out of memory")

    ok_loop = lambda k: (0.1 * k, 0.1 * k)  # noqa: E731
    r = measure.Runnable(call=lambda i: None, loop=ok_loop, output=boom)
    m, gpu = measure.pipeline._first_call(r, torch.zeros(2), device=0)
    assert gpu is None and m.error == "accuracy check: RuntimeError: CUDA error: out of memory"
    m, gpu = measure.pipeline._first_call(measure.Runnable(call=lambda i: None, loop=boom, output=lambda: None), None, 0)
    assert gpu is None and m.error.startswith("first timed call: RuntimeError")
    good, _ = measure.pipeline._first_call(measure.Runnable(call=lambda i: None, loop=ok_loop, output=lambda: None), None, 0)
    assert good.error == ""
    m, k = measure.pipeline._throughput(measure.Runnable(call=lambda i: None, loop=boom, output=lambda: None), good,
                              MeasureConfig(), 0)
    assert k == 0 and m.error.startswith("throughput samples: RuntimeError")


def test_one_search_asks_for_the_peak_once_per_math_kind(monkeypatch):
    # CPU test: under memory pressure each row used to try the 2 x 128 MiB peak again (and warn again)
    asked = []

    def peak(device, dtype, tf32):
        asked.append(tf32)
        return None

    monkeypatch.setattr(measure.pipeline, "peak_or_none", peak)
    problem = make_problem(ConvSpec(8, 8, (3, 3)), (2, 8, 16, 16), dtype=torch.float32)
    rows = [measure.Runnable(call=lambda i: None, loop=lambda k: (0, 0), output=lambda: None, tensor_math=tm)
            for tm in (True, True, False, True, False)]
    out = [measure.pipeline.Measurement(kernel_ms=Stats.of([0.01 * (i + 1)]), throughput_ms=None, host_ms=None,
                              calls_per_sample=1) for i in range(len(rows))]
    measure.pipeline._work_and_ranks(rows, out, problem, 0, peak=True)
    assert sorted(asked) == [False, True]
    assert all(m.tflops > 0 and m.pct_peak is None for m in out)
    assert [m.measured_rank for m in out] == [0, 1, 2, 3, 4]


def test_an_output_check_names_a_write_outside_before_an_unwritten_element():
    from cudnn_algos.measure.runnable import REDZONE, output_problem

    assert output_problem(0, 0, 0, 10) is None
    assert output_problem(0, 2, 5, 10) == (f"wrote outside its output buffer: 2 of {REDZONE} guard elements after "
                                           "it changed")
    assert output_problem(1, 0, 0, 10).endswith("before it changed")
    assert output_problem(0, 0, 5, 10) == "left 5 of 10 output elements unwritten (still the NaN poison)"


@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(lean=True), ValueError, "lean=True needs screen"),
    (dict(lean=1, screen=2, measure=True), TypeError, "lean=1 must be a bool"),
    (dict(lean="far", screen=2, measure=True), TypeError, "lean='far' must be a bool"),  # removed: pipeline's Note
])
def test_a_lean_screen_is_asked_for_with_a_screen(kwargs, exc, match):
    from cudnn_algos.engines import validate_engines

    with pytest.raises(exc, match=match):
        validate_engines(torch.nn.Conv2d(8, 8, 3), (1, 8, 8, 8), **kwargs)


@NO_GPU
def test_a_screen_samples_a_slow_row_with_one_call_a_window_and_throughput_with_two(monkeypatch):
    """A screen (no throughput samples): a row over ~0.7 ms a call gets kernel-clock windows of one call (CUPTI
    records each kernel's duration, so one call is a sample), also a pruned row whose one sample turned out close;
    the throughput path keeps MIN_CALLS back-to-back calls a sample. Stand-ins for the kernel clock (no GPU)."""
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    plans = []
    monkeypatch.setattr(measure.pipeline, "_kernel_pass", lambda runs, out, plan, dev, phases: plans.append(plan))
    problem = make_problem(ConvSpec(8, 8, (3, 3)), (1, 8, 8, 8))
    (fast, _), (slow, _) = _fake(0.50), _fake(1.2)
    cfg = MeasureConfig(repeats=3, warmup=2, prune=8.0, throughput=False)
    m_fast, m_slow = measure.measure_rows([fast, slow], problem, cfg, None, 0, peak=False)
    assert plans == [{0: (2, 3), 1: (1, 3)}] and m_slow.calls_per_sample == 1 and not m_slow.pruned
    assert measure.pipeline.calls_per_sample(1.2) == 2, "a throughput sample is still two calls back to back"
    sessions = []
    per_call = {0: 0.9, 1: 1.0}

    def fake_pass(runs, out, plan, dev, phases):
        sessions.append(dict(plan))
        for i, (k, n) in plan.items():
            out[i] = replace(out[i], kernel_ms=Stats.of([per_call[i]] * n))

    monkeypatch.setattr(measure.pipeline, "_kernel_pass", fake_pass)
    runs = [_fake(ms)[0] for ms in (0.9, 9.0)]  # row 1's first call 10x the fastest (pruned), its kernels 1.1x
    m = measure.measure_rows(runs, problem, replace(cfg, close=1.5), None, 0, peak=False)
    assert sessions == [{0: (1, 1), 1: (1, 1)}, {0: (1, 2), 1: (1, 2)}] and not m[1].pruned
