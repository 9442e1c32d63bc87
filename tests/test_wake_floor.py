"""benchmarks/wake_floor.py: the helper's structure and that every loop performs the waits it
was asked for (no timing assertion: the figures are the benchmark's, not the test's)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "wake_floor", Path(__file__).resolve().parents[1] / "benchmarks" / "wake_floor.py")
wake_floor = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(wake_floor)

KEYS = {"waits", "cpu_us", "schedstat_us", "runs_per_wait", "late_p50_us", "late_p99_us",
        "late_min_us"}


def test_structure_and_requested_waits():
    # 2,000 /s for 0.05 s: round(2000 * 0.05) = 100 wake-ups requested (exact integer)
    res = wake_floor.wake_floor(2000.0, 0.05)
    assert res["requested"] == 100
    assert res["rate"] == 2000.0 and res["seconds"] == 0.05
    assert set(res["methods"]) == set(wake_floor.METHODS)
    for name, m in res["methods"].items():
        assert KEYS <= set(m), name
        # every loop completes exactly the requested number of waits
        assert m["waits"] == 100, (name, m["waits"])
        # each wake-up is stamped after its absolute deadline (monotonic clock): a loop that
        # did not wait would show negative lateness
        assert m["late_min_us"] >= 0.0, (name, m["late_min_us"])
        # the waiting thread was charged CPU and was put on a CPU at least once
        assert m["cpu_us"] > 0.0 and math.isfinite(m["cpu_us"]), name
    ev = res["methods"]["event"]
    assert 1 <= ev["wakeups"] and ev["pacer_cpu_us"] > 0.0 and ev["cpu_us_per_wakeup"] > 0.0


@pytest.mark.parametrize("method", ["python", "numba"])
def test_single_method_counts_its_waits(method):
    # 1,000 /s for 0.02 s: 20 wake-ups requested, only the one method run
    res = wake_floor.wake_floor(1000.0, 0.02, methods=(method,), timer_slack_ns=0)
    assert list(res["methods"]) == [method]
    assert res["methods"][method]["waits"] == res["requested"] == 20


def test_bad_input_named():
    with pytest.raises(ValueError, match="rate and seconds"):
        wake_floor.wake_floor(0.0, 1.0)
    with pytest.raises(ValueError, match="unknown method 'spin'"):
        wake_floor.wake_floor(1000.0, 0.01, methods=("spin",))


def test_table_rows():
    res = [wake_floor.wake_floor(1000.0, 0.01, methods=("python", "event"))]
    rows = wake_floor.table(res)
    # header, separator, one row per (rate, method)
    assert len(rows) == 4
    assert rows[2].startswith("| 1,000 | python | 10 |")
    assert "pacer" in rows[3]


def test_beside_costs_rows():
    # two configurations as in daemon_costs.CONFIGS: one per-sample (block 1), one block 64;
    # the daemon's figure is synthetic (60 us/sample): only the arithmetic of the rows is tested
    configs = (("1 kHz signal", "signal", 1000.0, 1, "auto"),
               ("10 kHz blk", "signal", 10000.0, 64, "acquisition"))
    res = {c[0]: [{"stages": {"daemon": 60.0}}] for c in configs}
    rows = wake_floor.beside_costs(res, configs, 0.01, 1, lambda: "0")
    assert len(rows) == 4
    cells = [r.strip("|").split("|") for r in rows]
    floor_py = float(cells[0][1])
    assert all(c[2].strip() == "-" for c in cells)  # block mode: no per-sample wake-up
    # daemon minus floor and daemon / floor from the same (rounded) floor
    assert float(cells[2][1]) == pytest.approx(60.0 - floor_py, abs=0.06)
    assert float(cells[3][1]) == pytest.approx(60.0 / floor_py, rel=0.01, abs=0.06)
