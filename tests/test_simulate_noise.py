"""``vsense-offline simulate`` adds each sensor's declared noise (``[[sensors]] noise``
relative to the channel's signal std, paper 004 eq. 28, or ``noise_std`` absolute, which
wins); ``--noise X`` overrides it with X relative on every channel; a sensor declaring
neither gets 1 %. Reference: the declarations themselves; the noise is the measurement
minus the noise-free values (``Y - Y_clean`` through the ideal chain, ``Y - Y_conv`` through
the chip), its std a sample std of n draws (relative sd 1/sqrt(2 n))."""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("scipy.sparse")

from edge.csvio import read_table  # noqa: E402
from helpers import strip_toml  # noqa: E402
from offline.cli import main  # noqa: E402
from offline.simulate import simulate_model  # noqa: E402

RATE = 1082.5  # two channels cycled by the ADS1256 at 3750 SPS (the default chain)
TAIL = """
[[boundary]]
select = { at = [0.0, 0.0, 0.0] }
[estimator]
rate = 1082.5
[[forces]]
name = "F_tip"
select = { at = [0.17, 0.0, 0.0] }
dof = "uz"
[[sensors]]
name = "d102"
select = { at = [0.102, 0.0, 0.0] }
dof = "uz"
kind = "displacement"
D102_NOISE
[[sensors]]
name = "a170"
select = { at = [0.17, 0.0, 0.0] }
dof = "uz"
kind = "acceleration"
A170_NOISE
"""
#: a170's std under the 1 N random load is about 3.7e3 m/s^2: 50 m/s^2 is about 1.4 %
A170_STD = 50.0


def model(tmp_path, d102="noise = 0.05", a170=f"noise_std = {A170_STD}"):
    path = tmp_path / "two.toml"
    path.write_text(strip_toml(10) + TAIL.replace("D102_NOISE", d102)
                    .replace("A170_NOISE", a170))
    return path


def _cli_noise(tmp_path, path, *extra):
    """The CLI's record through the ideal chain: (noise (ns, 2), clean (ns, 2))."""
    out = tmp_path / "rec"
    assert main(["simulate", str(path), "--duration", "2", "--seed", "3", "--chain",
                 "ideal", "--quiet", "-o", str(out), *extra]) == 0
    _, y, names = read_table(f"{out}_measurement.csv")
    _, truth, tnames = read_table(f"{out}_truth.csv")
    clean = truth[:, [tnames.index(n) for n in names]]
    assert names == ["d102", "a170"]
    return y - clean, clean


def test_cli_adds_each_sensors_declared_noise_and_says_so(tmp_path, capsys):
    noise, clean = _cli_noise(tmp_path, model(tmp_path))
    out = capsys.readouterr().out
    assert "noise: d102 5 % (model file), a170 50 m/s^2 (noise_std)" in out
    n = noise.shape[0]
    assert n == 2166  # 2 s at 1082.5 rows/s, both ends
    # tolerance 4 sample-std sigmas: 4 / sqrt(2 n) = 6 % relative for n = 2166
    tol = 4 / np.sqrt(2 * n)
    assert np.std(noise[:, 0]) / np.std(clean[:, 0]) == pytest.approx(0.05, rel=tol)
    assert np.std(noise[:, 1]) == pytest.approx(A170_STD, rel=tol)
    # the absolute std is not the 1 % default (would be ~37 m/s^2, 26 % lower)
    assert abs(np.std(noise[:, 1]) / (0.01 * np.std(clean[:, 1])) - 1) > 2 * tol


def test_cli_noise_option_overrides_both_declarations(tmp_path, capsys):
    noise, clean = _cli_noise(tmp_path, model(tmp_path), "--noise", "0.01")
    assert "noise: d102 1 % (--noise), a170 1 % (--noise)" in capsys.readouterr().out
    tol = 4 / np.sqrt(2 * noise.shape[0])  # as above
    for j in range(2):
        assert np.std(noise[:, j]) / np.std(clean[:, j]) == pytest.approx(0.01, rel=tol)


def test_cli_undeclared_noise_is_one_percent_and_said(tmp_path, capsys):
    noise, clean = _cli_noise(tmp_path, model(tmp_path, d102="", a170=""))
    assert ("noise: d102 1 % (default: the model file declares none), a170 1 % (default: "
            "the model file declares none)") in capsys.readouterr().out
    tol = 4 / np.sqrt(2 * noise.shape[0])  # as above
    for j in range(2):
        assert np.std(noise[:, j]) / np.std(clean[:, j]) == pytest.approx(0.01, rel=tol)


def test_api_default_is_the_declaration_through_the_chip(tmp_path):
    # the default chain (ADS1256, cycled): the noise is on the conversions, Y - Y_conv
    res = simulate_model(model(tmp_path), {"type": "random", "band": (5.0, 160.0), "rms": 1.0},
                         2.0, seed=4, progress=False)
    assert res.info["chain"] == "ads1256" and res.info["noise_from"] == ["model file",
                                                                         "noise_std"]
    noise = res.Y - res.Y_conv
    tol = 4 / np.sqrt(2 * noise.shape[0])  # as above
    assert np.std(noise[:, 0]) / np.std(res.Y_conv[:, 0]) == pytest.approx(0.05, rel=tol)
    assert np.std(noise[:, 1]) == pytest.approx(A170_STD, rel=tol)


@pytest.mark.parametrize("kw,argv,msg", [
    (dict(d102="noise = -0.05"), [], r"two.toml: \[\[sensors\]\]\[0\]\.noise: -0.05 is out "
                                     r"of range"),
    (dict(a170="noise_std = -3.0"), [], r"two.toml: \[\[sensors\]\]\[1\]\.noise_std: -3.0 is "
                                        r"out of range"),
    ({}, ["--noise", "-0.01"], r"noise \(--noise\): a relative level must be a finite "
                               r"number >= 0, got -0.01"),
])
def test_bad_noise_is_refused_naming_the_key(tmp_path, capsys, kw, argv, msg):
    assert main(["simulate", str(model(tmp_path, **kw)), "--duration", "0.1", "--quiet",
                 "-o", str(tmp_path / "x"), *argv]) == 2
    assert re.search(msg, capsys.readouterr().err)
