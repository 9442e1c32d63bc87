"""Sensor placement through the measurement chain (offline/placement/chained.py): each layout's
smoother is the one the build designs for the written model file, with its ADS1256 chain
(continuous for one channel, the multiplexer cycling for several) and the candidates' sensor
dynamics (a laser's moving average, an IEPE accelerometer's high-pass)."""

import re

import numpy as np
import pytest
from scipy.linalg import expm

import offline.smoother.chain as smoother_chain
from edge.acquisition import Chain
from offline.build import build
from offline.cli import main as offline_main
from offline.model import load_model_file
from offline.placement import placement_model
from offline.placement.chained import layout_chain
from offline.placement.honest import _transfers
from offline.placement.write import write_placed
from offline.smoother.chain import sensor_model
from offline.smoother.van_loan import van_loan
from tests.test_placement import HEAD

# The strip of tests/test_placement.py without its [acquisition] (the default ADS1256 chain),
# three candidates at the tip: a laser displacement sensor averaging over 4 ms, an IEPE
# accelerometer high-passed at 10 Hz and a plain displacement sensor; 1 % noise each.
STRIP = HEAD.replace('[acquisition]\nconverter = "ideal"\n', "") + """[placement]
[[placement.candidates]]
name = "L170"
select = { at = [0.17, 0.0, 0.0] }
dof = "uz"
kind = "displacement"
noise = 0.01
average_s = 0.004
[[placement.candidates]]
name = "a170"
select = { at = [0.17, 0.0, 0.0] }
dof = "uz"
kind = "acceleration"
noise = 0.01
highpass_hz = 10.0
[[placement.candidates]]
name = "d170"
select = { at = [0.17, 0.0, 0.0] }
dof = "uz"
kind = "displacement"
noise = 0.01
"""
# 719 rows/s: the ADS1256's row rate at 2000 SPS with two channels cycling
CYCLE = STRIP.replace("rate = 1000.0", "rate = 719.0")


def test_a_layouts_chain_is_the_one_the_build_gives_the_placed_file(tmp_path):
    for text, layout, conv in ((STRIP, ["L170"], ("ads1256", 1000.0, "continuous")),
                               (STRIP, ["a170", "d170"], ("ideal", 0.0, "continuous")),
                               (CYCLE, ["L170", "d170"], ("ads1256", 2000.0, "cycle"))):
        p = tmp_path / "s.toml"
        p.write_text(text)
        spec = load_model_file(p)
        cands = list(spec.placement.candidates)
        mine = layout_chain(spec, [c for c in cands if c.name in layout])
        built = load_model_file(write_placed(p, tmp_path / "w.toml", layout)).chain()
        assert mine == built
        assert (mine.converter, mine.drate, mine.mode) == conv
        assert len(mine.offsets) == (2 if conv[2] == "cycle" else 0)


def test_a_layout_the_build_would_refuse_is_named(tmp_path):
    # one offset per [[sensors]] entry: the placed file with a second channel is refused
    p = tmp_path / "s.toml"
    p.write_text(STRIP + '[acquisition]\nconverter = "ideal"\noffsets = [0.0001]\n'
                 '[[sensors]]\nname = "d100"\nselect = { at = [0.1, 0.0, 0.0] }\n'
                 'dof = "uz"\nkind = "displacement"\nnoise = 0.01\n')
    spec = load_model_file(p)
    with pytest.raises(ValueError, match=r"2 channel\(s\) would be refused by the build: "
                                         r".*\[acquisition\]\.offsets"):
        layout_chain(spec, list(spec.sensors) + list(spec.placement.candidates)[:1])
    # a data rate declared for one channel: continuous; cycling two is refused the same way
    p.write_text(STRIP + '[acquisition]\nconverter = "ads1256"\n')
    spec = load_model_file(p)
    with pytest.raises(ValueError, match=r"\[acquisition\]\.drate"):
        layout_chain(spec, list(spec.placement.candidates)[:2])


def test_schur_transfer_equals_the_eigen_one():
    # T(z) = (zI - Abar)^-1 A K two ways on a stable diagonalisable system (seeded)
    rng = np.random.default_rng(5)
    Ac = rng.normal(size=(8, 8)) - 4.0 * np.eye(8)
    Abar = expm(0.05 * Ac)
    AK, Cq, H = rng.normal(size=(8, 2)), rng.normal(size=(3, 8)), rng.normal(size=(2, 8))
    z = np.exp(2j * np.pi * np.linspace(0.0, 0.5, 33))
    a = _transfers(Abar, AK, Cq, H, z, schur=False)
    b = _transfers(Abar, AK, Cq, H, z, schur=True)
    for x, y in zip(a, b):  # both backward stable: round-off only
        np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-9 * np.max(np.abs(y)))


@pytest.mark.parametrize("text, layout", [(STRIP, ["L170"]), (CYCLE, ["L170", "a170"])])
def test_prediction_through_the_chain_is_what_the_built_bundle_measures(tmp_path, text,
                                                                        layout):
    # Point samples predicted F110 / d60 0.180 / 0.0123 for the laser alone where the built
    # bundle's calibration runs measure 0.288 / 0.036 (38 % / 66 % off), and 0.145 / 0.0055
    # for laser + IEPE cycling at 719 rows/s against 0.190 / 0.0057 (23 % off). Through the
    # chain: 0.284 / 0.039 and 0.195 / 0.0053 (measured, 3 runs of 2 s: within 7 %; bound 10 %)
    p = tmp_path / "s.toml"
    p.write_text(text)
    pm = placement_model(load_model_file(p), progress=False)
    idx = [pm.candidates.index(n) for n in layout]
    b = build(write_placed(p, tmp_path / "w.toml", layout), progress=False, limit=False,
              maps=False).bundle
    assert not b.chain.point
    cal = np.array(b.meta["selection"]["best"]["nrmse"])
    np.testing.assert_allclose(pm.nrmse(idx), cal, rtol=0.10)
    # the stated std: the same model as the build's (4 %: the two reductions differ, as in
    # tests/test_placement.py's point-sample check)
    stated = np.array(b.meta["estimator"]["std"]) / pm.target_std
    np.testing.assert_allclose(pm.stated(idx, b.meta["estimator"]["model_error"]), stated,
                               rtol=0.04)


def test_place_prefers_the_plain_sensor_to_the_averaging_laser(tmp_path, capsys):
    # as point samples the laser and the displacement sensor at the tip are the same
    # candidate (a tie); through the chain the laser's 4 ms average costs it (0.284 / 0.039
    # against 0.184 / 0.013 predicted; tests above)
    p = tmp_path / "s.toml"
    p.write_text(STRIP)
    out = tmp_path / "one.toml"
    assert offline_main(["place", str(p), "-n", "1", "-o", str(out), "--quiet"]) == 0
    text = capsys.readouterr().out
    row = re.search(r"^\s+1\s+(\S+)\s", text, re.M)
    assert row.group(1) == "d170"
    assert "note: the predictions are the Kalman smoother's" not in text  # method smoother


def _augmented_reference(Ac, Qcs, npers, s, idx, nk, nch):
    """The NumPy twin of offline.smoother.chain._augmented: the module docstring's backward
    recursion on the whole ``[Phi_j; G_j]`` (the design path's form before placement needed
    it fast)."""
    nx, N = Ac.shape[0], len(s) - 1
    Wrow = {}
    for j, r, w in idx:
        Wrow.setdefault(j, np.zeros((nk, nx)))[r] += w
    nz = npers + nk
    T = np.zeros((nz, nx))
    T[:npers, :npers] = np.eye(npers)      # Phi_N = I
    T[npers:] = Wrow.get(N, 0.0)           # G_N = W_N
    Qa = [np.zeros((nz, nz)) for _ in Qcs]
    for j in range(N, 0, -1):
        EQ = [van_loan(Ac, Qc, s[j] - s[j - 1]) for Qc in Qcs]
        for Qm, (_, Qj) in zip(Qa, EQ):
            Qm += T @ Qj @ T.T             # cov += [Phi_j; G_j] Q_j [Phi_j; G_j]^T
        T = T @ EQ[0][0]                   # Phi_j-1 = Phi_j E_j;  G_j-1 = W_j-1 + G_j E_j
        if j - 1 in Wrow:
            T[npers:] += Wrow[j - 1]
    F = np.zeros((nz, nz))
    F[:, :npers] = T[:, :npers]
    F[npers + nch:, npers:nz - nch] = np.eye(nk - nch)
    Ha = np.zeros((nch, nz))
    Ha[:, nz - nch:] = np.eye(nch)
    return F, [0.5 * (Q + Q.T) for Q in Qa], Ha


@pytest.mark.parametrize("chain", [
    Chain("ads1256", 2000.0, "cycle", (0.0, 3e-4, 6e-4)),
    Chain("ads1256", 3750.0, average=(0.0025, 0.0, 0.0), highpass=(0.0, 10.0, 0.0),
          drift=(0.0, 0.0, 0.1)),
    Chain("daq", 1000.0, cutoff=400.0, group_delay=0.002)])
def test_the_chains_discretisation_equals_its_reference_recursion(monkeypatch, chain):
    # the functionals-only recursion (offline/smoother/chain.py) against the whole-state one
    # on a random stable system (seeded): the same sums in another order, round-off only
    # (measured 2e-13 relative)
    rng = np.random.default_rng(1)
    Ac = rng.normal(size=(10, 10)) * 50.0 - 200.0 * np.eye(10)
    Qc = rng.normal(size=(10, 10))
    Qc = Qc @ Qc.T
    C = rng.normal(size=(3, 10))
    fast = sensor_model(Ac, Qc, C, 1e-3, chain, 3)
    monkeypatch.setattr(smoother_chain, "_augmented", _augmented_reference)
    ref = sensor_model(Ac, Qc, C, 1e-3, chain, 3)
    for a, b in zip(fast, ref):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-11 * max(np.max(np.abs(b)), 1e-300))
