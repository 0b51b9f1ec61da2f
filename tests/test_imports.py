"""CPU: the package's shape (docs/layout.md), every module of every subpackage walked: imports run one way (no
circle, and down the layers of LAYERS), no module imports another's underscore names (the extension loader _ext and the build finder _build are
the package's own private modules), only ``backend`` loads the extension, no public name of a package is shadowed
by a submodule of the same name (or the other way round), no file runs past 500 lines and no function past 80
without saying why ("Long because")."""
import ast
import importlib
from pathlib import Path

import cudnn_algos

PKG = Path(cudnn_algos.__file__).parent
ALLOWED_PRIVATE_MODULES = ("_ext", "_build", "_C")  # _C: the compiled extension, loaded by _ext alone


def _dotted(path: Path) -> str:
    rel = path.relative_to(PKG).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)  # "" is the package itself


MODULES = {_dotted(p): p for p in sorted(PKG.rglob("*.py"))}
PACKAGES = {name for name, p in MODULES.items() if p.name == "__init__.py"}


def _resolve(name: str, level: int, module: str | None) -> str:
    """The dotted name a relative import in module `name` refers to."""
    here = name.split(".") if name else []
    base = here if name in PACKAGES else here[:-1]  # a package's __init__ imports relative to itself
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join(base + (module.split(".") if module else []))


def _imports(name: str) -> tuple[set[str], list[str]]:
    """(modules `name` imports, its imports of another module's underscore names)."""
    deps, private, aliases = set(), [], {}
    tree = ast.parse(MODULES[name].read_text())
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and node.level >= 1):
            continue
        target = _resolve(name, node.level, node.module)
        for a in node.names:
            sub = f"{target}.{a.name}" if target else a.name
            if sub in MODULES:  # `from . import backend`, `from .results import codec`
                deps.add(sub)
                aliases[a.asname or a.name] = sub
            elif target in MODULES:
                deps.add(target)
                if a.name.startswith("_") and not a.name.startswith("__") and a.name not in ALLOWED_PRIVATE_MODULES \
                        and target.split(".")[-1] not in ALLOWED_PRIVATE_MODULES:
                    private.append(f"{name} imports {target}.{a.name}")
    for node in ast.walk(tree):  # `from . import api` then `api._x(...)`
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and node.attr.startswith("_") and not node.attr.startswith("__")
                and aliases[node.value.id].split(".")[-1] not in ALLOWED_PRIVATE_MODULES):
            private.append(f"{name} uses {aliases[node.value.id]}.{node.attr}")
    return deps - {name, "", "__main__"}, private


def test_every_subpackage_is_walked():
    assert {"results.codec", "measure.clocks", "model.profiling", "tuning.db", "backend"} <= set(MODULES)


def test_no_private_cross_module_imports():
    bad = [p for name in MODULES for p in _imports(name)[1]]
    assert bad == []


def test_no_import_circle():
    graph = {name: _imports(name)[0] for name in MODULES if name not in ("", "__main__")}
    state: dict[str, int] = {}
    circles = []

    def visit(u, path):
        state[u] = 1
        for v in sorted(graph.get(u, ())):
            if state.get(v) == 1:
                circles.append(" -> ".join(path[path.index(v):] + [v]))
            elif not state.get(v):
                visit(v, path + [v])
        state[u] = 2

    for u in sorted(graph):
        if not state.get(u):
            visit(u, [u])
    assert circles == []


def test_only_the_backend_loads_the_extension():
    users = sorted(name for name in MODULES if "_ext" in _imports(name)[0])
    assert users == ["backend"]


def test_no_public_name_shadows_a_submodule():
    for pkg in sorted(PACKAGES):
        mod = importlib.import_module(f"cudnn_algos{'.' + pkg if pkg else ''}")
        subs = {n.rsplit(".", 1)[-1] for n in MODULES if n.startswith(f"{pkg}." if pkg else "") and
                n.count(".") == (pkg.count(".") + 1 if pkg else 0) and n}
        shadowed = sorted(n for n in getattr(mod, "__all__", ()) if n in subs)
        assert shadowed == [], f"cudnn_algos.{pkg}: {shadowed} name both a submodule and a public object"


def test_files_and_functions_are_short_or_say_why():
    long = []
    for name, path in MODULES.items():
        text = path.read_text()
        lines = text.splitlines()
        if len(lines) > 500 and "Long because" not in "\n".join(lines[:15]):
            long.append(f"{name or '__init__'}: {len(lines)} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > 80:
                head = "\n".join(lines[node.lineno - 1: node.lineno + 40])
                if "Long because" not in head:
                    long.append(f"{name}.{node.name} ({node.end_lineno - node.lineno + 1} lines)")
    assert long == []


def test_pyproject_ships_every_subpackage():
    """A wheel holds what pyproject's package discovery finds: every package directory here must match it."""
    import fnmatch
    import tomllib

    cfg = tomllib.loads((PKG.parent / "pyproject.toml").read_text())
    include = cfg["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = sorted("cudnn_algos" + (f".{p}" if p else "") for p in PACKAGES)
    assert len(packages) >= 6
    assert [p for p in packages if not any(fnmatch.fnmatch(p, pat) for pat in include)] == []


# The layers, bottom to top (docs/layout.md): a module imports only from its own layer or a lower one. Each top-level
# module or subpackage of cudnn_algos is in exactly one layer; a new one must be placed here.
LAYERS = (
    ("errors", "spec", "_version", "_build", "environment", "files", "progress", "plots", "repro", "choices", "configs",
     "builtin_models", "epilogue"),
    ("problem", "_ext"),
    ("backend", "plans_ahead", "installation"),
    ("results", "comparison", "trace"),
    ("measure",),
    ("api", "engines", "fused"),
    ("choose",),  # the run-time choice without a search: the selector's inference, apply()'s unseen handler
    ("model", "model_source", "corpus", "sampling"),
    ("tuning",),
    ("sweep",),
    ("dataset",),  # the measured rows, the shards, the regret report
    ("selector",),  # training and evaluating a selector
    ("cli", "__main__", ""),
)


def test_imports_run_down_the_layers():
    rank = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}
    units = {name.split(".")[0] for name in MODULES}
    assert sorted(units - set(rank)) == [], "place these modules in a layer of LAYERS"
    upward = sorted(f"{name} (layer {rank[name.split('.')[0]]}) imports {dep} (layer {rank[dep.split('.')[0]]})"
                    for name in MODULES for dep in _imports(name)[0]
                    if rank[dep.split(".")[0]] > rank[name.split(".")[0]])
    assert upward == []
