"""The chain check is shipped only where it can tell the chains apart
(offline/smoother/chain_alt.py ``with_chain_alternative(bundle, runs)``): runs that fit the
alternative chain as well as the declared one (one converted channel: a conversion looks
like a delayed load) leave the bundle without the alternative's filter, said in its meta and
the build's summary; the device then runs no check. The separable case (two channels cycled)
keeps it: tests/test_chain_wrong.py, whose CLI builds go through the same path."""

from types import SimpleNamespace

import numpy as np

from edge.estimator import Estimator
from offline.smoother import ForceModel, attach_smoother, design_smoother
from offline.smoother.chain_alt import COMMON_FILTER, SEPARABLE, runs_llr, with_chain_alternative
from tests.helpers import chain_bundle


def _toy():
    # point samples, 1 kHz, one displacement: the alternative is the ADS1256 at DRATE 1000,
    # continuous (tests/test_chain_wrong.py's toy)
    fm = [ForceModel("bandpass", (5.0, 80.0), 1.0, 2)]
    b = chain_bundle(n=4)
    return attach_smoother(b, design_smoother(b, fm, lag=3), fm, 0.0, nis_window_s=0.5)


def _own_innovation_runs(b, n_runs=3, n=3000, seed=4):
    """Records of the bundle's own steady filter (its innovation form: x' = A x + A K e,
    y = H x + e, e ~ N(0, S)): the declared chain's model, exactly."""
    kf = b.kf
    A, H, K = kf["A"], kf["H"], kf["K"]
    L = np.linalg.cholesky(np.linalg.inv(kf["Sinv"]))
    rng = np.random.default_rng(seed)
    runs = []
    for _ in range(n_runs):
        x = np.zeros(A.shape[0])
        Y = np.empty((n, H.shape[0]))
        for k in range(n):
            e = L @ rng.standard_normal(H.shape[0])
            Y[k] = H @ x + e
            x = A @ (x + K @ e)
        runs.append(SimpleNamespace(Y=Y, start=500))
    return runs


def test_runs_that_cannot_tell_the_chains_apart_ship_no_check():
    b = _toy()
    runs = _own_innovation_runs(b)
    full = with_chain_alternative(b)                  # no runs: the filter, as before
    assert "alt_A" in full.kf and full.meta["chain_check"]["alternative"] is not None
    v = runs_llr(full, full.kf, runs)
    # the declared chain's own records: the alternative no better (LLR <= 0 in expectation),
    # and with one continuous channel hardly worse (the README beam's laser: -0.0011)
    assert -SEPARABLE < v <= 1e-3, v
    got = with_chain_alternative(b, runs)
    cc = got.meta["chain_check"]
    assert cc["alternative"] is None and "alt_A" not in got.kf
    assert cc["runs_llr"] == v and "the device does not check it" in cc["note"]
    assert Estimator(got).chain_check is None and Estimator(full).chain_check is not None


def test_point_samples_and_a_daq_say_what_no_check_notices():
    """A filter common to every channel commutes with the structure, so no statistic of the
    records flags it (benchmarks/chain.py: the plate's three channels through one 2 ms FIR,
    replayed with the point-sample bundle, NIS/dof 0.95, no warning, d_out 23x worse): the
    build says so where the user declares the timing (point samples, a generic DAQ), not for
    the ADS1256, whose timing the chip fixes."""
    from edge.acquisition import Chain

    b = _toy()
    for got in (with_chain_alternative(b), with_chain_alternative(b, _own_innovation_runs(b))):
        assert COMMON_FILTER in got.meta["chain_check"]["note"], got.meta["chain_check"]
    # the declared chain only decides the note (the alternative of either is point samples,
    # which the toy's gains are designed for)
    for chain, said in ((Chain(converter="daq", drate=1000.0, cutoff=300.0,
                               group_delay=2e-3), True),
                        (Chain(converter="ads1256", drate=1000.0), False)):
        c = b.replace(chain=chain)
        note = with_chain_alternative(c).meta["chain_check"].get("note", "")
        assert (COMMON_FILTER in note) is said, (chain.converter, note)
