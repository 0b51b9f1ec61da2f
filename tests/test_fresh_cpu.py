"""CPU: the profile's pre-started fresh processes (cudnn_algos.model.fresh): they run their module's pass with the
arguments handed over later, end when unused, refuse modules they were not started for, and the torch-off pass runs
through one (it fails here, with no GPU, and says so, as the fresh process it replaces does). No GPU result."""
import subprocess
import sys
import time

import pytest

from cudnn_algos.model import torch_off_runs
from cudnn_algos.model.fresh import MODULES, Prestarted, Waiting, run_fresh
from cudnn_algos.model.profiling import _fresh_processes

TORCH_OFF = "cudnn_algos.model.torch_off"


def test_a_waiting_process_runs_its_module_with_the_arguments_it_is_handed(tmp_path):
    w = Waiting(TORCH_OFF)
    try:
        time.sleep(0.2)
        assert w.proc.poll() is None  # it waits for its arguments
        missing = tmp_path / "no-such-problems.json"
        r = w.run([missing, tmp_path / "out.json", 0], timeout=120)
    finally:
        w.close()
    assert r.returncode != 0 and "no-such-problems.json" in r.stderr  # torch_off_pass opened the file it was given


def test_the_same_arguments_fail_the_same_way_in_a_process_started_now(tmp_path):
    missing = tmp_path / "no-such-problems.json"
    r = run_fresh(TORCH_OFF, [missing, tmp_path / "out.json", 0], timeout=120)
    assert r.returncode != 0 and "no-such-problems.json" in r.stderr


def test_torch_off_runs_through_a_waiting_process_reports_the_failure():
    item = {"key": "0|forward", "spec": {"kind": "Conv2d", "in_channels": 4, "out_channels": 4, "kernel_size": [3, 3]},
            "input_shape": [1, 4, 8, 8], "dtype": "float32", "memory_format": "contiguous", "direction": "forward",
            "repeats": 3, "check_clock": False}
    with Prestarted({"t": TORCH_OFF}) as pre:
        runs, err = torch_off_runs([item], 0, timeout=120, waiting=pre.take("t"))
    assert runs == {} and err.startswith("torch benchmark-off pass failed: ")


def test_unused_processes_end_when_the_block_ends():
    with Prestarted({"a": TORCH_OFF, "b": "cudnn_algos.model.benchmark_mode"}) as pre:
        procs = [pre._waiting["a"].proc, pre._waiting["b"].proc]
        taken = pre.take("b")
        assert pre.take("b") is None and taken.proc is procs[1]
    assert all(p.returncode is not None for p in procs)


def test_a_process_closed_without_work_exits_cleanly():
    p = subprocess.run([sys.executable, "-m", "cudnn_algos.model.fresh", TORCH_OFF], input="", capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr


def test_only_the_profile_passes_modules_run_and_a_process_runs_only_its_own():
    with pytest.raises(ValueError, match="module must be one of"):
        Waiting("os")
    p = subprocess.run([sys.executable, "-m", "cudnn_algos.model.fresh", "os"], input="[]\n", capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2 and "usage" in p.stderr
    w = Waiting(TORCH_OFF)
    try:
        with pytest.raises(ValueError, match="was started for cudnn_algos.model.torch_off"):
            run_fresh("cudnn_algos.model.benchmark_mode", [], timeout=10, waiting=w)
    finally:
        w.close()


def test_a_process_that_overruns_its_time_is_killed(tmp_path):
    w = Waiting(TORCH_OFF)  # still importing torch when the deadline passes
    with pytest.raises(subprocess.TimeoutExpired):
        w.run([tmp_path / "p.json", tmp_path / "o.json", 0], timeout=0.01)
    assert w.proc.returncode is not None


def test_the_profile_starts_the_processes_its_passes_use():
    assert _fresh_processes(True, True) == {"torch_off": TORCH_OFF, "e2e_off": MODULES[1], "e2e_on": MODULES[1]}
    assert _fresh_processes(False, True).keys() == {"e2e_off", "e2e_on"}
    assert _fresh_processes(True, False) == {"torch_off": TORCH_OFF} and _fresh_processes(False, False) == {}
