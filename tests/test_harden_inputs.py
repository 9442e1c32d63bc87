"""Issue 12 regressions in the loaders: crafted bundles, recordings, CSVs, TOML files;
check-config agreeing with run; update_model bounds; Ed25519 bundle signatures."""

import io
import json
import zipfile
from types import SimpleNamespace

import numpy as np
import pytest

from edge.bundle import Bundle, BundleError, content_hash
from edge.daemon.config import ConfigError, config_from_dict, load_config
from edge.daemon.recorder import MAGIC, RecordingError, _header_bytes, read_file
from helpers import chain_bundle


def _arrays(b: Bundle) -> dict:
    with np.load(io.BytesIO(b.to_bytes()), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _save(arrays: dict, path, rehash=True):
    arrays = dict(arrays)
    if rehash:
        arrays["content_hash"] = np.array(content_hash(arrays))
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    return path


# ---------------------------------------------------------------------------- item 4
def test_compression_bomb_is_refused_before_decompression(tmp_path, monkeypatch):
    """A 2 MB file took 3.97 GB for 13.6 s: members were decompressed before any check.
    Now declared sizes are checked against VSENSE_MAX_BUNDLE_MB first."""
    monkeypatch.setenv("VSENSE_MAX_BUNDLE_MB", "4")
    p = tmp_path / "bomb.npz"
    good = chain_bundle().to_bytes()
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as out:
        with zipfile.ZipFile(io.BytesIO(good)) as src:
            for info in src.infolist():
                out.writestr(info.filename, src.read(info))
        hdr = b"\x93NUMPY\x01\x00" + b"v\x00"  # only the name matters: sizes come first
        out.writestr("x_bomb.npy", hdr + b"\0" * 20_000_000)  # 20 MB of zeros, ~20 KB
    assert p.stat().st_size < 200_000
    with pytest.raises(BundleError, match=r"bomb\.npz: uncompressed size exceeds 4 MB at "
                                          r"member 'x_bomb\.npy'"):
        Bundle.load(p)


def test_npy_header_claiming_a_huge_shape_is_refused(tmp_path):
    p = tmp_path / "huge.npz"
    good = chain_bundle().to_bytes()
    with zipfile.ZipFile(p, "w") as out:
        with zipfile.ZipFile(io.BytesIO(good)) as src:
            for info in src.infolist():
                if info.filename != "M.npy":
                    out.writestr(info.filename, src.read(info))
        buf = io.BytesIO()
        np.lib.format.write_array_header_1_0(
            buf, {"descr": "<f8", "fortran_order": False, "shape": (100_000, 100_000)})
        out.writestr("M.npy", buf.getvalue() + b"\0" * 64)
    with pytest.raises(BundleError, match=r"field 'M': header claims 80000000000 bytes"):
        Bundle.load(p)


@pytest.mark.parametrize("edit, match", [
    (lambda a: a.__setitem__("window", np.array(10**9)), r"field 'window': must be <= 512"),
    (lambda a: a.__setitem__("meta", np.array(json.dumps(
        dict(json.loads(str(a["meta"])), channels=[{"name": "y0", "node": "x"}])))),
     r"'channels'\[0\]\.node must be a int"),
    (lambda a: a.__setitem__("meta", np.array(json.dumps(
        dict(json.loads(str(a["meta"])), forces=[{"name": "F", "unit": 3}])))),
     r"'forces'\[0\]\.unit must be a str"),
    (lambda a: a.__setitem__("meta", np.array("[" * 100_000)), r"field 'meta': not valid JSON"),
    (lambda a: a.__setitem__("M", a["M"].astype(np.float16)), r"malformed bundle|field 'M'"),
])
def test_crafted_fields_give_a_bundle_error(tmp_path, edit, match):
    a = _arrays(chain_bundle())
    edit(a)
    with pytest.raises(BundleError, match=match):
        Bundle.load(_save(a, tmp_path / "b.npz"))


def test_check_config_bundle_refuses_what_run_refuses(tmp_path, capsys):
    """`check-config --bundle` said ok for an ADC rate that `run` then refused."""
    from edge.cli import main

    p = chain_bundle(dt=1e-3).save(tmp_path / "b.npz") and tmp_path / "b.npz"
    toml = tmp_path / "edge.toml"
    toml.write_text(f'[device]\nid = "c"\n[bundle]\npath = "{p}"\n'
                    '[adc]\ndrate = 2000.0\nmode = "continuous"\n'
                    '[[channels]]\nname = "y0"\npin = "AIN0"\n')
    assert main(["check-config", "--bundle", str(toml)]) == 2
    assert "[adc] drate: 2000 SPS gives 2000 rows/s" in capsys.readouterr().err
    toml.write_text(toml.read_text().replace("2000.0", "1000.0"))
    assert main(["check-config", "--bundle", str(toml)]) == 0


def test_unit_file_prevents_restarts_exactly_for_the_hopeless_exit_codes():
    from pathlib import Path

    from edge.daemon.exitcodes import EXIT_CODES, EXIT_NO_RESTART

    unit = (Path(__file__).resolve().parents[1] / "systemd" / "vsense-edge.service").read_text()
    line = next(x for x in unit.splitlines() if x.startswith("RestartPreventExitStatus="))
    codes = {int(c) for c in line.split("=", 1)[1].split()}
    assert codes == set(EXIT_NO_RESTART) and codes <= set(EXIT_CODES)


# ---------------------------------------------------------------------------- item 5
def test_csv_with_a_nan_time_is_refused(tmp_path):
    """It replayed to a NaN-stamped row with exit 0."""
    from edge.cli import main

    b = tmp_path / "b.npz"
    chain_bundle().save(b)
    csv = tmp_path / "m.csv"
    csv.write_text("time,y0\n0.0,0.0\n0.001,0.0\nnan,0.0\n0.003,0.0\n")
    assert main(["replay", str(csv), "--bundle", str(b), "-o", str(tmp_path / "o.csv")]) == 6
    assert not (tmp_path / "o.csv").exists()


def _vsr(path, header, body=b""):
    path.write_bytes(_header_bytes(header) + body)
    return path


def test_vsr_without_columns_or_with_a_wrong_record_size_is_refused(tmp_path):
    h = {"format": "vsense-recording", "version": 1, "kind": "raw", "record_size": 25}
    with pytest.raises(RecordingError, match="'columns' missing"):
        read_file(_vsr(tmp_path / "a.vsr", h))
    h["columns"] = ["a", "b"]  # 2 columns make 33-byte records, not 25
    with pytest.raises(RecordingError, match=r"b\.vsr: header field 'record_size' is 25"):
        read_file(_vsr(tmp_path / "b.vsr", h, b"\0" * 99))
    (tmp_path / "c.vsr").write_bytes(MAGIC + (10**9).to_bytes(4, "little") + b"{}")
    with pytest.raises(RecordingError, match="header length 1000000000 exceeds the file"):
        read_file(tmp_path / "c.vsr")


@pytest.mark.parametrize("data, match", [
    (b'[device]\nid = "\xff\xfe"\n', "not UTF-8"),
    (b"a = " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested too deeply|not valid TOML"),
])
def test_config_toml_bad_bytes_and_deep_nesting(tmp_path, data, match):
    p = tmp_path / "edge.toml"
    p.write_bytes(data)
    with pytest.raises(ConfigError, match=match):
        load_config(p)


@pytest.mark.parametrize("data, match", [
    (b'[model]\nname = "\xff"\n', "not UTF-8"),
    (b"a = " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested too deeply|TOML syntax error"),
])
def test_model_toml_bad_bytes_and_deep_nesting(tmp_path, data, match):
    from offline.model import ModelFileError, load_model_file

    p = tmp_path / "m.toml"
    p.write_bytes(data)
    with pytest.raises(ModelFileError, match=match):
        load_model_file(p)


@pytest.mark.parametrize("example, pattern, repl", [
    ("portal_frame.toml", r"n = 12 \}", "n = 100000000 }"),
    ("paper_cantilever.toml", r"nx = 170", "nx = 1000000"),
])
def test_model_with_1e8_elements_is_refused_at_once(tmp_path, example, pattern, repl):
    """`n = 1e8` elements ran unbounded (memory); now a ModelFileError naming the key."""
    import re
    from pathlib import Path

    from offline.model import ModelFileError, build_fe_model, load_model_file

    src = Path(__file__).resolve().parents[1] / "examples" / example
    text, k = re.subn(pattern, repl, src.read_text(), count=1)
    assert k == 1
    p = tmp_path / example
    p.write_text(text)
    with pytest.raises((ModelFileError, ValueError), match="at most"):
        build_fe_model(load_model_file(p), progress=False)


# ---------------------------------------------------------------- item 2: update bounds
def test_update_model_values_outside_the_bundle_bounds_are_refused():
    """E = 1 Pa was accepted (force RMS 0.0095 -> 0.31 N, status still running)."""
    from edge import inverse as EI

    rt = SimpleNamespace(maps={"m": SimpleNamespace(names=("E", "zeta"),
                                                    bounds=[[60e9, 78e9], [0.005, 0.03]])})
    EI.check_bounds(rt, ("E", "zeta"), [69e9, 0.01])
    EI.check_bounds(rt, ("E", "zeta"), [78e9 + 1e9, 0.01])  # within the 10 % margin
    with pytest.raises(EI.RejectedUpdate, match=r"'E' = 1 is outside the bundle's bounds "
                                                r"\[6e\+10, 7\.8e\+10\]"):
        EI.check_bounds(rt, ("E", "zeta"), [1.0, 0.01])
    with pytest.raises(EI.RejectedUpdate, match="'zeta'"):
        EI.check_bounds(rt, ("E", "zeta"), [69e9, 0.5])


# ------------------------------------------------------------------ Ed25519 signatures
def test_signed_bundle_verifies_and_tampering_or_another_key_does_not(tmp_path):
    from edge import signing

    b = tmp_path / "b.npz"
    h = chain_bundle().save(b)
    key, pub = signing.keygen(tmp_path / "k")
    other, other_pub = signing.keygen(tmp_path / "o")
    signing.sign_bundle(b, key)
    signing.verify(b, h, pub)
    with pytest.raises(signing.SignatureError, match="does not verify"):
        signing.verify(b, h, other_pub)
    with pytest.raises(signing.SignatureError, match="does not verify"):
        signing.verify(b, "0" * 64, pub)  # another content hash
    (tmp_path / "b.npz.sig").write_text("zz\n")
    with pytest.raises(signing.SignatureError, match="not a hex signature"):
        signing.verify(b, h, pub)


def test_daemon_refuses_unsigned_bundle_when_required_and_locks_updates_otherwise(tmp_path):
    from edge import signing
    from edge.daemon.app import StartupError, build_daemon, preflight

    b = tmp_path / "b.npz"
    chain_bundle().save(b)
    _, pub = signing.keygen(tmp_path / "k")
    base = {"device": {"id": "s"}, "channels": [{"name": "y0", "pin": "AIN0"}],
            "mqtt": {"enabled": False}, "recorder": {"enabled": False},
            "simulate": {"level": "signal", "clock": "virtual"}}
    cfg = config_from_dict(dict(base, bundle={"path": str(b), "public_key": str(pub),
                                              "require_signature": True}))
    with pytest.raises(StartupError, match="no signature file") as e:
        preflight(cfg, simulate=True)
    assert e.value.code == 3
    cfg = config_from_dict(dict(base, bundle={"path": str(b), "public_key": str(pub)}))
    d = build_daemon(cfg, simulate=True)
    try:
        assert d.updates_locked and "not signed by the trusted key" in d.updates_locked
    finally:
        d.abort()
    signing.sign_bundle(b, tmp_path / "k")
    d = build_daemon(cfg, simulate=True)
    try:
        assert d.updates_locked is None
    finally:
        d.abort()
    with pytest.raises(ConfigError, match="require_signature: needs public_key"):
        config_from_dict(dict(base, bundle={"path": str(b), "require_signature": True}))
