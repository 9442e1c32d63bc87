"""Late imports of the command lines: :func:`resolve` ``("package.module:name")``.

``vsense-edge`` (:mod:`edge.cli`) and ``vsense-offline`` (:mod:`offline.cli`) name what each
sub-command runs, and the parser parts it lends, as ``"module:name"`` strings in one table
each, and import them through :func:`resolve` only when the command is built or run:
``--help`` and argument errors answer without loading numba, paho, onnxruntime or scipy's
solvers (tests/test_cli_startup.py), and ``vsense-edge`` asks the math libraries for one
thread before NumPy loads (:func:`edge.cli.single_threaded_math`). The one import inside a
function that start-up time needs (tests/test_import_graph.py counts them).
"""

from __future__ import annotations

import importlib


def resolve(target: str):
    """The object ``name`` of ``module`` for ``target = "module:name"``, the module imported
    now; ValueError for a target without both parts, ImportError/AttributeError naming what
    is not there."""
    module, sep, name = target.partition(":")
    if not (sep and module and name):
        raise ValueError(f"lazy target {target!r}: expected 'package.module:name'")
    # lazy: the command lines' modules load when their command is built or runs (start-up)
    return getattr(importlib.import_module(module), name)
