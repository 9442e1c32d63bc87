"""An empty file name on the command line is named as such: ``Path("")`` is ``.``, a
directory, and the commands used to answer with a message about ``.`` or ``: bundle file
does not exist`` (found by the CLI fuzz class's review)."""

from pathlib import Path

import pytest

from edge.cli import main as edge_main
from offline.cli import main as offline_main

STRIP = Path(__file__).resolve().parents[1] / "examples" / "strip.toml"


@pytest.mark.parametrize("main, args, what", [
    (offline_main, ["build", "", "-o", "{tmp}/b.npz"], "the model file name is empty"),
    (offline_main, ["simulate", "", "--duration", "1", "-o", "{tmp}/r"],
     "the model file name is empty"),
    (offline_main, ["build", str(STRIP), "--record", "", "-o", "{tmp}/b.npz"],
     "the CSV file name is empty"),
    (edge_main, ["replay", "--bundle", "", "{tmp}/m.csv"], "the bundle file name is empty"),
    (edge_main, ["check-config", ""], "the config file name is empty"),
])
def test_an_empty_file_name_is_named(tmp_path, capsys, main, args, what):
    code = main([a.format(tmp=tmp_path) for a in args])
    assert code not in (0, None)
    assert what in capsys.readouterr().err


def test_replay_of_an_empty_measurement_name(tmp_path, capsys):
    bundle = tmp_path / "b.npz"
    assert offline_main(["build", str(STRIP), "-o", str(bundle), "--quiet"]) == 0
    assert edge_main(["replay", "--bundle", str(bundle), ""]) not in (0, None)
    assert "the measurement file name is empty" in capsys.readouterr().err
