"""Size rule of docs/ARCHITECTURE.md's style: no module of ``offline/`` or ``edge/`` over
:data:`MAX_MODULE` lines, no function (method, nested function) over :data:`MAX_FUNCTION`.

What still breaks the rule is listed below with its length when listed and why; the list can
only shrink: an entry that grew fails, and an entry that no longer breaks the rule fails until
it is removed. Lengths are counted with :mod:`ast` (a function from its ``def`` line to its last
line, decorators not counted), nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("edge", "offline")
MAX_MODULE = 450
MAX_FUNCTION = 80

#: module -> (lines when listed, why it is still longer)
MODULES = {
}

#: (module, qualified function name) -> (lines when listed, why it is still longer)
FUNCTIONS = {
    ("edge/estimator/smoother_kernel.py", "_smooth"):
        (227, "numba kernel of the smoother's sample step: one compiled body"),
    ("edge/estimator/kernel.py", "_process"):
        (89, "numba kernel of the Tikhonov sample step: one compiled body"),
}


def sizes(root: Path = ROOT, packages=PACKAGES):
    """``(modules, functions)``: ``{path: lines}`` and ``{(path, qualname): lines}`` of every
    module and function under ``packages`` (paths relative to ``root``, with ``/``)."""
    modules, functions = {}, {}
    for pkg in packages:
        for p in sorted((root / pkg).rglob("*.py")):
            rel = p.relative_to(root).as_posix()
            src = p.read_text(encoding="utf-8")
            modules[rel] = len(src.splitlines())
            functions.update({(rel, q): n for q, n in function_lengths(src)})
    return modules, functions


def function_lengths(src: str):
    """``(qualified name, lines)`` of every function, method and nested function of ``src``."""
    out = []

    def walk(node, prefix):
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((prefix + ch.name, ch.end_lineno - ch.lineno + 1))
                walk(ch, f"{prefix}{ch.name}.")
            elif isinstance(ch, ast.ClassDef):
                walk(ch, f"{prefix}{ch.name}.")
            else:
                walk(ch, prefix)

    walk(ast.parse(src), "")
    return out


def _over(measured: dict, allowed: dict, limit: int) -> list[str]:
    bad = []
    for key, n in sorted(measured.items()):
        listed = allowed.get(key)
        if n > limit and listed is None:
            bad.append(f"{key}: {n} lines > {limit} (split it; the allow-list only shrinks)")
        elif listed is not None and n > listed[0]:
            bad.append(f"{key}: {n} lines, longer than the {listed[0]} it was listed with")
    for key, (n0, _) in sorted(allowed.items()):
        if key not in measured:
            bad.append(f"{key}: listed but not found (moved or renamed: update the list)")
        elif measured[key] <= limit:
            bad.append(f"{key}: {measured[key]} lines, within {limit} now: remove it from the list")
    return bad


def test_function_lengths_counts_methods_and_nested_functions():
    # 3 lines for f, 6 for C.m (def to its last line), 2 for its nested g: counted by hand
    src = ("def f():\n    x = 1\n    return x\n\n\nclass C:\n    def m(self):\n"
           "        def g():\n            return 1\n        y = g()\n        y += 1\n"
           "        return y\n")
    assert dict(function_lengths(src)) == {"f": 3, "C.m": 6, "C.m.g": 2}


def test_allow_list_entries_are_explained():
    for key, (n, why) in {**MODULES, **FUNCTIONS}.items():
        assert n > 0 and why.strip(), key


def test_no_module_over_the_limit():
    modules, _ = sizes()
    assert not _over(modules, MODULES, MAX_MODULE), "\n".join(_over(modules, MODULES, MAX_MODULE))


def test_no_function_over_the_limit():
    _, functions = sizes()
    bad = _over(functions, FUNCTIONS, MAX_FUNCTION)
    assert not bad, "\n".join(bad)
