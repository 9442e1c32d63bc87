"""Packaging contract: edge never imports offline or scipy; missing extras are named."""

import subprocess
import sys

import pytest


def test_edge_imports_without_offline_or_scipy():
    code = (
        "import sys, edge, edge.bundle, edge.estimator\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('offline', 'scipy', 'sklearn')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_dependency_names_the_extra():
    from offline._deps import MissingDependency, need

    with pytest.raises(MissingDependency, match=r"vsense\[offline\]"):
        need("scipy_that_does_not_exist")
