"""Model-check bands of the smoother: resonance band pairs and their thresholds."""

from __future__ import annotations

import numpy as np

from edge.bundle import Bundle
from edge.estimator.operator import modal_basis
from edge.estimator.chi2 import _norm_sf
from offline._deps import need


def check_bands(bundle: Bundle, force_models=(), width: float = 0.08, fmax_frac: float = 0.4,
                min_participation: float = 1e-3):
    """Model-check bands: ``[f_i (1 - width), f_i]`` and ``[f_i, f_i (1 + width)]`` around
    every resonance ``f_i`` that the forces excite (the pair inside some force model's band
    and below ``fmax_frac * rate``) and the channels see (participation ``sum |Phi[channel
    dofs, i]| * sum |Phi[force dofs, i]|`` above ``min_participation`` of the largest). A
    shifted resonance moves innovation power from one band of the pair to the other; outside
    the load band the innovation there is noise plus the force model's roll-off, whose slope
    would bias the pair. Returns ``[(lo, hi), ...]`` [Hz]."""
    w2, Phi = modal_basis(bundle.M, bundle.K)
    f = np.sqrt(np.clip(w2, 0.0, None)) / (2 * np.pi)
    ch = np.sum(np.abs(Phi[[c.dof for c in bundle.channels]]), axis=0)
    fo = np.sum(np.abs(Phi[[x.dof for x in bundle.forces]]), axis=0)
    part = ch * fo
    inside = np.zeros(f.shape, bool)
    for fm in force_models:
        inside |= (f * (1 - width) >= fm.band[0]) & (f * (1 + width) <= fm.band[1])
    if not len(force_models):
        inside[:] = True
    keep = (f > 0) & inside & (f * (1 + width) < fmax_frac * bundle.rate) & \
        (part >= min_participation * np.max(part))
    bands = []
    for fi in f[keep]:
        bands += [(fi * (1 - width), fi), (fi, fi * (1 + width))]
    return bands


def band_filters(bands, rate: float, window: int, nch: int, p: float):
    """Biquads ``(nb, 5)`` [b0, b1, b2, a1, a2] (first-order Butterworth band-pass), their
    white-noise power gains ``g = sum h^2`` and the pair thresholds.

    A windowed band power of white innovations is chi-square with the effective degrees of
    freedom ``nu = window * nch * r(0)^2 / sum_k r(k)^2`` (r the filter's autocorrelation)
    divided by nu; the ratio of the two powers of a pair is then F(nu_lo, nu_hi), whose log is
    close to normal with variance ``2/nu_lo + 2/nu_hi``. Threshold of the pair ratio
    (two-sided, false-alarm probability p per window): ``exp(z_(p/2) sqrt(2/nu_lo +
    2/nu_hi))``, stored for both bands of the pair.
    """
    signal = need("scipy.signal")
    nb = len(bands)
    ba = np.zeros((nb, 5))
    gain = np.zeros(nb)
    nu = np.zeros(nb)
    for i, (lo, hi) in enumerate(bands):
        b, a = signal.butter(1, [lo, hi], "bandpass", fs=rate)
        b, a = b / a[0], a / a[0]
        ba[i] = [b[0], b[1], b[2], a[1], a[2]]
        n = int(min(max(40 * rate / max(hi - lo, 1e-3), 2000), 1_000_000))
        h = signal.lfilter(b, a, np.r_[1.0, np.zeros(n - 1)])
        gain[i] = float(h @ h)
        r = np.fft.irfft(np.abs(np.fft.rfft(h, 2 * n)) ** 2)[:n]  # r(k), k = 0..n-1
        nu[i] = max(window * nch * r[0] ** 2 / (r[0] ** 2 + 2 * np.sum(r[1:] ** 2)), 1.0)
    # z with P(Z > z) = p / 2
    lo_z, hi_z = 0.0, 40.0
    for _ in range(200):
        mid = 0.5 * (lo_z + hi_z)
        lo_z, hi_z = (mid, hi_z) if _norm_sf(mid) > p / 2 else (lo_z, mid)
    thr = np.ones(nb)
    for i in range(0, nb - 1, 2):
        thr[i] = thr[i + 1] = np.exp(lo_z * np.sqrt(2 / nu[i] + 2 / nu[i + 1]))
    return ba, gain, thr
