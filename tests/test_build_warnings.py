"""The build warns when an estimate is worse than an estimate of zero on its calibration runs
(offline/build.py ``worse_than_zero``): a user's two-storey frame whose reduced model (20
modes, 4 % eigenvalue error within the band) misses the girder's vertical acceleration was
built without a word, and its estimate had 2.3x the signal's own RMS as its error."""

from pathlib import Path

import numpy as np

from offline.build import build, worse_than_zero

# the user's frame of benchmarks/load_user.py (its model file, 20 modes), reduced by GMR+ (the
# file's "auto" takes cb+r there, whose a1z is within its limit: tests/test_reduction_auto.py)
FRAME = (Path(__file__).resolve().parents[1] / "benchmarks" / "load_user"
         / "frame.toml").read_text().replace('method = "auto"', 'method = "gmr+"')
assert 'method = "gmr+"' in FRAME


def test_worse_than_zero_names_exactly_the_targets_above_one():
    assert worse_than_zero(["F", "d", "a"], [0.5, 1.0, 1.0001]).startswith(
        "on the calibration runs the estimate of a 1 (normalised")
    assert worse_than_zero(["F", "d"], [0.99, np.float64(0.2)]) is None


def test_a_target_the_reduced_model_misses_is_warned_about(tmp_path):
    # the Tikhonov estimators: their a1z rests on every reduced mode (the smoother's
    # acceleration output leaves out the two the reduction misses and estimates a1z on these
    # runs, 0.11: tests/test_honest_cli.py)
    text = {}
    for modes in (20, 40):
        p = tmp_path / f"frame{modes}.toml"
        p.write_text(FRAME.replace("modes = 20", f"modes = {modes}").replace(
            "rate = 500.0", 'rate = 500.0\nmethod = "tikhonov"'))
        text[modes] = build(p, progress=False, maps=False, limit=False).summary()
    # 20 modes: the girder's vertical acceleration a1z (measured: error 1.9-2.3x its RMS)
    warn = [x for x in text[20].splitlines() if "WARNING" in x and "worse than" in x]
    assert len(warn) == 1 and "a1z" in warn[0] and "Fx" not in warn[0], text[20]
    # 40 modes describe it (measured: 0.7): no warning
    assert "worse than an estimate of zero" not in text[40], text[40]


def test_a_sensor_without_a_declared_noise_is_warned_about(tmp_path, capsys):
    # examples/my_beam.toml without its `noise = 0.01` lines: the schema reads 0, and the
    # runs, the limit and the design take the floor (offline.limit.model.NOISE_FLOOR, 1e-4),
    # so the stated std assumed near-perfect sensors without a word (d05's std 2.3e-7 m)
    from offline.calibration_runs import noise_warning
    from offline.cli import main
    from offline.model import load_model_file

    src = Path(__file__).resolve().parents[1] / "examples" / "my_beam.toml"
    bare = tmp_path / "bare.toml"
    bare.write_text("\n".join(ln for ln in src.read_text().splitlines()
                              if not ln.startswith("noise = ")) + "\n")
    assert main(["build", str(bare), "-o", str(tmp_path / "b.npz"), "--quiet"]) == 0
    warn = [ln for ln in capsys.readouterr().out.splitlines() if "no noise declared" in ln]
    assert len(warn) == 1 and "WARNING: d_tip:" in warn[0] and "0.0001" in warn[0], warn
    # the file as shipped declares its noise: silent
    assert noise_warning(load_model_file(src)) is None
    # a learned absolute noise (build --record) stands in for the declaration
    lm = type("Learned", (), {"noise_std": [1e-6]})()
    assert noise_warning(load_model_file(bare), lm) is None
    assert "d_tip" in noise_warning(load_model_file(bare))
