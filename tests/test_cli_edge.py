"""`vsense-edge` argument handling: version, exit-code help, `run --broker`, one error line,
replay into a closed pipe."""


import numpy as np
import pytest

from edge import __version__
from edge.cli import _parser, apply_overrides, main
from edge.daemon.config import config_from_dict
from edge.daemon.exitcodes import EXIT_CODES
from helpers import ClosedPipe, chain_bundle


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"vsense-edge {__version__}"


def test_help_lists_every_exit_code_on_its_own_line(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = capsys.readouterr().out
    for code in EXIT_CODES:
        assert any(line.startswith(f"  {code}  ") for line in out.splitlines()), code
    assert "``" not in out  # no reStructuredText quoting leaks into the help
    assert "(default: /etc/vsense/edge.toml)" in out and "(default: None)" not in out
    with pytest.raises(SystemExit):
        main(["check-config", "--help"])
    out = capsys.readouterr().out
    assert "  3  bad bundle" in out and "  2  bad configuration" in out


@pytest.mark.parametrize("cmd,codes", [("check-config", "023"), ("replay", "0236"),
                                       ("monitor", "012"), ("dashboard", "02")])
def test_each_command_lists_its_own_exit_codes(cmd, codes, capsys):
    """Not the daemon's (`run`: signals, hardware, broker) for commands that cannot exit so."""
    with pytest.raises(SystemExit):
        main([cmd, "--help"])
    out = capsys.readouterr().out
    epilog = out.split("exit codes:\n", 1)[1]
    listed = "".join(x[2] for x in epilog.splitlines() if x[:2] == "  " and x[2:3].isdigit())
    assert listed == codes
    assert "SIGTERM" not in epilog and "hardware" not in epilog and "(default: )" not in out
    assert "``" not in out


@pytest.mark.parametrize("broker,host,port", [("broker.local", "broker.local", 1883),
                                              ("10.0.0.5:8883", "10.0.0.5", 8883),
                                              ("[::1]:1884", "::1", 1884)])
def test_run_broker_override(broker, host, port):
    cfg = config_from_dict({"device": {"id": "d"}, "bundle": {"path": "b.npz"},
                            "channels": [{"name": "y", "pin": "AIN0"}]})
    args = _parser().parse_args(["run", "--broker", broker, "--duration", "2"])
    apply_overrides(cfg, args)
    assert (cfg["mqtt"]["host"], cfg["mqtt"]["port"]) == (host, port)
    assert cfg["simulate"]["duration_s"] == 2.0


def test_run_bad_broker_and_missing_config_are_one_error_line(tmp_path, capsys):
    assert main(["run", "-c", str(tmp_path / "none.toml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "none.toml" in err[0], err
    cfg = tmp_path / "edge.toml"
    cfg.write_text('[device]\nid = "d"\n[bundle]\npath = "b.npz"\n'
                   '[[channels]]\nname = "y"\npin = "AIN0"\n')
    assert main(["run", "-c", str(cfg), "--broker", "host:99999"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--broker" in err[0] and "65535" in err[0], err


def test_replay_into_a_closed_pipe_exits_quietly(tmp_path, monkeypatch, capsys):
    b = chain_bundle(window=3)
    bp = tmp_path / "b.npz"
    b.save(bp)
    csv = tmp_path / "m.csv"
    t = np.arange(200) * 1e-3
    csv.write_text("time,y0\n" + "".join(f"{x:.3f},{1e-6 * np.sin(60 * x):.9e}\n" for x in t))
    sink = ClosedPipe(tmp_path / "scratch")
    monkeypatch.setattr("sys.stdout", sink)
    assert main(["replay", str(csv), "--bundle", str(bp)]) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_replay_says_how_many_estimates_the_model_check_flagged(capsys):
    # the flag is in the estimates' column only; replay says it on stderr (a new user missed
    # 935 flagged rows of a declared plate bundle: they read the values alone)
    from edge.flags import FLAG_MODEL_SUSPECT, FLAG_WARMUP
    from edge.replay import _say_model_suspect

    t = np.arange(10) * 0.5
    flags = np.zeros(10, np.uint8)
    flags[0] = FLAG_WARMUP
    _say_model_suspect(t, flags)
    assert capsys.readouterr().err == ""
    flags[[3, 4, 7]] |= FLAG_MODEL_SUSPECT
    _say_model_suspect(t, flags)
    err = capsys.readouterr().err
    assert "3 of 10 estimates carry the model check's flag (flag 32" in err, err
    assert "between t = 1.5 and 3.5 s" in err, err
