"""The dashboard's fatigue panel in the real headless Chromium (fixtures of
tests/test_dashboard.py): retained summaries on <base>/<id>/fatigue/<output> give one line
per hotspot with the damage over time and the range-mean histogram; a malformed summary is a
counted bad payload, not a broken page."""

from __future__ import annotations

import json

import pytest
from test_dashboard import (browser, dev, page_relay, screenshot, stats,  # noqa: F401
                            wait_js, wait_page, ws_broker, ws_publisher)

pytestmark = pytest.mark.mqtt


def _summary(k):
    counts = [[0.0] * 8 for _ in range(8)]
    counts[0][3], counts[2][4], counts[5][4] = 300.0 + k, 40.0, 2.0
    return {"hotspot": "root", "curve": "EN-71", "cycles": 342.0 + k, "damage": 1e-4 * (k + 1),
            "damage_with_residue": 1.2e-4 * (k + 1), "residue": 12, "samples": 1000 * (k + 1),
            "gaps": 0, "overflow": 0, "clipped": 0,
            "histogram": {"range_max": 4e8, "mean_lo": -2e8, "mean_hi": 2e8, "counts": counts}}


def test_fatigue_panel(ws_broker, browser, page_relay, ws_publisher, tmp_path):  # noqa: F811
    page, pub, tp = page_relay, ws_publisher, "vsense/fat0/"
    browser.get(page + "?device=fat0")
    wait_page(browser, lambda s: s["conn"] == "connected", 20, "broker connection")
    pub.publish(tp + "status", json.dumps({"state": "running"}))
    for k in range(3):
        pub.publish(tp + "fatigue/root", json.dumps(_summary(k)))
    s = wait_page(browser, lambda s: dev(s, "fat0").get("fatigue", {}).get("root", {})
                  .get("points") == 3, 20, "three fatigue summaries")
    f = dev(s, "fat0")["fatigue"]["root"]
    assert f["damage"] == _summary(2)["damage"] and f["samples"] == 3000  # JSON: exact
    text = wait_js(browser, "return document.getElementById('fatigue').textContent",
                   lambda x: "root (EN-71): D = 0.0003000" in x)
    assert "with the residue 0.0003600" in text and "3000 samples" in text
    assert browser.execute_script(
        "return document.querySelectorAll('#fatigue canvas.fatigue-plot').length") == 2
    # the histogram canvas has coloured pixels (the three bins drawn)
    painted = browser.execute_script(
        "const c = document.querySelectorAll('#fatigue canvas')[1];"
        "const a = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        "let n = 0; for (let i = 3; i < a.length; i += 4) if (a[i] > 0) n++; return n;")
    assert painted > 500
    pub.publish(tp + "fatigue/root", b'{"curve": "EN-71"}')       # no damage: bad payload
    pub.publish(tp + "fatigue/other", b"not json")
    s = wait_page(browser, lambda s: dev(s, "fat0").get("bad") == 2, 10, "bad payload count")
    assert s["counters"]["uncaught"] == 0
    assert dev(s, "fat0")["fatigue"]["root"]["points"] == 3
    screenshot(browser, tmp_path, "dashboard-fatigue.png")
