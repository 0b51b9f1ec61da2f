"""CPU: the package's shape (docs/layout.md): imports run one way (no circle), no module imports another's underscore
names (the extension loader _ext and the build finder _build are the package's own private modules), no public
function is shadowed by a submodule of the same name, and no function runs past 80 lines without saying why."""
import ast
from pathlib import Path

import cudnn_algos

PKG = Path(cudnn_algos.__file__).parent
MODULES = {p.stem: p for p in PKG.glob("*.py")}
ALLOWED_PRIVATE_MODULES = ("_ext", "_build")


def _imports(name: str) -> tuple[set[str], list[str]]:
    deps, private, aliases = set(), [], {}
    tree = ast.parse(MODULES[name].read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            target = (node.module or "").split(".")[0]
            if target in MODULES:
                deps.add(target)
                private += [f"{name} imports {target}.{a.name}" for a in node.names
                            if a.name.startswith("_") and not a.name.startswith("__")
                            and target not in ALLOWED_PRIVATE_MODULES]
            elif node.module is None:
                for a in node.names:
                    if a.name in MODULES:
                        deps.add(a.name)
                        aliases[a.asname or a.name] = a.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and node.attr.startswith("_") and not node.attr.startswith("__")
                and aliases[node.value.id] not in ALLOWED_PRIVATE_MODULES):
            private.append(f"{name} uses {aliases[node.value.id]}.{node.attr}")
    return deps - {name, "__init__", "__main__"}, private


def test_no_private_cross_module_imports():
    bad = [p for name in MODULES for p in _imports(name)[1]]
    assert bad == []


def test_no_import_circle():
    graph = {name: _imports(name)[0] for name in MODULES if name not in ("__init__", "__main__")}
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


def test_no_public_name_shadows_a_submodule():
    shadowed = [n for n in cudnn_algos.__all__ if n in MODULES]
    assert shadowed == []
    import importlib

    for name in MODULES:
        if name.startswith("_"):
            continue
        mod = importlib.import_module(f"cudnn_algos.{name}")
        assert getattr(cudnn_algos, name, mod) is mod, f"cudnn_algos.{name} is not the submodule"


def test_long_functions_say_why():
    long = []
    for name, path in MODULES.items():
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > 80:
                head = "\n".join(lines[node.lineno - 1: node.lineno + 40])
                if "Long because" not in head:
                    long.append(f"{name}.{node.name} ({node.end_lineno - node.lineno + 1} lines)")
    assert long == []
