"""Fuzz tier, text inputs: daemon config (TOML), model file (TOML, built into an FE model),
MQTT commands; ``VSENSE_FUZZ_EXAMPLES`` cases each (tests/fuzz.py). Acceptable outcomes:
the loader's own error naming the file/key, or a result that satisfies the schema."""

import json
import tempfile
from pathlib import Path

import pytest

from edge.daemon.config import SCHEMA, ConfigError, load_config
from edge.daemon.mqtt import CommandError, CommandRegistry
from fuzz import N_EXAMPLES, run_cases

pytestmark = pytest.mark.fuzz

ROOT = Path(__file__).resolve().parents[1]
_SHM = "/dev/shm" if Path("/dev/shm").is_dir() else None
_DIR = Path(tempfile.mkdtemp(prefix="vsense-fuzz-", dir=_SHM))


def _toml_value(d):
    return d.choice(["0", "-1", "1", "1000.0", "2.5", "1e300", "nan", "inf", "true", '"x"',
                     '""', '"AIN0"', '"AINCOM"', "[]", "[1, 2]", '["a"]', '["*"]',
                     '["status", "pause"]', "{ a = 1 }", "[" * 40 + "]" * 40, '"\\u0000"',
                     "99999999999999999999", "-0.0", '"../../etc/passwd"'])


def _config_text(d) -> str:
    """Valid-looking configs: known sections and keys (and a few unknown ones) with values
    of every type, or mutations of the deployment template."""
    if d.int(0, 3) == 0:
        return d.mutated_text((ROOT / "deploy" / "edge.toml").read_text())
    lines = ["[device]", "id = " + d.choice(['"dev"', '"dev 1"', '""', "3"])]
    for sec in d.sample(SCHEMA, d.int(1, 4)):
        if sec.name == "device":
            continue
        lines.append(f"[[{sec.name}]]" if sec.array else f"[{sec.name}]")
        for key in d.sample(sec.keys, min(len(sec.keys), d.int(0, 4))):
            lines.append(f"{key.name} = {_toml_value(d)}")
        if d.int(0, 5) == 0:
            lines.append(f"{d.choice(['bogus', 'Port', 'id'])} = {_toml_value(d)}")
    if d.bool():
        lines += ["[[channels]]", 'name = "y0"', 'pin = "AIN0"']
    return "\n".join(lines) + "\n"


def test_fuzz_daemon_config():
    p = _DIR / "edge.toml"

    def case(d):
        data = _config_text(d).encode()
        if d.int(0, 5) == 0:
            data = d.mutated_bytes(data)
        p.write_bytes(data)
        try:
            cfg = load_config(p)
        except ConfigError as e:
            assert str(p) in str(e)
            return "refused"
        # accepted: every key has the schema's type
        for sec in SCHEMA:
            tables = cfg[sec.name] if sec.array else [cfg[sec.name]]
            for t in tables:
                assert set(t) == {k.name for k in sec.keys}
        assert 1 <= len(cfg.channels) <= 8
        return "accepted"

    counts = run_cases("config", case)
    assert counts.get("refused", 0) > N_EXAMPLES // 4 and counts.get("accepted", 0) > 0


_MODEL = (ROOT / "examples" / "portal_frame.toml").read_text()
_MODEL_TOKENS = ["0", "-1", "1", "2", "3", "0.5", "1e-300", "1e300", "nan", "inf",
                 "100000000", '"x"', '""', '"steel"', '"column"', '"timoshenko"', "true",
                 "[]", "[1, 2]", "[0.0, 0.0, 0.0]", "[[0, 0, 0], [1, 1, 1]]",
                 "{ d = 0.15, t = 0.2 }", "{ b = -1, h = 0 }", "{ at = [9, 9, 9] }",
                 "{ start = [0, 0, 0], end = [0, 0, 0], n = 2 }", "[" * 40 + "]" * 40]


def test_fuzz_model_file():
    from offline.model import build_fe_model, load_model_file

    p = _DIR / "model.toml"

    def case(d):
        data = d.mutated_text(_MODEL, _MODEL_TOKENS).encode()
        if d.int(0, 7) == 0:
            data = d.mutated_bytes(data)
        p.write_bytes(data)
        try:
            model = build_fe_model(load_model_file(p), progress=False)
        except ValueError as e:  # ModelFileError and the element builders' input errors
            assert str(e)
            return "refused"
        assert model.M.shape == model.K.shape and model.M.shape[0] > 0
        return "accepted"

    counts = run_cases("modelfile", case)
    assert counts.get("refused", 0) > 0 and counts.get("accepted", 0) > 0


def _registry():
    from edge.daemon.commands import register_builtin_commands
    from edge.inverse import register_commands

    reg = CommandRegistry(allowed=None)
    register_builtin_commands(reg)
    register_commands(reg)
    return reg


def _command(d, names) -> bytes:
    k = d.int(0, 5)
    if k == 0:
        return d.binary(0, 64)
    if k == 1:
        return json.dumps(d.json()).encode()
    if k == 2:
        return (d.choice(["[", "{\"a\":", "{\"cmd\": ["]) * d.int(1, 5000)).encode()
    msg = {"cmd": d.choice(names + ["", "x" * 100]) if d.int(0, 5) else d.json(),
           "id": d.choice([1, "a", None, [1], {"x": 1}, 1.5, True, "i" * 200])}
    if d.bool():
        msg["args"] = ({d.choice(["map", "params", "force", "window_s", ""]): d.json()
                        for _ in range(d.int(0, 3))} if d.int(0, 4) else d.json())
    if d.int(0, 6) == 0:
        msg[d.text(5)] = d.json()
    data = json.dumps(msg).encode()
    return d.mutated_bytes(data) if d.int(0, 4) == 0 else data


def test_fuzz_mqtt_commands():
    """Every payload: a CommandError (its reason goes to cmd/reply) or a command whose
    arguments have the registered types; never another exception (it would end paho's
    network thread)."""
    reg = _registry()
    names = sorted(reg.commands)
    reg_limited = _registry()
    reg_limited.allowed = {"status", "health"}

    def case(d):
        data = _command(d, names)
        r = reg_limited if d.int(0, 3) == 0 else reg
        try:
            cmd, args, cid = r.parse(data)
        except CommandError as e:
            assert str(e)
            return "rejected"
        assert cmd.name in r.commands and (r.allowed is None or cmd.name in r.allowed)
        for k, v in args.items():
            assert isinstance(v, cmd.args[k])
        assert cid is None or isinstance(cid, (str, int, float))
        return "accepted"

    counts = run_cases("commands", case)
    assert counts.get("rejected", 0) > N_EXAMPLES // 4 and counts.get("accepted", 0) > 0


def test_fuzz_monitor_payloads():
    """What a dashboard/monitor receives from the broker is not trusted either: a malformed
    message is counted, never raised (it would end the monitor's network thread)."""
    import numpy as np

    from edge.daemon.mqtt import encode_estimates
    from edge.monitor import DeviceView

    good = encode_estimates(0, np.arange(3, dtype=np.int64), np.ones((3, 2)),
                            np.zeros(3, np.uint8), "binary")
    good_json = encode_estimates(0, np.arange(3, dtype=np.int64), np.ones((3, 2)),
                                 np.zeros(3, np.uint8), "json")

    def case(d):
        view = DeviceView()
        sub = d.choice(["estimates", "estimates", "status", "meta", "health", "cmd/reply"])
        k = d.int(0, 3)
        if k == 0:
            payload = d.mutated_bytes(good)
        elif k == 1:
            payload = d.mutated_bytes(good_json)
        elif k == 2:
            payload = json.dumps(d.json()).encode()
        else:
            payload = d.binary(0, 64)
        view.feed(sub, payload)
        view.feed("estimates", good)  # still works afterwards
        return "bad" if view.n_bad_payloads else "ok"

    counts = run_cases("monitor", case)
    assert counts.get("bad", 0) > 0
