"""The import graph of vsense's own modules (module-level imports) has no cycle.

Parsed with :mod:`ast` (nothing is imported), so the test also guards modules whose optional
dependencies are missing. ``from pkg import name`` counts as an import of ``pkg.name`` when that
is a module of ours, else of ``pkg``; imports inside functions are not module-level and are not
counted (they are the exception, kept only where a test shows they are needed).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("edge", "offline")


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
