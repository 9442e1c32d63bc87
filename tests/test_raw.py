"""edge.daemon.raw: the optional decimated `raw` topic (pure part, with a recording fake of
the publisher's send)."""

import numpy as np
import pytest

from edge.daemon.mqtt import decode_estimates
from edge.daemon.raw import RawPublisher


class FakePub:
    batch, max_delay = 50, 0.1

    def __init__(self, fmt):
        self.fmt = fmt
        self.sent = []

    def send(self, topic, payload, qos=None, nsamp=0):
        self.sent.append((topic, payload))


@pytest.mark.parametrize("fmt", ["json", "binary"])
def test_every_kth_sample_in_consecutive_raw_rows_with_gap(fmt):
    rng = np.random.default_rng(4)
    seq = np.r_[np.arange(0, 600), np.arange(637, 1000)]      # samples 600..636 lost
    t = seq * 1_000_000
    v = rng.standard_normal((seq.size, 2))
    f = (seq % 7 == 0).astype(np.uint8)
    pub = FakePub(fmt)
    raw = RawPublisher(pub, 2, 10, "vsense/d/raw")
    i = 0
    for n in rng.integers(1, 40, 200):                          # uneven hand-over spans
        j = i
        while j < min(i + n, seq.size) and (j == i or seq[j] == seq[j - 1] + 1):
            j += 1                                              # spans are consecutive
        raw.add(seq[i:j], t[i:j], v[i:j], f[i:j])
        i = j
        if i >= seq.size:
            break
    raw.flush()
    parts = [decode_estimates(p) for _, p in pub.sent]
    assert all(topic == "vsense/d/raw" for topic, _ in pub.sent)
    assert max(p["seq"].size for p in parts) == 5              # batch 50 // k 10
    rs = np.concatenate([p["seq"] for p in parts])
    keep = seq % 10 == 0
    np.testing.assert_array_equal(rs * 10, seq[keep])          # raw seq x k = sample seq
    np.testing.assert_array_equal(np.concatenate([p["t_ns"] for p in parts]), t[keep])
    # JSON floats round-trip exactly and binary is raw f8: equal to 0 ulp
    np.testing.assert_array_equal(np.vstack([p["v"] for p in parts]), v[keep])
    np.testing.assert_array_equal(np.concatenate([p["flags"] for p in parts]), f[keep])
    assert raw.published == keep.sum()


def test_bad_decimation_is_named():
    with pytest.raises(ValueError, match="raw_decimation"):
        RawPublisher(FakePub("json"), 1, 0, "t")
