"""GPU (H200): the graph API's engine x knob search: configurations enumerated and built, every built plan run
through the extension and checked against PyTorch (float64 reference), exhaustive mode, measurement."""
from __future__ import annotations

import pytest
import torch

import cudnn_algos
from cudnn_algos import ConvSpec

from reference import ERR_FACTOR, TOL, Case, rel_err

pytestmark = [pytest.mark.gpu]
CL, C = torch.channels_last, torch.contiguous_format

CASES = {
    "3x3-fp16-nhwc": (torch.nn.Conv2d(64, 64, 3, padding=1), (8, 64, 28, 28), torch.float16, CL),
    "3x3-fp32": (torch.nn.Conv2d(64, 64, 3, padding=1), (8, 64, 28, 28), torch.float32, C),
    "1x1s2-bf16": (torch.nn.Conv2d(64, 128, 1, stride=2), (8, 64, 28, 28), torch.bfloat16, C),
    "conv1d-fp32": (torch.nn.Conv1d(80, 256, 5), (4, 80, 1000), torch.float32, C),
    "convT2d-fp16-nhwc": (torch.nn.ConvTranspose2d(64, 32, 4, stride=2, padding=1), (4, 64, 16, 16), torch.float16, CL),
}


def _check_all(res, case, direction):
    ref = case.reference(direction)
    tol = max(TOL[case.dtype], ERR_FACTOR * rel_err(case.torch_gpu(direction), ref))
    failures = []
    for row in res.succeeded:
        out = cudnn_algos.run(case.spec, row, direction=direction, **case.run_kwargs(direction))
        if not torch.isfinite(out).all():
            failures.append(f"{direction} {row.name}: non-finite output")
        elif (e := rel_err(out, ref)) > tol:
            failures.append(f"{direction} {row.name}: rel err {e:.2e} > {tol:.2e}")
    return failures


@pytest.mark.parametrize("name", list(CASES))
def test_heuristic_engine_configs_build_and_match_pytorch(name):
    module, shape, dtype, fmt = CASES[name]
    spec = ConvSpec.from_module(module)
    case = Case(spec, shape, dtype, fmt)
    failures = []
    for d in cudnn_algos.DIRECTIONS:
        res = cudnn_algos.find_engines(spec, shape, direction=d, dtype=dtype, memory_format=fmt,
                                       runtime_compiled=False)
        assert res.engine_count > 0 and res.rows, f"{d}: no engine configuration at all"
        assert res.succeeded, f"{d}: no plan built:\n{res}"
        assert all(r.status for r in res.rows)
        assert any(r.rank_a == 0 for r in res.rows), "heuristic A's first choice is a row"
        failures += _check_all(res, case, d)
    assert not failures, "\n".join(failures)


def test_exhaustive_knob_search():
    module, shape, dtype, fmt = CASES["3x3-fp16-nhwc"]
    spec = ConvSpec.from_module(module)
    heur = cudnn_algos.find_engines(spec, shape, dtype=dtype, memory_format=fmt, runtime_compiled=False)
    cap = len(heur.rows) + 30
    res = cudnn_algos.find_engines(spec, shape, dtype=dtype, memory_format=fmt, exhaustive=True, max_configs=cap,
                                   runtime_compiled=False)
    configs = [r for r in res.rows if r.stage != "engine"]
    assert len(heur.rows) < len(configs) <= cap, "the cap counts configurations, heuristic ones included"
    extra = [r for r in configs if r.sources == ("exhaustive",)]
    assert len({r.engine_id for r in extra}) > 1, "rounds over the engines: the cap does not go to one engine"
    assert any(r.knobs for r in res.rows), "some engines have knobs"
    assert len({(r.engine_id, r.knobs) for r in res.rows}) == len(res.rows), "configurations are unique"
    case = Case(spec, shape, dtype, fmt)
    sample = type(res)(**{**res.__dict__, "rows": tuple(r for r in extra if r.ok)[:12]})
    assert not _check_all(sample, case, "forward")


def test_measured_engines_and_best():
    module, shape, dtype, fmt = CASES["3x3-fp16-nhwc"]
    res = cudnn_algos.find_engines(module, shape, dtype=dtype, memory_format=fmt, measure=True, repeats=3)
    timed = [r for r in res.succeeded if r.kernel_ms is not None]
    # compare_torch follows measure: the 3 fastest torch would accept are measured again on fresh operands beside
    # torch's op, and best is the fastest of those (not the minimum of the first, noisier pass)
    conf = [r for r in timed if r.measured.confirmed]
    assert timed and 1 <= len(conf) <= 3 and res.best.measured.confirmed
    assert res.best.kernel_ms == min(r.kernel_ms for r in conf)
    for r in timed:
        st = r.measured.kernel_ms
        assert 0 < st.min <= st.median <= st.max
        assert r.measured.rel_err is not None and r.measured.rel_err < 1e-2
    text = str(res)
    assert "best: eng" in text and any(ln.startswith("config ") and "kernel" in ln for ln in text.splitlines())
    assert max(len(ln) for ln in text.splitlines() if not ln.startswith("[")) <= 120
    assert res.to_json()  # plans are not saved; everything else is


# Shapes used nowhere else in the suite: torch keeps the first plan it picks for a shape for the life of the
# process, so benchmark mode's own choice only shows for a shape torch has not run before.
@pytest.mark.parametrize("direction", cudnn_algos.DIRECTIONS)
def test_torch_benchmark_choice_is_identified_among_its_candidates(direction):
    res = cudnn_algos.find_engines(torch.nn.Conv2d(96, 96, 3, padding=1), (16, 96, 20, 20), direction=direction,
                                   dtype=torch.float16, memory_format=CL, measure=True, repeats=3,
                                   compare_torch=True, torch_benchmark=True)
    t = res.torch
    assert t is not None and t.mode == "benchmark_on" and t.kernels, t
    assert t.match in ("exact", "partial"), f"torch's kernels {t.kernels} match no configuration:\n{res}"
    ran = [r for r in res.rows if r.torch_ran]
    assert ran and {r.name for r in ran} == set(t.matches)
    assert any(r.torch_rank is not None for r in ran), f"torch ran a configuration it does not time:\n{res}"
    assert t.measured.kernel_ms.median > 0 and t.measured.rel_err is not None and t.measured.rel_err < 1e-2
    assert all(r.kernels for r in res.succeeded if r.measured and r.measured.kernel_ms), "every run plan's kernels"
    assert res.best_eligible is not None and not res.best_eligible.torch_filter
    assert "torch (benchmark on)" in str(res)


def test_torch_default_choice_is_heuristic_first_candidate_fp32():
    res = cudnn_algos.find_engines(torch.nn.Conv2d(40, 72, 3, stride=2, padding=1), (8, 40, 30, 30),
                                   direction="backward_filter", dtype=torch.float32, compare_torch=True,
                                   torch_benchmark=False)
    t = res.torch
    assert t.mode == "benchmark_off" and t.match in ("exact", "partial"), res
    assert t.measured is None  # no measure: identification only
    # torch without benchmark mode runs the first configuration of its list that builds and runs
    assert any(r.torch_rank == 0 for r in res.rows if r.torch_ran), res


def test_cli_engines_with_torch(capsys):
    from cudnn_algos.cli import main

    rc = main(["engines", "--conv", "Conv2d(48, 64, 1)", "--input", "8,48,17,17", "--dtype", "float16",
               "--channels-last", "--measure", "--repeats", "2", "--torch-benchmark", "on", "--no-runtime-compiled"])
    out = " ".join(capsys.readouterr().out.split())  # prose lines are wrapped at 120 columns
    assert rc == 0 and "torch (benchmark on)" in out and "best configuration torch would accept" in out, out


def test_refine_builds_one_knob_neighbours_that_match_pytorch():
    module, shape, dtype, fmt = CASES["3x3-fp16-nhwc"]
    spec = ConvSpec.from_module(module)
    res = cudnn_algos.find_engines(spec, shape, dtype=dtype, memory_format=fmt, measure=True, repeats=2, refine=2,
                                   refine_max=40, runtime_compiled=False, compare_torch=False)
    new = [r for r in res.rows if r.sources == ("refine",)]
    assert res.refined == len(new) and 0 < len(new) <= 40, res
    assert len({(r.engine_id, r.knobs) for r in res.rows}) == len(res.rows), "configurations are unique"
    built = [r for r in new if r.ok]
    assert built, "some neighbours build"
    assert all(r.measured is not None for r in built)
    ranks = sorted(r.measured.measured_rank for r in res.rows if r.ok and r.kernel_ms is not None)
    assert ranks == list(range(len(ranks))), "one ranking over heuristic and refined rows"
    case = Case(spec, shape, dtype, fmt)
    sample = type(res)(**{**res.__dict__, "rows": tuple(built[:10])})
    assert not _check_all(sample, case, "forward")


def test_identify_torch_after_timing_fp32_backward_data():
    res = cudnn_algos.find_engines(torch.nn.Conv2d(56, 88, 3, padding=1), (8, 56, 18, 18), direction="backward_data",
                                   dtype=torch.float32, measure=True, repeats=2, compare_torch=False)
    assert res.torch is None and not any(r.torch_ran for r in res.rows)
    got = cudnn_algos.identify_torch(res, torch_benchmark=False)
    assert got.torch.mode == "benchmark_off" and got.torch.match in ("exact", "partial"), got
    assert [r.name for r in got.rows] == [r.name for r in res.rows], "rows kept in place"
    assert {r.name for r in got.rows if r.torch_ran} == set(got.torch.matches)


def test_run_uses_the_layout_the_row_was_searched_in():
    """A 1x1 filter has the same strides in both layouts: run() takes the layout from the row, not the tensor."""
    module = torch.nn.Conv2d(64, 32, 1)
    spec, shape = ConvSpec.from_module(module), (4, 64, 14, 14)
    res = cudnn_algos.find_engines(spec, shape, direction="backward_data", dtype=torch.float16, memory_format=CL,
                                   runtime_compiled=False)
    case = Case(spec, shape, torch.float16, CL)
    g = case.gpu
    row = res.succeeded[0]
    assert row.memory_format == "channels_last"
    out = cudnn_algos.run(spec, row, direction="backward_data", weight=g["weight"], grad_output=g["grad_output"],
                          input_shape=shape)
    assert out.is_contiguous(memory_format=CL)
    assert rel_err(out, case.reference("backward_data")) < 1e-2
    with pytest.warns(UserWarning, match="not in the layout the row was searched in"):
        cudnn_algos.run(spec, row, direction="backward_data", weight=g["weight"],
                        grad_output=g["grad_output"].contiguous(), input_shape=shape)


def test_a_configuration_is_rebuilt_alone_by_its_name():
    """configs=[name] builds exactly that configuration (engine id + knob values), runs and matches PyTorch: the
    repro command of a row, and how a stored winner is rebuilt in another process."""
    module, shape, dtype, fmt = CASES["3x3-fp16-nhwc"]
    spec = ConvSpec.from_module(module)
    res = cudnn_algos.find_engines(spec, shape, dtype=dtype, memory_format=fmt, runtime_compiled=False)
    names = [r.name for r in res.succeeded[:5]]
    again = cudnn_algos.find_engines(spec, shape, dtype=dtype, memory_format=fmt, configs=names)
    assert [r.name for r in again.rows] == names and all(r.ok and r.sources == ("exact",) for r in again.rows)
    case = Case(spec, shape, dtype, fmt)
    assert not _check_all(again, case, "forward")
    bad = cudnn_algos.find_engines(spec, shape, dtype=dtype, memory_format=fmt, configs=["eng62{TILE_SIZE=999}"])
    assert len(bad.rows) == 1 and not bad.rows[0].ok and bad.rows[0].stage in ("config", "plan")


@pytest.mark.parametrize("direction", cudnn_algos.DIRECTIONS)
def test_plans_built_by_threads_are_the_same_rows_and_run_like_pytorch(direction):
    """build_threads=8: the plans finalized on eight threads, each with its own handle, are the same
    rows in the same order as one thread builds (configuration, sources and ranks, status, workspace) — heuristic
    lists with runtime-compiled engines, and an exhaustive enumeration; every such plan runs on this thread's handle
    and matches PyTorch; the threads' handles go back to the pool (a second search makes none)."""
    from cudnn_algos import backend

    module, shape, dtype, fmt = CASES["3x3-fp16-nhwc"]
    spec = ConvSpec.from_module(module)
    case = Case(spec, shape, dtype, fmt)

    def key(r):
        return (r.engine_id, r.knobs, r.sources, r.heuristic_ranks, r.status, r.stage, r.workspace_bytes)

    for kw in (dict(), dict(exhaustive=True, max_configs=60, runtime_compiled=False)):
        one = cudnn_algos.find_engines(spec, shape, direction=direction, dtype=dtype, memory_format=fmt, **kw)
        many = cudnn_algos.find_engines(spec, shape, direction=direction, dtype=dtype, memory_format=fmt,
                                        build_threads=8, **kw)
        assert [key(r) for r in many.rows] == [key(r) for r in one.rows], kw
        assert len(many.succeeded) >= 4, kw
        assert not _check_all(many, case, direction)
    made = backend.cudnn_handles().created
    cudnn_algos.find_engines(spec, shape, direction=direction, dtype=dtype, memory_format=fmt, build_threads=8)
    assert backend.cudnn_handles().created == made, "a second search reuses the pooled handles"


def test_plans_built_ahead_on_another_thread_are_the_same_rows_and_measure_like_pytorch():
    """engines.list_ahead here and Listed.build on a thread of its own (as a profile builds the next search's plans
    while one is timed; Note [building ahead]): the same rows, sources and list positions as find_engines builds
    itself, measured and checked against PyTorch from this thread; plans built for another search are refused."""
    from concurrent.futures import ThreadPoolExecutor

    from cudnn_algos.engines import list_ahead

    module, shape, dtype, fmt = CASES["3x3-fp32"]
    spec = ConvSpec.from_module(module)
    case = Case(spec, shape, dtype, fmt)
    kw = dict(direction="backward_data", dtype=dtype, memory_format=fmt)
    listed = list_ahead(spec, shape, **kw)
    assert listed.out.plans and all(p.status != "SUCCESS" for p in listed.out.plans), "listed, none built"
    with ThreadPoolExecutor(1) as pool:
        built = pool.submit(listed.build, 2).result()
    mine = cudnn_algos.find_engines(spec, shape, **kw)

    def key(r):
        return (r.engine_id, r.knobs, r.sources, r.heuristic_ranks, r.status, r.workspace_bytes)

    res = cudnn_algos.find_engines(spec, shape, built=built, **kw)
    assert [key(r) for r in res.rows] == [key(r) for r in mine.rows]
    res = cudnn_algos.find_engines(spec, shape, built=built, measure=True, screen=2, repeats=3, **kw)
    assert res.best is not None and res.best.kernel_ms > 0
    assert not _check_all(res, case, "backward_data")
    with pytest.raises(ValueError, match="built= holds the plans of another search"):
        cudnn_algos.find_engines(spec, shape, built=built, direction="forward", dtype=dtype, memory_format=fmt)


def test_a_sweep_task_sharing_its_gpu_measures_inside_its_turn(tmp_path):
    """sweep Note [sharing a GPU]: find_engines enters its gpu_turn once, after the plans are built, and measures
    inside it; a sweep task with share_gpu measures as usual and says how long it waited for its turn."""
    from cudnn_algos.sweep import GpuTurn, measure_task

    entered = []

    class Spy(GpuTurn):
        def __enter__(self):
            entered.append(True)
            return super().__enter__()

    spy = Spy("test", str(tmp_path))
    module, shape, dtype, fmt = CASES["3x3-fp16-nhwc"]
    res = cudnn_algos.find_engines(module, shape, dtype=dtype, memory_format=fmt, measure=True, screen=2, repeats=3,
                                   gpu_turn=spy)
    assert len(entered) == 1 and spy.held > 0 and spy.waited < 5
    assert res.best is not None and res.best.kernel_ms is not None and res.best.kernel_ms > 0
    task = {"key": "turn test", "spec": ConvSpec(32, 32, (3, 3), padding=1).to_dict(), "input_shape": [2, 32, 12, 12],
            "dtype": "float16", "memory_format": "channels_last", "direction": "forward"}
    out = measure_task(task, {"share_gpu": True, "turn_dir": str(tmp_path)})
    assert out["status"] == "done", out.get("reason")
    assert out["stages"]["gpu_wait"] >= 0
    assert any(r["candidate_kind"] == "engine" and (r.get("kernel_median_ms") or 0) > 0 for r in out["rows"])


def test_timing_turns_hold_the_gpu_alone_for_every_timed_call(tmp_path, monkeypatch):
    """sweep Note [timing turns]: with scope "timing" the turn is shared for the untimed work and exclusive around
    every kernel-clock session and torch's first call; the task measures as usual and reports its exclusive
    seconds and holds, by step."""
    import cudnn_algos.engines as engines_mod
    import cudnn_algos.measure.pipeline as pipeline
    from cudnn_algos.sweep import GpuTurn, measure_task

    turn = GpuTurn("test", str(tmp_path), scope="timing")
    seen = []
    real_clock, real_first = pipeline.kernel_clock, engines_mod._torch_first_call

    def clock(*a, **k):
        seen.append(("clock", turn.exclusive))
        return real_clock(*a, **k)

    def first(*a, **k):
        seen.append(("torch first call", turn.exclusive))
        return real_first(*a, **k)

    monkeypatch.setattr(pipeline, "kernel_clock", clock)
    monkeypatch.setattr(engines_mod, "_torch_first_call", first)
    module, shape, dtype, fmt = CASES["3x3-fp16-nhwc"]
    res = cudnn_algos.find_engines(module, shape, dtype=dtype, memory_format=fmt, measure=True, screen=2, repeats=3,
                                   gpu_turn=turn, lean=True, refine=1)
    assert res.best is not None and res.best.kernel_ms is not None and res.best.kernel_ms > 0
    assert {k for k, _ in seen} == {"clock", "torch first call"} and all(alone for _, alone in seen), seen
    assert 0 < turn.timed < turn.held and not turn.exclusive
    task = {"key": "timing turn test", "spec": ConvSpec(32, 32, (3, 3), padding=1).to_dict(),
            "input_shape": [2, 32, 12, 12], "dtype": "float16", "memory_format": "channels_last",
            "direction": "forward"}
    out = measure_task(task, {"share_gpu": True, "turn_dir": str(tmp_path), "turn_scope": "timing", "lean": True,
                              "legacy": False})
    assert out["status"] == "done", out.get("reason")
    assert 0 < out["stages"]["gpu_timed"] < out["stages"]["engine_timing"]
    # one hold alone each for the screen, the refine and the confirm (torch's search with it), by step
    assert 1 <= out["stages"]["gpu_holds"] <= 4 and out["stages"]["timed_screen"] > 0
    assert out["stages"]["timed_confirm"] > 0
    # the untimed GPU work (operands, the reference, the lean screen's accuracy calls) held shared
    assert out["stages"]["gpu_shared"] > 0


def _misaligned(t: torch.Tensor, fmt) -> torch.Tensor:
    """`t`'s values in a dense view of its layout that starts one element into a larger buffer (2 bytes for fp16):
    not 16-byte aligned, and not copied by .contiguous()."""
    dense = t.contiguous(memory_format=fmt)
    buf = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
    v = buf.as_strided(dense.size(), dense.stride(), storage_offset=1)
    v.copy_(dense)
    assert v.data_ptr() % 16 and v.is_contiguous(memory_format=fmt)
    return v


@pytest.mark.parametrize("name", ["3x3-fp16-nhwc", "3x3-fp32"])
def test_run_on_misaligned_operands_matches_pytorch(name):
    """Note [16-byte operands] (csrc/pinned/ops.cpp): every built plan of every direction run through run() on
    operands that are views at an offset breaking 16-byte alignment: each matches PyTorch as on aligned operands
    (the plans are declared for 16-byte aligned tensors; run() copies such an operand first)."""
    module, shape, dtype, fmt = CASES[name]
    spec = ConvSpec.from_module(module)
    case = Case(spec, shape, dtype, fmt)
    failures = []
    for d in cudnn_algos.DIRECTIONS:
        res = cudnn_algos.find_engines(spec, shape, direction=d, dtype=dtype, memory_format=fmt,
                                       runtime_compiled=False)
        ref = case.reference(d)
        tol = max(TOL[dtype], ERR_FACTOR * rel_err(case.torch_gpu(d), ref))
        kw = {k: (_misaligned(v, fmt) if isinstance(v, torch.Tensor) and v.dim() == 4 else v)
              for k, v in case.run_kwargs(d).items()}
        assert any(isinstance(v, torch.Tensor) for v in kw.values())
        for row in res.succeeded:
            out = cudnn_algos.run(spec, row, direction=d, **kw)
            if not torch.isfinite(out).all() or (e := rel_err(out, ref)) > tol:
                failures.append(f"{d} {row.name}: {'non-finite' if not torch.isfinite(out).all() else f'{e:.2e}'}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("name", ["3x3-fp16-nhwc", "1x1s2-bf16"])
def test_a_lean_screen_checks_and_times_every_row_like_the_full_one(name):
    """find_engines(lean=True) (Note [a lean screen]): the same configurations built, every one checked and timed
    (a relative error and a kernel time on each row that has one in the full screen), the screened rows without a
    host time, the confirmed ones with their full samples."""
    module, shape, dtype, fmt = CASES[name]
    kw = dict(dtype=dtype, memory_format=fmt, measure=True, repeats=3, screen=2)
    full = cudnn_algos.find_engines(module, shape, **kw)
    lean = cudnn_algos.find_engines(module, shape, lean=True, **kw)
    assert {r.name for r in lean.rows} == {r.name for r in full.rows}
    timed_full = {r.name for r in full.succeeded if r.kernel_ms is not None}
    timed_lean = {r.name for r in lean.succeeded if r.kernel_ms is not None}
    assert timed_lean == timed_full and timed_lean
    for r in lean.succeeded:
        if r.kernel_ms is None:
            continue
        m = r.measured
        assert m.rel_err is not None and m.rel_err < 1e-2, (r.name, m.rel_err, m.error)
        assert (m.host_ms is not None) == m.confirmed, r.name
    assert lean.best.measured.confirmed and lean.best.measured.host_ms.n == 3


def test_a_lean_screen_fails_the_rows_whose_output_check_fails():
    """_checked_together on real CUDA tensors (no cuDNN: stand-in calls that write the output right, leave it
    poisoned, or write into a guard): the right one gets its error against the reference and an estimate, the
    others a failed row naming what went wrong and no estimate."""
    from cudnn_algos.measure.pipeline import _checked_together
    from cudnn_algos.measure.runnable import Runnable, guarded_like

    ref = torch.randn(4, 8, device="cuda", dtype=torch.float64)

    def fake(kind):
        def guarded():
            out, guards = guarded_like(torch.empty(4, 8, device="cuda", dtype=torch.float16))
            out.fill_(float("nan"))
            if kind != "unwritten":
                out.copy_(ref)
            if kind == "outside":
                guards[1][:3].fill_(0.0)
            return out, guards
        return Runnable(lambda i: None, lambda k: (0.0, 0.0), lambda: None, heuristic_rank=7, guarded_output=guarded)

    (ok, est), (unwritten, est_u), (outside, est_o) = _checked_together(
        [fake("right"), fake("unwritten"), fake("outside")], ref, 0)
    assert ok.rel_err is not None and ok.rel_err < 1e-3 and est > 0 and not ok.error and ok.heuristic_rank == 7
    assert est_u is None and "left 32 of 32 output elements unwritten" in unwritten.error
    assert est_o is None and "wrote outside its output buffer: 3 of" in outside.error and "after" in outside.error
