"""Daemon config: schema validation, errors naming the key, secrets, generated reference."""

import re
from pathlib import Path

import pytest

from edge.cli import main
from edge.daemon.config import (EXAMPLE, SCHEMA, ConfigError, config_from_dict, load_config,
                                mqtt_password, reference_markdown)

ROOT = Path(__file__).resolve().parents[1]
MIN = {"device": {"id": "d1"}, "channels": [{"name": "y0", "pin": "AIN0"}]}


def _with(**sections):
    d = {k: (v.copy() if isinstance(v, dict) else [dict(c) for c in v]) for k, v in MIN.items()}
    for k, v in sections.items():
        d[k] = v
    return d


def test_minimal_config_takes_schema_defaults():
    cfg = config_from_dict(MIN)
    for sec in SCHEMA:
        if sec.array:
            continue
        for key in sec.keys:
            if key.name == "id":
                continue
            assert cfg[sec.name][key.name] == key.default, (sec.name, key.name)
    assert cfg.channels[0]["pin_neg"] == "AINCOM"
    assert cfg.channels[0]["sensitivity"] == 1.0


@pytest.mark.parametrize("raw, pattern", [
    (_with(mqtt={"port": 70000}), r"\[mqtt\] port: must be <= 65535, got 70000"),
    (_with(mqtt={"port": "1883"}), r"\[mqtt\] port: expected int, got str"),
    (_with(mqtt={"qos": 3}), r"\[mqtt\] qos: must be one of 0, 1, 2; got 3"),
    (_with(mqtt={"prot": 1}), r"\[mqtt\] prot: unknown key"),
    (_with(mqtt={"password_env": "s3cr3t!"}), r"\[mqtt\] password_env: .* not an environment"),
    (_with(mqtt={"cert_file": "c.pem"}), r"\[mqtt\] key_file: cert_file and key_file"),
    (_with(adc={"drate": 1234.0}), r"\[adc\] drate: must be one of"),
    (_with(adc={"pga": True}), r"\[adc\] pga: expected int, got bool"),
    (_with(bundle={"block": 0}), r"\[bundle\] block: must be >= 1, got 0"),
    (_with(device={}), r"\[device\] id: required key is missing"),
    (_with(device={"id": "a b"}), r"\[device\] id: 'a b' does not match"),
    (_with(channels=[]), r"\[\[channels\]\]: at least 1 required"),
    (_with(channels=[{"name": "y0"}]), r"\[\[channels\]\] #0 pin: required key is missing"),
    (_with(channels=[{"name": "y0", "pin": "AIN9"}]), r"#0 pin: must be one of"),
    (_with(channels=[{"name": "y0", "pin": "AIN0", "sensitivity": 0.0}]),
     r"#0 sensitivity: must not be 0"),
    (_with(channels=[{"name": "y0", "pin": "AIN0"}, {"name": "y0", "pin": "AIN1"}]),
     r"name: duplicate 'y0'"),
    (_with(channels={"name": "y0"}), r"expected an array of tables"),
    (_with(simulate={"source": "file"}), r"\[simulate\] file: required"),
    (_with(realtime={"cpu_affinity": [0, -1]}), r"\[realtime\] cpu_affinity: must be >= 0"),
    (_with(recorder={"fsync_interval_s": float("nan")}), r"fsync_interval_s: must be finite"),
    (dict(MIN, bogus={}), r"\[bogus\]: unknown section"),
])
def test_bad_values_name_the_key(raw, pattern):
    with pytest.raises(ConfigError, match=pattern):
        config_from_dict(raw)


def test_file_errors_name_the_file(tmp_path):
    with pytest.raises(ConfigError, match=r"nope\.toml: cannot read config file"):
        load_config(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[device\nid = 1\n")
    with pytest.raises(ConfigError, match=r"bad\.toml: not valid TOML"):
        load_config(bad)
    wrong = tmp_path / "wrong.toml"
    wrong.write_text('[device]\nid = "d"\n[[channels]]\nname = "a"\npin = "AIN0"\n'
                     "[mqtt]\nport = 0\n")
    with pytest.raises(ConfigError, match=r"wrong\.toml: \[mqtt\] port: must be >= 1, got 0"):
        load_config(wrong)


def test_relative_paths_resolve_against_the_config_file(tmp_path):
    p = tmp_path / "sub" / "edge.toml"
    p.parent.mkdir()
    p.write_text(EXAMPLE.replace('/var/lib/vsense/bundle.npz', 'bundle.npz'))
    cfg = load_config(p)
    assert cfg.resolve(cfg["bundle"]["path"]) == p.parent / "bundle.npz"
    assert cfg.resolve("/abs/x") == Path("/abs/x")


def test_password_comes_from_the_named_environment_variable(monkeypatch):
    cfg = config_from_dict(_with(mqtt={"username": "u", "password_env": "VSENSE_TEST_PW"}))
    monkeypatch.delenv("VSENSE_TEST_PW", raising=False)
    with pytest.raises(ConfigError, match="VSENSE_TEST_PW is not set"):
        mqtt_password(cfg)
    monkeypatch.setenv("VSENSE_TEST_PW", "hunter2")
    assert mqtt_password(cfg) == "hunter2"
    assert mqtt_password(config_from_dict(MIN)) is None


def test_shipped_examples_are_valid():
    load_config(ROOT / "deploy" / "edge.toml")
    bench = load_config(ROOT / "examples" / "bench.toml")  # the README's bench config
    assert bench["device"]["id"] == "bench-1" and bench.channels[0]["name"] == "d110"
    cfg = config_from_dict(__import__("tomllib").loads(EXAMPLE))
    assert cfg["device"]["id"] == "cantilever-01"


def test_check_config_cli_exit_codes(tmp_path, capsys):
    good = tmp_path / "good.toml"
    good.write_text(EXAMPLE)
    assert main(["check-config", str(good)]) == 0
    # without --bundle it says what it could not check (issue 37: a plain "ok" passed wrong
    # channel names)
    out = capsys.readouterr().out
    assert ": ok (" in out and "Not checked without --bundle: the channel names and order" in out
    assert "ADC's row rate against the bundle's rate" in out
    bad = tmp_path / "bad.toml"
    bad.write_text(EXAMPLE.replace('host = "localhost"', "host = 5"))
    assert main(["check-config", str(bad)]) == 2
    assert re.search(r"\[mqtt\] host: expected str, got int", capsys.readouterr().err)


def test_reference_is_generated_from_the_schema_and_embedded_in_the_docs(capsys):
    assert main(["config-reference"]) == 0
    out = capsys.readouterr().out
    assert out == reference_markdown()
    for sec in SCHEMA:
        for key in sec.keys:
            assert f"| `{key.name}` |" in out
    doc = (ROOT / "docs" / "daemon.md").read_text()
    assert reference_markdown().strip() in doc, \
        "docs/daemon.md is stale: paste the output of `vsense-edge config-reference`"


def test_a_drate_that_cannot_feed_the_bundle_says_which_can():
    """The row rate check of `check-config --bundle` and `run` (edge.daemon.app) names the
    drate that fits, or the row rates the channel count can have. Reference: the ADS1256
    datasheet's Table 14 (multiplexer cycling throughput 2165 Hz at 3750 SPS, 837 Hz at
    1000 SPS, shared by the channels)."""
    from edge.daemon.app import hardware_row_rate
    from edge.hw.ads1256_spec import rate_mismatch_message, row_rates

    assert row_rates(2)[3750.0] == pytest.approx(2165.0 / 2, rel=1e-15)
    assert row_rates(1, "continuous")[1000.0] == 1000.0
    two = _with(channels=[{"name": "a", "pin": "AIN0"}, {"name": "b", "pin": "AIN1"}],
                adc={"drate": 3750.0})
    assert hardware_row_rate(config_from_dict(two)) == (pytest.approx(1082.5, rel=1e-15),
                                                        "cycle")
    assert rate_mismatch_message(1000.0, 2, "cycle", 1082.5).endswith(
        "set [adc] drate = 3750")
    m = rate_mismatch_message(1000.0, 2, "cycle", 1000.0)
    assert "gives 418.5 rows/s in cycle mode with 2 channel(s)" in m
    assert "[estimator] rate" in m and "1082.5 (drate 3750)" in m and "719 (drate 2000)" in m
    assert 'mode = "continuous"' in rate_mismatch_message(1000.0, 1, "cycle", 1000.0)
    assert "continuous" not in m


def test_removed_keys_load_with_a_warning_naming_them(tmp_path, caplog):
    """A configuration written for the daemon with its micro-optimisation keys still loads:
    each removed key is named in a warning and ignored; an old switch off maps to its
    replacement; an unknown key in the removed [loop] section is still an error."""
    p = tmp_path / "old.toml"
    p.write_text('[device]\nid = "d"\n[[channels]]\nname = "y"\npin = "AIN0"\n'
                 '[loop]\nring_s = 4.0\nestimate_in = "loop"\nhandover_ms = 20\n'
                 '[realtime]\ntimer_slack_ns = 1000\nswitch_interval_us = 100\n'
                 'release_file_pages = false\nsched_fifo_priority = 50\n'
                 '[mqtt]\nread_interval_s = 0.2\n[simulate]\nmax_lead_us = 0\n')
    with caplog.at_level("WARNING", logger="vsense.config"):
        cfg = load_config(p)
    text = caplog.text
    for key in ("[loop] ring_s", "[loop] estimate_in", "[loop] handover_ms",
                "[realtime] timer_slack_ns", "[realtime] switch_interval_us",
                "[realtime] release_file_pages", "[mqtt] read_interval_s",
                "[simulate] max_lead_us"):
        assert f"{key}: deprecated key, ignored" in text, key
    assert cfg["realtime"]["sched_fifo_priority"] == 50  # kept keys still apply
    assert cfg["realtime"]["release_startup_memory"] is False  # the old switch, off
    assert "loop" not in cfg.data
    p.write_text('[device]\nid = "d"\n[[channels]]\nname = "y"\npin = "AIN0"\n'
                 '[loop]\nring_size = 4\n')
    with pytest.raises(ConfigError, match=r"\[loop\] ring_size: unknown key"):
        load_config(p)
