"""The dashboard against a misbehaving device (issue 40 item 5), in the real headless Chromium
through a real Mosquitto (fixtures of tests/test_dashboard.py): size limits of the decoder (a
32 KB message claiming 4,000 columns, 300,000 column names), binary version 2 (what a daemon
with a smoother bundle sends), the CSV export of hostile names, no automatic selection; and
the seeded fuzz class of the page's decoder (2,000+ payloads in the reliability tier, batched
per page load; a sample in the normal tier)."""
# ruff: noqa: F811 - the fixtures of tests/test_dashboard.py, imported, are the arguments

from __future__ import annotations

import base64
import csv
import io
import json
import struct

import numpy as np
import pytest
from fuzz import Draw, SEED, tier_cases
from test_dashboard import (browser, dev, page_relay, stats, wait_js, wait_page,  # noqa: F401
                            ws_broker, ws_publisher)

from edge.daemon.payloads import BIN_HEADER, BIN_MAGIC, encode_estimates

pytestmark = pytest.mark.mqtt

META = {"bundle_id": "b", "rate": 1000.0, "columns": ["F", "u"],
        "forces": [{"name": "F", "unit": "N"}], "outputs": [{"name": "u", "unit": "m"}]}


def _open(drv, page, query=""):
    drv.get(page + query)
    wait_page(drv, lambda s: s["conn"] == "connected", 20, "broker connection")


def _frames_go_on(drv, n=10):
    f0 = stats(drv)["counters"]["frames"]
    wait_page(drv, lambda s: s["counters"]["frames"] > f0 + n, 20, f"{n} more frames")


def test_a_header_claiming_4000_columns_allocates_nothing(ws_broker, browser, page_relay,
                                                          ws_publisher):
    _open(browser, page_relay, "?device=huge")
    heap0 = browser.execute_script("return performance.memory.usedJSHeapSize") / 2**20
    # the audit's message: 32 KB, one sample of 4,000 columns (length consistent)
    huge = encode_estimates(0, np.zeros(1, np.int64), np.zeros((1, 4000)),
                            np.zeros(1, np.uint8), "binary")
    assert len(huge) == 32_033
    ws_publisher.publish("vsense/huge/estimates", huge)
    # a header whose sizes do not match the payload's length
    ws_publisher.publish("vsense/huge/estimates", BIN_HEADER.pack(BIN_MAGIC, 1, 3, 1000, 0, 0)
                         + bytes(64))
    # 512 columns (the limit) at a claimed rate of 999,999/s: the history is capped in cells
    ws_publisher.publish("vsense/huge/meta", json.dumps(dict(
        META, rate=999_999.0, columns=[f"c{i}" for i in range(512)], forces=[], outputs=[])))
    ws_publisher.publish("vsense/huge/estimates", encode_estimates(
        0, np.zeros(1, np.int64), np.ones((1, 512)), np.zeros(1, np.uint8), "binary"))
    s = wait_page(browser, lambda s: dev(s, "huge").get("samples") == 1
                  and dev(s, "huge").get("bad") == 2, 20, "1 sample and 2 bad payloads")
    d = dev(s, "huge")
    assert "88 bytes, header says 33024 (version 1, n 1000, ncol 3)" in d["last_error"]
    cells = browser.execute_script("const e = window.vsense.devices.get('huge').est; "
                                   "return e.cap * e.ncol")
    assert cells <= 2_000_000
    _frames_go_on(browser)
    heap = browser.execute_script("return performance.memory.usedJSHeapSize") / 2**20
    assert heap - heap0 < 100, f"JS heap grew by {heap - heap0:.0f} MB"  # 2e6 cells: 16 MB
    assert stats(browser)["counters"]["uncaught"] == 0


def test_300000_column_names_are_refused_and_frames_go_on(ws_broker, browser, page_relay,
                                                          ws_publisher):
    _open(browser, page_relay, "?device=names")
    ws_publisher.publish("vsense/names/meta", json.dumps(META))
    ws_publisher.publish("vsense/names/estimates", encode_estimates(
        0, np.arange(50) * 1_000_000, np.ones((50, 2)), np.zeros(50, np.uint8), "binary"))
    wait_page(browser, lambda s: dev(s, "names").get("samples") == 50, 20, "first batch")
    ws_publisher.publish("vsense/names/meta", json.dumps(
        dict(META, columns=[f"n{i}" for i in range(300_000)])))
    s = wait_page(browser, lambda s: dev(s, "names").get("bad") == 1, 30, "meta refused")
    assert "300000 entries (at most 512)" in dev(s, "names")["last_error"]
    _frames_go_on(browser, 30)
    f0 = stats(browser)["counters"]["frames"]
    t0 = browser.execute_script("return performance.now()")
    _frames_go_on(browser, 30)
    fps = (stats(browser)["counters"]["frames"] - f0) / (
        browser.execute_script("return performance.now()") - t0) * 1e3
    print(f"\nframes/s after a 300,000-name meta: {fps:.1f}")
    assert fps > 10  # the audit: 4 frames/s; headless Chromium draws at up to 60


def test_binary_version_2_from_a_smoother_daemon_is_decoded(ws_broker, browser, page_relay,
                                                            ws_publisher):
    """edge.daemon.payloads.encode_estimates with ``std``: version 2, the std block after
    the flags (n = 7: the block starts unaligned)."""
    _open(browser, page_relay, "?device=smooth")
    rng = np.random.default_rng(5)
    v, sd = rng.standard_normal((7, 2)), np.abs(rng.standard_normal((7, 2)))
    ws_publisher.publish("vsense/smooth/meta", json.dumps(dict(META, std_columns=["F_std",
                                                                                  "u_std"])))
    p = encode_estimates(0, np.arange(7) * 1_000_000, v, np.zeros(7, np.uint8), "binary", sd)
    assert struct.unpack_from("<H", p, 4)[0] == 2
    ws_publisher.publish("vsense/smooth/estimates", p)
    s = wait_page(browser, lambda s: dev(s, "smooth").get("samples") == 7, 20, "7 samples")
    d = dev(s, "smooth")
    assert d["bad"] == 0 and d["has_std"]
    np.testing.assert_array_equal(np.array(d["last"], float), v[-1])  # f8: exact
    s_last = browser.execute_script(
        "const e = window.vsense.devices.get('smooth').est; const h = (e.head - 1 + e.cap) "
        "% e.cap; return Array.from(e.s.subarray(h * e.ncol, (h + 1) * e.ncol))")
    np.testing.assert_array_equal(np.array(s_last, float), sd[-1])


def test_csv_export_quotes_names_and_defuses_formulas(ws_broker, browser, page_relay,
                                                      ws_publisher):
    _open(browser, page_relay, "?device=csvdev")
    names = ["a,b", '=HYPERLINK("http://x.invalid","y")', 'q"uote', "ok"]
    ws_publisher.publish("vsense/csvdev/meta", json.dumps(dict(META, columns=names)))
    v = np.arange(12.0).reshape(3, 4)
    ws_publisher.publish("vsense/csvdev/estimates", encode_estimates(
        0, np.arange(3) * 1_000_000, v, np.zeros(3, np.uint8), "json"))
    wait_page(browser, lambda s: dev(s, "csvdev").get("samples") == 3, 20, "3 samples")
    browser.execute_script("window.vsense.zoom(-1, 1)")
    text = browser.execute_script("return window.vsense.visibleCsv().text")
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["time", "a,b", "'=HYPERLINK(\"http://x.invalid\",\"y\")", 'q"uote', "ok"]
    np.testing.assert_array_equal(np.array(rows[1:], float)[:, 1:], v)
    assert all(len(r) == 5 for r in rows)


def test_no_device_takes_the_view_by_arriving(ws_broker, browser, page_relay, ws_publisher):
    from selenium.webdriver.common.by import By

    _open(browser, page_relay)
    for d in ("sel-a", "sel-b"):
        ws_publisher.publish(f"vsense/{d}/status", json.dumps({"state": "running"}))
    wait_page(browser, lambda s: {"sel-a", "sel-b"} <= set(s["devices"]), 20, "two devices")
    assert stats(browser)["selected"] == ""
    assert browser.execute_script("return document.getElementById('device').hidden")
    row = wait_js(browser, "return document.querySelector('tr[data-device=\"sel-b\"]')",
                  lambda x: x is not None)
    browser.find_element(By.CSS_SELECTOR, 'tr[data-device="sel-b"]').click()
    assert row is not None and stats(browser)["selected"] == "sel-b"
    ws_publisher.publish("vsense/sel-0-intruder/status", json.dumps({"state": "running"}))
    wait_page(browser, lambda s: "sel-0-intruder" in s["devices"], 20, "a third device")
    assert stats(browser)["selected"] == "sel-b"


# --------------------------------------------------------------------- type confusion
HEALTH = {"latency_us": {"p50": 50, "p99": 400, "p999": 900, "max": 1000}, "lost_samples": 0,
          "overruns": 0, "ring_depth": 1, "ring_capacity": 100, "cpu_percent": 5.0,
          "rss_mb": 100.0, "cpu_temp_c": 50.0, "bad_samples": 0, "estimator_resets": 0,
          "degraded": "x", "publish": {"queue_depth": 0, "drops_samples": 0},
          "recorder": {"queue_depth": 0, "write_errors": 0, "dropped_samples": 0,
                       "problem": "p"},
          "model_check": {"nis": 3.0, "dof": 3, "ratio": 1.0, "threshold": 9.0,
                          "threshold_low": 0.5, "window_s": 5.0, "suspect": True,
                          "reasons": ["r"], "load_level": 1.2}}
FULL_META = dict(META, bundle_hash="0123456789abcdef", estimator="smoother", delay_s=0.002,
                 delay_samples=2, format="json", batch=50, raw_decimation=10,
                 std_columns=["F_std", "u_std"], channels=[{"name": "y0", "unit": "m"}],
                 method={"window": 3, "alpha": 0.1, "discretization": "foh",
                         "regularization": "tikhonov0"})
STATUS = {"state": "degraded", "faulty_channels": ["y0"], "reason": "r", "error": "e",
          "exit_code": 1, "bundle": "b"}
HOSTILE = [None, "", "<b>x</b>", [], {}, True, -1, 1e308, ["x", 1], [{"name": 5}], {"a": []}]


def _leaves(obj, path=()):
    items = obj.items() if isinstance(obj, dict) else enumerate(obj)
    for k, v in items:
        yield (*path, k)
        if isinstance(v, (dict, list)):
            yield from _leaves(v, (*path, k))


def _replaced(obj, path, value):
    obj = json.loads(json.dumps(obj))
    t = obj
    for k in path[:-1]:
        t = t[k]
    t[path[-1]] = value
    return obj


CARDS = """
const errors = [];
const enc = new TextEncoder();
for (const [sub, text] of arguments[0]) {
  window.vsense.feed("vsense/tc/meta", enc.encode(arguments[1]));
  window.vsense.feed("vsense/tc/" + sub, enc.encode(text));
  window.vsense.feed("vsense/tc/estimates", enc.encode(arguments[2]));
  try { window.vsense.cards("tc"); } catch (e) { errors.push(sub + " " + text.slice(0, 200) + ": " + e.message); }
}
return errors;
"""


def test_every_field_replaced_by_every_hostile_value_draws_the_cards(ws_broker, browser,
                                                                     page_relay):
    """Each field (nested ones too) of valid status, meta and health payloads replaced by
    each value of HOSTILE, the fleet table and the device's cards drawn after each: nothing
    throws, nothing is run as HTML."""
    _open(browser, page_relay, "?device=tc")
    cases = [[sub, json.dumps(_replaced(base, path, v))]
             for sub, base in (("status", STATUS), ("meta", FULL_META), ("health", HEALTH))
             for path in _leaves(base) for v in HOSTILE]
    good = encode_estimates(0, np.arange(3) * 1_000_000, np.ones((3, 2)), np.zeros(3, np.uint8),
                            "json").decode()
    errors = browser.execute_script(CARDS, cases, json.dumps(FULL_META), good)
    assert errors == [], errors[:5]
    assert len(cases) > 60 * len(HOSTILE)
    assert browser.execute_script("return document.querySelectorAll('#device b').length") == 0
    _frames_go_on(browser)
    assert stats(browser)["counters"]["uncaught"] == 0


# --------------------------------------------------------------------- fuzz class
def _payload(d: Draw) -> tuple[str, bytes]:
    sub = d.choice(["estimates", "estimates", "estimates", "meta", "status", "health", "raw"])
    k = d.int(0, 5)
    if k <= 1:
        n, ncol = d.int(0, 9), d.int(1, 4)
        good = encode_estimates(d.int(0, 10**6), np.arange(n) * 1_000_000,
                                np.ones((n, ncol)), np.zeros(n, np.uint8),
                                d.choice(["json", "binary"]), d.choice([None, 0.5]))
        return sub, d.mutated_bytes(good)
    if k == 2:  # a header claiming sizes (huge, zero, inconsistent) over a short body
        hdr = BIN_HEADER.pack(BIN_MAGIC, d.choice([0, 1, 2, 3, 65535]),
                              d.choice([0, 1, 3, 512, 513, 4000, 65535]),
                              d.choice([0, 1, 7, 100_000, 100_001, 2**32 - 1]), 0,
                              d.choice([0, -1, 2**53, 2**63 - 1]))
        return sub, hdr + d.binary(0, 96)
    if k == 3:
        obj = dict(META)
        obj[d.choice(["columns", "std_columns", "forces", "channels", "rate", "x"])] = \
            d.choice([d.json(), [d.absurd()] * d.int(0, 600), d.extreme()])
        return sub, json.dumps(obj).encode()
    if k == 4:
        return sub, json.dumps(d.json()).encode()
    return sub, d.binary(0, 64)


FEED = """
const out = [];
for (const [topic, b64] of arguments[0]) {
  const s = atob(b64), b = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) b[i] = s.charCodeAt(i);
  out.push(window.vsense.feed(topic, b));
}
const good = new Uint8Array(atob(arguments[1]).split("").map((c) => c.charCodeAt(0)));
window.vsense.feed("vsense/fz-good/estimates", good);
return [out, window.vsense.stats().counters.uncaught,
        performance.memory.usedJSHeapSize / 1048576,
        window.vsense.devices.get("fz-good").samples];
"""


def test_fuzz_dashboard_decoder_in_chromium(ws_broker, browser, page_relay, request):
    """Hostile payloads through the page's message path (window.vsense.feed: what MQTT.js
    hands over), 250 per batch, on one page load per 1,000, the device view on one of the
    hostile devices: 0 uncaught errors (messages, frames, fleet table, cards), the JS heap
    bounded, a good batch still counted after each batch."""
    total = tier_cases(request, 60)
    counts, heap_max, good_n = {}, 0.0, 0
    for start in range(0, total, 250):
        if start % 1000 == 0:  # the device view shows a hostile device: its cards, plots
            _open(browser, page_relay, "?device=fz0")
            good_n = 0
        batch = []
        for i in range(start, min(total, start + 250)):
            d = Draw(f"{SEED}:dashboard:{i}")
            sub, p = _payload(d)
            batch.append([f"vsense/fz{i % 7}/{sub}", base64.b64encode(p).decode()])
        good = encode_estimates(good_n, np.arange(good_n, good_n + 5) * 1_000_000,
                                np.ones((5, 2)), np.zeros(5, np.uint8), "binary")
        out, uncaught, heap, samples = browser.execute_script(
            FEED, batch, base64.b64encode(good).decode())
        good_n += 5
        _frames_go_on(browser, 20)  # > 250 ms: the fleet table and the cards redrawn too
        uncaught = stats(browser)["counters"]
        assert uncaught["uncaught"] == 0, \
            f"fuzz dashboard: uncaught errors in cases {start}..: {uncaught['lastBad']}"
        assert samples == good_n, f"fuzz dashboard: after cases {start}..: {samples} samples"
        heap_max = max(heap_max, heap)
        for x in out:
            counts[x] = counts.get(x, 0) + 1
        assert heap < 400, f"fuzz dashboard: JS heap {heap:.0f} MB after cases {start}.."
    _frames_go_on(browser)
    print(f"\nfuzz dashboard: {sum(counts.values())} cases {counts}; JS heap max "
          f"{heap_max:.0f} MB")
    assert sum(counts.values()) == total and counts.get("bad", 0) > 0 and counts.get("ok", 0) > 0
