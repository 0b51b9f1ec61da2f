"""CPU: the benchmark scripts' own logic (job parsing, the shape cycle, the cumulative-time figure) without a GPU;
what they measure runs on the device (scripts/gpu-check)."""
import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_varying_shapes_cycle_and_figure(tmp_path):
    pytest.importorskip("matplotlib")
    vs = _load("varying_shapes")
    assert vs.shapes("16,32,48,64", "192,224") == [(16, 192), (16, 224), (32, 192), (32, 224), (48, 192),
                                                   (48, 224), (64, 192), (64, 224)]
    fake = {"off": {"step_s": [0.1] * 16}, "on": {"step_s": [3.0] + [0.2] * 15}, "apply": {"error": "x"}}
    assert vs.plot(fake, str(tmp_path / "v.png"))
    assert (tmp_path / "v.png").stat().st_size > 1000
    # the paired measurement alone (--modes=): no steps to draw, no empty figure
    assert not vs.plot({"paired_off": [{"ratio": 1.0}], "apply": {"error": "x"}}, str(tmp_path / "w.png"))
    assert not (tmp_path / "w.png").exists()


def test_varying_shapes_k_is_an_int_or_auto(capsys):
    vs = _load("varying_shapes")
    assert vs._k("auto") == "auto" and vs._k("5") == 5
    for bad in ("0", "Auto", "-1"):
        with pytest.raises(SystemExit) as e:
            vs.main(["--k", bad, "--modes="])
        assert e.value.code == 2 and f"--k {bad}: an int >= 1 or 'auto'" in capsys.readouterr().err


def test_profiles_job_parsing():
    pr = _load("profiles")
    j = pr.parse_job("torchvision:mobilenet_v3_small:fp16-nhwc:16:forward+backward_data")
    assert j["model"] == "torchvision:mobilenet_v3_small" and j["batch"] == 16
    assert j["directions"] == ("forward", "backward_data") and j["label"] == "mobilenet_v3_small_fp16-nhwc_b16"
    with pytest.raises(SystemExit, match="config"):
        pr.parse_job("resnet50:fp8")
    j = pr.parse_job("benchmarks/unseen_models.py:inception_v3:fp16-nhwc")
    assert j["model"] == "benchmarks/unseen_models.py:inception_v3" and j["label"] == "inception_v3_fp16-nhwc_b32"


def test_unseen_models_are_outside_the_corpus():
    """benchmarks/unseen_models.py's models: none is a model of the dataset's corpus, and each loads as `profile`
    takes a FILE:factory (its example input at batch 32)."""
    from cudnn_algos.corpus import FAMILIES
    from cudnn_algos.model_source import load_model

    um = _load("unseen_models")
    names = [n for n in vars(um) if not n.startswith("_") and callable(getattr(um, n)) and n != "annotations"]
    assert names == ["inception_v3", "efficientnet_b4"]
    corpus = {m.split(".")[0] for models in FAMILIES.values() for m in models}
    assert not corpus & set(names)
    for n in names:
        model, example, name = load_model(f"benchmarks/unseen_models.py:{n}")
        assert name == n and example.shape[0] == 32 and example.shape[1] == 3


def test_varying_shapes_why_lines_count_allocator_calls_after_the_first_pass():
    vs = _load("varying_shapes")
    mem = [{"reserved": 2**30, "retries": 0, "cuda_mallocs": 10 + i, "cuda_frees": 0} for i in range(16)]
    out = vs.why_lines({"on": {"step_s": [0.02] * 16, "host_s": [0.019] * 16, "memory": mem}, "off": {"error": "x"}},
                       8)
    assert "median wall 20.00 ms" in out and "8 cudaMalloc" in out and "off" not in out


def test_varying_shapes_converged_cycles_begin_after_the_last_choosing_step():
    """Cycles of 8 steps after the first pass; choosing until step 9 (in the second cycle): the third and fourth
    count; choosing to the end: none."""
    vs = _load("varying_shapes")
    times = [1.0] * 8 + [2.0] * 8 + [3.0] * 8 + [5.0] * 8
    assert vs.converged(times, 8, 9) == {"converged_cycles": 2, "converged_cycle_ms": 32000.0}
    assert vs.converged(times, 8, 0) == {"converged_cycles": 3, "converged_cycle_ms": 24000.0}
    assert vs.converged(times, 8, 32) == {"converged_cycles": 0, "converged_cycle_ms": None}


def test_varying_shapes_added_wall_is_each_modes_steps_less_offs_over_the_same_steps():
    """on paid 9 s in its first step; measure_top_k 0.2 + 0.5 s, and its fourth step is beyond off's three (not
    counted); a mode that failed and the tune entry are left out."""
    vs = _load("varying_shapes")
    out = vs.added_line({"tune": None, "off": {"step_s": [1.0, 1.0, 1.0]}, "on": {"step_s": [10.0, 1.0, 1.0]},
                         "predict": {"error": "x"}, "measure_top_k": {"step_s": [1.2, 1.5, 1.0, 9.0]}})
    assert out == "added to benchmark off's wall over the run: on 9.00 s, measure_top_k 0.70 s (0.078x on's)"


def test_varying_shapes_first_pass_is_the_median_over_each_modes_processes():
    """--repeats: a mode's first run and its further ones (mode + AGAIN); a failed process is left out; on ran once."""
    vs = _load("varying_shapes")
    res = {"off": {"first_pass_s": 3.0}, "off_again": [{"first_pass_s": 2.0}, {"first_pass_s": 4.0}],
           "on": {"first_pass_s": 50.0}, "predict": {"first_pass_s": 3.3},
           "predict_again": [{"error": "x"}, {"first_pass_s": 3.9}]}
    assert vs.first_pass_line(res, ("off", "on", "predict")) == (
        "first pass, median over fresh processes: off 3.00 s [3.00, 2.00, 4.00]; on 50.00 s [50.00] (16.67x off's); "
        "predict 3.60 s [3.30, 3.90] (1.20x off's)")


def test_varying_shapes_first_pass_steps_and_host_time_are_medians_over_each_modes_processes():
    """Per step of the first pass (n = 2): the median over a mode's processes and its difference from off's; with
    --why, the collector's seconds and oldest collections at the pass's last step and the operator's stages (those
    under 1 ms left out), medians over processes; a failed process is left out."""
    vs = _load("varying_shapes")

    def mem(gc_s, oldest, stages):
        start = {"gc_s": 0.0, "gc_oldest": 0, "stages_us": {}}
        return [start, {"gc_s": gc_s, "gc_oldest": oldest, "stages_us": stages}]

    res = {"off": {"step_s": [0.30, 0.20, 0.02], "memory": mem(0.001, 0, {})},
           "off_again": [{"step_s": [0.32, 0.24, 0.02], "memory": mem(0.003, 0, {})}, {"error": "x"}],
           "predict": {"step_s": [0.40, 0.25, 0.02], "memory": mem(0.2, 1, {"resolve": 30e3, "torch_op": 2e6,
                                                                              "count": 500.0})},
           "predict_again": [{"step_s": [0.36, 0.21, 0.02], "memory": mem(0.1, 0, {"resolve": 50e3, "torch_op": 1e6,
                                                                                  "count": 900.0})}]}
    assert vs.first_pass_steps_line(res, ("off", "predict"), 2).splitlines() == [
        "first pass step by step, median ms over processes (steps 1..2):",
        "            off: 310 220", "        predict: 380 230 (- off's: +70 +10)"]
    assert vs.first_pass_host_line(res, ("off", "predict"), 2).splitlines() == [
        "first pass host time, median over processes:", "            off: gc 2 ms (0 oldest-generation)",
        "        predict: gc 150 ms (0 oldest-generation); operator stages, ms: torch_op 1500, resolve 40"]


def test_gc_clock_counts_the_collectors_time_and_oldest_collections():
    import gc

    fresh = _load("fresh")
    clock = fresh.GcClock()
    try:
        junk = [[i] for i in range(50_000)]  # objects for the full collection to walk
        before, spent = clock.oldest, clock.seconds
        gc.collect()
        assert clock.oldest == before + 1 and clock.seconds > spent
        gc.collect(0)  # a young collection: not the oldest generation's
        assert clock.oldest == before + 1 and len(junk) == 50_000
    finally:
        clock.close()
    n = clock.oldest
    gc.collect()
    assert clock.oldest == n  # closed: no longer counting


def test_varying_shapes_paired_lines_take_each_processes_median_ratio():
    """--paired: blocks torch, apply, apply, torch: each apply cycle over the torch cycle beside it; per flag the
    median over processes of each process's median ratio; a process that failed is named, not averaged."""
    vs = _load("varying_shapes")
    assert vs.paired_ratios([100.0, 110.0, 100.0, 90.0], [95.0, 99.0, 110.0, 81.0]) == [0.95, 0.9, 1.1, 0.9]
    assert vs.block_order(8) == [False, True, True, False] * 2 and vs.block_order(2) == [False, True, True, False]
    base = {"unseen": "predict", "chosen": 544, "problems": 544, "choosing_cycles": 12, "choosing_s": 3.0,
            "chose_all": True, "first_torch_cycle_s": 2.5, "calls": {"pinned": 10, "torch_winner": 0, "fallback": 0}}
    gpu = {"gpu_ratios": [0.98, 0.99], "gpu_torch_ms": [50.0, 52.0], "gpu_apply_ms": [49.0, 51.5]}
    runs = {"paired_off": [{**base, "ratios": [0.9, 1.0, 1.1], "torch_ms": [200.0], "apply_ms": [190.0], **gpu},
                           {**base, "ratios": [0.95, 0.97], "torch_ms": [210.0], "apply_ms": [205.0]},
                           {"error": "timed out after 900 s"}],
            "paired_on": [{"error": "CUDA error"}]}
    off, off_gpu, on = vs.paired_lines(runs)
    assert off.startswith("paired_off: apply(unseen=predict) / torch's op per cycle in one process 0.980 "
                          "(2 processes: 1.000; 0.960)")
    assert "cycles torch 205.0 ms, apply 197.5 ms" in off and off.endswith("errors: timed out after 900 s")
    # the kernel clock's GPU busy time, where a process measured it
    assert off_gpu == ("paired_off: GPU busy per cycle (kernel clock), apply / torch's op 0.985 (0.985); torch "
                       "51.0 ms, apply 50.2 ms")
    assert on == "paired_on: CUDA error"


def test_forward_switch_gives_back_the_modules_own_forward_and_apply_s_again():
    import sys

    import torch

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from fresh import forward_switch

    model = torch.nn.Sequential(torch.nn.Conv2d(2, 2, 1), torch.nn.ReLU())
    model[0].forward = lambda x: x * 0 + 7.0  # stands in for apply()'s forward
    use = forward_switch(model)
    x = torch.ones(1, 2, 3, 3)
    use(False)
    assert "forward" not in model[0].__dict__ and not torch.equal(model(x), torch.full_like(x, 7.0))
    use(True)
    assert torch.equal(model(x), torch.full_like(x, 7.0))


def test_apply_e2e_loss_figure(tmp_path):
    pytest.importorskip("matplotlib")
    ae = _load("apply_e2e")
    runs = [{"config": c, "batch": 32, **{m: {"losses": [7.0 / (i + 1) for i in range(50)]} for m in ae.MODES}}
            for c in ("fp16-nhwc", "fp32")]
    runs[1]["on"] = {"error": "timed out"}  # a mode that failed leaves its curve out, not the figure
    ae.plot_losses(runs, str(tmp_path / "loss.png"))
    assert (tmp_path / "loss.png").stat().st_size > 1000


def test_cpu_lists_parse_and_pinning_without_a_gpu_changes_nothing():
    import os

    fresh = _load("fresh")
    assert fresh.parse_cpulist("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert fresh.parse_cpulist("5") == {5} and fresh.parse_cpulist("") == set()
    before = os.sched_getaffinity(0)
    if not __import__("torch").cuda.is_available():
        assert fresh.pin_to_gpu_cpus(0) is None  # no device to ask: affinity left alone
        assert os.sched_getaffinity(0) == before


def test_apply_overhead_times_every_case_on_the_cpu(tmp_path):
    """benchmarks/apply_overhead.py (CPU: the operator's CPU kernel is torch's convolution): every case timed for
    torch, apply and torch again, and apply() undone after its row (no timing asserted here)."""
    ao = _load("apply_overhead")
    out = tmp_path / "o.json"
    assert ao.main(["--calls", "20", "--json", str(out)]) == 0
    us = json.loads(out.read_text())["us"]
    assert list(us) == ["torch", "apply", "torch again"]
    assert all(v > 0 for row in us.values() for v in row.values()) and len(us["apply"]) == 3


def test_apply_e2e_pairs_each_rounds_processes(tmp_path, monkeypatch, capsys):
    """apply_e2e's aggregation (workers replaced by made-up step times): the medians over rounds, and apply against
    the same round's off and on, so that a drift between rounds cancels."""
    ae = _load("apply_e2e")
    steady = {"off": [20.0, 30.0, 25.0], "on": [19.0, 29.0, 24.0], "apply": [19.5, 28.0, 24.0]}
    seen = {m: 0 for m in ae.MODES}

    def fake(args, timeout):
        mode = args[args.index("--worker") + 1]
        if mode == "tune":
            return {"tune_s": 1.0, "searched": 3, "already": 0, "build_s": 0.1, "store_s": 0.0}
        i = seen[mode]
        seen[mode] += 1
        return {"mode": mode, "steady_ms": steady[mode][i], "first_step_s": 1.0, "cpus": [0]}

    monkeypatch.setattr(ae, "_sub", fake)
    out = tmp_path / "r.json"
    assert ae.main(["--configs", "fp16-nhwc:32", "--rounds", "3", "--json", str(out)]) == 0
    row = json.loads(out.read_text())[0]
    assert row["paired_ratios"] == pytest.approx([19.5 / 19.0, 28.0 / 29.0, 24.0 / 24.0])
    assert row["apply"]["steady_ms"] == 24.0 and row["on"]["steady_ms"] == 24.0  # medians over the rounds
    assert "round by round: 1.026, 0.966, 1.000 (median 1.000)" in capsys.readouterr().out


def test_apply_e2e_in_process_pairs(tmp_path, monkeypatch, capsys):
    """apply_e2e --paired --rounds 0 (workers replaced by made-up block times): each flag's ratio is the median over
    every block pair of its processes, and the fresh-process modes are not run."""
    ae = _load("apply_e2e")
    asked = []

    def fake(args, timeout):
        mode = args[args.index("--worker") + 1]
        asked.append(mode)
        if mode == "tune":
            return {"tune_s": 1.0, "searched": 3, "already": 0, "build_s": 0.1, "store_s": 0.0}
        t = [20.0, 21.0] if mode == "paired_off" else [18.0, 18.0]
        a = [19.0, 21.0] if mode == "paired_off" else [18.9, 18.9]
        return {"mode": mode, "torch_ms": t, "apply_ms": a, "ratios": [y / x for x, y in zip(t, a)], "cpus": [0],
                "calls": {"pinned": 10, "torch_winner": 0, "fallback": 0}}

    monkeypatch.setattr(ae, "_sub", fake)
    out = tmp_path / "r.json"
    assert ae.main(["--configs", "fp16-nhwc:32", "--rounds", "0", "--paired", "2", "--json", str(out)]) == 0
    assert asked == ["tune", "paired_off", "paired_on", "paired_off", "paired_on"]
    text = capsys.readouterr().out
    assert "fp16-nhwc:32 benchmark off: apply / torch's op in one process 0.975 (block pairs 0.950-1.000" in text
    assert "fp16-nhwc:32 benchmark on: apply / torch's op in one process 1.050" in text
    assert "{'pinned': 20, 'torch_winner': 0, 'fallback': 0}" in text


def test_store_write_stores_what_it_times(tmp_path):
    """benchmarks/store_write.py: every problem-direction stored with full long-form rows (no timing asserted)."""
    sw = _load("store_write")
    out = tmp_path / "w.json"
    assert sw.main(["--tasks", "5", "--rows", "3", "--dir", str(tmp_path), "--json", str(out)]) == 0
    r = json.loads(out.read_text())
    assert (r["tasks"], r["rows_per_task"]) == (5, 3) and r["rows_per_s"] > 0 and r["row_json_bytes"] > 1000
    from cudnn_algos.results import LONG_FORM_COLUMNS

    assert set(LONG_FORM_COLUMNS) <= set(sw.long_form_row(0))


def test_sweep_scaling_times_each_worker_count_and_kills_a_worker(tmp_path):
    """benchmarks/sweep_scaling.py over a real Dask cluster of processes with dry-run tasks: the same list swept by
    1 and 2 workers, then a worker SIGKILLed while it holds a task: that task stored after running again, nothing
    lost or stored twice, and the 1-worker run kept as the noise floor's repeats (no rate asserted)."""
    pytest.importorskip("distributed")
    import subprocess
    import sys

    from cudnn_algos.corpus import build_corpus

    corpus = tmp_path / "c.json.gz"
    build_corpus(["decoders"], batches=(1,), configs=("fp32",), progress=False).to_json(str(corpus))  # 48 tasks
    out, keep = tmp_path / "s.json", tmp_path / "kept.sqlite"
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "sweep_scaling.py"), str(corpus), "--store",
                        str(tmp_path / "none.sqlite"), "--n", "16", "--workers", "1,2", "--kill-n", "24",
                        "--kill-after", "0.5", "--dry-run", "--task-s", "0.15", "--keep", str(keep), "--json",
                        str(out)], capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    r = json.loads(out.read_text())
    assert [(x["workers"], x["done"]) for x in r["runs"]] == [(1, 16), (2, 16)]
    k = r["kill"]
    assert k["killed"]["task"] and k["killed_task_status"] == "done"
    assert (k["stored"], k["done"], k["duplicates"], k["lost"], k["extra"], k["rows_match"]) == (24, 24, 0, 0, 0, True)
    assert r["repeats_added"] == 16
    # the two runs' rows against each other (the dry run's are the same every time: no change)
    assert r["agreement"].startswith("noise floor: 16 problem-directions measured twice") and "median 0.0%" in \
        r["agreement"], r["agreement"]
    from cudnn_algos.sweep import SweepStore

    with SweepStore(keep) as s:
        assert s.counts()["done"] == 16 + 24 + 16
    assert "kill test: SIGKILLed" in p.stdout
    # two workers taking turns on one GPU: their run compared with the lone worker's, and only the lone worker's rows
    # kept for the dataset
    keep2 = tmp_path / "kept2.sqlite"
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "sweep_scaling.py"), str(corpus), "--store",
                        str(tmp_path / "none.sqlite"), "--n", "12", "--workers", "1,2", "--per-gpu", "2", "--kill-n",
                        "0", "--dry-run", "--task-s", "0.05", "--keep", str(keep2), "--json", str(out)],
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    r = json.loads(out.read_text())
    assert r["agreement"].startswith("noise floor: 12 problem-directions measured twice") and "kill" not in r
    assert "2 workers (2 per GPU) against 1" in p.stdout and "repeats_added" not in r
    with SweepStore(keep2) as s:
        assert s.counts()["done"] == 12 and {t.worker for t in s.tasks()} == {"w0"}
    # both orders: 1 then 2 workers on a list, 2 then 1 on the next; each count's rate over both lists; the lone
    # worker's rows of both lists kept, no list measured twice by the same count
    keep3 = tmp_path / "kept3.sqlite"
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "sweep_scaling.py"), str(corpus), "--store",
                        str(tmp_path / "none.sqlite"), "--n", "8", "--workers", "1,2", "--per-gpu", "2",
                        "--both-orders", "--kill-n", "0", "--dry-run", "--task-s", "0.05", "--keep", str(keep3),
                        "--json", str(out)], capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    r = json.loads(out.read_text())
    assert [(x["pass"], x["workers"], x["done"]) for x in r["runs"]] == [(1, 1, 8), (1, 2, 8), (2, 2, 8), (2, 1, 8)]
    secs = {w: sum(x["seconds"] for x in r["runs"] if x["workers"] == w) for w in (1, 2)}
    assert r["rate"] == {"1": pytest.approx(16 / secs[1]), "2": pytest.approx(16 / secs[2])}
    assert len(r["agreements"]) == 2 and all(x.startswith("noise floor: 8 problem-directions") for x in r["agreements"])
    assert "over both lists" in p.stdout and "(list 2)" in p.stdout
    with SweepStore(keep3) as s:
        assert s.counts()["done"] == 16 and {t.worker for t in s.tasks()} == {"w0"}


def test_sweep_profile_lists_where_a_tasks_time_goes(tmp_path):
    """benchmarks/sweep_profile.py with dry-run tasks (no GPU: the plumbing): N tasks after a warm-up, each
    ordering's top functions with their seconds and calls a task, the JSON beside; bad counts are refused."""
    import subprocess
    import sys

    from cudnn_algos.corpus import build_corpus

    corpus = tmp_path / "c.json.gz"
    build_corpus(["decoders"], batches=(1,), configs=("fp32",), progress=False).to_json(str(corpus))
    script, out = str(ROOT / "benchmarks" / "sweep_profile.py"), tmp_path / "p.json"
    p = subprocess.run([sys.executable, script, str(corpus), "--n", "4", "--top", "3", "--dry-run", "--json",
                        str(out)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    r = json.loads(out.read_text())
    assert (r["tasks"], r["failed"]) == (4, 0) and len(r["by_own_time"]) == 3 == len(r["by_time_with_callees"])
    assert any("dry_run_measure" in f["function"] for f in r["by_time_with_callees"]), r["by_time_with_callees"]
    assert r["by_own_time"][0]["own_s"] >= r["by_own_time"][-1]["own_s"]
    assert "sweep profile: 4 tasks (0 failed) after one warm-up (1 build thread(s))" in p.stdout
    assert "top 3 by own time" in p.stdout and r["options"]["legacy"] is True
    p = subprocess.run([sys.executable, script, str(corpus), "--n", "2", "--dry-run", "--no-legacy", "--build-threads",
                        "4", "--json", str(out)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "(no legacy, 4 build thread(s))" in p.stdout, p.stdout[-2000:] + p.stderr[-2000:]
    assert json.loads(out.read_text())["options"] == {"seconds": 0.01, "legacy": False, "build_threads": 4,
                                                      "lean": False}
    p = subprocess.run([sys.executable, script, str(corpus), "--n", "0", "--dry-run"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 2 and "--n 0" in p.stderr


def test_a_failed_worker_reports_the_error_line_and_its_stderr(tmp_path):
    """benchmarks/fresh.run_worker: a worker that dies names the error (not torch's closing advice) and keeps the
    end of its stderr."""
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from fresh import run_worker

    w = tmp_path / "w.py"
    w.write_text("import sys\nprint('torch.AcceleratorError: CUDA error: an illegal memory access', file=sys.stderr)\n"
                 "print('Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.', file=sys.stderr)\n"
                 "sys.exit(1)\n")
    r = run_worker(str(w), [], 30)
    assert r["error"] == "torch.AcceleratorError: CUDA error: an illegal memory access" and r["returncode"] == 1
    assert r["stderr_tail"][-1].startswith("Compile with")


def test_varying_shapes_detection_style_model_trains_on_the_cpu():
    """benchmarks/varying_shapes.py --model retinanet: the detection-style model (RetinaNet's backbone with FPN and
    its heads) builds, its loss is a finite scalar and reaches every convolution's weight (its timing is the
    device's)."""
    import torch

    vs = _load("varying_shapes")
    model = vs._model(False, "retinanet", device="cpu")
    loss = vs._loss(model(torch.randn(1, 3, 64, 64)), None)
    loss.backward()
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert loss.dim() == 0 and torch.isfinite(loss) and len(convs) > 60
    assert all(m.weight.grad is not None for m in convs)


def test_heuristic_threads_asks_about_every_problem_direction_of_the_models_shapes():
    """benchmarks/heuristic_threads.py: what its threads ask cuDNN about — each distinct problem of the model's shapes
    (found on the meta device), in three directions, each once — and its --what check (the queries are the
    device's)."""
    import subprocess
    import sys

    ht, vs = _load("heuristic_threads"), _load("varying_shapes")
    model = vs._model(True, "resnet50", device="cpu")
    one = ht._problems(model, [(2, 64)])
    both = ht._problems(model, [(2, 64), (4, 64), (2, 64)])
    assert {d for d, _ in one} == set(ht.DIRECTIONS) and len(one) % 3 == 0
    described = [(d, cp.describe()) for d, cp in both]
    assert len(set(described)) == len(described) == 2 * len(one)  # a second batch size: every problem again
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "heuristic_threads.py"), "--what", "idle,bogus"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "--what bogus: not one of idle, handle" in p.stderr


def test_selector_speed_ranks_with_the_shipped_model_or_a_file_with_evidence(tmp_path, capsys):
    """benchmarks/selector_speed.py: the shipped selector by default, or a model file (here one trained with
    neighbour evidence on the committed sample); a line per candidate count (no timing asserted here)."""
    pytest.importorskip("sklearn")
    from test_selector_cpu import real_sample

    from cudnn_algos.selector.train import train

    ss = _load("selector_speed")
    assert ss.main(["--candidates", "5,9", "--repeats", "3"]) == 0
    model = tmp_path / "ev.npz"
    train(real_sample(), family="sm_90-cudnn-9.19", params={"n_estimators": 10, "max_depth": 3}).save(model)
    assert ss.main(["--candidates", "5", "--repeats", "3", "--model", str(model)]) == 0
    out = capsys.readouterr().out.splitlines()
    counts = [ln.split()[0] for ln in out if ln.split() and ln.split()[0].isdigit()]
    assert counts == ["5", "9", "5"] and "evidence: none" not in out[-3] and "evidence: " in out[-3], out


def test_picks_kernel_time_takes_each_orders_first_that_builds_and_sums_with_use_counts(monkeypatch, capsys):
    """benchmarks/picks_kernel_time.py on a stand-in for cuDNN (the benchmark's GPU parts: lists, builds, the clock):
    lists A/B name engines 2, 3, 4, INSTANT 3 then 1 (none among the shipped selector's known configurations);
    engine 2 fails to build, so no pick is it; torch off's is INSTANT's first (engine 3: 0.03 ms a call on the
    stand-in clock); every order's pick and the totals are printed."""
    import types

    from cudnn_algos import backend, measure
    from cudnn_algos.backend import EngineSearchOut, Plan

    pk = _load("picks_kernel_time")

    class Live:
        def __init__(self, e):
            self.e = e

        def time_calls(self, xs, ws, ys, n, operands=()):
            return SimpleNamespace(host_ms=0.0, gpu_ms=0.01 * self.e * n)  # the extension's bound CallTiming

    def search(direction, cp, lists, exact=(), build=True, build_threads=1, **kw):
        if exact:
            return EngineSearchOut(tuple(Plan(e, tuple(map(tuple, kn)), (), (), ("exact",), (),
                                              "FAILED" if e == 2 else "SUCCESS", "plan" if e == 2 else "", 0, "",
                                              Live(e)) for e, kn in exact), 1, 0.0)
        engines = [2, 3, 4] if "a" in lists else [3, 1]
        return EngineSearchOut(tuple(Plan(e, (), (), (), tuple(f"heuristic_{x}" for x in lists),
                                          tuple((f"heuristic_{x}", i) for x in lists), "NOT_BUILT", "", 0, "")
                                     for i, e in enumerate(engines)), 3, 0.0)

    monkeypatch.setattr(backend, "engine_search", search)
    monkeypatch.setattr(backend, "conv_problem", lambda p: None)
    family = types.SimpleNamespace(selector_family=lambda: "sm_90-cudnn-9.19")
    monkeypatch.setattr(backend, "environment", lambda i: family, raising=False)
    monkeypatch.setattr(measure, "operand_sets", lambda p, l2, d: [{"x": 0, "w": 0, "y": 0}])
    assert pk.main(["--batches", "16", "--sizes", "192", "--near", "1"]) == 0
    out = capsys.readouterr().out
    assert "68 problem-directions (left out: none)" in out  # 23 layers x 3 directions, the stem without dgrad
    assert "off 4.74 (1.000x)" in out  # 0.03 ms x 158 uses: ResNet-50's 53 layers x 3 directions, the stem's dgrad not
    assert "near1 " in out and "trees " in out and "lists " in out and "top3 " in out
    assert "eng2 " not in out and "(eng2 vs" not in out


def test_heldout_picks_regrets_and_summary_arithmetic():
    """benchmarks/heldout_picks.py (the held-out evaluation through apply(); its measuring needs a GPU): regret is
    pick / best - 1, a pick with no time (torch's op ran) is left out of its means, the summary groups by dtype;
    INSTANT's first is the accepted row with the lowest "heuristic_instant" rank."""
    hp = _load("heldout_picks")
    assert hp.regrets({"predict": 1.5, "instant": None}, 1.0) == {"predict": 0.5, "instant": None}
    rows = [{"dtype": "float16", "regret": {"predict": 0.0, "measure_top_k": 0.0, "instant": 0.5, "torch_on": 0.1}},
            {"dtype": "float32", "regret": {"predict": 0.2, "measure_top_k": None, "instant": 0.0, "torch_on": 0.0}}]
    lines = hp.summary(rows)
    assert lines[0].startswith("all (2): predict 10.0% (10.0%, >5% 50%)")
    assert "measure_top_k 0.0% (0.0%, >5% 0%)" in lines[0]
    assert lines[1].startswith("float16 (1): ") and lines[2].startswith("float32 (1): ")
    assert "measure_top_k" not in lines[2]
    from types import SimpleNamespace

    def row(name, ranks, filtered=False):
        return SimpleNamespace(name=name, heuristic_ranks=ranks, torch_filter="no" if filtered else "")

    rs = [row("a", (("heuristic_a", 0),)), row("f", (("heuristic_instant", 0),), filtered=True),
          row("i2", (("heuristic_instant", 2), ("heuristic_b", 0))), row("i1", (("heuristic_instant", 1),)),
          row("fb", (("fallback", 0),))]
    assert hp.instant_first(rs).name == "i1"  # INSTANT's first that torch accepts, by the list's source name
    assert hp.instant_first(rs[:1] + rs[-1:]) is None
    import subprocess
    import sys

    import torch
    if not torch.cuda.is_available():
        r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "heldout_picks.py"), "--n", "1"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and "needs a CUDA GPU" in r.stderr
    for args, says in ((["--skip", "-1"], "--skip -1 at least 0"), (["--selector", "no.npz"], "--selector no.npz: no "
                       "such file"), (["--family", "nope"], "has no problem of family 'nope'")):
        r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "heldout_picks.py"), *args],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_sampled_halves_disagreement_arithmetic_and_the_split(tmp_path, capsys):
    sh = _load("sampled_halves")
    # halves and bags are fixed by the key alone: the same key, the same half, each run
    keys = [f"k{i}" for i in range(400)]
    assert {sh.half_of(k) for k in keys} == {0, 1}
    assert [sh.half_of(k) for k in keys] == [sh.half_of(k) for k in keys]
    share = sum(sh.in_bag(k, "a") for k in keys) / len(keys)
    assert 0.65 < share < 0.85
    assert [sh.in_bag(k, "a") for k in keys] != [sh.in_bag(k, "b") for k in keys]

    def p(dtype, predict, instant, on=0.5, auto=0.0):
        return {"dtype": dtype, "regret": {"predict": predict, "instant": instant, "torch_on": on,
                                           "known_auto": auto}}

    base = {"a": p("float16", 0.0, 0.0), "b": p("float16", 1.0, 0.5), "c": p("float32", 0.2, 0.1),
            "d": p("float32", None, 0.0)}  # d: no predict pick, not scored
    bag = {"a": p("float16", 0.0, 0.0), "b": p("float16", 0.3, 0.5), "c": p("float32", 0.2, 0.1),
           "d": p("float32", 0.0, 0.0)}
    got = sh.disagreement(base, [bag])
    assert got["n"] == 3
    assert got["all"]["predict"]["mean"] == pytest.approx(0.4)
    # b: 2.0 against INSTANT's 1.5 is > 5% slower; c: 1.2 against 1.1 too; a is INSTANT's own
    assert got["all"]["predict"]["slower"] == pytest.approx(2 / 3)
    # b disagrees: INSTANT's first there
    assert got["all"]["predict, disagreement -> INSTANT"]["mean"] == pytest.approx((0.0 + 0.5 + 0.2) / 3)
    assert got["agree"]["n"] == 2 and got["disagree"]["n"] == 1
    assert got["disagree"]["bag 0's predict"] == pytest.approx(0.3)
    assert got["float32"]["n"] == 1 and got["float32"]["predict"] == pytest.approx(0.2)
    (tmp_path / "base.json").write_text(json.dumps({"problems": [{"key": k, **v} for k, v in base.items()]}))
    (tmp_path / "bag.json").write_text(json.dumps([{"key": k, **v} for k, v in bag.items()]))
    sh.main(["compare", str(tmp_path / "base.json"), str(tmp_path / "bag.json")])
    out = capsys.readouterr().out
    assert "3 held-out problem-directions" in out and "disagree (1)" in out
    with pytest.raises(SystemExit):
        sh.main(["score", "x", "--half", "0", "--out", "y", "--share", "1.5"])


def test_every_benchmark_imports_names_the_package_has():
    """Each `from cudnn_algos... import NAME` in benchmarks/ (module level or inside a function, which runs only on
    the GPU machine) names something the package has: a moved name fails here, not in a device call."""
    import ast
    import importlib

    missing = []
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "cudnn_algos":
                module = importlib.import_module(node.module)
                missing += [f"{path.name}:{node.lineno}: {node.module}.{a.name}" for a in node.names
                            if a.name != "*" and not hasattr(module, a.name)
                            and not (hasattr(module, "__path__")
                                     and importlib.util.find_spec(f"{node.module}.{a.name}"))]
    assert not missing, missing
