"""CPU (CI): the documented install works in a fresh virtual environment. Runs where CUDNN_ALGOS_INSTALL_TEST=1 (CI's
.ci/run sets it: it needs a package registry and about a minute); elsewhere it is skipped with that reason.

The venv sees the machine's torch (--system-site-packages: torch is gigabytes) but has its own fresh setuptools, as a
new venv does; the README's two steps then install and build cudnn_algos from a copy of this tree."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(os.environ.get("CUDNN_ALGOS_INSTALL_TEST") != "1",
                                reason="set CUDNN_ALGOS_INSTALL_TEST=1 to run (CI does): needs PyPI and ~1 minute")


def _run(*cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    return r


def readme_install_lines() -> list[list[str]]:
    """The `pip install ...` lines of the README's code blocks, as argument lists (comments dropped)."""
    import shlex

    out = []
    for line in (ROOT / "README.md").read_text().splitlines():
        if line.startswith("pip install"):
            out.append(shlex.split(line.split("#", 1)[0]))
    return out


def test_fresh_venv_install(tmp_path):
    tree = tmp_path / "src"
    shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(".git", "build", "*.so", "__pycache__", "*.egg-info",
                                                              "out", ".whl"))
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--system-site-packages", str(venv))
    py = str(venv / "bin" / "python")
    # the README's install, word for word: its `pip install` lines (torch is the machine's, seen by the venv)
    lines = readme_install_lines()
    assert len(lines) == 2 and lines[1][-2] == "-e" and lines[1][-1].startswith("."), lines
    for args in lines:
        _run(py, "-m", *args[:2], "-q", *[str(tree) + a[1:] if a.startswith(".") else a for a in args[2:]])
    r = _run(py, "-c", "from cudnn_algos import info; print(info().extension)", cwd=tmp_path)
    assert r.stdout.startswith("installed (") and str(tree) in r.stdout
    assert _run(str(venv / "bin" / "cudnn-algos"), "--version").stdout.startswith("cudnn-algos ")
    # every optional module a command checks for imports after that install (compare, --plot, sweeps, selector)
    from cudnn_algos.cli.checks import OPTIONAL

    _run(py, "-c", "; ".join(f"import {m}" for m in OPTIONAL), cwd=tmp_path)
    # the README's test command after that install uses the module it built: no second build (setup.py leaves
    # bootstrap's stamp; it built the extension again, ~4 min of a 2-core machine's set-up)
    r = _run("bash", "-c", "source scripts/bootstrap.sh", cwd=tree, env={**os.environ, "PYTHON": py})
    assert "building cudnn_algos._C" not in r.stderr and "ready after" in r.stderr, r.stderr
