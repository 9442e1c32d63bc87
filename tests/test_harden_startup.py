"""Issue 26 item 3: what ``check-config`` refuses, ``run`` refuses the same way; inputs that
pass must not give unflagged non-finite estimates.

Found by an audit of main: crafted inverse-map entries made ``vsense-edge run`` exit with a
traceback (TypeError/ValueError past ``InverseHook.attach``) while ``check-config --bundle``
refused them with exit code 3; ``[mqtt] host = ""`` passed ``check-config`` and ``run`` died
in paho; ``output_rows = -1e308`` and a replay CSV cell of 1e308 gave +-inf estimates with
flags 0. The classes that found them run in the fuzz tier (tests/test_fuzz_startup.py).
"""

import io
import json

import numpy as np
import pytest

from edge.bundle import Bundle, content_hash
from edge.cli import main
from edge.estimator import Estimator
from edge.flags import FLAG_OVERFLOW, FLAG_WARMUP
from helpers import chain_bundle, toy_map_bundle


def _toml(tmp_path, bundle, channels=("y2",), **mqtt) -> str:
    chans = "".join(f'[[channels]]\nname = "{c}"\npin = "AIN{i}"\n'
                    for i, c in enumerate(channels))
    extra = "".join(f"{k} = {json.dumps(v)}\n" for k, v in mqtt.items())
    p = tmp_path / "edge.toml"
    p.write_text(f'[device]\nid = "st"\n[bundle]\npath = "{bundle}"\n{chans}'
                 f'[mqtt]\nenabled = {"true" if mqtt else "false"}\n{extra}'
                 f'[recorder]\nenabled = false\n'
                 f'[simulate]\nlevel = "signal"\nclock = "virtual"\nduration_s = 0.2\n')
    return str(p)


def _rewrite(src: Bundle, path, edit) -> None:
    """Save ``src`` with ``edit(arrays, meta)`` applied and the content hash recomputed."""
    with np.load(io.BytesIO(src.to_bytes()), allow_pickle=False) as z:
        a = {k: z[k] for k in z.files}
    meta = json.loads(str(a["meta"]))
    edit(a, meta)
    a["meta"] = np.array(json.dumps(meta))
    a["content_hash"] = np.array(content_hash(a))
    buf = io.BytesIO()
    np.savez(buf, **a)
    path.write_bytes(buf.getvalue())


@pytest.mark.parametrize("entry, value", [("n", None), ("nch", "two"), ("bounds", [[1.0]])])
def test_run_refuses_a_crafted_inverse_map_like_check_config(tmp_path, capsys, entry, value):
    b = tmp_path / "crafted.npz"
    _rewrite(toy_map_bundle(), b,
             lambda a, meta: meta["inverse"]["maps"]["mlp"].__setitem__(entry, value))
    cfg = _toml(tmp_path, b)
    assert main(["check-config", cfg, "--bundle", "--simulate"]) == 3
    checked = capsys.readouterr().err
    assert "[bundle] inverse maps" in checked
    assert main(["run", "--config", cfg, "--simulate"]) == 3  # main: a traceback, exit 1


def test_empty_broker_host_is_refused_by_check_config_and_run(tmp_path, capsys):
    b = tmp_path / "b.npz"
    chain_bundle(kinds=("displacement",)).save(b)
    cfg = _toml(tmp_path, b, channels=("y0",), host="")
    assert main(["check-config", cfg]) == 2
    assert "[mqtt] host: must not be empty" in capsys.readouterr().err
    assert main(["run", "--config", cfg, "--simulate"]) == 2  # main: ValueError in paho


def test_huge_output_row_gives_flagged_estimates(tmp_path):
    """``output_rows = -1e308`` passes the loader (finite); z = E x overflows at once."""
    b = tmp_path / "b.npz"
    _rewrite(chain_bundle(window=2), b,
             lambda a, meta: a["output_rows"].__setitem__((0, 3), -1e308))
    est = Estimator(Bundle.load(b))
    Y = np.random.default_rng(0).standard_normal((400, 1)) * 10.0
    F, Z, flags = est.run(Y)
    bad = ~np.isfinite(Z).all(1)
    past = (flags & FLAG_WARMUP) == 0
    assert bad[past].sum() > 100  # the overflow is real (reference: |z| > 1.8e308 when x > 1)
    assert np.all(flags[bad & past] & FLAG_OVERFLOW)
    assert np.all(np.isfinite(Z[~bad]))  # and nothing finite is flagged as overflow
    assert not np.any(flags[~bad] & FLAG_OVERFLOW)


def test_replay_of_a_csv_with_a_1e308_cell_flags_every_nonfinite_row(tmp_path, capsys):
    b = tmp_path / "b.npz"
    chain_bundle(window=2).save(b)
    t = np.arange(380) * 1e-3
    y = 1e-6 * np.sin(2 * np.pi * 20 * t)
    y[40] = 1e308
    csv = tmp_path / "m.csv"
    csv.write_text("time,y0\n" + "".join(f"{a:.17g},{v:.17g}\n" for a, v in zip(t, y)))
    out = tmp_path / "est.csv"
    assert main(["replay", str(csv), "--bundle", str(b), "-o", str(out)]) == 0
    assert "are not finite (flag 64, overflow)" in capsys.readouterr().err
    rows = np.genfromtxt(out, delimiter=",", names=True)
    vals = np.column_stack([rows[n] for n in rows.dtype.names[1:-1]])
    bad = ~np.isfinite(vals).all(1)
    assert bad.sum() > 100  # reference: 325 of 380 rows were +-inf on main, flags 0
    assert np.all(rows["flags"][bad].astype(int) & FLAG_OVERFLOW)


@pytest.mark.parametrize("substeps", [float("inf"), 0, 2.5, "2", 10**6])
def test_a_crafted_experiment_is_refused_at_start_not_in_identify(tmp_path, capsys, substeps):
    """Found by the bundle-meta fuzz class: ``experiment.substeps = inf`` passed
    ``check-config`` and ``run``, then every ``identify`` died in ``int(inf)`` (an
    OverflowError past the command's error handling). Now both refuse the bundle, naming
    the map and the field."""
    b = tmp_path / "crafted.npz"
    _rewrite(toy_map_bundle(), b, lambda a, meta: meta["inverse"]["maps"]["mlp"]
             ["experiment"].__setitem__("substeps", substeps))
    cfg = _toml(tmp_path, b)
    assert main(["check-config", cfg, "--bundle", "--simulate"]) == 3
    err = capsys.readouterr().err
    assert "inverse map 'mlp'" in err and "substeps" in err
    assert main(["run", "--config", cfg, "--simulate"]) == 3


@pytest.mark.parametrize("excitation", [{"type": "pulse", "width": None},
                                        {"type": "chirp", "f0": "low"}, "pulse"])
def test_a_crafted_excitation_is_refused_at_start_not_in_identify(tmp_path, capsys,
                                                                   excitation):
    """Found by the bundle-meta fuzz class: a pulse without a numeric width passed the start,
    then every ``identify`` on the simulated rig raised TypeError in the excitation."""
    b = tmp_path / "crafted.npz"
    _rewrite(toy_map_bundle(), b, lambda a, meta: meta["inverse"]["maps"]["mlp"]
             ["experiment"].__setitem__("excitation", excitation))
    cfg = _toml(tmp_path, b)
    assert main(["check-config", cfg, "--bundle", "--simulate"]) == 3
    assert "experiment.excitation" in capsys.readouterr().err
    assert main(["run", "--config", cfg, "--simulate"]) == 3
