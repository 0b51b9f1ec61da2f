"""CPU: the README holds true. It is a user's document (at most 12 KB); every `cudnn-algos` line in its code blocks
names a command that exists and flags that command takes (checked against the real parser, with --help); every
docs/ page it points to exists; every Python name its API block calls is in the package. The docs read in a terminal:
no line over 120 characters, and the pages a user reads first stay short (dated runs live in docs/results/)."""
import re
import shlex
from pathlib import Path

import pytest
from conftest import run_cli

import cudnn_algos
from cudnn_algos import cli

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def _cli_lines() -> list[list[str]]:
    lines, cont = [], ""
    for block in _blocks("bash"):
        for line in block.splitlines():
            line = cont + line.split("   #")[0].strip()
            if line.endswith("\\"):
                cont = line[:-1] + " "
                continue
            cont = ""
            if line.startswith("cudnn-algos"):
                lines.append(shlex.split(line)[1:])
    return lines


def test_the_readme_is_a_users_document():
    assert len(README.encode()) <= 12 * 1024
    for heading in ("## Set-up: two commands", "## Python API", "## CLI", "## Limitations"):
        assert heading in README
    assert "bash scripts/run" in README and "bash scripts/test" in README


def test_every_docs_page_the_readme_names_exists():
    for page in set(re.findall(r"docs/[\w./-]+\.md", README)):
        assert (ROOT / page).is_file(), page


def test_no_line_of_the_docs_is_over_120_characters():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    long = [f"{p.relative_to(ROOT)}:{n}" for p in pages
            for n, line in enumerate(p.read_text().splitlines(), 1) if len(line.encode()) > 120]  # UTF-8 bytes
    assert long == [], long[:10]


def test_the_how_to_pages_stay_pages_not_run_logs():
    for page, kb in (("selector.md", 15), ("sweep.md", 16), ("dataset.md", 16)):
        assert len((ROOT / "docs" / page).read_bytes()) <= kb * 1024, page


@pytest.mark.parametrize("argv", _cli_lines(), ids=lambda a: " ".join(a)[:60])
def test_every_cli_line_of_the_readme_names_real_flags(argv):
    parser = cli.build_parser()
    command = argv[0]
    sub = next(a for a in parser._subparsers._group_actions if a.dest == "command").choices  # noqa: SLF001
    assert command in sub, argv
    known = {s for act in sub[command]._actions for s in act.option_strings}  # noqa: SLF001
    for tok in (t.strip("[]") for t in argv[1:]):  # [--db PATH]: optional, still a real flag
        if tok.startswith("--"):
            assert tok.split("=")[0] in known, (tok, argv)
    r = run_cli(command, "--help")
    assert r.returncode == 0 and "usage:" in r.stdout


def test_every_name_the_api_block_calls_is_public():
    (block,) = [b for b in _blocks("python") if "cudnn_algos.profile" in b]
    for name in set(re.findall(r"cudnn_algos\.(\w+)", block)):
        assert name in cudnn_algos.__all__ and hasattr(cudnn_algos, name), name


def test_the_readmes_install_line_brings_every_optional_package_a_command_checks_for():
    """Every module a command checks for with `needs()` (each flag's literal in cli/) is in cli.checks.OPTIONAL, and
    the extras of the README's `pip install ... -e ".[...]"` line hold its package (pyproject.toml's extras,
    followed through `cudnn_algos[...]`). (`compare` and `--plot` said "needs the pandas package" after the
    README's install, which was `-e .`.)"""
    import tomllib

    from cudnn_algos.cli.checks import OPTIONAL

    src = "".join(p.read_text() for p in (ROOT / "cudnn_algos" / "cli").glob("*.py"))
    checked = set(re.findall(r'needs\([^()]*?,\s*"(\w+)"\)', src))
    checked |= set(re.findall(r'\("--[\w-]+", a\.\w+, "(\w+)"\)', src))  # (flag, given, module) tuples
    assert {"pandas", "matplotlib", "pyarrow", "sklearn"} <= checked and checked <= set(OPTIONAL), checked
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]

    def packages(names: str) -> set[str]:
        out = set()
        for name in names.split(","):
            for req in extras[name.strip()]:
                inner = re.fullmatch(r"cudnn_algos\[(.*)\]", req)
                out |= packages(inner.group(1)) if inner else {req}
        return out

    install = [ln for ln in README.splitlines() if ln.startswith("pip install") and " -e " in ln]
    assert len(install) == 1, install
    given = re.search(r'-e "?\.\[([\w,]+)\]"?', install[0])
    assert given, f"the README's install line installs no extras: {install[0]}"
    have = packages(given.group(1))
    assert all(OPTIONAL[m][0] in have and OPTIONAL[m][0] in packages(OPTIONAL[m][1]) for m in OPTIONAL), have
