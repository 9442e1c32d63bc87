"""Import of optional heavy packages with an error that names the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

_EXTRA = {
    "scipy": "offline",
    "meshio": "offline",
    "gmsh": "mesh",
    "matplotlib": "offline",
    "sklearn": "offline",
    "skl2onnx": "offline",
    "onnx": "offline",
    "tqdm": "offline",
    "emcee": "offline",
    "dynesty": "offline",
    "pypardiso": "fast",
    "jax": "hybrid",
    "jax2onnx": "hybrid",
}


class MissingDependency(ImportError):
    """A package of an optional extra is not installed."""


def need(module: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependency` naming the pip extra.

    Parameters
    ----------
    module : str
        Dotted module name, e.g. ``"scipy.sparse.linalg"``.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - exercised by test_deps with a fake name
        top = module.split(".")[0]
        extra = _EXTRA.get(top, "offline")
        raise MissingDependency(
            f"{module!r} is needed here but not installed: pip install 'vsense[{extra}]'"
        ) from exc


def progress(iterable=None, total=None, desc: str = "", enable: bool = True, **kw):
    """A tqdm progress bar on stderr (a plain iterator when tqdm is missing or disabled; no bar
    when stderr is not a terminal, so logs get no carriage returns or escape codes)."""
    if not enable:
        return iterable if iterable is not None else _NullBar()
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return iterable if iterable is not None else _NullBar()
    kw.setdefault("disable", None)  # None: off when stderr is not a TTY
    return tqdm(iterable, total=total, desc=desc, leave=False, dynamic_ncols=True, **kw)


class _NullBar:
    def update(self, n=1):
        pass

    def set_postfix_str(self, s):
        pass

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False
