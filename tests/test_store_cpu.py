"""CPU: a run is never lost. profile()'s store keeps every finished search as one JSON line the moment it exists; an
interrupted profile resumes without measuring again what was stored; a line cut short by a kill, or from another
environment, is skipped. The searches here are hand-made stand-ins for find_engines (conftest's builders): what is
tested is the bookkeeping, not cuDNN."""
from dataclasses import replace

import pytest
import torch

from cudnn_algos import model
from cudnn_algos.errors import CudnnError
from cudnn_algos.model import profiling
from cudnn_algos.model import ResultStore


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.b = torch.nn.Conv2d(8, 16, 1)
        self.c = torch.nn.Conv2d(16, 16, 3, padding=1)

    def forward(self, x):
        return self.c(self.b(self.a(x)))


class _FakeListed:
    """engines.list_ahead's stand-in: its build() says what it was built for (the thread that lists is recorded)."""
    listed_on: list = []
    built_on: list = []

    def __init__(self, spec, shape, *, direction, **kw):
        import threading

        self.what = ("built", str(spec), direction)
        _FakeListed.listed_on.append(threading.current_thread().name)

    def build(self, threads):
        import threading

        _FakeListed.built_on.append(threading.current_thread().name)
        return self.what


@pytest.fixture
def fake_gpu(monkeypatch, make):
    """find_engines replaced by a counter returning hand-made results; no device work anywhere."""
    calls = []
    stop_after = {"n": None}

    def fake_find_engines(spec, shape, *, direction, **kw):
        if stop_after["n"] is not None and len(calls) >= stop_after["n"]:
            raise KeyboardInterrupt
        calls.append((str(spec), direction))
        return make.engine_result(direction=direction, spec=spec, shape=shape)

    monkeypatch.setattr(profiling, "find_engines", fake_find_engines)
    monkeypatch.setattr(profiling, "list_ahead", _FakeListed)
    monkeypatch.setattr(profiling, "device_index", lambda device: 0)
    monkeypatch.setattr(profiling, "environment", lambda dev: make.env)
    return calls, stop_after


def _profile(store):
    return model.profile(_Net(), torch.randn(2, 8, 8, 8), directions=("forward", "backward_data"), torch_off=False,
                          end_to_end_check=False, progress=False, store=str(store), name="net")


def test_an_interrupted_profile_resumes_without_measuring_again(fake_gpu, tmp_path):
    calls, stop_after = fake_gpu
    store = tmp_path / "run.jsonl"
    stop_after["n"] = 3  # Ctrl-C during the 4th search
    first = _profile(store)
    assert first.interrupted and len(calls) == 3
    assert len(store.read_text().splitlines()) == 3, "every finished search is on disk"
    assert [len(p.engines) for p in first.problems] == [2, 1], "the partial problem is in the report too"
    stop_after["n"] = None
    calls.clear()
    again = _profile(store)
    assert not again.interrupted and len(calls) == 3, "only the 3 searches the store lacks are run"
    assert len(store.read_text().splitlines()) == 6
    assert [len(p.engines) for p in again.problems] == [2, 2, 2]
    calls.clear()
    third = _profile(store)
    assert calls == [] and third.totals() == again.totals()


def test_a_line_cut_short_or_from_elsewhere_is_skipped(fake_gpu, tmp_path, make):
    store = tmp_path / "run.jsonl"
    _profile(store)
    lines = store.read_text().splitlines()
    store.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])  # killed mid-write
    s = ResultStore(str(store), make.env)
    assert len(s) == 5 and s.skipped == 1
    other = ResultStore(str(store), replace(make.env, gpu_name="Another GPU"))
    assert len(other) == 0 and other.skipped == 6, "results from another GPU are never reused"


def test_a_time_budget_stops_cleanly_and_a_rerun_continues(fake_gpu, tmp_path, monkeypatch):
    calls, _ = fake_gpu
    store = tmp_path / "run.jsonl"
    clock = iter(range(0, 1000, 10))  # every perf_counter() call advances 10 s
    monkeypatch.setattr(profiling.time, "perf_counter", lambda: float(next(clock)))
    r = model.profile(_Net(), torch.randn(2, 8, 8, 8), directions=("forward", "backward_data"), torch_off=False,
                       end_to_end_check=False, progress=False, store=str(store), budget_s=25)
    assert r.interrupted and r.stopped_by == "budget" and 0 < len(calls) < 6
    assert "STOPPED EARLY (the time budget ran out)" in str(r)
    monkeypatch.undo()
    with pytest.raises(ValueError, match="budget_s=0"):
        model.profile(_Net(), torch.randn(2, 8, 8, 8), budget_s=0)


def test_a_resume_after_a_cut_last_line_never_glues_the_next_search_onto_it(fake_gpu, tmp_path):
    calls, _ = fake_gpu
    store = tmp_path / "run.jsonl"
    _profile(store)
    text = store.read_text()
    lines = text.splitlines()
    store.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])  # killed mid-write
    calls.clear()
    with pytest.warns(RuntimeWarning, match="reusing 5 search.*skipped 1 damaged line"):
        _profile(store)
    assert len(calls) == 1, "only the search whose line was cut is measured again"
    calls.clear()
    with pytest.warns(RuntimeWarning, match="reusing 6 search.*skipped 1 damaged line"):
        _profile(store)  # the resumed search's line was not glued onto the fragment: nothing measured again
    assert calls == []


@pytest.mark.parametrize("line", [b"\xff\xfe not utf-8", b"null", b"42", b"[1, 2, 3]", b'"text"', b"{}",
                                  b'{"key": "k"}', b'{"key": "k", "result": 5, "schema": 3}',
                                  b"[" * 100000 + b"]" * 100000])
def test_a_store_line_of_any_kind_is_skipped_and_counted_never_a_crash(make, tmp_path, line):
    store = tmp_path / "run.jsonl"
    store.write_bytes(line + b"\n")
    with pytest.warns(RuntimeWarning, match="reusing 0 search"):
        s = ResultStore(str(store), make.env)
    assert len(s) == 0 and s.skipped == 1  # damaged, or (the schema-3 line without an env) from elsewhere


def test_a_directory_as_the_store_is_one_clear_error(make, tmp_path):
    from cudnn_algos.errors import ResultFileError

    with pytest.raises(ResultFileError, match="is a directory"):
        ResultStore(str(tmp_path), make.env)


def _recording(monkeypatch, make, calls: list, arg: str) -> list:
    """find_engines replaced by a stand-in that records each search (in `calls`) and the value of its keyword `arg`
    (in the list returned)."""
    seen = []

    def fake_find_engines(spec, shape, *, direction, **kw):
        seen.append(kw[arg])
        calls.append((str(spec), direction))
        return make.engine_result(direction=direction, spec=spec, shape=shape)

    monkeypatch.setattr(profiling, "find_engines", fake_find_engines)
    return seen


def test_build_threads_reach_every_search_and_leave_the_store_key_alone(fake_gpu, tmp_path, monkeypatch, make):
    """build_threads changes how fast plans are built, not which rows a search has: every search gets it, and a
    store written with one count is taken whole by a re-run with another."""
    calls, _ = fake_gpu
    seen = _recording(monkeypatch, make, calls, "build_threads")
    store = tmp_path / "run.jsonl"
    kw = dict(directions=("forward",), torch_off=False, end_to_end_check=False, progress=False, store=str(store))
    model.profile(_Net(), torch.randn(2, 8, 8, 8), build_threads=5, **kw)
    assert seen == [5, 5, 5]
    seen.clear()
    model.profile(_Net(), torch.randn(2, 8, 8, 8), **kw)
    assert seen == [], "the store's searches are reused whatever build_threads was"
    store.unlink()
    model.profile(_Net(), torch.randn(2, 8, 8, 8), **kw)
    assert seen == [profiling.default_build_threads()] * 3 and 1 <= seen[0] <= 8
    for bad, err in ((0, ValueError), (65, ValueError), (2.0, TypeError), (True, TypeError)):
        with pytest.raises(err, match="build_threads"):
            model.profile(_Net(), torch.randn(2, 8, 8, 8), build_threads=bad, **kw)


def test_each_search_gets_the_plans_built_ahead_for_it_and_stored_ones_are_not_built(fake_gpu, tmp_path, monkeypatch,
                                                                                      make):
    """The next search's plans are built on a thread while one is timed (engines.list_ahead and Listed.build,
    stand-ins here): every search's lists are asked on the timing thread while the other is idle (list B's query must
    not run beside another thread's CUDA work); the first search's plans are built there too, every later one gets
    those built ahead for it; searches a store holds are neither listed nor built; an error building them is the
    search's error, as if find_engines had raised it, and a failed listing leaves the search to find_engines."""
    import threading

    calls, _ = fake_gpu
    got = _recording(monkeypatch, make, calls, "built")
    _FakeListed.listed_on.clear()
    _FakeListed.built_on.clear()
    store = tmp_path / "run.jsonl"
    kw = dict(directions=("forward", "backward_data"), torch_off=False, end_to_end_check=False, progress=False)
    model.profile(_Net(), torch.randn(2, 8, 8, 8), store=str(store), **kw)
    assert got == [("built", s, d) for s, d in calls] and len(got) == 6
    assert _FakeListed.listed_on == [threading.current_thread().name] * 6
    assert _FakeListed.built_on[0] == threading.current_thread().name
    assert all(t.startswith("cudnn_algos-build-ahead") for t in _FakeListed.built_on[1:])
    _FakeListed.built_on.clear()
    monkeypatch.setattr(profiling, "find", lambda spec, shape, *, direction, **k: make.legacy_result(
        direction=direction))
    model.profile(_Net(), torch.randn(2, 8, 8, 8), legacy=True, **kw)
    assert _FakeListed.built_on == [threading.current_thread().name] * 6, "beside the legacy search: none ahead"
    lines = store.read_text().splitlines()
    store.write_text("\n".join(lines[:2] + lines[3:]) + "\n")  # the third search is no longer stored
    got.clear()
    _FakeListed.listed_on.clear()
    model.profile(_Net(), torch.randn(2, 8, 8, 8), store=str(store), **kw)
    assert got == [("built",) + calls[-1]] and len(_FakeListed.listed_on) == 1, "stored ones: not listed or built"

    class Broken(_FakeListed):
        def build(self, threads):
            raise CudnnError("building failed: CUDNN_STATUS_INTERNAL_ERROR", "CUDNN_STATUS_INTERNAL_ERROR")

    monkeypatch.setattr(profiling, "list_ahead", Broken)
    r = model.profile(_Net(), torch.randn(2, 8, 8, 8), **kw)
    assert not r.interrupted and [sorted(p.errors) for p in r.problems] == [["backward_data", "forward"]] * 3
    assert "INTERNAL_ERROR" in r.problems[1].errors["forward"]

    def unlisted(spec, shape, *, direction, **k):
        raise CudnnError("listing failed: CUDNN_STATUS_BAD_PARAM", "CUDNN_STATUS_BAD_PARAM")

    monkeypatch.setattr(profiling, "list_ahead", unlisted)
    got.clear()
    r = model.profile(_Net(), torch.randn(2, 8, 8, 8), **kw)
    assert got == [None] * 6 and not any(p.errors for p in r.problems)


def test_a_lost_cuda_context_stops_the_profile_with_what_was_done_and_says_where(fake_gpu, tmp_path, monkeypatch,
                                                                                  make):
    """CPU (find_engines replaced; the fault is CudaContextLost, as the measuring pipeline raises it): after a
    kernel fault no GPU work can run in the process, so the profile stops at once (it went on failing every later
    search), keeps the finished searches, and its report and the failed search say what ran."""
    from cudnn_algos.errors import CudaContextLost

    calls, _ = fake_gpu

    def fake_find_engines(spec, shape, *, direction, **kw):
        calls.append((str(spec), direction))
        if len(calls) == 2:
            raise CudaContextLost.after(f"{spec} {direction} | eng20{{TILE_SIZE=6,USE_TEX=1}} (accuracy check)",
                                        RuntimeError("CUDA error: an illegal memory access was encountered"))
        return make.engine_result(direction=direction, spec=spec, shape=shape)

    monkeypatch.setattr(profiling, "find_engines", fake_find_engines)
    r = model.profile(_Net(), torch.randn(2, 8, 8, 8), directions=("forward", "backward_data"), torch_off=False,
                      end_to_end_check=False, progress=False, store=str(tmp_path / "run.jsonl"))
    assert len(calls) == 2 and r.interrupted and r.stopped_by == "context-lost"
    assert len(r.problems) == 1 and "eng20{TILE_SIZE=6,USE_TEX=1}" in r.problems[0].errors["backward_data"]
    assert "the CUDA context is lost" in str(r) and "STOPPED EARLY (a kernel faulted" in str(r)


def test_a_candidate_whose_fault_lost_the_context_is_no_row_but_an_error_naming_it():
    """CPU: measure_rows turns a candidate's failure into a row saying so; a fault that lost the CUDA context
    (every later call fails the same way) is raised instead, naming the candidate, and other failures stay rows."""
    from cudnn_algos.errors import CudaContextLost, is_context_lost
    from cudnn_algos.measure import pipeline
    from cudnn_algos.measure.runnable import Runnable

    r = Runnable(call=None, loop=None, output=None, label="Conv2d(8, 8, 3) forward | eng20{USE_TEX=1}")
    with pytest.raises(CudaContextLost, match=r"eng20\{USE_TEX=1\} \(accuracy check\)") as e:
        pipeline._failed(r, RuntimeError("CUDA error: an illegal memory access was encountered"), 0, "accuracy check")
    assert is_context_lost(e.value) and e.value.culprit.startswith("Conv2d(8, 8, 3)")
    row = pipeline._failed(r, RuntimeError("CUDNN_STATUS_NOT_SUPPORTED"), 0, "first timed call")
    assert row.error.startswith("first timed call: RuntimeError")
    assert not is_context_lost(ValueError("out of memory"))
