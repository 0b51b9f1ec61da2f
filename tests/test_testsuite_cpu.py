"""CPU: the test suite's own machinery (tests/conftest.py) under pytest-xdist workers, as scripts/test runs it where
cores are spare: GPU tests share the GPU, `gpu_alone` ones (those that compare timings) have it to themselves."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def test_gpu_alone_tests_overlap_no_other_gpu_test_under_workers(tmp_path):
    """Stand-in GPU tests (sleeps, marked like the real ones) run by three workers with the conftest's `_gpu_turn`
    fixture: each `gpu_alone` test's interval overlaps no other test's, while the shared ones do overlap."""
    pytest.importorskip("xdist")
    (tmp_path / "conftest.py").write_text(textwrap.dedent(f"""
        import importlib.util
        spec = importlib.util.spec_from_file_location("suite_conftest", {os.path.join(HERE, "conftest.py")!r})
        suite = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(suite)
        _gpu_turn = suite._gpu_turn  # the fixture under test (autouse)
        """))
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    gpu: x\n    gpu_alone: y\n")
    log = tmp_path / "log.txt"
    (tmp_path / "test_stand_ins.py").write_text(textwrap.dedent(f"""
        import time
        import pytest

        def record(name, t0):
            with open({str(log)!r}, "a") as f:
                f.write(f"{{name}} {{t0}} {{time.monotonic()}}\\n")

        @pytest.mark.gpu
        @pytest.mark.parametrize("i", range(9))
        def test_shared(i):
            t0 = time.monotonic(); time.sleep(0.3); record(f"shared{{i}}", t0)

        @pytest.mark.gpu
        @pytest.mark.gpu_alone
        @pytest.mark.parametrize("i", range(3))
        def test_alone(i):
            t0 = time.monotonic(); time.sleep(0.3); record(f"alone{{i}}", t0)
        """))
    repo = os.path.dirname(HERE)  # the package importable where it is not installed
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "3", "-p", "no:cacheprovider", str(tmp_path)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    spans = [(name, float(a), float(b)) for name, a, b in (line.split() for line in log.read_text().splitlines())]
    assert len(spans) == 12

    def overlap(x, y):
        return x[1] < y[2] and y[1] < x[2]

    alone = [s for s in spans if s[0].startswith("alone")]
    shared = [s for s in spans if s[0].startswith("shared")]
    assert not [(a[0], o[0]) for a in alone for o in spans if o is not a and overlap(a, o)]
    assert any(overlap(x, y) for i, x in enumerate(shared) for y in shared[i + 1:]), "the shared ones ran one by one"


def test_optional_packages_no_registry_answered_are_not_asked_for_again_on_that_machine(tmp_path):
    """scripts/optional.sh with a stand-in python whose pip always fails (no registry): the first run asks pip once
    and marks the machine; the next run with the same packages missing skips pip and says why; another missing list,
    or the mark removed, asks again; nothing missing clears the mark."""
    root = os.path.dirname(HERE)
    calls = tmp_path / "pip_calls.txt"
    fake = tmp_path / "python"  # the real interpreter, except that `-m pip` logs its arguments and fails
    fake.write_text(f'#!/usr/bin/env bash\nif [ "$1 $2" = "-m pip" ]; then echo "$*" >> {calls}; exit 1; fi\n'
                    f'exec {sys.executable} "$@"\n')
    fake.chmod(0o755)
    mark = tmp_path / "mark"

    def run(*wanted):
        script = f'set -euo pipefail; PY={fake}; source scripts/optional.sh; install_optional "$@"'
        r = subprocess.run(["bash", "-c", script, "bash", *wanted], cwd=root, capture_output=True, text=True,
                           env={**os.environ, "OPTIONAL_MARK": str(mark)}, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stderr, (calls.read_text().splitlines() if calls.exists() else [])

    err, pip = run("no_such_module_a:pkg-a[x]", "json")  # json is there: only pkg-a is asked for
    assert len(pip) == 1 and "pkg-a[x]" in pip[0] and "json" not in pip[0] and "--retries 0" in pip[0], pip
    assert "no package registry?" in err and mark.read_text().split() == ["pkg-a[x]"]
    err, pip = run("no_such_module_a:pkg-a[x]", "json")
    assert len(pip) == 1 and "no registry answered before on this machine" in err, err
    err, pip = run("no_such_module_a:pkg-a[x]", "no_such_module_b:pkg-b")  # another list: asked again
    assert len(pip) == 2 and "pkg-a[x] pkg-b" in pip[1]
    mark.unlink()
    err, pip = run("no_such_module_a:pkg-a[x]", "no_such_module_b:pkg-b")
    assert len(pip) == 3
    err, pip = run("json")  # nothing missing: no pip, and the mark is cleared
    assert len(pip) == 3 and not mark.exists() and err == ""
