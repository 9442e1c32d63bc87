"""The import graph of vsense's own modules (module-level imports) has no cycle.

Parsed with :mod:`ast` (nothing is imported), so the test also guards modules whose optional
dependencies are missing. ``from pkg import name`` counts as an import of ``pkg.name`` when that
is a module of ours, else of ``pkg``; imports inside functions are not module-level and are not
counted by the cycle tests (they are the exception, kept only where a test shows they are
needed): :data:`LOCAL_IMPORTS` lists each with its one-line reason, at most
:data:`MAX_LOCAL_IMPORTS`.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("edge", "offline")

MAX_LOCAL_IMPORTS = 10
#: (module file, what it imports inside a function) -> why not at the top. The list can only
#: shrink: an unlisted local import fails, and so does a listed one that is gone.
#: ``importlib.import_module`` counts as one (edge.lazy.resolve: the command lines' tables).
LOCAL_IMPORTS = {
    ("edge/lazy.py", "importlib.import_module"):
        "the command lines' 'module:name' tables: a command's modules load when it is built or "
        "runs, so --help stays fast and scipy-free (tests/test_cli_startup.py)",
    ("offline/_deps.py", "importlib.import_module"):
        "need(): an optional extra's third-party package (scipy, gmsh ...), with an error "
        "naming the pip extra; none of our modules",
    ("edge/daemon/config.py", "edge.fatigue.sn_curve"):
        "the package edge.fatigue loads numba (rainflow); the config loads for every "
        "vsense-edge --help",
    ("edge/daemon/app.py", "edge.fatigue.monitor"):
        "the fatigue counters only with [[fatigue]] hotspots (numba's rainflow kernel)",
    ("edge/historian/store.py", "edge.historian.postgres"):
        "PostgreSQL only for a postgresql:// URL (psycopg 3 is the optional historian extra)",
    ("offline/calibration/cli.py", "offline.calibration.command"):
        "`vsense-offline calibrate --help` answers without scipy and the build",
    ("offline/calibration/cli.py", "offline.model.spec"):
        "`vsense-offline calibrate --help` answers without scipy and the build",
}


def _modules(root=ROOT, packages=PACKAGES) -> dict[str, Path]:
    out = {}
    for pkg in packages:
        for p in sorted((root / pkg).rglob("*.py")):
            parts = list(p.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


def _resolve(name: str, mods) -> str | None:
    """The longest prefix of ``name`` that is one of our modules."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def _ancestors(name: str, mods) -> set[str]:
    parts = name.split(".")
    return {p for p in (".".join(parts[:i]) for i in range(1, len(parts))) if p in mods}


def _imported(node, module: str, is_pkg: bool, mods) -> set[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:  # relative: from the package of `module`
            pkg = module.split(".") if is_pkg else module.split(".")[:-1]
            pkg = pkg[:len(pkg) - node.level + 1]
            base = ".".join(pkg + ([base] if base else []))
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
    out = {r for r in (_resolve(n, mods) for n in names) if r and r != module}
    # importing a.b.c runs the packages a and a.b first (those not already being imported)
    return out.union(*(_ancestors(r, mods) - _ancestors(module, mods) - {module} for r in out))


def _lazy_table(node) -> list[str]:
    """The ``"module:name"`` targets of a module-level ``LAZY = {...}`` (:mod:`edge.lazy`)."""
    if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
            and [ast.unparse(t) for t in node.targets] == ["LAZY"]):
        return []
    return [v.value for v in node.value.values
            if isinstance(v, ast.Constant) and isinstance(v.value, str) and ":" in v.value]


def import_graph(root=ROOT, packages=PACKAGES, functions: bool = False) -> dict[str, set[str]]:
    """module -> our modules it imports at module level (also under ``if``/``try``, not under
    ``if TYPE_CHECKING``), including the packages such an import runs first; with
    ``functions`` also the imports inside functions and classes."""
    mods = _modules(root, packages)
    graph = {}
    for m, p in mods.items():
        tree = ast.parse(p.read_text(encoding="utf-8"), str(p))
        deps: set[str] = set()
        stack = list(tree.body)
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                deps |= _imported(node, m, p.name == "__init__.py", mods)
            elif isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
                continue  # not executed
            elif isinstance(node, (ast.If, ast.Try)) or (functions and isinstance(
                    node, (ast.For, ast.While, ast.With))):
                stack += [*node.body, *getattr(node, "orelse", []),
                          *getattr(node, "finalbody", []),
                          *(s for h in getattr(node, "handlers", []) for s in h.body)]
            elif functions and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                 ast.ClassDef)):
                stack += node.body
            elif functions and _lazy_table(node):  # LAZY = {...: "module:name"} (edge.lazy)
                deps |= {r for r in (_resolve(t.split(":")[0], mods) for t in _lazy_table(node))
                         if r and r != m}
        graph[m] = deps
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of modules (first == last), or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def visit(v):
        state[v] = 1
        path.append(v)
        for w in sorted(graph.get(v, ())):
            if state.get(w) == 1:
                return path[path.index(w):] + [w]
            if w not in state:
                c = visit(w)
                if c:
                    return c
        state[v] = 2
        path.pop()
        return None

    for v in sorted(graph):
        if v not in state:
            c = visit(v)
            if c:
                return c
    return None


def test_finder_sees_a_cycle():
    # the checker itself: a two-module cycle and a three-module one are found, a chain is not
    assert find_cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_a_submodule_import_runs_its_package(tmp_path):
    # f.beam importing m.elements runs m/__init__.py, which imports m.modelfile -> f.beam: the
    # cycle that breaks `import f.beam` when it comes first (offline.fem.beam and offline.model
    # had it); the same import under `if TYPE_CHECKING:` is not executed and is no cycle
    files = {"m/__init__.py": "from m.modelfile import x\n", "m/modelfile.py":
             "from f.beam import y\nx = 1\n", "m/elements.py": "z = 1\n",
             "f/__init__.py": "", "f/beam.py": "from m.elements import z\ny = 1\n"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    cycle = find_cycle(import_graph(tmp_path, ("m", "f")))
    assert cycle is not None and "f.beam" in cycle and "m" in cycle
    (tmp_path / "f/beam.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                        "    from m.elements import z\ny = 1\n")
    assert find_cycle(import_graph(tmp_path, ("m", "f"))) is None


def test_graph_has_the_known_edges():
    # the parser resolves absolute, relative and `from pkg import module` imports
    g = import_graph()
    assert "edge.bundle" in g["offline.build"]
    assert "offline.reduction.pardiso" in g["offline.reduction.eigen"]
    assert "offline.reduction.gmr" in g["offline.reduction"]  # `from .gmr import ...`
    assert "offline" not in g["edge.bundle"] and not any(d.startswith("offline") for d in
                                                         set().union(*(g[m] for m in g
                                                                       if m.startswith("edge"))))


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_function_level_imports_are_seen(tmp_path):
    # a cycle closed by an import inside a function (or a method) is found with functions=True
    (tmp_path / "p").mkdir()
    (tmp_path / "p/__init__.py").write_text("")
    (tmp_path / "p/a.py").write_text("from p.b import y\nx = 1\n")
    (tmp_path / "p/b.py").write_text("y = 1\nclass C:\n    def f(self):\n"
                                     "        from p.a import x\n        return x\n")
    assert find_cycle(import_graph(tmp_path, ("p",))) is None
    assert find_cycle(import_graph(tmp_path, ("p",), functions=True)) == ["p.a", "p.b", "p.a"]


def test_no_import_cycle_function_level_imports_included():
    # a cycle closed only by an import inside a function still ties the modules together
    # (neither can be understood or tested without the other); the load vocabulary
    # (offline/forcing) sits below the model-file parser, the smoother and the load learning
    cycle = find_cycle(import_graph(functions=True))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def local_imports(root=ROOT, packages=PACKAGES) -> list[tuple[str, str]]:
    """``(module file, imported name)`` of each import of our modules inside a function or a
    class (relative imports included) and of each ``import_module`` call."""
    out = []
    for pkg in packages:
        for p in sorted((root / pkg).rglob("*.py")):
            rel = p.relative_to(root).as_posix()
            tree = ast.parse(p.read_text(encoding="utf-8"), str(p))
            for top in tree.body:
                if not isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    continue
                for node in ast.walk(top):
                    if isinstance(node, ast.Import):
                        out += [(rel, a.name) for a in node.names
                                if a.name.split(".")[0] in packages]
                    elif isinstance(node, ast.ImportFrom) and (
                            node.level or (node.module or "").split(".")[0] in packages):
                        out.append((rel, "." * node.level + (node.module or "")))
                    elif isinstance(node, ast.Call) and (
                            ast.unparse(node.func).endswith("import_module")):
                        out.append((rel, "importlib.import_module"))
    return out


def test_local_import_counter_sees_each_kind(tmp_path):
    # three local imports of the package (plain, from, relative), one import_module call and
    # a local import of the standard library (not counted): written by hand, counted by hand
    (tmp_path / "p").mkdir()
    (tmp_path / "p/__init__.py").write_text("import os\n")
    (tmp_path / "p/a.py").write_text(
        "import importlib\n\ndef f():\n    import json\n    import p.b\n"
        "    from p import b\n    return importlib.import_module('p.b')\n\n"
        "class C:\n    def g(self):\n        from . import b\n        return b\n")
    (tmp_path / "p/b.py").write_text("x = 1\n")
    assert sorted(local_imports(tmp_path, ("p",))) == sorted(
        [("p/a.py", "p.b"), ("p/a.py", "p"), ("p/a.py", "importlib.import_module"),
         ("p/a.py", ".")])


def test_local_imports_are_few_and_explained():
    found = local_imports()
    counted = sorted(set(found))
    assert len(found) <= MAX_LOCAL_IMPORTS, (
        f"{len(found)} imports of our modules inside functions (at most {MAX_LOCAL_IMPORTS}): "
        + ", ".join(f"{m}: {n}" for m, n in counted))
    unlisted = [k for k in counted if k not in LOCAL_IMPORTS]
    assert not unlisted, f"local imports without a reason in LOCAL_IMPORTS: {unlisted}"
    gone = [k for k in LOCAL_IMPORTS if k not in counted]
    assert not gone, f"listed in LOCAL_IMPORTS but no longer local (remove them): {gone}"
    assert all(why.strip() and "\n" not in why for why in LOCAL_IMPORTS.values())


@pytest.mark.parametrize("cli", ["edge.cli", "offline.cli"])
def test_lazy_tables_name_what_exists(cli):
    # a typo in a "module:name" string shows only when the command runs: resolve them all
    if cli.startswith("offline"):
        pytest.importorskip("scipy", reason="the offline CLI needs vsense[offline]")
    from edge.lazy import resolve

    table = importlib.import_module(cli).LAZY
    assert table and all(t.split(":")[0] in _modules() for t in table.values()), table
    for key, target in table.items():
        assert resolve(target) is not None, (key, target)
    # and the tables are edges of the function-level graph (the cycle test sees them)
    assert {t.split(":")[0] for t in table.values()} <= import_graph(functions=True)[cli]


def test_resolve_names_a_bad_target():
    from edge.lazy import resolve

    with pytest.raises(ValueError, match="edge.cli.main"):
        resolve("edge.cli.main")  # a dot where the colon belongs
    with pytest.raises(AttributeError, match="no_such_name"):
        resolve("edge.cli:no_such_name")
