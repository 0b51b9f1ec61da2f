"""CPU: the tuning database (keys, hits, misses, another GPU or version never used, concurrent writers, corrupt and
foreign files, export/import) and apply()/undo with the operator's CPU and meta kernels (on the CPU the operator runs
torch's convolution; what it runs on the GPU is in test_gpu_apply.py). No GPU, no cuDNN search here."""
import contextlib
import json
import multiprocessing as mp
import os
import sqlite3
import warnings
from dataclasses import replace

import pytest
import torch

import cudnn_algos
from cudnn_algos.errors import TuningDBForeign
from cudnn_algos.problem import Environment
from cudnn_algos.tuning import TORCH_WINNER, TuningDB, env_key, module_args, winner_entry


def _env(cudnn=91900, gpu="NVIDIA H200"):
    return Environment(gpu_name=gpu, compute_capability="9.0", device_index=0, driver_version="580.159.04",
                       cuda_driver_api=13000, cuda_runtime=13000, cudnn_runtime=cudnn, cudnn_build=cudnn,
                       cudnn_library=None, torch_version="2.11.0+cu130", torch_cuda="13.0")


def _winner(key, env=None, config="eng62{TILE_SIZE=1}", ms=0.02, settings="{}", at="2026-11-30T00:00:00+00:00"):
    return {"env": env_key(env or _env()), "key": key, "settings": settings, "direction": "forward",
            "config": config, "engine_id": 62, "knobs": json.dumps([[2, 1]]), "kernel_ms": ms, "measured_at": at}


def test_winners_are_keyed_by_environment_and_problem(tmp_path):
    with TuningDB(tmp_path / "t.sqlite") as db:
        db.put(_winner("forward k1"), [{"env": env_key(_env()), "key": "forward k1", "settings": "{}",
                                        "name": "eng62{TILE_SIZE=1}", "kernel_ms": 0.02}])
        assert db.winner(env_key(_env()), "forward k1")["config"] == "eng62{TILE_SIZE=1}"
        assert db.winner(env_key(_env()), "forward k2") is None  # a miss
        assert db.winner(env_key(_env(cudnn=92400)), "forward k1") is None  # another cuDNN: never used
        assert db.winner(env_key(_env(gpu="NVIDIA A100")), "forward k1") is None  # another GPU
        db.put(_winner("forward k1", config="eng58{WORKSPACE=0}", at="2026-12-01T00:00:00+00:00", settings="{\"n\": 1}"))
        assert db.winner(env_key(_env()), "forward k1")["config"] == "eng58{WORKSPACE=0}"  # the newest
        assert db.info()["winners"] == 2 and db.info()["candidates"] == 1


def _writer(path, i):
    try:
        with TuningDB(path) as db:
            for j in range(20):
                db.put(_winner(f"forward p{i}-{j}"), [{"env": env_key(_env()), "key": f"forward p{i}-{j}",
                                                      "settings": "{}", "name": "eng0", "kernel_ms": 0.1}])
    except BaseException as e:  # the parent's assertion says what went wrong in this process
        with open(f"{path}.writer{i}.err", "w") as f:
            f.write(f"{type(e).__name__}: {e}")
        raise


def _exporter(path, i, stop):
    """Reads the whole database again and again while the writers write (export: one read transaction each)."""
    try:
        while not stop.is_set():
            if os.path.exists(path):
                with TuningDB(path, read_only=True) as db:
                    db.export(f"{path}.export{i}.jsonl")
    except BaseException as e:
        with open(f"{path}.writer{8 + i}.err", "w") as f:
            f.write(f"{type(e).__name__}: {e}")
        raise


def test_several_processes_writing_at_once_lose_nothing(tmp_path):
    """8 writers and 3 readers exporting the whole database at the same time: every put lands (Note [a lock wait
    that waits], tuning/db.py)."""
    path = str(tmp_path / "t.sqlite")
    TuningDB(path).close()
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    procs = [ctx.Process(target=_writer, args=(path, i)) for i in range(8)]
    readers = [ctx.Process(target=_exporter, args=(path, i, stop)) for i in range(3)]
    for p in procs + readers:
        p.start()
    for i, p in enumerate(procs):
        p.join(120)
    stop.set()
    for p in readers:
        p.join(120)
    for i, p in enumerate(procs + readers):
        err = tmp_path / f"t.sqlite.writer{i}.err"
        assert p.exitcode == 0, err.read_text() if err.exists() else f"process {i} exit {p.exitcode}"
    with TuningDB(path) as db:
        assert len(db.winners()) == 160 and len(db.candidates()) == 160


def test_an_empty_file_becomes_a_database_and_another_file_is_refused(tmp_path):
    path = tmp_path / "t.sqlite"
    path.write_bytes(b"")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an empty file holds nothing to move aside
        db = TuningDB(path)
    db.put(_winner("forward k"))
    assert db.winner(env_key(_env()), "forward k") is not None
    db.close()
    other = tmp_path / "o.sqlite"
    other.write_bytes(b"this is not a database" * 100)
    with pytest.raises(TuningDBForeign, match="is not an SQLite database"):
        TuningDB(other)
    assert other.read_bytes() == b"this is not a database" * 100 and len(list(tmp_path.iterdir())) == 2


def test_export_import_round_trip(tmp_path):
    with TuningDB(tmp_path / "a.sqlite") as a:
        for i in range(3):
            a.put(_winner(f"forward k{i}"), [{"env": env_key(_env()), "key": f"forward k{i}", "settings": "{}",
                                              "name": f"eng{i}", "kernel_ms": 0.1 * i}])
        assert a.export(tmp_path / "x.jsonl") == 3
        with TuningDB(tmp_path / "b.sqlite") as b:
            assert b.import_(tmp_path / "x.jsonl") == 3
            assert b.winners() == a.winners() and sorted(map(str, b.candidates())) == sorted(map(str, a.candidates()))
    (tmp_path / "bad.jsonl").write_text('{"something": 1}\n')
    with TuningDB(tmp_path / "c.sqlite") as c, pytest.raises(ValueError, match="not a cudnn_algos tuning export"):
        c.import_(tmp_path / "bad.jsonl")


def test_default_path_follows_the_environment_variable_then_xdg(monkeypatch, tmp_path):
    from cudnn_algos.tuning import default_path

    monkeypatch.setenv("CUDNN_ALGOS_DB", str(tmp_path / "mine.sqlite"))
    assert default_path() == tmp_path / "mine.sqlite"
    monkeypatch.delenv("CUDNN_ALGOS_DB")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert default_path() == tmp_path / "cache" / "cudnn_algos" / "tuning.sqlite"


def test_winner_is_the_fastest_torch_would_accept_or_torch_when_it_was_faster(make):
    rows = (make.engine_row(1, ms=0.010, name="eng1{TILE_SIZE=0}"), make.engine_row(2, ms=0.012, name="eng2"),
            make.engine_row(3, ms=0.005, name="eng3", torch_filter="nondeterministic"))
    rows = tuple(replace(r, measured=replace(r.measured, confirmed=True)) for r in rows)
    res = make.engine_result(rows=rows, torch_runs=(make.torch_run(ms=0.011),))
    w, cands = winner_entry(res, _env(), "forward k", "{}")
    assert w["config"] == "eng1{TILE_SIZE=0}" and w["engine_id"] == 1 and json.loads(w["knobs"]) == [[2, 0]]
    assert w["runner_up"] == "eng2" and w["torch_on_ms"] == pytest.approx(0.011)
    assert [c["name"] for c in cands] == ["eng1{TILE_SIZE=0}", "eng2", "eng3"]  # every candidate is kept
    res2 = make.engine_result(rows=rows, torch_runs=(make.torch_run(ms=0.008),))
    w2, _ = winner_entry(res2, _env(), "forward k", "{}")
    assert w2["config"] == TORCH_WINNER and w2["engine_id"] == -1 and w2["runner_up"] == "eng1{TILE_SIZE=0}"
    # torch's op faster, but within the margin (Note [torch's op as the winner]): the configuration is stored
    res3 = make.engine_result(rows=rows, torch_runs=(make.torch_run(ms=0.0098),))
    assert winner_entry(res3, _env(), "forward k", "{}")[0]["config"] == "eng1{TILE_SIZE=0}"
    assert winner_entry(res3, _env(), "forward k", "{}", torch_margin=0.0)[0]["config"] == TORCH_WINNER


def test_reselect_applies_another_torch_margin_from_what_is_stored_and_back(make, tmp_path, capsys):
    rows = (make.engine_row(1, ms=0.010, name="eng1{TILE_SIZE=0}"), make.engine_row(2, ms=0.012, name="eng2"),
            make.engine_row(3, ms=0.005, name="eng3", torch_filter="nondeterministic"))
    rows = tuple(replace(r, measured=replace(r.measured, confirmed=True)) for r in rows)
    settings = json.dumps({"search": "full", "torch_margin": 0.03}, sort_keys=True)
    near = winner_entry(make.engine_result(rows=rows, torch_runs=(make.torch_run(ms=0.0098),)), _env(), "forward a",
                        settings)  # torch's op 2% faster: within 3%, the configuration is stored
    quick = winner_entry(make.engine_result(rows=rows, torch_runs=()), _env(), "forward q", settings)
    path = tmp_path / "t.sqlite"
    with TuningDB(path) as db:
        db.put(*near)
        db.put(*quick)
        assert db.reselect(0.0) == {"to_config": 0, "to_torch": 1, "unchanged": 1, "skipped": 0}
        w = db.winner(env_key(_env()), "forward a")
        assert w["config"] == TORCH_WINNER and w["engine_id"] == -1 and w["kernel_ms"] == pytest.approx(0.0098)
        assert w["runner_up"] == "eng1{TILE_SIZE=0}" and w["runner_up_ms"] == pytest.approx(near[0]["kernel_ms"])
        assert json.loads(w["settings"])["torch_margin"] == 0.0
        assert {c["settings"] for c in db.candidates() if c["key"] == "forward a"} == {w["settings"]}
        assert db.winner(env_key(_env()), "forward q")["config"] == quick[0]["config"]  # torch's op not compared
        assert db.reselect(0.03) == {"to_config": 1, "to_torch": 0, "unchanged": 1, "skipped": 0}
        back = db.winner(env_key(_env()), "forward a")
    # back where tune() stored it: the same winner, knobs, times, error and runner-up (from the stored candidates)
    for k in ("config", "engine_id", "knobs", "kernel_ms", "host_ms", "rel_err", "runner_up", "runner_up_ms",
              "settings", "torch_on_ms"):
        assert back[k] == pytest.approx(near[0][k]) if isinstance(near[0][k], float) else back[k] == near[0][k], k
    from cudnn_algos.cli import main

    assert main(["db", "reselect", "--db", str(path)]) == 2  # the margin is needed: a usage error
    assert main(["db", "reselect", "--torch-margin", "1.5", "--db", str(path)]) == 2
    assert main(["db", "reselect", "--torch-margin", "0", "--db", str(path)]) == 0
    assert "1 now torch's op" in capsys.readouterr().out
    with TuningDB(path) as db, pytest.raises(ValueError, match="torch_margin"):
        db.reselect(-0.1)
    # a second search of the same problem under the other margin: neither overwrites the other
    with TuningDB(path) as db:
        db.put(*winner_entry(make.engine_result(rows=rows, torch_runs=(make.torch_run(ms=0.0098),)), _env(),
                             "forward a", settings))
        assert db.reselect(0.0) == {"to_config": 0, "to_torch": 0, "unchanged": 2, "skipped": 1}
        assert len([w for w in db.winners() if w["key"] == "forward a"]) == 2


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.b = torch.nn.Conv2d(8, 8, 3, padding="same", groups=4, bias=False)
        self.c = torch.nn.Conv2d(8, 8, 4, padding="same")  # even kernel: asymmetric padding, left to torch
        self.d = torch.nn.Conv2d(8, 8, 3, padding=1, padding_mode="reflect")
        self.e = torch.nn.Conv1d(8, 4, 5, stride=2, dilation=2)

    def forward(self, x):
        y = self.d(self.c(self.b(self.a(x)).relu()))
        return self.e(y.flatten(2)).sum(-1)


def test_apply_runs_the_operator_matches_torch_and_undo_restores_exactly(tmp_path):
    torch.manual_seed(0)
    net, x = _Net(), torch.randn(2, 3, 8, 8)
    ref = net(x)
    ref.pow(2).sum().backward()
    ref_grads = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    before = {n: dict(m.__dict__) for n, m in net.named_modules()}
    with cudnn_algos.apply(net, tmp_path / "t.sqlite") as h:
        assert h.modules == ["a", "b", "e"] and set(h.skipped) == {"c", "d"}
        assert "asymmetric" in h.skipped["c"] and "reflect" in h.skipped["d"]
        with torch.autograd.profiler.profile() as prof:
            out = net(x)
        assert sum(e.name == "cudnn_algos::conv" for e in prof.function_events) == 3
        torch.testing.assert_close(out, ref)
        out.pow(2).sum().backward()
        for p, g in zip(net.parameters(), ref_grads):
            torch.testing.assert_close(p.grad, g)
    assert {n: dict(m.__dict__) for n, m in net.named_modules()} == before  # no forward left behind
    torch.testing.assert_close(net(x), ref)


def test_host_stage_names_are_the_documented_ones_and_counts_carry_execute_time():
    # (the GPU test reads stages by name: a renamed stage failed there, not here, once)
    documented = ["operands", "resolve", "alloc", "handle", "workspace", "variant_pack", "cudnn_execute", "count",
                  "torch_op", "bias"]
    for name in documented:
        assert name in cudnn_algos.Applied.host_stages.__doc__
    cudnn_algos.Applied.time_host(True)
    try:
        st = cudnn_algos.Applied.host_stages()
    finally:
        cudnn_algos.Applied.time_host(False)
    assert list(st["us"]) == documented
    assert st["forward_calls"] == st["backward_calls"] == 0  # the CPU kernel is torch's: no CUDA kernel calls
    net, x = _Net(), torch.randn(2, 3, 8, 8)
    with cudnn_algos.apply(net, ":memory:") as h:
        h.reset_counts()
        net(x).sum().backward()
        assert h.counts() == []  # the CPU kernels do not reach the counted CUDA path
        assert h.execute_by_config() == []


def test_execute_by_config_groups_the_timed_calls_by_engine_beside_tune_s_host_time(monkeypatch):
    # the counts are the GPU kernels' (none on the CPU): hand-made here, as pinned_counts gives them
    counts = [{"key": "k1", "timed_calls": 10, "execute_us": 200.0}, {"key": "k2", "timed_calls": 30,
                                                                       "execute_us": 900.0},
              {"key": "k3", "timed_calls": 5, "execute_us": 50.0}, {"key": "k4", "timed_calls": 0, "execute_us": 0}]
    monkeypatch.setattr(cudnn_algos.Applied, "counts", staticmethod(lambda: counts))
    h = cudnn_algos.Applied(modules=[], skipped={}, winners=4, db=":memory:",
                            configs={"k1": "eng62{TILE_SIZE=1}", "k2": "eng62{TILE_SIZE=3}", "k3": "eng58",
                                     "k4": "eng1"},
                            host_ms={"k1": 0.010, "k2": 0.014, "k3": None, "k4": 0.5})
    assert h.execute_by_config() == [
        {"engine": "eng62", "calls": 40, "us_per_call": 27.5, "problems": 2, "alone_us": pytest.approx(12.0)},
        {"engine": "eng58", "calls": 5, "us_per_call": 10.0, "problems": 1, "alone_us": None}]


def test_a_torch_function_mode_still_sees_the_operator_called():
    # the bound fast call (Note [the Python call]) must not hide the call from __torch_function__ overrides
    from torch.overrides import TorchFunctionMode

    seen = []

    class Record(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    m, mt = torch.nn.Conv2d(3, 4, 3), torch.nn.ConvTranspose2d(4, 3, 3)
    x = torch.randn(1, 3, 8, 8)
    with cudnn_algos.apply(m, ":memory:"), cudnn_algos.apply(mt, ":memory:"):
        plain = mt(m(x))
        with Record():
            recorded = mt(m(x))
    assert "cudnn_algos.conv.default" in seen and "cudnn_algos.conv_transpose.default" in seen, seen
    torch.testing.assert_close(recorded, plain)


@pytest.mark.parametrize("dtype,w_shape", [(torch.bool, (4, 3, 3, 3)), (torch.float32, (4, 5, 3, 3))])
def test_the_bound_call_raises_what_torch_ops_raises(dtype, w_shape):
    # Note [the Python call]: errors cross the binding as torch's own (NotImplementedError here, a
    # torch.OutOfMemoryError on the GPU), not as pybind's generic RuntimeError
    from cudnn_algos import backend

    bound = backend.load().BoundConv([1, 1], [0, 0], [], [1, 1], 1, False)
    x, w = torch.ones(1, 3, 8, 8).to(dtype), torch.ones(w_shape).to(dtype)
    with pytest.raises(Exception) as via_ops:
        torch.ops.cudnn_algos.conv.default(x, w, None, [1, 1], [0, 0], [1, 1], 1)
    with pytest.raises(Exception) as via_bound:
        bound(x, w, None)
    assert type(via_bound.value) is type(via_ops.value)
    assert str(via_bound.value).splitlines()[0] == str(via_ops.value).splitlines()[0]


def test_undo_keeps_a_forward_the_user_had_set():
    m = torch.nn.Conv2d(3, 4, 3)
    mine = m.forward
    m.forward = lambda x: mine(x) * 2
    theirs = m.forward
    h = cudnn_algos.apply(m, ":memory:")
    assert m.forward is not theirs
    h.undo()
    assert m.forward is theirs


def test_custom_conv_subclasses_keep_their_forward():
    class WS(torch.nn.Conv2d):  # weight-standardised: its forward is not Conv2d's
        def forward(self, x):
            return super().forward(x) * 0

    m = WS(3, 4, 3)
    h = cudnn_algos.apply(m, ":memory:")
    assert h.modules == [] and "own forward" in h.skipped["<model>"]


def test_module_args_match_torch_padding_rules():
    assert module_args(torch.nn.Conv2d(3, 4, 3, padding="same", dilation=2)) == ([1, 1], [2, 2], [2, 2], 1, None)
    assert module_args(torch.nn.Conv3d(3, 4, 3, padding="valid")) == ([1, 1, 1], [0, 0, 0], [1, 1, 1], 1, None)
    assert isinstance(module_args(torch.nn.Conv2d(3, 4, (2, 3), padding="same")), str)
    assert module_args(torch.nn.ConvTranspose1d(4, 6, 3, stride=2, output_padding=1, groups=2)) == (
        [2], [0], [1], 2, [1])
    assert "padding_mode" in module_args(torch.nn.Conv2d(3, 4, 3, padding_mode="circular"))


@pytest.mark.parametrize("make, shape", [
    (lambda: torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2), (2, 4, 5, 7)),
    (lambda: torch.nn.ConvTranspose1d(3, 5, 4, stride=3, dilation=2, bias=False), (2, 3, 9)),
    (lambda: torch.nn.ConvTranspose3d(2, 4, 3, stride=2), (1, 2, 3, 4, 5)),
])
def test_applied_transposed_layers_match_torch_on_the_cpu_and_meta_kernels(make, shape):
    """CPU: the conv_transpose operator (its CPU kernel is torch's) gives torch's output and gradients, with
    output_size as torch's module takes it; its meta kernel gives torch's shape; the key the operator computes for each
    cuDNN direction is the one tune() stores (a transposed layer's forward is cuDNN's backward-data)."""
    from cudnn_algos import backend
    from cudnn_algos.problem import make_problem
    from cudnn_algos.tuning import problem_key

    torch.manual_seed(0)
    m = make()
    x = torch.randn(shape, requires_grad=True)
    ref = m(x)
    ref.pow(2).sum().backward()
    want = [x.grad.clone()] + [p.grad.clone() for p in m.parameters()]
    x.grad = None
    m.zero_grad()
    with cudnn_algos.apply(m, ":memory:") as h:
        assert h.modules == ["<model>"]
        out = m(x)
        out.pow(2).sum().backward()
        got = [x.grad] + [p.grad for p in m.parameters()]
        a = module_args(m)
        xm, wm = torch.empty(shape, device="meta"), m.weight.detach().to("meta")
        ym = torch.ops.cudnn_algos.conv_transpose(xm, wm, None, a.stride, a.padding, a.output_padding, a.dilation,
                                                  a.groups)
        # output_size picks output_padding as torch's module does (here 0 where the module has 1)
        sized = [r - op for r, op in zip(ref.shape[2:], a.output_padding)]
        assert torch.equal(m(x, output_size=sized), type(m).forward(m, x, output_size=sized))
    assert torch.allclose(out, ref, atol=1e-5)
    assert all(torch.allclose(g, w, atol=1e-4) for g, w in zip(got, want))
    assert ym.shape == ref.shape and ym.device.type == "meta"
    p = make_problem(m, shape)
    for d in ("forward", "backward_data", "backward_filter"):
        for det, tf32 in ((False, True), (True, False)):
            assert problem_key(p, d, det, tf32) == backend.operator_key(
                p.cudnn_direction(d), xm, wm, a.stride, a.padding, a.dilation, a.groups, det, tf32, True,
                a.output_padding)


def test_applied_model_traces_under_torch_compile_with_the_meta_kernel():
    torch.manual_seed(0)
    net, x = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                 torch.nn.Conv2d(8, 4, 1), torch.nn.ConvTranspose2d(4, 4, 2, stride=2)), torch.randn(
                                     2, 3, 8, 8, requires_grad=True)
    ref = net(x)
    with cudnn_algos.apply(net, ":memory:") as h:
        assert len(h.modules) == 3
        compiled = torch.compile(net, backend="aot_eager", fullgraph=True)
        out = compiled(x)
        out.sum().backward()
    torch.testing.assert_close(out, ref)
    assert x.grad is not None and x.grad.abs().sum() > 0
    m = torch.ops.cudnn_algos.conv(torch.empty(2, 3, 9, 9, device="meta"), torch.empty(5, 3, 3, 3, device="meta"),
                                   None, [2, 2], [1, 1], [1, 1], 1)
    assert m.shape == (2, 5, 5, 5) and m.device.type == "meta"


def test_cli_db_info_list_export_import_clear(tmp_path):
    from cudnn_algos.cli import main

    path = tmp_path / "t.sqlite"
    with TuningDB(path) as db:
        db.put(_winner("forward k1"))
    assert main(["db", "info", "--db", str(path)]) == 0
    assert main(["db", "list", "--db", str(path)]) == 0
    assert main(["db", "export", str(tmp_path / "x.jsonl"), "--db", str(path)]) == 0
    assert main(["db", "import", str(tmp_path / "x.jsonl"), "--db", str(tmp_path / "u.sqlite")]) == 0
    assert main(["db", "export", "--db", str(path)]) == 2  # no FILE: a usage error, not a traceback
    assert main(["db", "clear", "--all", "--db", str(path)]) == 0
    with TuningDB(path) as db:
        assert db.winners() == []


def _endless_writer(path):
    with TuningDB(path) as db:
        i = 0
        while True:
            db.put(_winner(f"forward endless{i}"), [{"env": env_key(_env()), "key": f"forward endless{i}",
                                                     "settings": "{}", "name": f"eng{j}", "kernel_ms": 0.1}
                                                    for j in range(20)])
            i += 1


def test_a_writer_killed_with_sigkill_loses_nothing_it_committed(tmp_path):
    """One transaction per stored search: a tune killed mid-write leaves every earlier search intact and the file
    usable; the next run goes on where it stopped."""
    import os
    import signal
    import time

    path = str(tmp_path / "t.sqlite")
    ctx = mp.get_context("spawn")
    p = ctx.Process(target=_endless_writer, args=(path,))
    p.start()
    seen, t0 = 0, time.time()
    while seen < 50 and time.time() - t0 < 60:
        time.sleep(0.05)
        with contextlib.suppress(sqlite3.Error):
            seen = len(TuningDB(path).winners())
    os.kill(p.pid, signal.SIGKILL)
    p.join(10)
    assert seen >= 50
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "moved aside": the file is fine
        db = TuningDB(path)
    n = len(db.winners())
    assert n >= seen and db.con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert all(len([c for c in db.candidates() if c["key"] == w["key"]]) == 20 for w in db.winners())  # whole searches
    db.put(_winner("forward after"))
    assert len(db.winners()) == n + 1
    db.close()


def test_a_truncated_file_is_moved_aside_and_kept(tmp_path):
    path = tmp_path / "t.sqlite"
    with TuningDB(path) as db:
        for i in range(500):
            db.put(_winner(f"forward k{i}"), [{"env": env_key(_env()), "key": f"forward k{i}", "settings": "{}",
                                               "name": f"eng{j}", "kernel_ms": 0.1} for j in range(5)])
        db.con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size // 2)
    with pytest.warns(RuntimeWarning, match="moved aside .*read back into the fresh database"):
        db = TuningDB(path)
    aside = [p for p in tmp_path.iterdir() if ".bad-" in p.name]
    assert len(aside) == 1 and aside[0].stat().st_size == size // 2  # kept for the user, not deleted
    assert len(db.winners()) == db.salvaged.winners < 500  # what read back of the half that is left
    db.close()


class _FakeSearch:
    """find_engines as tune() calls it, without a GPU: a recorded-shape result per call; optionally a cuDNN failure
    for one direction, or Ctrl-C after some calls."""

    def __init__(self, make, fail_direction=None, interrupt_after=None):
        self.make, self.calls, self.fail, self.stop = make, [], fail_direction, interrupt_after

    def __call__(self, spec, shape, *, direction, **kw):
        from cudnn_algos.errors import CudnnError

        if self.stop is not None and len(self.calls) == self.stop:
            raise KeyboardInterrupt
        self.calls.append((str(spec), tuple(shape), direction))
        self.kw = kw
        if direction == self.fail:
            raise CudnnError("cudnnBackendFinalize failed", "CUDNN_STATUS_NOT_SUPPORTED", 9)
        return self.make.engine_result(direction=direction)


@pytest.fixture
def fake_tune(monkeypatch, make):
    import cudnn_algos.tuning.tuner as tuning

    monkeypatch.setattr(tuning, "device_index", lambda device: 0)
    monkeypatch.setattr(tuning, "environment", lambda dev: _env())

    def install(**kw):
        search = _FakeSearch(make, **kw)
        monkeypatch.setattr(tuning, "find_engines", search)
        return search

    return install


def _small_model():
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.Conv2d(8, 8, 3, padding=1),
                               torch.nn.ConvTranspose2d(8, 4, 2, stride=2),
                               torch.nn.Conv2d(4, 4, 3, padding=1, padding_mode="reflect"))


def test_tune_searches_only_what_the_database_lacks_and_stores_every_candidate(fake_tune, tmp_path):
    db = tmp_path / "t.sqlite"
    search = fake_tune()
    model, x = _small_model(), torch.randn(2, 3, 8, 8)
    r = cudnn_algos.tune(model, x, db, progress=False)
    # three distinct problems (the two 8->8 layers share one; the transposed layer is one) x 3 directions; the
    # reflect-padded layer is not something apply() runs, so it is not tuned
    assert (r.searched, r.already, r.unsupported, r.failed, r.interrupted) == (9, 0, 1, {}, False)
    assert len(search.calls) == 9
    # where its time went: cuDNN's plan building as each search reported it, the database writes on our clock
    assert r.build_s == pytest.approx(9 * search.make.engine_result().search_ms / 1e3)
    assert 0 < r.store_s < r.seconds and "building plans" in str(r)
    with TuningDB(db) as t:
        ws = t.winners(env_key(_env()))
        assert len(ws) == 9 and all(w["config"] for w in ws)
        assert len(t.candidates()) == 9 * 4  # every row of every search
        keys = {w["key"].split(" ")[0] for w in ws}
        assert keys == {"forward", "backward_data", "backward_filter"}
    again = cudnn_algos.tune(model, x, db, progress=False)
    assert (again.searched, again.already) == (0, 9) and len(search.calls) == 9


def test_tune_skips_what_another_process_stored_while_it_ran(fake_tune, tmp_path):
    db = tmp_path / "t.sqlite"
    search = fake_tune()
    real = search.__call__

    def meanwhile(spec, shape, *, direction, **kw):  # after the first search, "another process" stores the rest
        out = real(spec, shape, direction=direction, **kw)
        if len(search.calls) == 1:
            import cudnn_algos.tuning.tuner as tuning

            with TuningDB(db) as other:
                for d in ("backward_data", "backward_filter"):
                    p = tuning.make_problem(spec, shape, None, None)
                    other.put(_winner(tuning.problem_key(p, d)))
        return out

    import cudnn_algos.tuning.tuner as tuning

    tuning.find_engines = meanwhile  # (monkeypatched by the fixture: restored after the test)
    m = torch.nn.Conv2d(3, 8, 3, padding=1)
    r = cudnn_algos.tune(m, torch.randn(2, 3, 8, 8), db, progress=False)
    assert (r.searched, r.already) == (1, 2) and len(search.calls) == 1


def test_tune_records_a_failed_search_and_goes_on(fake_tune, tmp_path):
    fake_tune(fail_direction="backward_filter")
    r = cudnn_algos.tune(_small_model(), torch.randn(2, 3, 8, 8), tmp_path / "t.sqlite", progress=False)
    assert r.searched == 6 and len(r.failed) == 3
    assert all("CudnnError" in v and k.startswith("backward_filter") for k, v in r.failed.items())
    assert "3 failed" in str(r)


def test_tune_interrupted_keeps_what_it_stored_and_a_rerun_resumes(fake_tune, tmp_path):
    db = tmp_path / "t.sqlite"
    fake_tune(interrupt_after=2)
    model, x = _small_model(), torch.randn(2, 3, 8, 8)
    r = cudnn_algos.tune(model, x, db, progress=False)
    assert r.interrupted and r.searched == 2
    search = fake_tune()
    r2 = cudnn_algos.tune(model, x, db, progress=False)
    assert (r2.searched, r2.already) == (7, 2) and len(search.calls) == 7


def test_tune_budget_stops_before_the_next_search(fake_tune, tmp_path):
    search = fake_tune()
    r = cudnn_algos.tune(_small_model(), torch.randn(2, 3, 8, 8), tmp_path / "t.sqlite", budget_s=1e-9,
                         progress=False)
    assert r.interrupted and r.searched <= 1 and len(search.calls) == r.searched


def test_tune_checks_its_arguments(fake_tune, tmp_path):
    fake_tune()
    with pytest.raises(ValueError, match="directions"):
        cudnn_algos.tune(_small_model(), torch.randn(2, 3, 8, 8), tmp_path / "t.sqlite", directions=("sideways",))
    for bad in (-0.1, 1.0, "3%", True):
        with pytest.raises(ValueError, match="torch_margin"):
            cudnn_algos.tune(_small_model(), torch.randn(2, 3, 8, 8), tmp_path / "t.sqlite", torch_margin=bad)


def test_quick_tuning_searches_torch_lists_only_with_options_find_engines_accepts(fake_tune, tmp_path):
    from cudnn_algos.tuning import SEARCHES

    search = fake_tune()
    r = cudnn_algos.tune(_small_model(), torch.randn(2, 3, 8, 8), tmp_path / "t.sqlite", search="quick",
                         progress=False)
    assert r.searched == 9
    assert search.kw["heuristics"] == ("instant", "fallback") and search.kw["refine"] == 0
    assert search.kw["compare_torch"] is False and search.kw["repeats"] <= 3
    with TuningDB(tmp_path / "t.sqlite") as t:
        assert all(json.loads(w["settings"])["search"] == "quick" for w in t.winners())
    for name, make_options in SEARCHES.items():
        # find_engines checks its options before the problem: with options it refused, the error would name one of
        # them; accepted, it reaches the input's channel count (wrong on purpose), on any machine, GPU or not
        with pytest.raises(ValueError, match="has 4 channels but the layer expects 3"):
            cudnn_algos.find_engines(torch.nn.Conv2d(3, 8, 3), (2, 4, 8, 8), measure=True,
                                     **make_options(7, 3, 3, 32, True))
    with pytest.raises(ValueError, match="search"):
        cudnn_algos.tune(_small_model(), torch.randn(2, 3, 8, 8), tmp_path / "t.sqlite", search="slow")


def test_tune_and_the_operator_compute_the_same_key_for_fuzzed_layers():
    """The key tune() stores a winner under (from its problem) and the key the operator looks up (from the tensors
    it gets, here meta tensors: only sizes, dtype and layout are read) must agree for every layer apply() runs, or a
    tuned problem silently falls back. Over seeded valid layers: 1/2/3-d, groups, dilation, strides, 'same'/'valid',
    1x1 filters, fp32/fp16/bf16, contiguous and channels-last (the layout as discover() reads it)."""
    import random

    from problem_gen import case, torch_verdict, valid_extra

    from cudnn_algos import backend
    from cudnn_algos.problem import make_problem, parse_dtype
    from cudnn_algos.model import discover
    from cudnn_algos.tuning import module_args, problem_key

    ext = backend.load()
    rng = random.Random(5)
    checked = 0
    while checked < 300:
        c = case(rng)
        m, shape, _ = torch_verdict(c)
        if shape is None or not valid_extra(c) or isinstance(module_args(m), str):
            continue
        dtype = parse_dtype(c["dtype"])
        fmt = {"channels_last": torch.channels_last, "channels_last_3d": torch.channels_last_3d}.get(c["fmt"])
        m = m.to(dtype)
        if fmt is not None:
            m = m.to(memory_format=fmt)
        x = torch.empty(tuple(int(v) for v in c["shape"]), dtype=dtype, device="meta")
        if fmt is not None:
            x = x.contiguous(memory_format=fmt)
        # behind another convolution, as most layers are: on the meta device its output comes out contiguous
        pre = {1: torch.nn.Conv1d, 2: torch.nn.Conv2d, 3: torch.nn.Conv3d}[c["nd"]](c["cin"], c["cin"], 1).to(dtype)
        if fmt is not None:
            pre = pre.to(memory_format=fmt)
        use = discover(torch.nn.Sequential(pre, m), x)[1]  # the layout tune() would record for this layer
        p = make_problem(m, use.input_shape, dtype, use.memory_format)
        a = module_args(m)
        w = m.weight.detach().to("meta")
        for d in ("forward", "backward_data", "backward_filter"):
            for det, tf32 in ((False, True), (True, False)):
                ours = problem_key(p, d, det, tf32)
                op = backend.operator_key(p.cudnn_direction(d), x, w, a.stride, a.padding, a.dilation, a.groups, det,
                                      tf32, a.output_padding is not None, a.output_padding or [])
                assert ours == op, (c, ours, op)
        checked += 1


def _tuning_process(path, seed, slow):
    """tune() in a process of its own with a GPU-free search (the fake_tune fixture's, set up by hand: fixtures do
    not cross processes); `slow` seconds per search so that several processes overlap and a kill lands mid-tune."""
    import time as _time

    import cudnn_algos.tuning.tuner as tuning
    from conftest import Builders

    tuning.device_index = lambda device: 0
    tuning.environment = lambda dev: _env()
    fake = _FakeSearch(Builders)

    def search(*args, **kw):
        _time.sleep(slow)
        return fake(*args, **kw)

    tuning.find_engines = search
    torch.manual_seed(seed)
    tuning.tune(_wide_model(), torch.randn(2, 3, 8, 8), path, progress=False)


def _wide_model():
    # 12 distinct problems x 3 directions = 36 searches
    return torch.nn.Sequential(*[torch.nn.Conv2d(3 if i == 0 else 4 + i - 1, 4 + i, 3, padding=1) for i in range(12)])


def test_eight_processes_tuning_at_once_and_one_killed_mid_tune_lose_nothing(tmp_path):
    """The database under abuse (issue 12): 8 processes tune() one model into one file at once while a ninth is
    killed with SIGKILL in the middle of its tune; every stored search is whole, nothing is stored twice, the file
    is intact, and a later tune() resumes: it searches nothing that is stored and stores the rest."""
    import os
    import signal
    import time

    path = str(tmp_path / "t.sqlite")
    ctx = mp.get_context("spawn")
    victim = ctx.Process(target=_tuning_process, args=(path, 99, 0.2))
    victim.start()
    seen, t0 = 0, time.time()
    while seen < 3 and time.time() - t0 < 120:  # the victim has stored a few searches: kill it mid-tune
        time.sleep(0.05)
        with contextlib.suppress(sqlite3.Error), TuningDB(path) as db:
            seen = len(db.winners())
    os.kill(victim.pid, signal.SIGKILL)
    victim.join(10)
    assert 3 <= seen < 36, seen
    procs = [ctx.Process(target=_tuning_process, args=(path, i, 0.02)) for i in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
        assert p.exitcode == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing moved aside: the file is fine
        db = TuningDB(path)
    try:
        assert db.con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        ws = db.winners(env_key(_env()))
        assert len(ws) == len({w["key"] for w in ws}) == 36  # every problem and direction once
        per_key = {}
        for c in db.candidates():
            per_key[c["key"]] = per_key.get(c["key"], 0) + 1
        assert set(per_key.values()) == {4}  # each search whole: all of its candidates
    finally:
        db.close()
    import cudnn_algos.tuning.tuner as tuning

    searched = []
    old = (tuning.device_index, tuning.environment, tuning.find_engines)
    try:
        tuning.device_index, tuning.environment = (lambda device: 0), (lambda dev: _env())
        tuning.find_engines = lambda *a, **k: searched.append(a)
        r = tuning.tune(_wide_model(), torch.randn(2, 3, 8, 8), path, progress=False)
    finally:
        tuning.device_index, tuning.environment, tuning.find_engines = old
    assert (r.searched, r.already, searched) == (0, 36, [])


def _engine2_selector():
    """A hand-made selector (no training): one tree that predicts engine 2 faster than anything else."""
    import numpy as np

    from cudnn_algos.selector import PROBLEM_FEATURES, Neighbours, Selector, Trees, Vocabulary

    n = len(PROBLEM_FEATURES)
    trees = Trees(feature=np.array([n + 1, 0, 0], dtype=np.int32), threshold=np.array([0.5, 0.0, 0.0]),
                  left=np.array([1, -1, -1], dtype=np.int32), right=np.array([2, -1, -1], dtype=np.int32),
                  value=np.array([0.0, 1.0, -1.0]), offset=np.array([0], dtype=np.int64), base=0.0, rate=1.0)
    nb = Neighbours(np.zeros((1, n)), ("eng0",), np.zeros(n), np.ones(n))
    return Selector(Vocabulary((0, 2), ("WORKSPACE",)), trees, nb, "sm_90-cudnn-9.19", {"problems": 1})


def test_tune_predict_stores_the_selectors_pick_without_timing(fake_tune, tmp_path):
    """search="predict": the lists' configurations built, nothing measured, the selector's first pick among those
    torch would accept stored as predicted (the fake search's eng1 down-converts inputs, eng3 does not build)."""
    search = fake_tune()
    model, x = _small_model(), torch.randn(2, 3, 8, 8)
    sel = _engine2_selector()
    path = tmp_path / "sel.npz"
    sel.save(path)
    db = tmp_path / "t.sqlite"
    r = cudnn_algos.tune(model, x, db, progress=False, search="predict", selector=str(path))
    assert (r.searched, r.failed) == (9, {}) and search.kw["measure"] is False
    with TuningDB(db) as t:
        ws = t.winners(env_key(_env()))
    assert len(ws) == 9 and {w.config for w in ws} == {"eng2"} and {w.source for w in ws} == {"predicted"}
    assert all(w.kernel_ms is None and w.runner_up == "eng0" for w in ws)
    assert json.loads(ws[0].settings)["search"] == "predict" and "sm_90-cudnn-9.19" in ws[0].settings
    from conftest import run_cli

    listed = run_cli("db", "list", "--db", db)
    assert listed.returncode == 0 and "eng2" in listed.stdout, listed.stderr
    r = run_cli("tune", "resnet18", "--batch", "2", "--predict", tmp_path / "nope.npz")
    assert r.returncode == 2 and "--predict" in r.stderr and "no such file" in r.stderr, r.stderr
    r = run_cli("tune", "resnet18", "--quick", "--predict", path)
    assert r.returncode == 2 and "not allowed with" in r.stderr, r.stderr
    with pytest.raises(ValueError, match="needs selector="):
        cudnn_algos.tune(model, x, tmp_path / "u.sqlite", progress=False, search="predict")
    with pytest.raises(ValueError, match="selector='.*nope.npz'"):
        cudnn_algos.tune(model, x, tmp_path / "u.sqlite", progress=False, search="predict",
                         selector=str(tmp_path / "nope.npz"))
