"""The package's layout holds: layers imported only downwards, no import cycle, no private name across packages.

The layers are stated once, as an import-linter contract in ``pyproject.toml``
(``lint-imports`` checks it; this test runs the same check). grimp (which
import-linter is built on) gives the import graph, counting imports inside
functions too, for the cycle check; a module that loads others with
``importlib.import_module`` by name adds an edge to each package module it names.
"""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

from conftest import REPO

PKG = REPO / "vidur_specdec"


def _lint_imports():
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    return subprocess.run([exe], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_import_contracts_are_kept():
    out = _lint_imports()
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout
    # at least the layers the layout promises
    text = (REPO / "pyproject.toml").read_text()
    start = text.index("layers = [")
    layers = text[start:text.index("]", start)].count('"vidur_specdec.')
    assert layers >= 5


def _strongly_connected(graph):
    """Tarjan's algorithm, iterative; returns the components with more than one module."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(graph.get(w, ()))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _module_file(module: str) -> Path:
    path = REPO / module.replace(".", "/")
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def _importlib_edges(modules) -> dict:
    """``{module: {modules it names}}`` for modules that call ``importlib.import_module``: every string
    constant in such a module that is exactly a package module's name counts as an import of it (the
    subcommand table of the dispatcher, say), which grimp cannot see."""
    edges = {}
    for m in modules:
        tree = ast.parse(_module_file(m).read_text())
        calls = any(isinstance(n, ast.Call) and (getattr(n.func, "attr", None) == "import_module"
                                                 or getattr(n.func, "id", None) == "import_module")
                    for n in ast.walk(tree))
        if calls:
            edges[m] = {n.value for n in ast.walk(tree)
                        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in modules}
    return edges


def _import_graph():
    g = grimp.build_graph("vidur_specdec", cache_dir=None)  # imports inside functions count too
    root = "vidur_specdec"  # the package's own __init__ re-exports aside
    graph = {m: {d for d in g.find_modules_directly_imported_by(m) if d.startswith(root + ".")}
             for m in g.modules if m != root}
    for m, names in _importlib_edges(set(graph)).items():
        graph[m] |= names - {m}
    return graph


def test_no_import_cycle_among_the_packages_modules():
    assert _strongly_connected(_import_graph()) == []


def test_the_cycle_check_sees_imports_by_name():
    """The dispatcher loads its subcommands with importlib: those edges are in the checked graph."""
    graph = _import_graph()
    assert {"vidur_specdec.run", "vidur_specdec.sweep.cli", "vidur_specdec.validate.cli"} <= graph["vidur_specdec.cli"]


def test_the_cycle_check_finds_a_cycle():
    assert _strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _package_of(path: Path) -> str:
    """The package a module file belongs to (a package's ``__init__`` belongs to that package)."""
    return ".".join(path.relative_to(REPO).parts[:-1])


def _private_imports_across_packages():
    bad = []
    for f in sorted(PKG.rglob("*.py")):
        mine = _package_of(f)
        for node in ast.walk(ast.parse(f.read_text())):
            if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                    and node.module.startswith("vidur_specdec")):
                continue
            target = REPO / node.module.replace(".", "/")
            theirs = node.module if target.is_dir() else node.module.rsplit(".", 1)[0]
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__") and theirs != mine:
                    bad.append(f"{f.relative_to(REPO)}: from {node.module} import {alias.name}")
    return bad


def test_no_private_name_is_imported_across_packages():
    assert _private_imports_across_packages() == []


@pytest.mark.parametrize("module", ["vidur_specdec.config", "vidur_specdec.hardware.devices",
                                    "vidur_specdec.architectures.models", "vidur_specdec.costs.memory",
                                    "vidur_specdec.speculation.proposers"])
def test_lower_layers_import_without_vidur(module):
    """The layers below the engine load without Vidur's simulator (fast start for config and profile tools)."""
    code = f"import sys, {module}; print(any(m == 'vidur' or m.startswith('vidur.') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
