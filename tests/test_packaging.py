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


# gmsh has no aarch64 wheel: it is the `mesh` extra, and meshing a geometry file without it
# names the file and that extra (issue 14).
_BLOCKED_GMSH = r"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split('.')[0] == 'gmsh':
            raise ImportError('blocked for this test: ' + name)
sys.meta_path.insert(0, Block())
from offline._deps import MissingDependency
from offline.fem.mesh import read_mesh
try:
    read_mesh(sys.argv[1])
except MissingDependency as exc:
    print(exc)
"""


def test_meshing_without_gmsh_names_the_mesh_extra(tmp_path):
    geo = tmp_path / "block.geo"
    geo.write_text('SetFactory("OpenCASCADE");\nBox(1) = {0, 0, 0, 1, 1, 1};\n')
    out = subprocess.run([sys.executable, "-c", _BLOCKED_GMSH, str(geo)], check=True,
                         capture_output=True, text=True)
    assert "block.geo" in out.stdout and "vsense[mesh]" in out.stdout, out.stdout


def test_offline_extra_has_no_package_without_aarch64_wheel():
    # The `offline` extra must install on a Raspberry Pi 4/5 (aarch64); gmsh publishes neither
    # an aarch64 wheel nor a source release, so it lives in `mesh` (issue 14).
    import tomllib
    from pathlib import Path

    extras = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())[
        "project"]["optional-dependencies"]
    assert not any(r.lower().startswith("gmsh") for r in extras["offline"])
    assert any(r.lower().startswith("gmsh") for r in extras["mesh"])
