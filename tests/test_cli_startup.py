"""The command lines import their subcommands' modules only when a command is built or runs
(``edge/cli.py`` and ``offline/cli.py`` through their ``LAZY`` tables and
:func:`edge.lazy.resolve`, ``offline/calibration/cli.py`` inside ``main()``): ``--help`` must
answer without loading numba, paho, onnxruntime or scipy's solvers, which take seconds on a
Raspberry Pi. These tests show why those imports stay late; ``tests/test_import_graph.py``
lists every import inside a function with its reason."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("numba", "paho", "onnxruntime", "scipy.sparse.linalg", "scipy.signal", "matplotlib",
         "emcee", "dynesty", "offline.build", "edge.daemon.loop")


def _loaded_by(code: str) -> list[str]:
    prog = (f"import sys\ntry:\n    {code}\nexcept SystemExit:\n    pass\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True,
                         check=True).stdout
    return out.strip().splitlines()[-1]


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"], ["replay", "--help"],
                                  ["monitor", "--help"]])
def test_edge_cli_help_loads_no_heavy_module(argv):
    assert _loaded_by(f"from edge.cli import main; main({argv!r})") == "[]"


@pytest.mark.parametrize("argv", [["calibrate", "--help"], ["limit", "--help"]])
def test_offline_subcommand_help_loads_no_heavy_module(argv):
    pytest.importorskip("scipy", reason="the offline CLI needs vsense[offline]")
    assert _loaded_by(f"from offline.cli import main; main({argv!r})") == "[]"
