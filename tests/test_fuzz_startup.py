"""Fuzz tier, start-up and numerics (issue 26 item 3): crafted inverse-map entries, numeric
extremes in every numeric field (daemon config keys, bundle arrays, the bundle's meta) and
empty or absurd strings in every string key (config, the bundle's meta and string arrays);
``VSENSE_FUZZ_EXAMPLES`` cases each (tests/fuzz.py).

The audit that found these classes: 22 of ~3,000 crafted bundles made ``vsense-edge run`` exit
with a traceback while ``check-config --bundle`` refused them; ``[mqtt] host = ""`` passed
``check-config`` and crashed ``run``; ``output_rows = -1e308`` and a CSV cell of 1e308 gave
non-finite estimates with flags 0. Acceptable outcomes here: the config loader's error naming
the key, the same StartupError (exit code and message) from ``check-config --bundle``
(:func:`edge.daemon.app.preflight`) and from ``run``'s start-up (:func:`build_daemon` and the
MQTT client's start), or a daemon that starts; an estimator whose non-finite estimates all
carry a flag.
"""

import io
import json
import logging
import math
import tempfile
from pathlib import Path

import numpy as np
import pytest

from edge.bundle import Bundle, BundleError, content_hash
from edge.daemon.app import StartupError, build_daemon, preflight
from edge.daemon.config import SCHEMA, ConfigError, config_from_dict
from edge.estimator import Estimator
from edge.flags import FLAG_OVERFLOW, FLAG_WARMUP
from fuzz import N_EXAMPLES, run_cases
from helpers import chain_bundle, toy_map_bundle

pytestmark = pytest.mark.fuzz

#: cases of the start-up classes: each starts a daemon (two bundle loads, an ONNX session,
#: ~50 ms), so a fifth of the other classes' count
N_START = max(50, N_EXAMPLES // 5)

_SHM = "/dev/shm" if Path("/dev/shm").is_dir() else None
_DIR = Path(tempfile.mkdtemp(prefix="vsense-fuzz-start-", dir=_SHM))


@pytest.fixture(scope="module", autouse=True)
def _quiet():
    """Refused start-ups and unreachable brokers log errors by design: keep them out."""
    logging.disable(logging.CRITICAL)
    yield
    logging.disable(logging.NOTSET)


def _arrays(b: Bundle) -> dict:
    with np.load(io.BytesIO(b.to_bytes()), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _save(a: dict, path: Path) -> None:
    a = dict(a)
    if "content_hash" in a:  # recomputed: validation goes past the hash check
        a["content_hash"] = np.array(content_hash(a))
    buf = io.BytesIO()
    np.savez(buf, **a)
    path.write_bytes(buf.getvalue())


@pytest.fixture(scope="module")
def map_bundle():
    p = _DIR / "map.npz"
    toy_map_bundle().save(p)
    return p


def _config(bundle: Path, broker: bool = True, **sections) -> dict:
    """The fuzz's base config (MQTT to a port nothing listens on, only when ``broker``; no
    page release: it costs 60 ms a start and is not under test here)."""
    raw = {"device": {"id": "fz"}, "bundle": {"path": str(bundle)},
           "channels": [{"name": "y2", "pin": "AIN0"}],
           "mqtt": {"enabled": broker, "host": "127.0.0.1", "port": 9,
                    "reconnect_max_s": 600.0},
           "recorder": {"dir": str(_DIR / "rec")},
           "realtime": {"release_compiler_memory": False, "release_file_pages": False},
           "simulate": {"level": "signal", "clock": "virtual"}}
    for k, v in sections.items():
        raw[k] = dict(raw.get(k, {}), **v)
    return raw


def _start(cfg, start_mqtt: bool = False) -> str:
    """``check-config --bundle`` and ``run``'s start-up (without running the loop): the
    same refusal from both, or a daemon that starts (its MQTT client too with
    ``start_mqtt``)."""
    pre = None
    try:
        preflight(cfg, simulate=True)
    except StartupError as e:
        pre = e.code
        assert str(e) and pre in (2, 3, 5)
    try:
        d = build_daemon(cfg, simulate=True)
    except StartupError as e:
        assert e.code == pre, f"run refused with exit code {e.code}, check-config: {pre} ({e})"
        return f"refused {e.code}"
    try:
        assert pre is None, "check-config refused what run starts"
        if start_mqtt and d.pub is not None:
            d.pub.start()  # paho validates host/port here (run died here for host = "")
        if d.inverse is not None:
            _exercise_maps(d.inverse)
    finally:
        d.abort()
    return "started"


def _exercise_maps(hook) -> None:
    """What the daemon does with an accepted map: ``identify`` (the command catches KeyError
    and ValueError) and the identification of a window (the loop catches ValueError)."""
    try:
        m = hook.rt.get(None)
        hook.start(None)
    except (KeyError, ValueError):
        return
    if m.n * m.nch <= 10**6:
        try:
            hook.rt.identify(np.zeros((m.n, m.nch)))
        except ValueError:
            pass


# ---------------------------------------------------------------- crafted inverse maps
_MAP_KEYS = ["kind", "names", "bounds", "features", "experiment", "n", "nch", "sigma_val",
             "noise_sigma", "onnx_sha256"]


def _crafted_value(d, old):
    """A replacement for a meta value: the same structure with one element made extreme or
    absurd, another type, or random JSON."""
    k = d.int(0, 5)
    if k == 0 and isinstance(old, list) and old:
        new = json.loads(json.dumps(old))
        i = d.int(0, len(new) - 1)
        new[i] = _crafted_value(d, new[i]) if isinstance(new[i], (list, dict)) else \
            d.choice([d.extreme(), d.absurd(), None, []])
        return new
    if k == 1 and isinstance(old, dict) and old:
        new = dict(old)
        key = d.choice(sorted(new))
        new[key] = _crafted_value(d, new[key])
        return new
    if k == 2:
        return d.extreme()
    if k == 3:
        return d.absurd()
    return d.json()


def test_fuzz_crafted_inverse_maps(map_bundle):
    base = _arrays(Bundle.load(map_bundle))
    p = _DIR / "crafted.npz"
    cfg = config_from_dict(_config(p, broker=False))

    def case(d):
        a = dict(base)
        meta = json.loads(str(a["meta"]))
        inv = meta["inverse"]
        for _ in range(d.int(1, 2)):
            where = d.choice(["map", "map", "map", "default", "parts", "array", "array"])
            if where == "map":
                key = d.choice(_MAP_KEYS)
                inv["maps"]["mlp"][key] = _crafted_value(d, inv["maps"]["mlp"].get(key))
            elif where == "default":
                inv["default"] = d.choice([d.absurd(), d.extreme(), None, ["mlp"]])
            elif where == "parts":
                key = d.choice(sorted(inv["parts"]) + ["x"])
                inv["parts"][key] = _crafted_value(d, inv["parts"].get(key))
            else:
                key = d.choice(sorted(k for k in a if k.startswith("x_")))
                arr = np.array(a[key], copy=True)
                if arr.dtype.kind == "f" and arr.size and d.int(0, 2):
                    arr.reshape(-1)[d.int(0, arr.size - 1)] = d.extreme()
                elif d.bool():
                    arr = arr.reshape(-1)[:d.int(0, arr.size)]
                else:
                    arr = np.array(d.extreme() if d.bool() else d.absurd())
                a[key] = arr
        a["meta"] = np.array(json.dumps(meta))
        _save(a, p)
        return _start(cfg)

    counts = run_cases("inverse_maps", case, N_START)
    assert counts.get("refused 3", 0) > 0 and counts.get("started", 0) > 0


# ------------------------------------------- every string and number of the bundle's meta
def _leaves(obj, path=()):
    """``(path, value)`` of every string and number in a JSON tree."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _leaves(v, (*path, i))
    elif isinstance(obj, (str, int, float)) and not isinstance(obj, bool):
        yield path, obj


def _put(obj, path, value):
    for k in path[:-1]:
        obj = obj[k]
    obj[path[-1]] = value


def test_fuzz_strings_and_numbers_in_every_bundle_meta_field(map_bundle):
    """Empty or absurd strings in every string of a bundle (meta: names, units, kinds, dofs,
    the inverse maps' entries; string arrays: discretization, regularization, kinds) and
    numeric extremes in every number of its meta (nodes, scales, sizes), hash recomputed:
    ``check-config --bundle`` and ``run`` refuse it the same way or the daemon starts."""
    chain = _DIR / "chain-meta.npz"
    chain_bundle(window=2, kinds=("displacement", "acceleration")).save(chain)
    bases = [(_arrays(Bundle.load(map_bundle)), [{"name": "y2", "pin": "AIN0"}]),
             (_arrays(Bundle.load(chain)), [{"name": "y0", "pin": "AIN0"},
                                            {"name": "y1", "pin": "AIN1"}])]
    p = _DIR / "meta.npz"
    cfgs = [config_from_dict(dict(_config(p, broker=False), channels=ch)) for _, ch in bases]

    def case(d):
        i = d.int(0, 1)
        a = dict(bases[i][0])
        meta = json.loads(str(a["meta"]))
        leaves = list(_leaves(meta))
        text_arrays = sorted(k for k in a if a[k].dtype.kind == "U")
        for _ in range(d.int(1, 2)):
            if text_arrays and d.int(0, 3) == 0:
                key = d.choice(text_arrays)
                arr = np.array(a[key], copy=True)
                if arr.ndim == 0:
                    arr = np.array(d.absurd())
                elif arr.size:
                    arr = arr.astype(object)
                    arr.reshape(-1)[d.int(0, arr.size - 1)] = d.absurd()
                    arr = arr.astype(str)
                a[key] = arr
                continue
            path, old = d.choice(leaves)
            if isinstance(old, str):
                new = d.absurd() if d.int(0, 4) else d.choice([d.extreme(), None, [], {}])
            else:
                new = d.extreme() if d.int(0, 4) else d.choice([d.absurd(), None, []])
            _put(meta, path, new)
        try:
            a["meta"] = np.array(json.dumps(meta))
        except ValueError:  # a non-finite float: json.dumps writes NaN/Infinity (allowed)
            return "unwritable"
        _save(a, p)
        return _start(cfgs[i])

    counts = run_cases("bundle_meta", case, N_START)
    assert counts.get("refused 3", 0) > 0 and counts.get("started", 0) > 0


# ------------------------------------------------------- numeric extremes, absurd strings
_NUMERIC = [(s, k) for s in SCHEMA for k in s.keys if k.type in ("int", "float", "list[int]",
                                                                   "list[float]")]
_STRINGS = [(s, k) for s in SCHEMA for k in s.keys if k.type in ("str", "list[str]")]


def _set(raw: dict, sec, key, value) -> dict:
    if sec.array:
        raw[sec.name] = [dict(raw.get(sec.name, [{}])[0], **{key.name: value})]
    else:
        raw[sec.name] = dict(raw.get(sec.name, {}), **{key.name: value})
    return raw


def _config_case(map_bundle, keys, value):
    def case(d):
        sec, key = d.choice(keys)
        v = value(d, key)
        raw = _set(_config(map_bundle, broker=sec.name == "mqtt"), sec, key,
                   [v] if key.type.startswith("list") else v)
        try:
            cfg = config_from_dict(raw, base_dir=_DIR)
        except ConfigError as e:
            assert key.name in str(e) or sec.name in str(e), e
            return "refused 2"
        return _start(cfg, start_mqtt=sec.name == "mqtt")
    return case


def _number(d, key):
    v = d.near(key.min, key.max) if d.int(0, 2) == 0 else d.extreme()
    if key.type.endswith("int]") or key.type == "int":
        return int(v) if isinstance(v, float) and math.isfinite(v) and d.bool() else v
    return v


def test_fuzz_numeric_extremes_in_every_config_key(map_bundle):
    counts = run_cases("config_numbers", _config_case(map_bundle, _NUMERIC, _number), N_START)
    assert counts.get("refused 2", 0) > N_START // 4 and counts.get("started", 0) > 0


def test_fuzz_absurd_strings_in_every_config_key(map_bundle):
    counts = run_cases("config_strings", _config_case(map_bundle, _STRINGS,
                                                      lambda d, key: d.absurd()), N_START)
    assert counts.get("refused 2", 0) > N_START // 4 and counts.get("started", 0) > 0


def test_empty_host_is_refused_by_check_config_with_the_key_named(map_bundle):
    """Issue 26: ``[mqtt] host = ""`` passed check-config, then ``run`` died in paho."""
    with pytest.raises(ConfigError, match=r"\[mqtt\] host: must not be empty"):
        config_from_dict(_config(map_bundle, mqtt={"host": ""}))


# ------------------------------------------------------------- numeric extremes, bundle
def _smoother():
    from offline.smoother import ForceModel, attach_smoother, design_smoother

    b = chain_bundle(n=4, kinds=("displacement",))
    fm = [ForceModel("bandpass", (5.0, 80.0), 1.0, 2)]
    return attach_smoother(b, design_smoother(b, fm, lag=4), fm, 0.0, nis_window_s=0.2,
                           bands=[(20, 22), (22, 24)])


def test_fuzz_numeric_extremes_in_every_bundle_array():
    """Every float array of a Tikhonov and a smoother bundle with one entry (or all) made
    extreme: refused by the loader or the estimator, or every non-finite estimate of a
    random record carries a flag (``output_rows = -1e308`` gave +-inf with flags 0)."""
    bases = [_arrays(chain_bundle(window=2, kinds=("displacement", "acceleration"))),
             _arrays(_smoother())]
    p = _DIR / "num.npz"
    rng = np.random.default_rng(0)
    Ys = {2: rng.standard_normal((300, 2)), 1: rng.standard_normal((300, 1))}

    def case(d):
        a = dict(d.choice(bases))
        key = d.choice(sorted(k for k in a if a[k].dtype.kind == "f"))
        arr = np.array(a[key], dtype=np.float64, copy=True)
        if arr.size and d.int(0, 3):
            arr.reshape(-1)[d.int(0, arr.size - 1)] = d.extreme()
        else:
            arr[...] = d.extreme()
        a[key] = arr
        _save(a, p)
        try:
            b = Bundle.load(p)
        except BundleError as e:
            assert str(p) in str(e)
            return "refused"
        try:
            est = Estimator(b)
        except (ValueError, ArithmeticError, np.linalg.LinAlgError):
            return "estimator refused"  # exit code 3 in edge.daemon.app.load_estimator
        F, Z, flags = est.run(Ys[len(b.channels)])
        bad = ~(np.isfinite(F).all(1) & np.isfinite(Z).all(1))
        assert np.all(flags[bad] != 0), f"{key}: non-finite estimates with flags 0"
        # past the warm-up (NaN rows flagged FLAG_WARMUP) non-finite means overflow
        over = bad & (flags & FLAG_WARMUP == 0)
        assert np.all(flags[over] & FLAG_OVERFLOW), f"{key}: overflow not flagged"
        return "accepted non-finite" if over.any() else "accepted"

    counts = run_cases("bundle_numbers", case)
    assert counts.get("refused", 0) > 0 and counts.get("accepted", 0) > 0
