"""What an operator reads on the dashboard, in the real headless Chromium (fixtures of
tests/test_dashboard.py): y tick labels with SI prefixes and units for signals in metres,
a history longer than the plotted window, zoom by dragging over a plot, the CSV export of
the range shown, the smoother's method line, NIS next to the verdict, and the favicon."""

from __future__ import annotations

import csv
import io
import json
from urllib.request import urlopen

import numpy as np
import pytest
from test_dashboard import (browser, dev, page_relay, screenshot, stats,  # noqa: F401
                            wait_js, wait_page, ws_broker, ws_publisher)

from edge.daemon.mqtt import encode_estimates

pytestmark = pytest.mark.mqtt

META = {"bundle_id": "beam-0123456789ab", "bundle_hash": "0123456789abcdef", "rate": 1000.0,
        "columns": ["F110", "d60"], "forces": [{"name": "F110", "unit": "N"}],
        "outputs": [{"name": "d60", "unit": "m", "kind": "displacement"}],
        "channels": [{"name": "d110", "unit": "m"}], "estimator": "smoother",
        "delay_samples": 2, "delay_s": 0.002, "format": "json", "batch": 1000,
        "method": {"window": 3, "alpha": 0.0, "discretization": "foh",
                   "regularization": "tikhonov0"}}


def _publish_run(pub, topic, seconds, rng):
    """``seconds`` of 1 kHz estimates (F110 ~ 100 N, d60 ~ 2 um) in batches of 1,000."""
    n = int(seconds * 1000)
    t = np.arange(n) / 1000.0
    v = np.column_stack([100.0 * np.sin(2 * np.pi * 3.0 * t) + rng.normal(0, 5.0, n),
                         2e-6 * np.sin(2 * np.pi * 3.0 * t - 0.5) + rng.normal(0, 5e-8, n)])
    for s0 in range(0, n, 1000):
        sl = slice(s0, s0 + 1000)
        pub.publish(topic + "estimates", encode_estimates(
            s0, np.arange(s0, s0 + 1000) * 1_000_000, v[sl], np.zeros(1000, np.uint8)))
    return t, v


def test_axis_history_zoom_export_method_and_nis(ws_broker, browser, page_relay, ws_publisher,  # noqa: F811
                                                tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    page, pub, tp = page_relay, ws_publisher, "vsense/view0/"
    browser.get(page + "?device=view0")
    wait_page(browser, lambda s: s["conn"] == "connected", 20, "broker connection")
    pub.publish(tp + "status", json.dumps({"state": "running"}))
    pub.publish(tp + "meta", json.dumps(META))
    pub.publish(tp + "health", json.dumps({"latency_us": {"p50": 40, "p99": 90},
                                           "model_check": {"nis": None, "dof": 3000,
                                                           "window_s": 3.0, "ratio": None,
                                                           "threshold": 3200.0,
                                                           "suspect": False}}))
    t, v = _publish_run(pub, tp, 30.0, np.random.default_rng(4))
    s = wait_page(browser, lambda s: dev(s, "view0").get("samples") == 30_000, 30,
                  "30 s of estimates")
    # 30 s kept (the page keeps --history, 60 s by default), 10 s plotted
    assert dev(s, "view0")["history_rows"] == 30_000
    assert dev(s, "view0")["history_s"] == pytest.approx(29.999, abs=1e-9)
    # method: the smoother in words, no Tikhonov alpha; NIS not judged before the window fills
    card = wait_js(browser, "return document.getElementById('card-bundle').textContent",
                   lambda x: "Kalman fixed-lag smoother, lag 2 samples" in x)
    assert "α" not in card and "tikhonov" not in card
    wait_js(browser, "return document.getElementById('card-check').textContent",
            lambda x: "window not full yet" in x and "not judged yet" in x
            and "consistent" not in x)
    pub.publish(tp + "health", json.dumps({"model_check": {
        "nis": 2950.5, "dof": 3000, "window_s": 3.0, "ratio": 0.9835, "threshold": 3200.0,
        "suspect": False}}))
    wait_js(browser, "return document.getElementById('card-check').textContent",
            lambda x: "0.984 x (NIS 2951, expected 3000)" in x and "consistent" in x and "1.067" in x)
    # the fleet row: a consistent model is a plain "running"
    row = ("const c = document.querySelector('tr[data-device=\"view0\"] td.c-state'); "
           "return c ? [c.textContent, c.className] : null")
    wait_js(browser, row, lambda x: x == ["running", "c-state st-running"])
    # the two-sided check's reason and the tracked load level
    pub.publish(tp + "health", json.dumps({"model_check": {
        "nis": 1500.0, "dof": 3000, "window_s": 3.0, "ratio": 0.5, "threshold": 3200.0,
        "threshold_low": 2400.0, "suspect": True, "load_level": 0.0316,
        "reasons": ["innovations too small (NIS/dof 0.5 below 0.8)"]}}))
    wait_js(browser, "return document.getElementById('card-check').textContent",
            lambda x: "below 0.800 or above 1.067" in x and "innovations too small" in x
            and "0.0316 x the designed force RMS" in x)
    # and a suspect one is not a green "running" in the fleet table
    wait_js(browser, row, lambda x: x == ["running (model suspect)", "c-state st-model_suspect"])

    # y ticks: engineering notation with the unit; d60 (about 2 um) no longer "0 / 0 / -0"
    s = wait_page(browser, lambda s: len(s["y_ticks"]) == 2 and all(s["y_ticks"]), 10,
                  "tick labels of both plots")
    f_ticks, d_ticks = s["y_ticks"]
    print("\ny ticks F110:", f_ticks, "d60:", d_ticks)
    assert all(x.endswith(" N") for x in f_ticks)
    assert all(x.endswith(" µm") for x in d_ticks) and len(set(d_ticks)) == len(d_ticks) >= 3
    assert not any(x.startswith("-0") for x in f_ticks + d_ticks)
    vals = [float(x.split()[0]) for x in d_ticks]
    assert min(vals) < 0 < max(vals) and max(abs(x) for x in vals) <= 3.0  # micrometres

    # the window selector draws from the history: 60 s shows all 30 s (half the width)
    fill = "return window.vsense.stats().fill"
    Select(browser.find_element(By.ID, "span")).select_by_value("60")
    x = wait_js(browser, "return window.vsense.stats().x_range[0]",
                lambda r: r and r[1] - r[0] > 59)
    assert x[0] < 0 < x[1]
    filled = wait_js(browser, fill, lambda f: f and f[0] > 0.4)
    assert 0.4 < filled[0] < 0.55  # 30 s of data in a 60 s window
    Select(browser.find_element(By.ID, "span")).select_by_value("10")
    wait_js(browser, "return window.vsense.stats().x_range[0]",
            lambda r: r and 9 < r[1] - r[0] < 11)

    # zoom: drag over the middle half of the first plot
    over = browser.find_element(By.CSS_SELECTOR, "#plots-est .plot .u-over")
    w = over.size["width"]
    ActionChains(browser).move_to_element_with_offset(over, -w // 4, 0).click_and_hold() \
        .move_by_offset(w // 2, 0).release().perform()
    s = wait_page(browser, lambda s: s["zoom"] is not None, 10, "zoomed range")
    t0, t1 = s["zoom"]["t0"], s["zoom"]["t1"]
    assert 4.0 < t1 - t0 < 6.0 and 19.0 < t0 < t1 < 31.0, (t0, t1)
    wait_js(browser, "return window.vsense.stats().x_range[0]",
            lambda r: r and abs(r[0] - t0) < 0.1 and abs(r[1] - t1) < 0.1)
    # export of the range shown: every sample in [t0, t1], values exact (round-trip print)
    c = browser.execute_script("return window.vsense.visibleCsv()")
    assert c["name"].startswith("view0_") and c["name"].endswith("s.csv")
    rows = list(csv.reader(io.StringIO(c["text"])))
    assert rows[0] == ["time", "F110", "d60"]
    got = np.array(rows[1:], float)
    sel = (t >= t0) & (t <= t1)
    assert got.shape == (int(sel.sum()), 3)
    np.testing.assert_array_equal(got[:, 0], t[sel])
    np.testing.assert_array_equal(got[:, 1:], v[sel])
    wait_js(browser, "return document.getElementById('range').textContent",
            lambda x: x.startswith("zoomed:"))  # the text is refreshed 4 times a second
    shot = screenshot(browser, tmp_path, "dashboard-zoom.png")
    assert shot.stat().st_size > 10_000
    browser.find_element(By.ID, "live").click()
    wait_page(browser, lambda s: s["zoom"] is None, 10, "back to live")
    assert stats(browser)["counters"]["uncaught"] == 0

    # the page names its icon and the server has it (no 404 for a favicon)
    base = page.rsplit("/", 1)[0]
    assert 'rel="icon" href="favicon.svg"' in urlopen(base + "/index.html", timeout=5).read() \
        .decode()
    with urlopen(base + "/favicon.svg", timeout=5) as r:
        assert r.status == 200 and b"<svg" in r.read()
