"""The daemon's compiled per-sample call on the bundle ``vsense-offline build`` ships: the
README beam (examples/my_beam.toml) builds a Kalman smoother with load levels and a start-up
std (a chain check added here: its one laser ships none), and the same sample stream through the compiled call and through the
general path gives the same rows, flags, alignment and stated std, bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import run_sample_path

from edge.estimator import Estimator
from edge.flags import FLAG_GAP

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def beam_bundle(tmp_path_factory):
    from offline.cli import main

    from edge.bundle import Bundle
    from offline.smoother.chain_alt import with_chain_alternative

    out = tmp_path_factory.mktemp("beam") / "my_beam.npz"
    assert main(["build", str(ROOT / "examples" / "my_beam.toml"), "-o", str(out),
                 "--quiet"]) == 0
    # one laser converted continuously: the build's runs cannot tell the chains apart, so it
    # ships no chain check (tests/test_chain_inseparable.py); the paths are compared with one
    b = Bundle.load(out)
    assert b.meta["chain_check"]["alternative"] is None and "alt_A" not in b.kf
    with_chain_alternative(b).save(out)
    return out


def _stream(n, scale):
    """A tip displacement: 8 Hz (the first mode) and noise at ``scale`` [m], 4x louder from
    sample 5,000 (the level tracker's NIS moves), a gap at 2,500 and a short non-finite run
    at 7,000-7,002 (held, below the fault limit)."""
    rng = np.random.default_rng(31)
    t = np.arange(n) * 1e-3
    y = scale * (np.sin(2 * np.pi * 8.0 * t) + 0.3 * rng.normal(size=n))
    y[5000:] *= 4.0
    y[7000:7003] = np.nan
    fl = np.zeros(n, np.uint8)
    fl[2500] = FLAG_GAP
    return y[:, None], fl


def test_built_smoother_compiled_path_equals_the_general_path(beam_bundle):
    """14 s at 1 kHz: the tracker decides 11 times after the gap, the chain check evaluates
    once (10 s after the gap's reset). Equal bit for bit: both paths run the one compiled
    kernel on the same packed arrays (no tolerance)."""
    from edge.daemon.fastpath import CLOCK_OK

    if not CLOCK_OK:
        return
    est = Estimator(beam_bundle)
    assert est.tracker is not None and est.chain_check is not None and est.n_warm > 0
    # the scale: the stated std of the tip's neighbour output, d05 (~ the response's size)
    y, fl = _stream(14_000, 10.0 * float(est.std[-1]))
    got = run_sample_path(est, y, fl, True)
    ref = run_sample_path(Estimator(beam_bundle), y, fl, False)
    rows, stds, taken, est, path = got
    rows_r, stds_r, none, est_r, path_r = ref
    assert none == 0 and path.call.__name__ == "_sample_smooth"
    # Python takes the start-up rows after the start and the gap (kf_startup_var rows + lag),
    # the tracker's window ends (1 in 1,000), the chain check's evaluation and the held run
    assert taken > 0.9 * y.shape[0], taken
    for k, (a, b) in enumerate(zip(rows, rows_r)):
        assert a[:4] == b[:4], (k, a[:4], b[:4])
        assert np.array_equal(a[4], b[4], equal_nan=True), k
    assert np.array_equal(stds, stds_r)
    tr, tr_r = est.tracker, est_r.tracker
    assert (tr.level, tr.switches, tr.last_ratio) == (tr_r.level, tr_r.switches, tr_r.last_ratio)
    assert est.chain_check.count == est_r.chain_check.count == 1
    assert est.chain_check.value() == est_r.chain_check.value()
    assert est.model_check() == est_r.model_check()
