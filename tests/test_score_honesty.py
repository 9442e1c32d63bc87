"""``vsense-offline score``: the stated std's honesty (1-sigma coverage, std/error ratio),
through the public CLI (issue 37, item 4)."""

import json

import numpy as np
import pytest

from edge.flags import FLAG_WARMUP
from offline.cli import main as offline_main

N = 4000   # rows: the coverage's sampling std sqrt(p (1 - p) / N) <= 0.8 %
DT = 1e-3


def _files(tmp_path, std_scale, flags=None):
    """Truth F, estimate F + e with e ~ N(0, s^2) (seeded), stated std ``std_scale * s``;
    u without a std column."""
    rng = np.random.default_rng(37)
    t = np.arange(N) * DT
    F = np.sin(2 * np.pi * 13 * t)
    u = np.cos(2 * np.pi * 7 * t)
    s = 0.05
    e = s * rng.standard_normal(N)
    fl = np.zeros(N) if flags is None else flags
    est = tmp_path / "est.csv"
    np.savetxt(est, np.column_stack([t, F + e, u, np.full(N, std_scale * s), fl]),
               delimiter=",", header="time,F,u,F_std,flags", comments="", fmt="%.10g")
    tru = tmp_path / "truth.csv"
    np.savetxt(tru, np.column_stack([t, F, u]), delimiter=",", header="time,F,u",
               comments="", fmt="%.10g")
    return str(est), str(tru), e, s


@pytest.mark.parametrize("std_scale", [1.0, 0.1, 3.0])
def test_score_reports_coverage_and_std_ratio(tmp_path, capsys, std_scale):
    est, tru, e, s = _files(tmp_path, std_scale)
    assert offline_main(["score", est, tru, "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    # reference: the same seeded draw, counted directly (exact), and the Gaussian
    # probability P(|z| <= k) = erf(k / sqrt 2) within 4 sampling std (sqrt(p(1-p)/N))
    direct = np.mean(np.abs(e) <= std_scale * s)
    assert rows["F"]["coverage"] == pytest.approx(direct, abs=1e-12)
    from math import erf, sqrt
    p = erf(std_scale / sqrt(2))
    assert rows["F"]["coverage"] == pytest.approx(p, abs=4 * sqrt(p * (1 - p) / N) + 1e-3)
    # std/error = std_scale * s / RMS(e); RMS(e) = s within 5 % for N = 4000 Gaussian draws
    assert rows["F"]["std_ratio"] == pytest.approx(std_scale * s / np.sqrt(np.mean(e ** 2)),
                                                   rel=1e-9)
    assert rows["F"]["std_ratio"] == pytest.approx(std_scale, rel=0.05)
    # a column without a std column has no honesty figures
    assert rows["u"]["coverage"] is None and rows["u"]["std_ratio"] is None
    # the table prints them
    assert offline_main(["score", est, tru]) == 0
    out = capsys.readouterr().out
    assert "1-sigma cov." in out and "std/error" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("F "))
    assert f"{100 * direct:.1f}%" in line


def test_score_honesty_skips_warmup_rows(tmp_path, capsys):
    # the first 500 rows flagged warm-up (bit 1, value 2) carry a huge error: left out by default
    fl = np.zeros(N)
    fl[:500] = FLAG_WARMUP
    est, tru, e, s = _files(tmp_path, 1.0, flags=fl)
    data = np.loadtxt(est, delimiter=",", skiprows=1)
    data[:500, 1] += 100.0
    np.savetxt(est, data, delimiter=",", header="time,F,u,F_std,flags", comments="",
               fmt="%.10g")
    assert offline_main(["score", est, tru, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["n_warmup"] == 500
    F = next(r for r in d["rows"] if r["name"] == "F")
    # reference: the unflagged rows' own count (exact)
    assert F["coverage"] == pytest.approx(np.mean(np.abs(e[500:]) <= s), abs=1e-12)


def test_score_negative_std_names_file_and_column(tmp_path, capsys):
    est, tru, _, _ = _files(tmp_path, -1.0)
    assert offline_main(["score", est, tru]) == 2
    err = capsys.readouterr().err
    assert "est.csv" in err and "'F_std'" in err
