"""Packaging contract: edge runs without the offline stack; missing extras are named."""

import subprocess
import sys

import pytest

# Run edge with scipy, sklearn, matplotlib and offline made unimportable (as on a Pi with the
# base install only). numba itself probes for scipy and must cope with its absence too.
_BLOCKED_EDGE_RUN = r"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split('.')[0] in ('scipy', 'sklearn', 'matplotlib', 'offline', 'gmsh', 'meshio'):
            raise ImportError('blocked for this test: ' + name)
sys.meta_path.insert(0, Block())
import numpy as np
import edge, edge.bundle, edge.estimator, edge.replay, edge.cli
from tests.helpers import chain_bundle
from edge.estimator import Estimator
F, Z, flags = Estimator(chain_bundle()).run(np.zeros((50, 1)))
assert F.shape == (50, 1) and np.all(np.isfinite(F))
print('ok')
"""


def test_edge_runs_without_offline_stack():
    out = subprocess.run([sys.executable, "-c", _BLOCKED_EDGE_RUN], check=True,
                         capture_output=True, text=True)
    assert out.stdout.strip().endswith("ok")


def test_missing_dependency_names_the_extra():
    from offline._deps import MissingDependency, need

    with pytest.raises(MissingDependency, match=r"vsense\[offline\]"):
        need("scipy_that_does_not_exist")
