"""A model file with ``[[parameters]]`` and no ``[acquisition]`` keeps the ADS1256's chain
(the build keeps every model file's chain): its bundle models the chip's conversions,
and the device's model update (edge/inverse/update.py update_model) derives the updated
operator through that chain, the one a bundle of the changed structure gets directly."""

import numpy as np

from edge import inverse as EI
from edge.acquisition import Chain
from edge.estimator import Estimator, derive_operator
from offline.inverse.fromfile import from_model_file
from offline.model import load_model_file
from offline.reduced import design_bundle, reduce_model
from tests.helpers import root_spring_strip

# The paper's strip as 17 Euler-Bernoulli beams on a rotational root spring (tests/
# test_model_update.py without its [acquisition]: the ADS1256 by default), laser and force at
# 110 mm, output at 60 mm; parameters E and the root spring.
STRIP = root_spring_strip(tip_mass=False) + """[[forces]]
name = "F110"
select = { at = [0.11, 0.0, 0.0] }
dof = "uz"
[[outputs]]
name = "d60"
select = { at = [0.06, 0.0, 0.0] }
dof = "uz"
kind = "displacement"
[estimator]
rate = 1000.0
window = 1
[[parameters]]
name = "E"
kind = "modulus"
material = "aluminium"
bounds = [60e9, 78e9]
[[parameters]]
name = "k_root"
kind = "spring"
spring = "root"
bounds = [2.0, 20.0]
[experiment]
excitation = { type = "pulse", amplitude = 1.0, width = 0.002, at = "F110" }
duration = 0.5
rate = 1000.0
channels = ["d110"]
noise = 0.01
"""
ALPHA = 1e-6  # any alpha the per-step estimator is stable with; the same for both routes


def _bundle(path):
    """The build's bundle before calibration (offline.reduced.design_bundle), its chain as
    the build leaves it, and the reduced model."""
    spec = load_model_file(path)
    rm = reduce_model(spec, progress=False)
    b = design_bundle(rm, spec.estimator).replace(alpha=ALPHA)
    return b, rm


def _run(op_bundle, op, Y):
    """Forces and outputs of an estimator with operator ``op`` on the records ``Y``."""
    est = Estimator(op_bundle)
    est.swap(op)
    F, Z = np.empty((Y.shape[0], 1)), np.empty((Y.shape[0], 1))
    est.process(Y, F, Z, np.empty(Y.shape[0], np.uint8))
    return F, Z


def test_parameters_keep_the_ads1256_chain_and_the_update_derives_through_it(tmp_path):
    path = tmp_path / "strip.toml"
    path.write_text(STRIP)
    b, rm = _bundle(path)
    # no [acquisition]: the ADS1256 the device reads, its Markov parameters modelled, no
    # warning (on main: reset to point samples, "... is made for point samples")
    assert b.chain.converter == "ads1256" and b.chain.markov and b.chain.drate == 1000.0
    assert not b.meta.get("warnings")
    parts = from_model_file(path, progress=False, reduced=rm).pm.parts
    op, nb, _ = EI.update_model(parts, b, {"k_root": 4.0})
    assert nb.chain == b.chain and nb.chain.markov
    # the same structure built directly: the file with k = 4 reduced and designed anew
    path4 = tmp_path / "strip4.toml"
    path4.write_text(STRIP.replace("k = 10.0", "k = 4.0"))
    b4, _ = _bundle(path4)
    direct = derive_operator(b4)
    # the conversions' window reaches one sample interval back: the state keeps the previous
    # grid state and force (edge/estimator/chain_window.py), as the direct operator does
    assert op.n_state == direct.n_state > derive_operator(b4.replace(chain=Chain())).n_state
    # the two estimators on the same records (1 mm random displacements, 400 samples, seed 0):
    # the same forces and outputs. Reference: the direct operator; measured 1.4e-12 (forces)
    # and 2.9e-11 (outputs) of the largest value (the reduced matrices agree to round-off: the root's ry is a master, so
    # the Craig-Bampton basis does not depend on the spring); 1e-6 is the bound
    Y = 1e-3 * np.random.default_rng(0).standard_normal((400, 1))
    Fu, Zu = _run(b, op, Y)
    Fd, Zd = _run(b4, direct, Y)
    for u, d in ((Fu, Fd), (Zu, Zd)):
        assert np.abs(u - d).max() <= 1e-6 * np.abs(d).max()
    # ...while the operator for point samples of the same structure differs by far more
    # (measured 3.9x the largest force on these records; 1e-3 of it is the bound)
    Fp, _ = _run(b4.replace(chain=Chain()), derive_operator(b4.replace(chain=Chain())), Y)
    assert np.abs(Fp - Fd).max() > 1e-3 * np.abs(Fd).max()


def test_swap_keeps_the_conversions_history(tmp_path):
    """A swap mid-run to the same operator changes nothing through the chain: the older grid
    state the conversion's window reaches back to is carried over (edge/estimator/
    chain_window.py carry_history). On main it was zeroed: the force after the swap differed
    by 0.015 of its std (measured on this run)."""
    path = tmp_path / "strip.toml"
    path.write_text(STRIP)
    b, _ = _bundle(path)
    b = b.replace(chain=Chain("ads1256", 1000.0))  # the chip, whatever the file's default
    t = np.arange(600) * b.dt
    # two tones of the strip's band (23 and 71 Hz), displacements of 0.1 mm
    Y = (1e-4 * np.sin(2 * np.pi * 23 * t) + 3e-5 * np.sin(2 * np.pi * 71 * t + 1))[:, None]
    out = []
    for swap in (False, True):
        est = Estimator(b)
        F, Z = np.empty((600, 1)), np.empty((600, 1))
        for k0 in (0, 300):  # two blocks, the swap between them
            if swap and k0:
                est.swap(derive_operator(b))
            est.process(Y[k0:k0 + 300], F[k0:k0 + 300], Z[k0:k0 + 300],
                        np.empty(300, np.uint8))
        out.append((F, Z))
    (F0, Z0), (F1, Z1) = out
    # round-off only (measured 2e-16 / 1.5e-15 of the std); 1e-9 is the bound
    assert np.abs(F1 - F0).max() <= 1e-9 * F0[150:300].std()
    assert np.abs(Z1 - Z0).max() <= 1e-9 * Z0[150:300].std()
