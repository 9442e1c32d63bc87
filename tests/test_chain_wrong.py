"""A wrong measurement chain is noticed (edge/estimator/chain_check.py,
offline/smoother/chain_alt.py): the records' innovation likelihood under the bundle's chain
against the alternative (point samples / the ADS1256), on the device (replay) and in
``build --record``'s records check; the kernel against its NumPy twin."""

from pathlib import Path

import numpy as np
import pytest

from edge.estimator.chain_check import LLR_MAX, Filter, _quad_sum, quad_sum_numpy
from edge.flags import FLAG_MODEL_SUSPECT

ROOT = Path(__file__).resolve().parents[1]
SEEDS = (1, 2, 3)
# the README beam (examples/my_beam.toml) with a tip accelerometer beside the tip laser, the
# multiplexer cycling both at DRATE 3750: 1082.5 rows/s (docs/hardware.md)
ACCEL = """
[[sensors]]
name = "a_tip"
select = { at = [1.0, 0.0, 0.0] }
dof = "uz"
kind = "acceleration"
noise = 0.01
"""
ACQ = '[acquisition]\nconverter = "ads1256"\ndrate = 3750\nmode = "cycle"\n\n[estimator]'


@pytest.mark.parametrize("sparse", [False, True])
def test_quad_sum_kernel_agrees_with_its_numpy_twin(sparse):
    rng = np.random.default_rng(8)
    ns, nch, n = 12, 2, 300
    A = rng.standard_normal((ns, ns))
    if sparse:  # a smoother's pattern: 2x2 blocks, dense columns 8-9, a full last row; the
        # columns' runs of non-zero entries are then several per column, some far apart
        A *= np.kron(np.eye(6), np.ones((2, 2))) + (np.arange(ns) >= 8)
        A[:, 4] = 0.0
        A[2, 4] = A[9, 4] = 1.0
        A[-1] = rng.standard_normal(ns)
    A *= 0.9 / np.max(np.abs(np.linalg.eigvals(A)))
    H, K = rng.standard_normal((nch, ns)), 0.1 * rng.standard_normal((ns, nch))
    S = rng.standard_normal((nch, nch))
    Sinv = S @ S.T + np.eye(nch)
    Y = rng.standard_normal((n, nch))
    f = Filter(A, H, K, Sinv)
    if sparse:  # column 4: two runs (rows 2 and 9, 7 zeros apart); others 1-3 runs
        assert f.runs.shape[0] > ns and np.sum(f.runs[:, 0] == 4) == 2
    for start, skip in ((0, 0), (117, 40)):
        q = _quad_sum(Y, start, skip, f.AT, f.runs, f.H, f.AK, f.Sinv, f._x, f._xn, f._e)
        ref = quad_sum_numpy(Y, start, skip, f.A, f.H, f.AK, f.Sinv)
        assert abs(q - ref) <= 1e-9 * abs(ref), (q, ref)  # same sums, another order: 1e-9


@pytest.fixture(scope="module")
def beam(tmp_path_factory):
    """Model files (point samples, ADS1256 cycling) built with the CLI, and records of both
    chains from vsense-offline simulate (full FE model, 12 s, seeds ``SEEDS``)."""
    from offline.cli import main as offline

    d = tmp_path_factory.mktemp("chainwrong")
    text = (ROOT / "examples" / "my_beam.toml").read_text().replace(
        "rate = 1000.0 ", "rate = 1082.5 ") + ACCEL
    assert "rate = 1082.5" in text
    (d / "point.toml").write_text(text.replace(
        "[estimator]", '[acquisition]\nconverter = "ideal"\n\n[estimator]'))
    (d / "ads.toml").write_text(text.replace("[estimator]", ACQ))
    for name in ("point", "ads"):
        assert offline(["build", str(d / f"{name}.toml"), "-o", str(d / f"{name}.npz"),
                        "--quiet", "--no-maps"]) == 0
    for s in SEEDS:
        for chain, extra in (("ads1256", ["--drate", "3750", "--mode", "cycle"]),
                             ("ideal", [])):
            assert offline(["simulate", str(d / "point.toml"), "--band", "2", "100",
                            "--duration", "12", "--warmup", "1", "--chain", chain, *extra,
                            "--seed", str(s), "-o", str(d / f"{chain}_{s}"), "--quiet"]) == 0
    return d


def _replay(d, bundle, rec, capsys):
    from edge.cli import main as edge

    out = d / "est.csv"
    assert edge(["replay", str(d / f"{rec}_measurement.csv"), "--bundle",
                 str(d / f"{bundle}.npz"), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    flags = np.genfromtxt(out, delimiter=",", names=True)["flags"].astype(int)
    return err, flags


def test_replay_says_when_the_chain_is_wrong_and_not_when_it_is_right(beam, capsys):
    # a point-sample bundle fed the chip's cycled conversions, and an ADS1256 bundle fed
    # point samples: the warning in words, and the model-suspect flag after the first
    # evaluation (10 s); the right chain on the same seeds: neither (0 of 6 false alarms)
    for s in SEEDS:
        for bundle, rec, wrong in (("point", f"ads1256_{s}", True),
                                   ("ads", f"ideal_{s}", True),
                                   ("point", f"ideal_{s}", False),
                                   ("ads", f"ads1256_{s}", False)):
            err, flags = _replay(beam, bundle, rec, capsys)
            said = "the measurement chain looks wrong" in err
            assert said == wrong, (bundle, rec, err)
            if wrong:
                better = "ads1256 3750 SPS cycle" if bundle == "point" else \
                    "point samples (converter ideal)"
                assert f"the innovations fit {better} better" in err, err
                assert np.all(flags[-1000:] & FLAG_MODEL_SUSPECT), (bundle, rec)


def test_device_and_offline_statistics_have_a_margin(beam):
    # the log-likelihood ratio per sample and channel: measured (this machine) +0.095 to
    # +0.24 for the wrong chain on the device's 2 s buffer, -0.24 to -0.095 for the right one
    # (docs/hardware.md); both at least 1.5x the threshold away from it
    from edge.bundle import Bundle
    from edge.estimator import Estimator
    from offline.load import read_records
    from offline.smoother.chain_alt import records_chain_check

    for name, right in (("point", "ideal"), ("ads", "ads1256")):
        b = Bundle.load(beam / f"{name}.npz")
        # the build's own runs tell the chains apart, so the bundle carries the check
        # (offline.smoother.chain_alt.SEPARABLE: 0.1 LLR_MAX)
        assert b.meta["chain_check"]["runs_llr"] < -0.1 * LLR_MAX, b.meta["chain_check"]
        for s in SEEDS:
            for chain in ("ideal", "ads1256"):
                Y = read_records([beam / f"{chain}_{s}_measurement.csv"],
                                 [c.name for c in b.channels], b.dt)[0]
                est = Estimator(b)
                est.run(np.ascontiguousarray(Y))
                dev = est.model_check()["chain"]["llr"]
                off = records_chain_check(b, [Y])["llr"]
                for v in (dev, off):
                    if chain == right:
                        assert v < -0.5 * LLR_MAX, (name, chain, s, dev, off)
                    else:
                        assert v > 1.5 * LLR_MAX, (name, chain, s, dev, off)


@pytest.mark.timeout(1800)  # two builds with --record: 420 s idle serially, >600 s at load 8
def test_build_record_names_the_chain_the_records_fit(beam, capsys):
    # build --record with the wrong [acquisition]: the records check names the better chain;
    # with the right one: the records fit the declared chain
    from offline.cli import main as offline

    for name, wrong in (("point", True), ("ads", False)):
        capsys.readouterr()
        assert offline(["build", str(beam / f"{name}.toml"), "-o",
                        str(beam / f"{name}_rec.npz"), "--no-maps",
                        "--record", str(beam / "ads1256_1_measurement.csv")]) == 0
        out = capsys.readouterr().out
        if wrong:
            assert "WARNING: the measurement chain looks wrong: the records fit ads1256 " \
                   "3750 SPS cycle better than the declared point samples" in out, out
        else:
            assert "measurement chain: the records fit the declared ads1256 3750 SPS " \
                   "cycle" in out, out


def test_alternative_filter_is_stored_and_a_partial_group_is_named():
    # a toy smoother bundle (point samples, 1 kHz, one displacement): its alternative is
    # the ADS1256 at DRATE 1000, continuous (W = 2 chain states: 2 more states than its own)
    import io

    from edge.bundle import Bundle, BundleError, content_hash
    from offline.smoother import ForceModel, attach_smoother, design_smoother
    from offline.smoother.chain_alt import with_chain_alternative
    from tests.helpers import chain_bundle

    fm = [ForceModel("bandpass", (5.0, 80.0), 1.0, 2)]
    b = chain_bundle(n=4)
    b = attach_smoother(b, design_smoother(b, fm, lag=3), fm, 0.0, nis_window_s=0.5,
                        bands=[(20, 22), (22, 24)])
    b = with_chain_alternative(b)
    assert b.meta["chain_check"]["alternative"]["converter"] == "ads1256"
    assert b.kf["alt_A"].shape[0] == b.kf["A"].shape[0] + 2
    z = np.load(io.BytesIO(b.to_bytes()))
    a = {k: z[k] for k in z.files}
    r = Bundle.from_arrays(dict(a))
    assert np.array_equal(r.kf["alt_K"], b.kf["alt_K"])
    del a["kf_alt_K"]
    a["content_hash"] = np.array(content_hash(a))
    with pytest.raises(BundleError, match="kf_alt_K"):
        Bundle.from_arrays(a)


def test_device_check_evaluates_the_last_rows_in_order_whatever_the_blocks():
    # ChainCheck on rows pushed in uneven blocks: its value after each evaluation equals
    # llr() of the last BUFFER_S of rows in time order (same sums: 1e-12 relative), the
    # evaluations come every EVERY_S, and reset() clears them
    from edge.estimator.chain_check import BUFFER_S, EVERY_S, BURN, ChainCheck, llr

    rng = np.random.default_rng(5)
    ns, nch, dt = 5, 2, 0.01
    A = rng.standard_normal((ns, ns))
    A *= 0.8 / np.max(np.abs(np.linalg.eigvals(A)))
    kf = {"A": A, "H": rng.standard_normal((nch, ns)), "K": 0.1 * rng.standard_normal((ns, nch)),
          "Sinv": np.eye(nch)}
    kf.update({"alt_A": 0.9 * A, "alt_H": kf["H"], "alt_K": kf["K"], "alt_Sinv": 2 * np.eye(nch)})
    cc = ChainCheck(kf, dt, "a", "b")
    n, every = int(round(BUFFER_S / dt)), int(round(EVERY_S / dt))
    Y = rng.standard_normal((3 * every + 7, nch))
    a, seen = 0, []
    for nb in (1, 250, 3, 999, 1000, 17, 5000):
        blk = Y[a:a + nb]
        cc.push(blk)
        a += blk.shape[0]
        if cc.count > len(seen):
            end = (a // every) * every  # rows up to the last evaluation
            ref = llr(cc.bundle_filter, cc.alt, Y[end - n:end], 0, int(BURN * n))
            seen.append(ref)
            assert abs(float(cc.values[(cc.count - 1) % 6]) - ref) <= 1e-12 * abs(ref)
        if a >= Y.shape[0]:
            break
    assert cc.count == 3 == len(seen)
    assert abs(cc.value() - np.mean(seen)) <= 1e-12 * abs(np.mean(seen))
    cc.reset()
    assert cc.value() is None and not cc.suspect
