"""The accuracy benchmark through the chip (benchmarks/accuracy.py): where the distance to the
limit comes from when the test records are the ADS1256's conversions. Each smoother row is
also run as the same design for point samples on point-sample records of the same seeds
(``point``): ``nrmse / point`` is the chain's own cost, the rest the estimator's."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOAD_5_80 = {"type": "random", "band": [5.0, 80.0], "rms": 1.0}


def _bench():
    spec = importlib.util.spec_from_file_location("accuracy_bench",
                                                  ROOT / "benchmarks" / "accuracy.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def test_the_benchmark_declares_the_roll_off_order_it_is_asked_for():
    # --order N: every force's [[forces]] model order (docs/load.md: declare the roll-off of a
    # sharp band); without it the declared force model keeps the default second order
    from offline.forcing.force_model import DEFAULT_ORDER
    from offline.load.declared import declared_force_models

    bench = _bench()
    path = ROOT / "examples" / "strip.toml"
    sharp = bench.case_spec(path, LOAD_5_80, 0.01, None, order=16)
    plain = bench.case_spec(path, LOAD_5_80, 0.01, None)
    assert [fm.order for fm in declared_force_models(sharp, 1000.0)] == [16]
    assert [fm.order for fm in declared_force_models(plain, 1000.0)] == [DEFAULT_ORDER]
    assert sharp.forces[0].model["order"] == 16 and not plain.forces[0].model
    assert tuple(sharp.calibration.load.band) == (5.0, 80.0)


def test_the_gap_to_the_limit_through_the_chip_is_the_force_models_not_the_chains():
    # examples/strip.toml (no [acquisition]: the ADS1256, continuous, DRATE 1000), one laser,
    # 1 %, the test loads an ideal 5-80 Hz band, 2 records of 4 s after 1 s. Measured (this
    # machine, 2026-11-29): default (second-order force model) F110 / d60 0.168 / 0.00967,
    # 2.62x / 2.46x the limit at 20 ms, point samples 0.168 / 0.00924 (chip / point 1.000 /
    # 1.047), coverage 94 / 79 %; with order 16 declared 0.0716 / 0.00411, 1.12x / 1.04x,
    # chip / point 1.016 / 1.003, coverage 73 / 68 %. Before, the benchmark compared chip
    # figures of the second-order default with point-sample ones of the old order-16 default
    # and put a 2.5-3.5x gap on the chain
    bench = _bench()
    path = ROOT / "examples" / "strip.toml"
    got = {}
    for order in (None, 16):
        case = bench.run_case(path, LOAD_5_80, 0.01, None, n_test=2, test_s=4.0, order=order)
        assert case["chain"]["converter"] == "ads1256", case["chain"]
        row = next(r for r in case["rows"] if r["chosen"])
        assert row["estimator"] == "Kalman smoother", row["estimator"]
        got[order] = row["targets"]
    for order, targets in got.items():
        for name, t in targets.items():
            # issue 35's target: the chain's own cost within 1.1x (measured <= 1.047)
            assert t["nrmse"] <= 1.1 * t["point"], (order, name, t)
    for name, t in got[None].items():
        # the default's gap is on point samples too (measured 2.46-2.62x): the force model's
        assert t["point"] >= 2.0 * t["limit_at_delay"], (name, t)
    for name, t in got[16].items():
        # the sharp band declared: within 1.15x of the chain's limit at the 20 ms delay
        # (measured 1.12x / 1.04x), a right 1-sigma (issue 35's 61-75 %; measured 73 / 68 %)
        assert t["ratio_at_delay"] <= 1.15 and 0.61 <= t["coverage"] <= 0.75, (name, t)


def test_the_build_names_the_second_order_roll_off_when_it_is_far_from_the_limit():
    # the build's summary line (offline/build_report.order_hint) from the meta a build writes:
    # its ratios (offline.limit.ratio.ratios, the paper cantilever's 5-80 Hz figures of the
    # benchmark, 0.168 / 0.0636 and 0.00937 / 0.00393 at 20 ms) and the declared force model
    from offline.build_report import order_hint
    from offline.forcing.force_model import ForceModel
    from offline.limit.ratio import ratios

    lim = {"force_names": ["F110"], "output_names": ["d60"], "delays_ms": [20.0],
           "lag_force_nrmse": [[0.0636]], "lag_output_nrmse": [[0.00393]],
           "force_nrmse": [0.0483], "output_nrmse": [0.0037]}
    acc = ratios(lim, {"F110": 0.168, "d60": 0.00937}, 20.0)

    def meta(order, source="declared", load="random", rows=acc):
        fm = ForceModel(kind="bandpass", band=(5.0, 80.0), rms=1.0, order=order)
        return {"estimator": {"method": "smoother", "force_models": [fm.as_dict()]},
                "accuracy": rows, "load_model": {"source": source},
                "calibration": {"load": load}}

    hint = order_hint(meta(2))
    assert hint is not None and "F110 2.64x, d60 2.38x" in hint, hint
    assert "model = { order = 8 }" in hint and "build --record" in hint, hint
    assert "16 where an acceleration output" in hint, hint  # the chain benchmark's plate a_out
    # a sharp roll-off declared, a learned load, a sine declaration, near the limit: silent
    near = ratios(lim, {"F110": 0.0714, "d60": 0.00398}, 20.0)  # order 16: 1.12x / 1.01x
    assert order_hint(meta(16)) is None and order_hint(meta(2, source="record")) is None
    assert order_hint(meta(2, load="sine")) is None and order_hint(meta(2, rows=near)) is None
