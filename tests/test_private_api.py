"""``edge/`` uses only the public API of other packages: no ``._name`` of theirs.

A private attribute (``_name``, not a dunder) is vsense's own when vsense defines that name
somewhere in ``edge/`` or ``offline/`` (a ``def``/``class``, an assignment to a name or an
attribute, an import from one of our modules). Any other ``x._name`` in ``edge/`` reaches
into another package (paho's ``_sock``, numba's ``_shared_module``, ...), and so does
``mod._name`` on a module imported from outside vsense, whatever the name. Parsed with
:mod:`ast`: nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OURS = ("edge", "offline")
#: underscore names that are documented public API (namedtuple's methods, ``os._exit``)
PUBLIC = {"_asdict", "_replace", "_fields", "_make", "_field_defaults", "_exit"}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _targets(node):
    if isinstance(node, (ast.Tuple, ast.List)):
        for e in node.elts:
            yield from _targets(e)
    elif isinstance(node, ast.Starred):
        yield from _targets(node.value)
    else:
        yield node


def defined_names(trees) -> set[str]:
    """Every private name our code defines: defs, classes, assigned names and ``self.``
    attributes, arguments, names imported from our own modules."""
    out = set()
    for tree in trees:
        # the instance itself: self, cls, and what a __new__ made (obj = super().__new__(cls))
        own = {"self", "cls"} | {
            t.id for n in ast.walk(tree) if isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Attribute)
            and n.value.func.attr == "__new__" for t in n.targets if isinstance(t, ast.Name)}
        for n in ast.walk(tree):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.add(n.name)
            elif isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For,
                                ast.comprehension, ast.NamedExpr)):
                tg = n.targets if isinstance(n, ast.Assign) else [n.target]
                for t in tg:
                    for x in _targets(t):
                        if isinstance(x, ast.Name):
                            out.add(x.id)
                        elif isinstance(x, ast.Attribute) and isinstance(x.value, ast.Name) \
                                and x.value.id in own:
                            out.add(x.attr)  # not lib._name = ...: that patches a library
            elif isinstance(n, ast.ImportFrom) and (n.level or (n.module or "").split(".")[0]
                                                    in OURS):
                out |= {a.asname or a.name for a in n.names}
            elif isinstance(n, ast.arg):
                out.add(n.arg)
    return {x for x in out if _private(x)}


def foreign_modules(tree) -> set[str]:
    """Names bound to modules (or objects) imported from outside vsense."""
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            for a in n.names:
                if a.name.split(".")[0] not in OURS:
                    out.add(a.asname or a.name.split(".")[0])
        elif isinstance(n, ast.ImportFrom) and not n.level and \
                (n.module or "").split(".")[0] not in OURS:
            out |= {a.asname or a.name for a in n.names}
    return out


def private_uses(files: dict[str, str], ours: set[str]) -> list[str]:
    """``path:line: expr`` of every access to another package's private attribute."""
    bad = []
    for path, text in files.items():
        tree = ast.parse(text, path)
        mods = foreign_modules(tree)
        for n in ast.walk(tree):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and \
                    n.func.id in ("getattr", "setattr", "hasattr", "delattr") and \
                    len(n.args) > 1 and isinstance(n.args[1], ast.Constant) and \
                    isinstance(n.args[1].value, str) and _private(n.args[1].value) and \
                    n.args[1].value not in ours | PUBLIC:
                bad.append(f"{path}:{n.lineno}: {ast.unparse(n)}")
                continue
            if not (isinstance(n, ast.Attribute) and _private(n.attr)) or n.attr in PUBLIC:
                continue
            base = n.value
            while isinstance(base, ast.Attribute):
                base = base.value
            on_module = isinstance(base, ast.Name) and base.id in mods
            if on_module or n.attr not in ours:
                bad.append(f"{path}:{n.lineno}: {ast.unparse(n)}")
    return bad


def _sources(pkgs):
    return {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8")
            for pkg in pkgs for p in sorted((ROOT / pkg).rglob("*.py"))}


def test_the_checker_finds_private_access():
    # the patterns this replaced: paho's socket and queue, numba's IR and cache loader
    src = {"x.py": "import numba\nfrom numba.core import caching\n"
                   "def f(client, lib):\n"
                   "    client._sock_send(b'')\n    lib._shared_module = None\n"
                   "    caching.Cache.load_overload\n    numba._helperlib\n"
                   "    self._mine = 1\n    return self._mine, ring._mine\n"}
    ours = defined_names([ast.parse(src["x.py"])])
    got = private_uses(src, ours)
    assert sorted(g.split(": ")[1] for g in got) == [
        "client._sock_send", "lib._shared_module", "numba._helperlib"]
    assert private_uses({"y.py": "def f(c):\n    return getattr(c, '_thread', None)\n"}, set())


def test_edge_uses_no_private_attribute_of_another_package():
    files = _sources(OURS)
    ours = defined_names(ast.parse(t) for t in files.values())
    edge = {p: t for p, t in files.items() if p.startswith("edge")}
    bad = private_uses(edge, ours)
    assert not bad, "private attributes of other packages:\n" + "\n".join(bad)
