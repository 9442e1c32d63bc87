"""`vsense-offline` argument handling: version, help with defaults, window and pulse options."""

import numpy as np
import pytest

from edge import __version__
from offline.cli import _parser, main
from offline.simulate import load_profile


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"vsense-offline {__version__}"


def test_help_shows_defaults_and_units(capsys):
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert "half-sine pulse width [s] (--load pulse) (default: 0.002)" in out
    assert ("seed of the load and the noise (with --load csv the load is the CSV's: the "
            "seed draws the noise only) (default: 0)") in out
    assert "sine frequency [Hz] (--load sine)" in out


@pytest.mark.parametrize("value,expected", [("auto", "auto"), ("20", 20)])
def test_build_window_accepts_auto_and_integers(value, expected):
    args = _parser().parse_args(["build", "m.toml", "-o", "b.npz", "--window", value])
    assert args.window == expected


@pytest.mark.parametrize("value", ["0", "-3", "x", "2.5"])
def test_build_window_rejects_the_rest(value, capsys):
    with pytest.raises(SystemExit) as e:
        _parser().parse_args(["build", "m.toml", "-o", "b.npz", "--window", value])
    assert e.value.code == 2 and "window must be an integer >= 1 or 'auto'" in capsys.readouterr().err


def test_pulse_width_is_its_own_parameter():
    t = np.arange(100) * 1e-4
    f = load_profile("pulse", t, amplitude=2.0, width=0.004)
    # closed form: 2 sin(pi t / 0.004) for t < 4 ms, zero after
    np.testing.assert_allclose(f, np.where(t < 0.004, 2.0 * np.sin(np.pi * t / 0.004), 0.0),
                               atol=1e-12)
    with pytest.raises(ValueError, match="width > 0"):
        load_profile("pulse", t, width=0.0)
