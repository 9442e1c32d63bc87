"""Loads whose low-frequency part the sensors do not see (offline/load/observability.py,
``unseen_low_band_warning``): the frequency from which a tip accelerometer sees a tip force
above its noise against the cantilever's quasi-static closed form, and no warning for a
displacement sensor, which sees the static response."""

import numpy as np
import pytest

from offline.limit.transfer import modal_model
from offline.load import declared_load_model
from offline.load.observability import seen_from, unseen_low_band_warning
from offline.model import build_fe_model, load_model_file, resolve_dofs
from offline.model.strip import strip_head

E, B, H, L = 69e9, 0.013, 0.0012, 0.17   # the strip of examples/strip.toml
RATE = 1000.0
BAND = (7.0, 400.0)


def _strip(tmp_path, kind):
    text = strip_head() + f"""
[[boundary]]
select = {{ at = [0.0, 0.0, 0.0] }}
[damping]
ratios = [[34.0, 0.01], [600.0, 0.01]]
[estimator]
rate = {RATE}
[[sensors]]
name = "s170"
select = {{ at = [0.17, 0.0, 0.0] }}
dof = "uz"
kind = "{kind}"
[[forces]]
name = "F170"
select = {{ at = [0.17, 0.0, 0.0] }}
dof = "uz"
[design_load]
load = {{ type = "random", band = [{BAND[0]}, {BAND[1]}], rms = 1.0 }}
duration = 2.0
"""
    path = tmp_path / f"strip_{kind}.toml"
    path.write_text(text)
    spec = load_model_file(path)
    model = build_fe_model(spec, progress=False)
    tip = resolve_dofs(model, spec.sensors[0].select, "uz", "s170")[0]
    return spec, modal_model(model, [tip], [tip]), declared_load_model(spec, RATE)


def test_seen_from_is_exact_on_a_power_law():
    f = np.geomspace(0.1, 100.0, 37)
    assert seen_from(f, (f / 3.7) ** 4) == pytest.approx(3.7, rel=1e-12)  # log-log linear
    assert seen_from(f, np.full(f.size, 2.0)) == f[0]
    assert seen_from(f, np.full(f.size, 0.5)) is None


def test_tip_accelerometer_sees_the_force_from_the_quasi_static_closed_form(tmp_path):
    spec, mm, lm = _strip(tmp_path, "acceleration")
    dt = 1.0 / RATE
    G = L ** 3 / (3.0 * E * B * H ** 3 / 12.0)      # tip compliance [m/N], Euler-Bernoulli
    S = float(np.real(lm.psd([BAND[0]])[0, 0, 0]))   # the density carried below the band
    # below the first mode (34 Hz) |H_acc| = (2 pi f)^2 G, so SNR = S (2 pi f)^4 G^2 /
    # (sigma^2 dt) is 1 at f_see: choose sigma for f_see = 4 Hz (first-mode correction
    # (1 - (4/34)^2)^-2: 2.8 % in SNR, 0.7 % in f_see)
    f_see = 4.0
    sigma = np.sqrt(S * (2 * np.pi * f_see) ** 4 * G ** 2 / dt)
    w = unseen_low_band_warning(mm, lm, ["acceleration"], [sigma], dt, ["F170"])
    assert w is not None and "F170 below" in w and "its band from 7 Hz" in w
    got = float(w.split("F170 below ")[1].split(" Hz")[0])
    assert got == pytest.approx(f_see, rel=0.015)  # 0.7 % first mode + 3 significant digits
    # ten times less noise: seen from 4 / sqrt(10) = 1.26 Hz, below 7 / 3: no warning
    assert unseen_low_band_warning(mm, lm, ["acceleration"], [sigma / 10], dt,
                                   ["F170"]) is None


def test_tip_displacement_sees_the_static_response(tmp_path):
    spec, mm, lm = _strip(tmp_path, "displacement")
    dt = 1.0 / RATE
    G = L ** 3 / (3.0 * E * B * H ** 3 / 12.0)
    S = float(np.real(lm.psd([BAND[0]])[0, 0, 0]))
    sigma = np.sqrt(S * G ** 2 / dt / 100.0)         # static SNR 100 (20 dB)
    assert unseen_low_band_warning(mm, lm, ["displacement"], [sigma], dt, ["F170"]) is None
    # a noise 100x larger: SNR 0.01 down to DC and up to the first mode's flank
    w = unseen_low_band_warning(mm, lm, ["displacement"], [100 * sigma], dt, ["F170"])
    assert w is not None and "F170" in w


def test_the_build_ships_and_prints_the_warning(tmp_path):
    # the tip accelerometer at 1 % relative noise (the model file's default for the strip):
    # seen from about 5 Hz with its band from 7 Hz, so the build warns; the build's own
    # noise (the model file's) and load model (the declared one) decide
    from offline.build import build
    spec, _, _ = _strip(tmp_path, "acceleration")
    path = tmp_path / "strip_acceleration.toml"
    path.write_text(path.read_text().replace('kind = "acceleration"', 'kind = "acceleration"\n'
                                             'noise = 0.01').replace(
        f"rate = {RATE}", f'rate = {RATE}\nmethod = "smoother"\nmodel_error = 0.0'))
    out = build(path, progress=False, maps=False, limit=False)
    warns = out.bundle.meta["load_model"]["info"]["warnings"]
    assert any("F170 below" in w for w in warns), warns
    assert "WARNING: the sensors do not see these loads" in out.summary()
